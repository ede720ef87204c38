//! Workflow runs, as stored, and how they are listed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{PageRequest, now};

pub use kestrel_core::event::WorkflowStatus;

/// A workflow run as stored: its latest snapshot (JSON) and the columns runs are found by.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRunRecord {
    /// The workflow.
    pub workflow_id: String,
    /// The run.
    pub run_id: String,
    /// The resource the run acts for.
    pub resource_id: Option<String>,
    /// Where it stands (the store's copy wins over the snapshot's own).
    pub status: WorkflowStatus,
    /// The snapshot, as JSON text: stores keep it as it is, without reading it (the workflow
    /// store serialises its snapshot straight to this text and back, with no JSON tree
    /// between). A store may give back equivalent text (PostgreSQL's `jsonb` orders keys and
    /// spaces them its own way).
    pub snapshot: Box<RawValue>,
    /// Assigned by the store on creation.
    pub created_at: DateTime<Utc>,
    /// Assigned by the store on every save.
    pub updated_at: DateTime<Utc>,
    /// In a cluster: the lease token of the instance that saves it. The save raises the run's
    /// fence to it, and is refused ([`crate::StorageError::WorkflowRunFenced`], nothing
    /// written) when the fence is above. `None` is not checked. Not read back.
    pub lease_token: Option<u64>,
}

impl WorkflowRunRecord {
    /// A record to save (the times are assigned by the store).
    pub fn new(
        workflow_id: impl Into<String>,
        run_id: impl Into<String>,
        status: WorkflowStatus,
        snapshot: Box<RawValue>,
    ) -> Self {
        let now = now();
        Self {
            workflow_id: workflow_id.into(),
            run_id: run_id.into(),
            resource_id: None,
            status,
            snapshot,
            created_at: now,
            updated_at: now,
            lease_token: None,
        }
    }
}

/// Which workflow runs [`crate::WorkflowRecordStore::list_workflow_runs`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunFilter {
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Only runs of this resource.
    pub resource_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<WorkflowStatus>,
    /// The page (newest first; ties by run id, descending).
    pub page: PageRequest,
}
