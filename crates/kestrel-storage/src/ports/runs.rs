//! The [`RunStore`](kestrel_core::store::RunStore) port on a [`Storage`] backend's runs table,
//! so stopped runs (approvals, suspended tools, client tools) survive a restart.
//!
//! Snapshots are the runs table's rows: the [`RunState`] as JSON, its thread and resource, and
//! the row's version, which every save compares and sets.

use kestrel_core::agent::RunState;
use kestrel_core::store::{
    RunPhase, RunStoreError, StoredRun, SuspendedRunsPage, SuspendedRunsQuery,
};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{PageRequest, RunFilter, RunRecord};

fn backend(error: StorageError) -> RunStoreError {
    RunStoreError::Backend(Box::new(error))
}

/// The runs table's row of a snapshot.
fn record_of(state: &RunState, phase: RunPhase) -> Result<RunRecord, RunStoreError> {
    // Straight to JSON text: the store keeps it as it is.
    let snapshot =
        serde_json::value::to_raw_value(state).map_err(|e| RunStoreError::Backend(Box::new(e)))?;
    let mut record = RunRecord::new(&state.run_id, &state.agent_id, phase, snapshot);
    record.thread_id = state.settings.thread_id.clone();
    record.resource_id = state.settings.resource_id.clone();
    record.parent_run_id = state.delegated_by.as_ref().map(|d| d.run_id.clone());
    record.lease_token = state
        .lease_token
        .map(crate::codec::fence_token)
        .transpose()
        .map_err(backend)?;
    Ok(record)
}

/// A storage error as the run store reports it: a compare-and-set that found another version
/// (or no run, when `expected` named one) is a conflict.
fn run_store_error(error: StorageError, expected: Option<i64>) -> RunStoreError {
    match error {
        StorageError::Conflict {
            run_id,
            expected,
            actual,
        } => RunStoreError::Conflict {
            run_id,
            expected,
            actual,
        },
        StorageError::RunNotFound { run_id } => RunStoreError::Conflict {
            run_id,
            expected,
            actual: None,
        },
        StorageError::Fenced {
            run_id,
            token,
            current,
        } => RunStoreError::Fenced {
            run_id,
            token: u64::try_from(token).unwrap_or(0),
            current: u64::try_from(current).unwrap_or(0),
        },
        e => backend(e),
    }
}

fn stored(record: RunRecord) -> Result<StoredRun, RunStoreError> {
    let state: RunState = serde_json::from_str(record.snapshot.get()).map_err(|e| {
        RunStoreError::Backend(
            format!("the snapshot of run {:?} is unreadable: {e}", record.run_id).into(),
        )
    })?;
    Ok(StoredRun {
        state,
        phase: record.status,
        version: record.version,
        updated_at_ms: record.updated_at.timestamp_millis(),
    })
}

/// [`RunStore::save`](kestrel_core::store::RunStore::save) on `storage`.
pub async fn save<S: Storage + ?Sized>(
    storage: &S,
    state: &RunState,
    phase: RunPhase,
    expected_version: Option<i64>,
) -> Result<i64, RunStoreError> {
    let record = record_of(state, phase)?;
    match storage.save_run(record, expected_version).await {
        Ok(saved) => Ok(saved.version),
        Err(error) => Err(run_store_error(error, expected_version)),
    }
}

/// [`RunStore::save_all`](kestrel_core::store::RunStore::save_all) on `storage`.
pub async fn save_all<S: Storage + ?Sized>(
    storage: &S,
    saves: &[(&RunState, RunPhase, Option<i64>)],
) -> Result<Vec<i64>, RunStoreError> {
    let mut records = Vec::with_capacity(saves.len());
    for (state, phase, expected_version) in saves {
        records.push((record_of(state, *phase)?, *expected_version));
    }
    match storage.save_runs(records).await {
        Ok(saved) => Ok(saved.into_iter().map(|r| r.version).collect()),
        Err(error) => Err(run_store_error(error, None)),
    }
}

/// [`RunStore::load`](kestrel_core::store::RunStore::load) on `storage`.
pub async fn load<S: Storage + ?Sized>(
    storage: &S,
    run_id: &str,
) -> Result<Option<StoredRun>, RunStoreError> {
    match storage.get_run(run_id).await.map_err(backend)? {
        Some(record) => stored(record).map(Some),
        None => Ok(None),
    }
}

/// [`RunStore::list_in_phases`](kestrel_core::store::RunStore::list_in_phases) on `storage`.
pub async fn list_in_phases<S: Storage + ?Sized>(
    storage: &S,
    phases: &[RunPhase],
    query: &SuspendedRunsQuery,
) -> Result<SuspendedRunsPage, RunStoreError> {
    if phases.is_empty() {
        return Ok(SuspendedRunsPage {
            runs: Vec::new(),
            total: 0,
        });
    }
    let filter = RunFilter {
        agent_id: query.agent_id.clone(),
        thread_id: query.thread_id.clone(),
        resource_id: query.resource_id.clone(),
        statuses: phases.to_vec(),
        page: PageRequest::new(query.page, query.page_size()),
        ..RunFilter::default()
    };
    let page = storage.list_runs(filter).await.map_err(backend)?;
    let runs = page
        .items
        .into_iter()
        .map(stored)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SuspendedRunsPage {
        runs,
        total: page.total,
    })
}
