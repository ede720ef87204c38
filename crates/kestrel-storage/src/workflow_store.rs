//! [`StorageWorkflowStore`]: workflows' [`WorkflowStore`] on any [`Storage`] backend, so
//! workflow runs survive a restart (a suspended run is resumed from its snapshot, a run left
//! running is continued from its last step boundary).
//!
//! Snapshots are the `workflow_runs` table's rows: the [`WorkflowSnapshot`] as JSON, with its
//! workflow, run, resource and status as columns; the status column is the one a claim
//! compares and sets, and it wins over the snapshot's own copy when a run is read.

use std::sync::Arc;

use kestrel_core::workflow::{
    WorkflowFenced, WorkflowRunList, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStatus,
    WorkflowStore, WorkflowStoreError,
};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{PageRequest, WorkflowRunFilter, WorkflowRunRecord};

/// A [`WorkflowStore`] on a [`Storage`]. Cheap to clone.
#[derive(Clone)]
pub struct StorageWorkflowStore {
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for StorageWorkflowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageWorkflowStore")
            .field("backend", &self.storage.backend())
            .finish()
    }
}

impl StorageWorkflowStore {
    /// Workflow runs in `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self { storage }
    }
}

fn failed(error: impl std::error::Error + Send + Sync + 'static) -> WorkflowStoreError {
    WorkflowStoreError(Box::new(error))
}

/// A storage error as the workflow store's: a fence's refusal is the typed one workflows stop
/// on.
fn from_storage(error: StorageError) -> WorkflowStoreError {
    match error {
        StorageError::WorkflowRunFenced {
            workflow_id,
            run_id,
            token,
            current,
        } => WorkflowStoreError::fenced(WorkflowFenced {
            workflow_id,
            run_id,
            token: u64::try_from(token).unwrap_or(0),
            current: u64::try_from(current).unwrap_or(u64::MAX),
        }),
        other => failed(other),
    }
}

fn snapshot_of(record: WorkflowRunRecord) -> Result<WorkflowSnapshot, WorkflowStoreError> {
    let mut snapshot: WorkflowSnapshot = serde_json::from_str(record.snapshot.get())
        .map_err(|e| failed(StorageError::corrupt("workflow run snapshot", e)))?;
    snapshot.status = record.status;
    snapshot.created_at_ms = record.created_at.timestamp_millis();
    snapshot.updated_at_ms = record.updated_at.timestamp_millis();
    Ok(snapshot)
}

#[async_trait::async_trait]
impl WorkflowStore for StorageWorkflowStore {
    async fn save(&self, snapshot: &WorkflowSnapshot) -> Result<(), WorkflowStoreError> {
        // Straight to JSON text: the store keeps it as it is.
        let json = serde_json::value::to_raw_value(snapshot).map_err(failed)?;
        let mut record = WorkflowRunRecord::new(
            &snapshot.workflow_id,
            &snapshot.run_id,
            snapshot.status,
            json,
        );
        record.resource_id.clone_from(&snapshot.resource_id);
        record.lease_token = snapshot.lease_token;
        self.storage
            .save_workflow_run(record)
            .await
            .map(drop)
            .map_err(from_storage)
    }

    async fn fence(
        &self,
        workflow_id: &str,
        run_id: &str,
        token: u64,
    ) -> Result<(), WorkflowStoreError> {
        self.storage
            .fence_workflow_run(workflow_id, run_id, token)
            .await
            .map_err(from_storage)
    }

    async fn load(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowSnapshot>, WorkflowStoreError> {
        self.storage
            .get_workflow_run(workflow_id, run_id)
            .await
            .map_err(failed)?
            .map(snapshot_of)
            .transpose()
    }

    async fn claim(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool, WorkflowStoreError> {
        self.storage
            .claim_workflow_run(workflow_id, run_id, from, to)
            .await
            .map_err(failed)
    }

    async fn list(&self, query: &WorkflowRunsQuery) -> Result<WorkflowRunList, WorkflowStoreError> {
        let filter = WorkflowRunFilter {
            workflow_id: query.workflow_id.clone(),
            resource_id: query.resource_id.clone(),
            status: query.status,
            page: PageRequest::new(query.page, query.page_size()),
        };
        let page = self
            .storage
            .list_workflow_runs(filter)
            .await
            .map_err(failed)?;
        let runs = page
            .items
            .into_iter()
            .map(snapshot_of)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WorkflowRunList {
            runs,
            total: page.total,
        })
    }

    async fn delete(&self, workflow_id: &str, run_id: &str) -> Result<bool, WorkflowStoreError> {
        self.storage
            .delete_workflow_run(workflow_id, run_id)
            .await
            .map_err(failed)
    }

    fn is_durable(&self) -> bool {
        // The in-memory backend outlives nothing: snapshots at every step would only cost.
        self.storage.backend() != "memory"
    }
}
