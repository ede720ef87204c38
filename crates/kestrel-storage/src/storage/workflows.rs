//! Workflow runs' snapshots, claimed by status and fenced by lease token.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{Page, WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus};

/// Workflow runs' snapshots, claimed by status and fenced by lease token.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait WorkflowRecordStore: Send + Sync {
    /// Stores a workflow run's snapshot: the run is created, or its stored snapshot replaced.
    /// The record's `created_at` (kept from the first save) and `updated_at` are assigned by
    /// the store; the saved record is returned.
    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord>;

    /// Raises the fence of a workflow run to `token` (whether or not the run is stored): every
    /// later save with a smaller [`WorkflowRunRecord::lease_token`] is refused. Refused itself
    /// ([`crate::StorageError::WorkflowRunFenced`]) when the fence is above `token`. Fences
    /// outlive their runs' deletion.
    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()>;

    /// The workflow run, if any.
    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>>;

    /// Moves the run from status `from` to `to` if it is in `from` (a compare-and-set, so of
    /// two resumers one wins); `false` when it is not, or there is no such run.
    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool>;

    /// Workflow runs matching the filter, newest first (ties by run id, descending).
    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>>;

    /// Deletes a workflow run; `false` when there was none.
    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool>;
}
