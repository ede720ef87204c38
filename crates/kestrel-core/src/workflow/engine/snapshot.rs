//! A run's snapshots: saved at step boundaries and at the end (when the workflow's snapshot
//! policy keeps them), deleted when the policy refuses a later one, never written by an
//! instance that lost the run's lease. In a cluster every snapshot carries the driver's lease
//! token, and the store refuses one whose token is stale. A save that fails is tried again a
//! few times; one that still fails, or is refused, hands the run over: the driver stops
//! before its next step and writes nothing more, and the run goes on from its last stored
//! boundary elsewhere (or after a restart).

use std::sync::Arc;

use serde_json::Value;

use super::Engine;
use crate::event::{StepErrorInfo, WorkflowStatus};
use crate::store::{StepResults, WorkflowSnapshot};

/// Why a driver stopped driving its run before the run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum HandOver {
    /// Another instance took the run over (this one was paused past its lease).
    TakenOver = 1,
    /// Its progress could not be stored.
    StoreFailed = 2,
}

impl HandOver {
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::TakenOver),
            2 => Some(Self::StoreFailed),
            _ => None,
        }
    }

    /// What the run's caller is told (no store's own words: those are logged).
    pub(crate) fn message(self) -> &'static str {
        match self {
            Self::TakenOver => {
                "this instance stopped driving the run: another instance took it over (this one \
                 was paused past its lease), and the run goes on there from its last stored step"
            }
            Self::StoreFailed => {
                "this instance stopped driving the run: its progress could not be stored; the \
                 run goes on from its last stored step, on another instance of the cluster or \
                 when the application next starts"
            }
        }
    }
}

/// How long a failed save waits before each of its next attempts.
const SAVE_RETRIES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(500),
    std::time::Duration::from_secs(2),
];

impl Engine {
    /// Saves the run's snapshot. `false` when it could not be: the driver has handed the run
    /// over ([`Engine::handed_over`]) and must not run another step.
    pub(super) async fn save(
        &self,
        status: WorkflowStatus,
        result: Option<&Arc<Value>>,
        error: Option<&StepErrorInfo>,
    ) -> bool {
        if self.lease_lost() {
            self.hand_over(HandOver::TakenOver);
            return false;
        }
        if self.handed_over().is_some() {
            return false;
        }
        let steps = {
            let results = self.run.results.read().unwrap_or_else(|e| e.into_inner());
            self.keeps(status, &results).then(|| results.clone())
        };
        match steps {
            // Boxed: a step boundary's save is part of the run's future.
            Some(steps) => {
                Box::pin(self.store(&Box::new(self.snapshot(status, result, error, steps)))).await
            }
            None => {
                self.forget().await;
                true
            }
        }
    }

    /// Whether the workflow's snapshot policy keeps a snapshot in `status` with `steps`.
    pub(super) fn keeps(&self, status: WorkflowStatus, steps: &StepResults) -> bool {
        crate::workflow::persist::keeps(self.workflow.inner.persist.as_ref(), status, steps)
    }

    /// Deletes the run's stored snapshot, if there may be one: the snapshot policy refused a
    /// newer one, and the store must not show the run where it no longer is.
    pub(super) async fn forget(&self) {
        if !self
            .stored
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let store = &self.workflow.inner.store;
        if let Err(error) = store.delete(&self.run.workflow_id, &self.run.run_id).await {
            tracing::warn!(run_id = %self.run.run_id, %error, "deleting a workflow run's snapshot failed");
        }
    }

    /// Whether another instance drives the run now (its snapshots are the run's).
    pub(super) fn lease_lost(&self) -> bool {
        self.lease.as_ref().is_some_and(|lease| lease.is_lost())
    }

    /// Why this driver stopped driving the run, if it did.
    pub(super) fn handed_over(&self) -> Option<HandOver> {
        HandOver::from_byte(self.handed_over.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Stops driving the run: no step starts after this, steps in flight are told to stop
    /// (the run's abort signal), and nothing more is written.
    pub(super) fn hand_over(&self, why: HandOver) {
        let first = self.handed_over.compare_exchange(
            0,
            why as u8,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
        if first.is_ok() {
            tracing::warn!(run_id = %self.run.run_id, ?why, "this instance stops driving a workflow run");
        }
        self.run.abort.abort();
    }

    /// Stores `snapshot`, again after a failure (a few times, with growing waits). `false`
    /// when it could not be stored, or the store fenced it off: the run is handed over.
    pub(super) async fn store(&self, snapshot: &WorkflowSnapshot) -> bool {
        self.stored
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let store = &self.workflow.inner.store;
        let mut retries = SAVE_RETRIES.iter();
        loop {
            let error = match store.save(snapshot).await {
                Ok(()) => return true,
                Err(error) => error,
            };
            if error.is_fenced() {
                tracing::warn!(run_id = %self.run.run_id, %error, "a workflow run's save was fenced off: another instance drives it");
                if let Some(lease) = &self.lease {
                    lease.mark_lost();
                }
                self.hand_over(HandOver::TakenOver);
                return false;
            }
            match retries.next() {
                Some(wait) if !self.lease_lost() => {
                    tracing::warn!(run_id = %self.run.run_id, %error, ?wait, "saving a workflow run's snapshot failed; trying again");
                    // Boxed: the timer would otherwise take room in every run's future.
                    Box::pin(tokio::time::sleep(*wait)).await;
                }
                _ => {
                    tracing::error!(run_id = %self.run.run_id, %error, "saving a workflow run's snapshot failed for good");
                    self.hand_over(if self.lease_lost() {
                        HandOver::TakenOver
                    } else {
                        HandOver::StoreFailed
                    });
                    return false;
                }
            }
        }
    }

    /// The run's snapshot with these step results.
    pub(super) fn snapshot(
        &self,
        status: WorkflowStatus,
        result: Option<&Arc<Value>>,
        error: Option<&StepErrorInfo>,
        steps: StepResults,
    ) -> WorkflowSnapshot {
        WorkflowSnapshot {
            workflow_id: self.run.workflow_id.to_string(),
            run_id: self.run.run_id.to_string(),
            resource_id: self.resource_id.clone(),
            status,
            input: Arc::clone(&self.run.init),
            steps,
            state: self.state(),
            position: self.position,
            entry_input: Arc::clone(&self.entry_input),
            step_execution_path: self.path.clone(),
            result: result.cloned(),
            error: error.cloned(),
            request_context: self.run.request_context.to_map(),
            created_at_ms: 0,
            updated_at_ms: 0,
            lease_token: self.lease.as_ref().map(|lease| lease.token()),
        }
    }
}
