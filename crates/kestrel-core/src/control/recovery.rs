//! Continuing the runs of an instance that died: a run left `running` (or waiting for its
//! sub-agent) whose lease ran out is claimed, like a resume, and driven on from its last
//! snapshot by whichever instance finds it first: the periodic sweep, or (lazily) an
//! instance about to start a new run on the run's thread, so that the old run goes first.
//! A background task's run is continued the same way, and its result delivered to the thread
//! of the run that started it.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use super::RunControlError;
use crate::cluster::member::ThreadRecovery;
use crate::definition::AgentError;
use crate::definition::background::DEFAULT_BACKGROUND_TIMEOUT;
use crate::memory::MemoryScope;
use crate::model::FinishReason;
use crate::runtime::background::{BackgroundDone, deliver_to_thread};
use crate::runtime::registry::ThreadKey;
use crate::runtime::{Agent, AgentStream};
use crate::store::{RunPhase, StoredRun, SuspendedRunsQuery};

/// The runs one listing of a sweep reads, and the most listings of one sweep (so one sweep
/// looks at up to 10,000 running runs).
const SWEEP_PAGE: u32 = 100;
const SWEEP_PAGES: u32 = 100;

/// Looks once for abandoned top-level runs of `agents` and continues them in the background;
/// returns the ids of the runs this instance took over.
pub(crate) async fn recover_once(agents: &BTreeMap<String, Agent>) -> Vec<String> {
    let Some(any) = agents.values().next() else {
        return Vec::new();
    };
    let Some(cluster) = any.runtime.runs.cluster.clone() else {
        return Vec::new();
    };
    let store = std::sync::Arc::clone(&any.runtime.stores.runs);
    // Every page: the abandoned runs may be older than many live ones.
    let mut found = Vec::new();
    for page in 0..SWEEP_PAGES {
        let query = SuspendedRunsQuery {
            page,
            per_page: SWEEP_PAGE,
            ..SuspendedRunsQuery::default()
        };
        match store
            .list_in_phases(&[RunPhase::Running, RunPhase::WaitingForSubtask], &query)
            .await
        {
            Ok(listed) => {
                let last = listed.runs.len() < SWEEP_PAGE as usize;
                found.extend(listed.runs);
                if last {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the recovery sweep could not list the running runs");
                break;
            }
        }
    }
    let ttl = cluster.config.lease_ttl;
    let mut taken = Vec::new();
    for run in found {
        if !abandoned(&run, ttl) {
            continue;
        }
        let run_id = run.state.run_id.clone();
        if is_helper_run(agents, &run) {
            close_helper_run(&store, run).await;
            continue;
        }
        if let Some(taken_over) = take_over(agents, run).await {
            tracing::info!(%run_id, instance = %cluster.instance(), "took over a run whose instance stopped");
            // Dropped, the stream hands the run to a background task that drives it.
            drop(taken_over);
            taken.push(run_id);
        }
    }
    taken
}

/// Whether `run` is a run of one of the framework's own helper agents (a network's routing
/// agent deciding or checking completion), which no instance registers: the network step that
/// asked for it is retried as a whole, under a new run, so the old one has no one to continue it.
fn is_helper_run(agents: &BTreeMap<String, Agent>, run: &StoredRun) -> bool {
    run.state.agent_id == crate::runtime::ROUTING_AGENT_ID
        && !agents.contains_key(crate::runtime::ROUTING_AGENT_ID)
}

/// Ends an abandoned helper run as aborted, so that it is not left `running` for ever. The
/// save is a compare-and-set on the version read: a run its instance saved since is left alone.
async fn close_helper_run(store: &crate::store::SharedRunStore, run: StoredRun) {
    let StoredRun {
        mut state, version, ..
    } = run;
    let run_id = state.run_id.clone();
    state.end(FinishReason::Abort);
    match store.save(&state, RunPhase::Aborted, Some(version)).await {
        Ok(_) => tracing::info!(%run_id, "closed an abandoned routing agent run as aborted"),
        Err(error) => {
            tracing::debug!(%run_id, %error, "an abandoned routing agent run was saved meanwhile");
        }
    }
}

/// A run this instance took over.
enum TakenOver {
    /// Its stream: dropped, the run goes on in the background.
    Run(Box<AgentStream>),
    /// A background task, whose result a task of its own delivers when it ends.
    BackgroundTask,
}

/// Claims an abandoned run and drives it on here (`None` when its lease is held after all,
/// or another instance was quicker). A background task's result then goes to the thread of
/// the run that started it, as it would have from the instance that stopped.
async fn take_over(agents: &BTreeMap<String, Agent>, run: StoredRun) -> Option<TakenOver> {
    let agent = agents.get(&run.state.agent_id)?;
    let run_id = run.state.run_id;
    let abort = crate::abort::AbortSignal::new();
    let options = crate::definition::RunOptions::new().abort_signal(abort.clone());
    let stream = match agent.run(&run_id).options(options).proceed().stream().await {
        Ok(stream) => stream,
        Err(RunControlError::NotResumable { .. } | RunControlError::Conflict { .. }) => {
            return None;
        }
        Err(error) => {
            tracing::warn!(%run_id, %error, "could not take over a run whose instance stopped");
            return None;
        }
    };
    let Some(origin) = run.state.background_for else {
        return Some(TakenOver::Run(Box::new(stream)));
    };
    let parent = agents.get(&origin.agent_id).cloned();
    let timeout = parent
        .as_ref()
        .and_then(|p| p.inner.background.get(&origin.tool_name))
        .map_or(DEFAULT_BACKGROUND_TIMEOUT, |config| config.timeout);
    let sub_agent = agent.id().to_owned();
    tokio::spawn(async move {
        // The task's time counts again from the takeover.
        let outcome = tokio::time::timeout(timeout, stream.result()).await;
        let (text, is_error) = match outcome {
            Ok(Ok(result))
                if !matches!(
                    result.finish_reason,
                    FinishReason::Error | FinishReason::Abort
                ) =>
            {
                (result.text, false)
            }
            Ok(Err(AgentError::RunTakenOver { .. })) => return,
            Ok(_) => (
                format!("The {sub_agent:?} agent could not complete the task."),
                true,
            ),
            Err(_) => {
                abort.abort();
                (
                    format!(
                        "The {sub_agent:?} agent did not finish within {} ms and was stopped.",
                        timeout.as_millis()
                    ),
                    true,
                )
            }
        };
        let done = BackgroundDone {
            task_id: run_id,
            tool_name: origin.tool_name,
            tool_call_id: origin.tool_call_id,
            text,
            is_error,
        };
        match (parent, origin.thread_id, origin.resource_id) {
            (Some(parent), Some(thread_id), Some(resource_id)) => {
                let scope = MemoryScope {
                    thread_id,
                    resource_id,
                };
                deliver_to_thread(&parent, &scope, done).await;
            }
            _ => tracing::warn!(
                task_id = %done.task_id,
                "a background task taken over from a stopped instance ended; its run had no thread to deliver to, so its result is dropped"
            ),
        }
    });
    Some(TakenOver::BackgroundTask)
}

/// Whether a stored run looks abandoned: saved longer ago than the lease's time-to-live (a run
/// with a live owner saves after every step and renews its lease), and not a delegated run,
/// which its parent continues. Its lease decides: the claim is refused while it is held.
fn abandoned(run: &StoredRun, ttl: Duration) -> bool {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    now.saturating_sub(run.updated_at_ms) >= ttl_ms && run.state.delegated_by.is_none()
}

/// The most abandoned runs of one thread a new run looks for.
const THREAD_RUNS: u32 = 20;

/// The lazy side of recovery, called by a run about to take its thread (see
/// [`ThreadRecovery`]).
pub(crate) struct LazyRecovery {
    agents: Weak<BTreeMap<String, Agent>>,
}

impl LazyRecovery {
    pub(crate) fn new(agents: Weak<BTreeMap<String, Agent>>) -> Self {
        Self { agents }
    }

    async fn recover_thread(&self, thread: &ThreadKey, new_run: &str) {
        let Some(agents) = self.agents.upgrade() else {
            return;
        };
        let Some(any) = agents.values().next() else {
            return;
        };
        let Some(cluster) = any.runtime.runs.cluster.clone() else {
            return;
        };
        let query = SuspendedRunsQuery {
            thread_id: Some(thread.thread_id.clone()),
            resource_id: Some(thread.resource_id.clone()),
            per_page: THREAD_RUNS,
            ..SuspendedRunsQuery::default()
        };
        let listed = match any
            .runtime
            .stores
            .runs
            .list_in_phases(&[RunPhase::Running, RunPhase::WaitingForSubtask], &query)
            .await
        {
            Ok(listed) => listed.runs,
            Err(error) => {
                tracing::warn!(%error, thread_id = %thread.thread_id, "looking for abandoned runs on a thread failed; the sweep will find them");
                return;
            }
        };
        let ttl = cluster.config.lease_ttl;
        for run in listed {
            if run.state.run_id == new_run || !abandoned(&run, ttl) {
                continue;
            }
            let run_id = run.state.run_id.clone();
            if let Some(TakenOver::Run(mut stream)) = take_over(&agents, run).await {
                tracing::info!(%run_id, instance = %cluster.instance(), "took over a run whose instance stopped, before a new run on its thread");
                // Its first event comes once it holds the thread: the new run queues behind
                // it. Bounded, in case it waits behind a live run itself.
                let _ = tokio::time::timeout(cluster.config.request_timeout, stream.next()).await;
            }
        }
    }
}

impl ThreadRecovery for LazyRecovery {
    fn recover<'a>(&'a self, thread: &'a ThreadKey, new_run: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.recover_thread(thread, new_run))
    }
}

/// Sweeps every `interval` until the instance goes.
pub(crate) async fn sweep(agents: Weak<BTreeMap<String, Agent>>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(agents) = agents.upgrade() else {
            return;
        };
        recover_once(&agents).await;
    }
}
