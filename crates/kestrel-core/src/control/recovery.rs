//! Continuing the runs of an instance that died: a run left `running` (or waiting for its
//! sub-agent) whose lease ran out is claimed, like a resume, and driven on from its last
//! snapshot by whichever instance finds it first.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Duration;

use super::RunControlError;
use super::lifecycle::RunRef;
use crate::run_store::{RunPhase, SuspendedRunsQuery};
use crate::runtime::Agent;

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
    let store = std::sync::Arc::clone(&any.runtime.run_store);
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
    let ttl_ms = i64::try_from(cluster.config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut taken = Vec::new();
    for run in found {
        // A run saved within the lease's time-to-live may well have a live owner; a
        // delegated run is continued by its parent.
        if now.saturating_sub(run.updated_at_ms) < ttl_ms || run.state.delegated_by.is_some() {
            continue;
        }
        let Some(agent) = agents.get(&run.state.agent_id) else {
            continue;
        };
        let run_id = run.state.run_id;
        match agent.resume_run(RunRef::new(&run_id)).await {
            Ok(stream) => {
                tracing::info!(%run_id, instance = %cluster.instance(), "took over a run whose instance stopped");
                // Dropped, the stream hands the run to a background task that drives it.
                drop(stream);
                taken.push(run_id);
            }
            // Alive after all, or another instance was quicker.
            Err(RunControlError::NotResumable { .. } | RunControlError::Conflict { .. }) => {}
            Err(error) => {
                tracing::warn!(%run_id, %error, "could not take over a run whose instance stopped");
            }
        }
    }
    taken
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
