//! The [`WorkflowStore`](kestrel_core::store::WorkflowStore) port on a [`Storage`] backend, so
//! workflow runs survive a restart (a suspended run is resumed from its snapshot, a run left
//! running is continued from its last step boundary).
//!
//! Snapshots are the `workflow_runs` table's rows: the [`WorkflowSnapshot`] as JSON, with its
//! workflow, run, resource and status as columns; the status column is the one a claim
//! compares and sets, and it wins over the snapshot's own copy when a run is read.

use kestrel_core::store::{
    WorkflowFenced, WorkflowRunList, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStoreError,
};
use kestrel_core::workflow::WorkflowStatus;

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{PageRequest, WorkflowRunFilter, WorkflowRunRecord};

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

/// [`WorkflowStore::save`](kestrel_core::store::WorkflowStore::save) on `storage`.
pub async fn save<S: Storage + ?Sized>(
    storage: &S,
    snapshot: &WorkflowSnapshot,
) -> Result<(), WorkflowStoreError> {
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
    storage
        .save_workflow_run(record)
        .await
        .map(drop)
        .map_err(from_storage)
}

/// [`WorkflowStore::fence`](kestrel_core::store::WorkflowStore::fence) on `storage`.
pub async fn fence<S: Storage + ?Sized>(
    storage: &S,
    workflow_id: &str,
    run_id: &str,
    token: u64,
) -> Result<(), WorkflowStoreError> {
    storage
        .fence_workflow_run(workflow_id, run_id, token)
        .await
        .map_err(from_storage)
}

/// [`WorkflowStore::load`](kestrel_core::store::WorkflowStore::load) on `storage`.
pub async fn load<S: Storage + ?Sized>(
    storage: &S,
    workflow_id: &str,
    run_id: &str,
) -> Result<Option<WorkflowSnapshot>, WorkflowStoreError> {
    storage
        .get_workflow_run(workflow_id, run_id)
        .await
        .map_err(failed)?
        .map(snapshot_of)
        .transpose()
}

/// [`WorkflowStore::claim`](kestrel_core::store::WorkflowStore::claim) on `storage`.
pub async fn claim<S: Storage + ?Sized>(
    storage: &S,
    workflow_id: &str,
    run_id: &str,
    from: WorkflowStatus,
    to: WorkflowStatus,
) -> Result<bool, WorkflowStoreError> {
    storage
        .claim_workflow_run(workflow_id, run_id, from, to)
        .await
        .map_err(failed)
}

/// [`WorkflowStore::list`](kestrel_core::store::WorkflowStore::list) on `storage`.
pub async fn list<S: Storage + ?Sized>(
    storage: &S,
    query: &WorkflowRunsQuery,
) -> Result<WorkflowRunList, WorkflowStoreError> {
    let filter = WorkflowRunFilter {
        workflow_id: query.workflow_id.clone(),
        resource_id: query.resource_id.clone(),
        status: query.status,
        page: PageRequest::new(query.page, query.page_size()),
    };
    let page = storage.list_workflow_runs(filter).await.map_err(failed)?;
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

/// [`WorkflowStore::delete`](kestrel_core::store::WorkflowStore::delete) on `storage`.
pub async fn delete<S: Storage + ?Sized>(
    storage: &S,
    workflow_id: &str,
    run_id: &str,
) -> Result<bool, WorkflowStoreError> {
    storage
        .delete_workflow_run(workflow_id, run_id)
        .await
        .map_err(failed)
}

/// [`WorkflowStore::is_durable`](kestrel_core::store::WorkflowStore::is_durable) of `storage`.
pub fn is_durable<S: Storage + ?Sized>(storage: &S) -> bool {
    // The in-memory backend outlives nothing: snapshots at every step would only cost.
    storage.backend() != "memory"
}
