//! Continuing runs that stopped for a person: approve or decline a tool call, resume a
//! suspended tool, submit a client tool's result, and find the runs that wait.
//!
//! A stopped run lives in the agent's [`crate::store::RunStore`] as a snapshot, not as a
//! task, so the decision may come from another request or from a new process after a restart.
//! Every decision names exactly one waiting call (through the run's
//! [`RunHandle`](crate::agent::RunHandle)) and is checked before anything changes: the run
//! must exist, belong to this agent (and to the caller's resource, when given), wait on that
//! call, for that kind of decision, with the same fingerprint (when given). The decision is
//! then recorded with a compare-and-set on the snapshot's version: of two racing decisions
//! exactly one wins, the other gets [`RunControlError::Conflict`] and changes nothing. Nothing
//! is ever approved automatically.
//!
//! **Approval and suspension.** A call that needs approval waits *before* `execute` runs;
//! once approved it runs, and if its tool then calls [`crate::tool::ToolContext::suspend`],
//! it waits again, now for resume data (it is not asked for approval a second time). An
//! approval cannot answer a suspension and resume data cannot answer an approval
//! ([`RunControlError::WrongDecision`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::definition::{AgentError, RunOptions};
use crate::run::{
    CallDecision, CallProgress, GenerateResult, RunState, RunStatus, Waiting, WaitingCall,
};
use crate::runtime::{Agent, AgentRun, AgentStream};
use crate::schema::schema_errors;
use crate::store::{RunPhase, RunStoreError, SharedRunStore, StoredRun, SuspendedRunsQuery};

/// The text the model reads when a call is declined without a reason.
pub const DEFAULT_DECLINE_REASON: &str = "Tool call was not approved by the user";

/// The tool call a decision is about, and how its run continues (made by the run's handle).
#[derive(Debug, Clone, Default)]
pub(crate) struct CallTarget {
    /// The stopped run.
    pub(crate) run_id: String,
    /// The waiting call.
    pub(crate) tool_call_id: String,
    /// The `fingerprint` of the `tool-call-approval` / `tool-call-suspended` event the person
    /// saw. When given, the decision is refused unless the run waits on exactly that call
    /// (same arguments, same step).
    pub(crate) fingerprint: Option<String>,
    /// The resource the caller acts for. When given, a run of another resource is refused as
    /// not found: no one decides on another user's runs.
    pub(crate) resource_id: Option<String>,
    /// Options of the continued run: its abort signal and, optionally, its request context
    /// and run-level approval policy (see [`RunOptions::require_tool_approval`]). The run's
    /// own settings (model settings, memory, limits) are kept.
    pub(crate) options: RunOptions,
}

/// Why a decision on a stopped run was refused. A refused decision changes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunControlError {
    /// No such run of this agent (or of the caller's resource).
    #[error("run {run_id:?} not found")]
    RunNotFound {
        /// The run asked for.
        run_id: String,
    },
    /// The run does not wait for a decision.
    #[error("run {run_id:?} is not waiting for a decision: it is {phase}")]
    NotSuspended {
        /// The run.
        run_id: String,
        /// `running` or `finished`.
        phase: &'static str,
    },
    /// The run waits, but not on this call (an unknown or stale id, or a call already
    /// decided).
    #[error(
        "run {run_id:?} does not wait on tool call {tool_call_id:?}; it waits on: {}",
        waiting.join(", ")
    )]
    CallNotWaiting {
        /// The run.
        run_id: String,
        /// The call named.
        tool_call_id: String,
        /// The calls the run waits on.
        waiting: Vec<String>,
    },
    /// The call waits for another kind of decision.
    #[error("tool call {tool_call_id:?} of run {run_id:?} waits for {waits_for}, not {given}")]
    WrongDecision {
        /// The run.
        run_id: String,
        /// The call.
        tool_call_id: String,
        /// What it waits for: `an approval`, `resume data` or `a client tool result`.
        waits_for: &'static str,
        /// What was given.
        given: &'static str,
    },
    /// The call changed since the person saw it.
    #[error(
        "tool call {tool_call_id:?} of run {run_id:?} is not the one decided on (fingerprint \
         {given:?}, the waiting call's is {current:?})"
    )]
    FingerprintMismatch {
        /// The run.
        run_id: String,
        /// The call.
        tool_call_id: String,
        /// The fingerprint given.
        given: String,
        /// The waiting call's.
        current: String,
    },
    /// The resume data does not match the tool's resume schema; the run stays suspended.
    #[error(
        "resume data for tool call {tool_call_id:?} of run {run_id:?} does not match the \
         tool's resume schema: {}",
        errors.join("; ")
    )]
    InvalidResumeData {
        /// The run.
        run_id: String,
        /// The call.
        tool_call_id: String,
        /// One message per violation.
        errors: Vec<String>,
    },
    /// Another decision on this run was recorded first.
    #[error("another decision on run {run_id:?} was recorded first; load the run and decide again")]
    Conflict {
        /// The run.
        run_id: String,
    },
    /// The saved run cannot be continued by this build or agent.
    #[error(transparent)]
    InvalidState(AgentError),
    /// The continued run failed (the `_generate` forms).
    #[error(transparent)]
    Run(AgentError),
    /// The run store failed.
    #[error("run {run_id:?}: the run store failed: {source}")]
    Store {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: RunStoreError,
    },
    /// Another instance of the cluster had to be asked and could not be (its leases or bus
    /// failed, or it did not answer).
    #[error("run {run_id:?}: the cluster failed: {source}")]
    Cluster {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: crate::cluster::ClusterError,
    },
    /// The run cannot be resumed or aborted by id.
    #[error("run {run_id:?} cannot be {action}: {reason}")]
    NotResumable {
        /// The run.
        run_id: String,
        /// `resumed` or `aborted`.
        action: &'static str,
        /// Why not.
        reason: &'static str,
    },
    /// The run is a delegated sub-agent's: decisions on it go through the run that delegated
    /// (its waiting calls are that run's too).
    #[error(
        "run {run_id:?} is a delegation of run {parent_run_id:?}: decide, resume or abort it \
         through that run"
    )]
    Delegated {
        /// The sub-agent's run.
        run_id: String,
        /// The run that delegated to it.
        parent_run_id: String,
    },
    /// The run store failed to list the suspended runs.
    #[error("listing suspended runs failed: {0}")]
    List(#[source] RunStoreError),
}

/// A run that waits, as [`Agent::list_suspended_runs`] returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct SuspendedRun {
    /// The run.
    pub run_id: String,
    /// Its thread, when it uses memory.
    pub thread_id: Option<String>,
    /// Its resource, when it uses memory.
    pub resource_id: Option<String>,
    /// The calls it waits on, in the model's order.
    pub tool_calls: Vec<WaitingCall>,
    /// When it stopped (milliseconds since the Unix epoch).
    pub suspended_at_ms: i64,
}

/// A page of [`SuspendedRun`]s, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct SuspendedRuns {
    /// This page.
    pub runs: Vec<SuspendedRun>,
    /// How many match in all.
    pub total: u64,
}

fn waits_for(waiting: &Waiting) -> &'static str {
    match waiting {
        Waiting::Approval => "an approval",
        Waiting::Resume { .. } => "resume data",
        Waiting::ClientResult => "a client tool result",
        Waiting::SubAgent { .. } => "a sub-agent's calls to be decided",
    }
}

/// A decision as the caller gives it.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Allow the call.
    Approve,
    /// Refuse it, with the reason the model reads.
    Decline(Option<String>),
    /// Run the suspended tool again with this resume data.
    Resume(Value),
    /// A client tool's result.
    ClientResult {
        /// The result.
        result: Value,
        /// Whether the model reads it as a failure.
        is_error: bool,
    },
}

impl Decision {
    fn given(&self) -> &'static str {
        match self {
            Decision::Approve | Decision::Decline(_) => "an approval",
            Decision::Resume(_) => "resume data",
            Decision::ClientResult { .. } => "a client tool result",
        }
    }
}

/// A decision on a waiting tool call, about to continue its run: await it for the run's
/// result, or await [`Continue::stream`] for its events. Nothing is recorded until then.
///
/// Made by [`crate::agent::RunHandle::approve`], [`decline`](crate::agent::RunHandle::decline),
/// [`resume`](crate::agent::RunHandle::resume) and [`submit`](crate::agent::RunHandle::submit);
/// the continued run keeps its run id (its stream has no `start`
/// event). A continued run can stop again, on calls of its next steps, and be continued the
/// same way.
#[must_use = "a decision is recorded only when it is awaited"]
#[derive(Debug)]
pub struct Continue {
    agent: Agent,
    call: CallTarget,
    decision: Decision,
}

impl Continue {
    /// Refuses the decision unless the call's fingerprint is this one: the `fingerprint` of
    /// the `tool-call-approval` / `tool-call-suspended` event the person saw (same arguments,
    /// same step).
    pub fn fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.call.fingerprint = Some(fingerprint.into());
        self
    }

    /// Records the decision and continues the run as an event stream.
    pub async fn stream(self) -> Result<AgentStream, RunControlError> {
        let run = self.agent.decide(self.call, self.decision).await?;
        Ok(run.into_stream())
    }

    /// Records the decision and returns the continued run, not started, to drive it step by
    /// step.
    pub async fn start(self) -> Result<AgentRun, RunControlError> {
        self.agent.decide(self.call, self.decision).await
    }
}

impl std::future::IntoFuture for Continue {
    type Output = Result<GenerateResult, RunControlError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let run = self.agent.decide(self.call, self.decision).await?;
            run.run().await.map_err(RunControlError::Run)
        })
    }
}

impl Agent {
    /// The decision `decision` on the call `call` names, not recorded until awaited.
    pub(crate) fn continue_with(&self, call: CallTarget, decision: Decision) -> Continue {
        Continue {
            agent: self.clone(),
            call,
            decision,
        }
    }

    /// This agent's runs that wait for a decision, newest first (the query's agent id is
    /// ignored: it is this agent). Read from the run store, so they survive a restart.
    pub async fn list_suspended_runs(
        &self,
        mut query: SuspendedRunsQuery,
    ) -> Result<SuspendedRuns, RunControlError> {
        query.agent_id = Some(self.id().to_owned());
        let page = self
            .run_store()
            .list_suspended(&query)
            .await
            .map_err(RunControlError::List)?;
        let runs = page
            .runs
            .into_iter()
            .map(|stored| SuspendedRun {
                tool_calls: stored.state.waiting_calls(),
                run_id: stored.state.run_id,
                thread_id: stored.state.settings.thread_id,
                resource_id: stored.state.settings.resource_id,
                suspended_at_ms: stored.updated_at_ms,
            })
            .collect();
        Ok(SuspendedRuns {
            runs,
            total: page.total,
        })
    }

    /// Checks a decision against the saved run, records it (compare-and-set), and returns the
    /// run ready to continue. A decision on a call of a delegated sub-agent (at any depth) is
    /// recorded in each run on the way down, the topmost first: its compare-and-set is what
    /// makes one of two racing decisions win.
    async fn decide(
        &self,
        target: CallTarget,
        decision: Decision,
    ) -> Result<AgentRun, RunControlError> {
        let store = Arc::clone(self.run_store());
        let mut chain = self.prepare(store, &target, decision, false).await?;
        let top = chain.remove(0);
        let run_id = target.run_id.clone();
        // In a cluster the decision takes the run's lease first: a decision another instance
        // is applying right now holds it.
        let hold = self
            .claim_lease(&run_id)
            .await?
            .map_err(|_| RunControlError::Conflict {
                run_id: run_id.clone(),
            })?;
        let mut run = AgentRun::resume(self.clone(), top.state, target.options)
            .map_err(RunControlError::InvalidState)?
            .with_hold(hold);
        // The run and the sub-agents' runs the decision reaches are saved together (one
        // store holds them all): a conflict on any leaves every one as it was, still waiting.
        let mut saves = vec![(run.state(), RunPhase::Running, Some(top.version))];
        saves.extend(
            chain
                .iter()
                .map(|nested| (&nested.state, RunPhase::Running, Some(nested.version))),
        );
        let version = match top.store.save_all(&saves).await {
            Ok(versions) => versions.first().copied().unwrap_or(top.version + 1),
            // Another decision won: it saved first, or took the run's lease over (so this
            // save's token is fenced off).
            Err(RunStoreError::Conflict { run_id, .. } | RunStoreError::Fenced { run_id, .. }) => {
                return Err(RunControlError::Conflict { run_id });
            }
            Err(source) => return Err(RunControlError::Store { run_id, source }),
        };
        Ok(run.with_snapshot_version(version))
    }

    /// Loads `target.run_id` from `store` and checks the decision against it; returns the run
    /// with the decision recorded, followed by the sub-agents' runs it reaches down to.
    fn prepare<'a>(
        &'a self,
        store: SharedRunStore,
        target: &'a CallTarget,
        decision: Decision,
        nested: bool,
    ) -> BoxFuture<'a, Result<Vec<Prepared>, RunControlError>> {
        Box::pin(async move {
            let run_id = target.run_id.clone();
            let stored = self
                .load_own(&store, &run_id, target.resource_id.as_deref())
                .await?;
            if !nested && let Some(parent) = &stored.state.delegated_by {
                return Err(RunControlError::Delegated {
                    run_id,
                    parent_run_id: parent.run_id.clone(),
                });
            }
            let phase = match stored.phase {
                RunPhase::Suspended if stored.state.is_suspended() => None,
                RunPhase::Completed | RunPhase::Failed | RunPhase::Aborted | RunPhase::Tripwire => {
                    Some("finished")
                }
                RunPhase::Paused => Some("paused"),
                RunPhase::WaitingForSubtask => Some("waiting for a sub-agent"),
                RunPhase::Running | RunPhase::Suspended => Some("running"),
            };
            if let Some(phase) = phase {
                return Err(RunControlError::NotSuspended { run_id, phase });
            }
            let waiting_ids: Vec<String> = stored
                .state
                .waiting_calls()
                .into_iter()
                .map(|c| c.tool_call_id)
                .collect();
            let version = stored.version;
            let mut state = stored.state;
            let RunStatus::Suspended { step, mut calls } =
                std::mem::replace(&mut state.status, RunStatus::Ready)
            else {
                return Err(RunControlError::NotSuspended {
                    run_id,
                    phase: "running",
                });
            };
            let not_waiting = || RunControlError::CallNotWaiting {
                run_id: run_id.clone(),
                tool_call_id: target.tool_call_id.clone(),
                waiting: waiting_ids.clone(),
            };
            let own = calls
                .iter()
                .position(|c| c.call.tool_call_id == target.tool_call_id && c.waiting.is_some());
            let index = match own {
                Some(index) => index,
                None => calls
                    .iter()
                    .position(|c| match &c.waiting {
                        Some(Waiting::SubAgent { calls, .. }) => {
                            calls.iter().any(|w| w.tool_call_id == target.tool_call_id)
                        }
                        _ => false,
                    })
                    .ok_or_else(not_waiting)?,
            };
            let progress = &mut calls[index];
            let mut chain = Vec::new();
            if let Some(Waiting::SubAgent {
                agent_id,
                run_id: sub_run_id,
                ..
            }) = progress.waiting.clone()
            {
                // The call is the sub-agent's: record the decision in its run, and continue
                // the delegation from there.
                let Some(sub_agent) = self.sub_agent(&agent_id) else {
                    return Err(RunControlError::InvalidState(AgentError::InvalidRunState {
                        run_id,
                        message: format!(
                            "the run waits on sub-agent {agent_id:?}, which agent {:?} no \
                             longer has",
                            self.id()
                        ),
                    }));
                };
                let nested_target = CallTarget {
                    run_id: sub_run_id,
                    tool_call_id: target.tool_call_id.clone(),
                    fingerprint: target.fingerprint.clone(),
                    resource_id: None,
                    options: RunOptions::new(),
                };
                chain = sub_agent
                    .prepare(Arc::clone(&store), &nested_target, decision, true)
                    .await?;
                progress.decision = Some(CallDecision::SubAgent);
            } else {
                progress.decision = Some(self.check_decision(target, progress, decision)?);
            }
            state.status = RunStatus::ToolsPending { step, calls };
            chain.insert(
                0,
                Prepared {
                    store,
                    state,
                    version,
                },
            );
            Ok(chain)
        })
    }

    /// The stored run, if it is this agent's (and the caller's resource's, when given).
    pub(super) async fn load_own(
        &self,
        store: &SharedRunStore,
        run_id: &str,
        resource_id: Option<&str>,
    ) -> Result<StoredRun, RunControlError> {
        let not_found = || RunControlError::RunNotFound {
            run_id: run_id.to_owned(),
        };
        let stored = store
            .load(run_id)
            .await
            .map_err(|source| RunControlError::Store {
                run_id: run_id.to_owned(),
                source,
            })?
            .ok_or_else(not_found)?;
        if stored.state.agent_id != self.id() {
            return Err(not_found());
        }
        if let Some(resource) = resource_id
            && stored.state.settings.resource_id.as_deref() != Some(resource)
        {
            return Err(not_found());
        }
        Ok(stored)
    }

    /// Checks a decision against the call it names; returns what to record.
    fn check_decision(
        &self,
        target: &CallTarget,
        progress: &CallProgress,
        decision: Decision,
    ) -> Result<CallDecision, RunControlError> {
        let run_id = target.run_id.clone();
        if let Some(given) = &target.fingerprint
            && *given != progress.fingerprint
        {
            return Err(RunControlError::FingerprintMismatch {
                run_id,
                tool_call_id: target.tool_call_id.clone(),
                given: given.clone(),
                current: progress.fingerprint.clone(),
            });
        }
        let Some(waiting) = progress.waiting.as_ref() else {
            return Err(RunControlError::RunNotFound { run_id });
        };
        let wrong = RunControlError::WrongDecision {
            run_id: run_id.clone(),
            tool_call_id: target.tool_call_id.clone(),
            waits_for: waits_for(waiting),
            given: decision.given(),
        };
        Ok(match (waiting, decision) {
            (Waiting::Approval, Decision::Approve) => CallDecision::Approved,
            (Waiting::Approval, Decision::Decline(reason)) => CallDecision::Declined {
                reason: reason
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or_else(|| DEFAULT_DECLINE_REASON.to_owned()),
            },
            (Waiting::Resume { .. }, Decision::Resume(data)) => {
                let schema = self
                    .inner
                    .tools
                    .get(&progress.call.tool_name)
                    .and_then(|tool| tool.resume_schema().cloned());
                if let Some(schema) = schema {
                    let errors = schema_errors(&schema, &data);
                    if !errors.is_empty() {
                        return Err(RunControlError::InvalidResumeData {
                            run_id,
                            tool_call_id: target.tool_call_id.clone(),
                            errors,
                        });
                    }
                }
                CallDecision::Resumed { data }
            }
            (Waiting::ClientResult, Decision::ClientResult { result, is_error }) => {
                CallDecision::ClientResult { result, is_error }
            }
            _ => return Err(wrong),
        })
    }
}

/// A decision checked against a stored run, to be saved with a compare-and-set on `version`.
struct Prepared {
    store: SharedRunStore,
    state: RunState,
    version: i64,
}
