//! Pausing, resuming and aborting runs by id, also runs no process drives any more.
//!
//! A run that delegates is saved as waiting for its sub-agent's run
//! ([`RunPhase::WaitingForSubtask`]), and a delegated run saves a snapshot after every step,
//! in the same store (a durable one: with the in-memory default there is no restart to
//! survive, and only pauses and stops for a person are saved). So when the process stops
//! mid-delegation, nothing is lost: a new process on the same store calls
//! [`RunHandle::proceed`] on the parent's run, the parent's pending delegation finds its
//! sub-agent's run in the store (lazily, only then), continues it from its last finished
//! step, and the parent continues with its result.
//!
//! Operations on a parent reach its sub-agents: [`RunHandle::pause`] pauses the active
//! sub-agent at its next step boundary (and the parent with it), [`RunHandle::proceed`]
//! continues the sub-agent and then the parent, and [`RunHandle::abort`] ends every
//! unfinished sub-agent run, then the parent. Steps a process was in the middle of when it
//! stopped run again on resume (tool calls included): delivery is at least once per step.
//!
//! [`RunHandle::proceed`]: crate::agent::RunHandle::proceed
//! [`RunHandle::pause`]: crate::agent::RunHandle::pause
//! [`RunHandle::abort`]: crate::agent::RunHandle::abort

use futures::future::BoxFuture;

use super::decisions::RunControlError;
use crate::cluster::member::{Hold, holder_instance};
use crate::cluster::{Command, Outcome, run_lease_key};
use crate::definition::RunOptions;
use crate::model::FinishReason;
use crate::run::{RunState, RunStatus, Waiting};
use crate::runtime::registry::LiveAbort;
use crate::runtime::{Agent, AgentRun};
use crate::store::{RunPhase, RunStoreError, SharedRunStore, StoredRun};

/// A run named by id, as its handle names it for proceeding or aborting.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunTarget {
    /// The run.
    pub(crate) run_id: String,
    /// The resource the caller acts for: a run of another resource is refused as not found.
    pub(crate) resource_id: Option<String>,
    /// Options of the continued run (its abort signal, request context, hooks).
    pub(crate) options: RunOptions,
}

impl Agent {
    /// Claims a stored run that is paused, waits for a sub-agent, or was being driven by a
    /// process that stopped, and returns it ready to go on (a pending delegation continues
    /// its sub-agent's run first, found in the store when needed, then this run).
    ///
    /// Refused when the run is in progress in this process, waits for a decision, is
    /// finished, or is a delegated sub-agent's run. Claiming the run is a compare-and-set on
    /// its snapshot: of two processes resuming it, one wins.
    pub(crate) async fn claim(&self, target: RunTarget) -> Result<AgentRun, RunControlError> {
        let run_id = target.run_id.clone();
        if self.runtime.runs.is_active(&run_id) {
            return Err(RunControlError::NotResumable {
                run_id,
                action: "resumed",
                reason: "it is in progress in this process",
            });
        }
        let driven_elsewhere = || RunControlError::NotResumable {
            run_id: run_id.clone(),
            action: "resumed",
            reason: "it is in progress on another instance",
        };
        if let Some(cluster) = &self.runtime.runs.cluster {
            let elsewhere = cluster
                .other_holder(&run_lease_key(&run_id))
                .await
                .map_err(|source| RunControlError::Cluster {
                    run_id: run_id.clone(),
                    source,
                })?;
            if elsewhere.is_some() {
                return Err(driven_elsewhere());
            }
        }
        let store = self.run_store().clone();
        let stored = self.load_top_level(&store, &target).await?;
        let reason = match stored.phase {
            RunPhase::Completed | RunPhase::Failed | RunPhase::Aborted | RunPhase::Tripwire => {
                Some("it is finished")
            }
            RunPhase::Suspended => {
                Some("it waits for decisions on its tool calls (approve, decline or resume them)")
            }
            RunPhase::Paused | RunPhase::WaitingForSubtask | RunPhase::Running => None,
        };
        if let Some(reason) = reason {
            return Err(RunControlError::NotResumable {
                run_id,
                action: "resumed",
                reason,
            });
        }
        let hold = self
            .claim_lease(&run_id)
            .await?
            .map_err(|()| driven_elsewhere())?;
        let mut run = AgentRun::resume(self.clone(), stored.state, target.options)
            .map_err(RunControlError::InvalidState)?
            .with_hold(hold);
        let version = match store
            .save(run.state(), RunPhase::Running, Some(stored.version))
            .await
        {
            Ok(version) => version,
            Err(RunStoreError::Conflict { .. } | RunStoreError::Fenced { .. }) => {
                return Err(RunControlError::Conflict { run_id });
            }
            Err(source) => return Err(RunControlError::Store { run_id, source }),
        };
        Ok(run.with_snapshot_version(version))
    }

    /// Aborts a run by id, also one no process drives: a run in progress here gets its
    /// abort signal (its sub-agents stop at their next step, then it does); one another
    /// instance of the cluster drives is stopped there; a stored run that is not finished has
    /// every unfinished sub-agent run marked aborted, deepest first, then itself. Returns how
    /// many stored runs were marked (0 for a live run, which records its own end). With a
    /// resource, a run of another resource, in progress or stored, is not found.
    pub(crate) async fn abort_by_id(&self, target: RunTarget) -> Result<usize, RunControlError> {
        let run_id = target.run_id.clone();
        match self
            .runtime
            .runs
            .abort_run_of(&run_id, target.resource_id.as_deref())
        {
            LiveAbort::Aborted => return Ok(0),
            // Another resource's run is not revealed.
            LiveAbort::OtherResource => return Err(RunControlError::RunNotFound { run_id }),
            LiveAbort::NotLive => {}
        }
        // In a cluster, the instance that drives the run stops it (and records its end).
        match self.abort_elsewhere(&target).await? {
            Some(LiveAbort::Aborted) => return Ok(0),
            Some(LiveAbort::OtherResource) => return Err(RunControlError::RunNotFound { run_id }),
            Some(LiveAbort::NotLive) | None => {}
        }
        let store = self.run_store().clone();
        let stored = self.load_top_level(&store, &target).await?;
        if stored.phase.is_ended() {
            return Err(RunControlError::NotResumable {
                run_id,
                action: "aborted",
                reason: "it is finished",
            });
        }
        self.abort_tree(store, stored.state, stored.version).await
    }

    /// In a cluster, takes the lease of a stopped run about to be continued here: `Err` when
    /// another instance holds it; `Ok(None)` outside a cluster.
    pub(super) async fn claim_lease(
        &self,
        run_id: &str,
    ) -> Result<Result<Option<Hold>, ()>, RunControlError> {
        let Some(cluster) = &self.runtime.runs.cluster else {
            return Ok(Ok(None));
        };
        let hold = cluster
            .acquire(run_lease_key(run_id), cluster.instance())
            .await
            .map_err(|source| RunControlError::Cluster {
                run_id: run_id.to_owned(),
                source,
            })?;
        Ok(hold.map(Some).ok_or(()))
    }

    /// Asks the instance holding the run's lease, if another, to abort it: what it did, or
    /// `None` when no other instance drives the run.
    async fn abort_elsewhere(
        &self,
        target: &RunTarget,
    ) -> Result<Option<LiveAbort>, RunControlError> {
        let Some(cluster) = &self.runtime.runs.cluster else {
            return Ok(None);
        };
        let cluster_error = |source| RunControlError::Cluster {
            run_id: target.run_id.clone(),
            source,
        };
        let Some(lease) = cluster
            .other_holder(&run_lease_key(&target.run_id))
            .await
            .map_err(cluster_error)?
        else {
            return Ok(None);
        };
        let command = Command::AbortRun {
            run_id: target.run_id.clone(),
            resource_id: target.resource_id.clone(),
        };
        let outcome = cluster
            .request(holder_instance(&lease.holder), command)
            .await
            .map_err(cluster_error)?;
        Ok(Some(match outcome {
            Outcome::Done { .. } => LiveAbort::Aborted,
            Outcome::OtherResource => LiveAbort::OtherResource,
            _ => LiveAbort::NotLive,
        }))
    }

    /// The stored run, if it is this agent's (and the caller's resource's) and not a
    /// delegated sub-agent's (those are resumed and aborted through their parent).
    async fn load_top_level(
        &self,
        store: &SharedRunStore,
        target: &RunTarget,
    ) -> Result<StoredRun, RunControlError> {
        let stored = self
            .load_own(store, &target.run_id, target.resource_id.as_deref())
            .await?;
        if let Some(parent) = &stored.state.delegated_by {
            return Err(RunControlError::Delegated {
                run_id: target.run_id.clone(),
                parent_run_id: parent.run_id.clone(),
            });
        }
        Ok(stored)
    }

    /// Marks the sub-agents' unfinished runs of `state`, then `state`, aborted.
    fn abort_tree(
        &self,
        store: SharedRunStore,
        mut state: RunState,
        version: i64,
    ) -> BoxFuture<'_, Result<usize, RunControlError>> {
        Box::pin(async move {
            let mut marked = 0;
            let mut children: Vec<(String, String)> = state
                .active_sub_runs()
                .into_iter()
                .map(|s| (s.agent_id, s.run_id))
                .collect();
            if let RunStatus::Suspended { calls, .. } = &state.status {
                for call in calls {
                    if let Some(Waiting::SubAgent {
                        agent_id, run_id, ..
                    }) = &call.waiting
                        && !children.iter().any(|(_, r)| r == run_id)
                    {
                        children.push((agent_id.clone(), run_id.clone()));
                    }
                }
            }
            for (agent_id, child_id) in children {
                let Some(sub_agent) = self.sub_agent(&agent_id) else {
                    tracing::warn!(run_id = %state.run_id, sub_agent = %agent_id, "a sub-agent of an aborted run is no longer known; its run is left as it is");
                    continue;
                };
                if sub_agent.runtime.runs.abort_run(&child_id) {
                    continue;
                }
                let loaded =
                    store
                        .load(&child_id)
                        .await
                        .map_err(|source| RunControlError::Store {
                            run_id: child_id.clone(),
                            source,
                        })?;
                if let Some(child) = loaded
                    && !child.phase.is_ended()
                {
                    marked += sub_agent
                        .abort_tree(store.clone(), child.state, child.version)
                        .await?;
                }
            }
            let run_id = state.run_id.clone();
            state.end(FinishReason::Abort);
            match store.save(&state, RunPhase::Aborted, Some(version)).await {
                Ok(_) => Ok(marked + 1),
                Err(RunStoreError::Conflict { .. } | RunStoreError::Fenced { .. }) => {
                    Err(RunControlError::Conflict { run_id })
                }
                Err(source) => Err(RunControlError::Store { run_id, source }),
            }
        })
    }
}
