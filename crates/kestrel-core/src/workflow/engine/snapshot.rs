//! A run's snapshots: saved at step boundaries and at the end (when the workflow's snapshot
//! policy keeps them), deleted when the policy refuses a later one, never written by an
//! instance that lost the run's lease.

use std::sync::Arc;

use serde_json::Value;

use super::Engine;
use crate::event::{StepErrorInfo, WorkflowStatus};
use crate::workflow_store::{StepResults, WorkflowSnapshot};

impl Engine {
    /// Saves the run's snapshot; a store that fails is logged (the run goes on: its result
    /// still reaches the caller).
    pub(super) async fn save(
        &self,
        status: WorkflowStatus,
        result: Option<&Arc<Value>>,
        error: Option<&StepErrorInfo>,
    ) {
        if self.lease_lost() {
            return;
        }
        let steps = {
            let results = self.run.results.read().unwrap_or_else(|e| e.into_inner());
            self.keeps(status, &results).then(|| results.clone())
        };
        match steps {
            // Boxed: a step boundary's save is part of the run's future.
            Some(steps) => {
                self.store(&Box::new(self.snapshot(status, result, error, steps)))
                    .await;
            }
            None => self.forget().await,
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

    /// Stores `snapshot`; a store that fails is logged.
    pub(super) async fn store(&self, snapshot: &WorkflowSnapshot) {
        self.stored
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Err(error) = self.workflow.inner.store.save(snapshot).await {
            tracing::warn!(run_id = %self.run.run_id, %error, "saving a workflow run's snapshot failed");
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
        }
    }
}
