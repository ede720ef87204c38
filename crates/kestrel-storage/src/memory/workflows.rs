//! The workflow runs of [`super::InMemoryStorage`]: each run's latest snapshot by workflow
//! and run id, saved, claimed with a compare-and-set on its status, and listed.

use crate::storage::WorkflowRecordStore;
use async_trait::async_trait;

use super::listing::newest_first;
use super::{InMemoryStorage, State};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus};

fn key(workflow_id: &str, run_id: &str) -> (String, String) {
    (workflow_id.to_owned(), run_id.to_owned())
}

/// Raises the run's fence to `token`, or refuses when it is above.
pub(super) fn fence(state: &mut State, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
    codec::check_id("workflow_id", workflow_id)?;
    codec::check_id("run_id", run_id)?;
    let token = codec::fence_token(token)?;
    let current = state
        .workflow_fences
        .entry(key(workflow_id, run_id))
        .or_insert(0);
    if *current > token {
        return Err(StorageError::WorkflowRunFenced {
            workflow_id: workflow_id.to_owned(),
            run_id: run_id.to_owned(),
            token,
            current: *current,
        });
    }
    *current = token;
    Ok(())
}

/// Creates the run or replaces its snapshot, keeping its creation time; a save with a stale
/// lease token is refused.
pub(super) fn save(state: &mut State, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
    codec::check_id("workflow_id", &record.workflow_id)?;
    codec::check_id("run_id", &record.run_id)?;
    if let Some(token) = record.lease_token {
        fence(state, &record.workflow_id, &record.run_id, token)?;
    }
    let key = key(&record.workflow_id, &record.run_id);
    let now = codec::now();
    let created_at = state
        .workflow_runs
        .get(&key)
        .map_or(now, |stored| stored.created_at);
    let saved = WorkflowRunRecord {
        created_at,
        updated_at: now,
        ..record
    };
    state.workflow_runs.insert(key, saved.clone());
    Ok(saved)
}

pub(super) fn get(state: &State, workflow_id: &str, run_id: &str) -> Option<WorkflowRunRecord> {
    state.workflow_runs.get(&key(workflow_id, run_id)).cloned()
}

/// Moves the run from `from` to `to` if it is in `from`.
pub(super) fn claim(
    state: &mut State,
    workflow_id: &str,
    run_id: &str,
    from: WorkflowStatus,
    to: WorkflowStatus,
) -> bool {
    match state.workflow_runs.get_mut(&key(workflow_id, run_id)) {
        Some(run) if run.status == from => {
            run.status = to;
            run.updated_at = codec::now();
            true
        }
        _ => false,
    }
}

/// The runs matching `filter`, newest first (ties by run id, descending).
pub(super) fn list(state: &State, filter: WorkflowRunFilter) -> Result<Page<WorkflowRunRecord>> {
    codec::check_page(filter.page)?;
    let runs: Vec<&WorkflowRunRecord> = state
        .workflow_runs
        .values()
        .filter(|r| {
            filter
                .workflow_id
                .as_ref()
                .is_none_or(|w| *w == r.workflow_id)
        })
        .filter(|r| filter.resource_id.is_none() || filter.resource_id == r.resource_id)
        .filter(|r| filter.status.is_none_or(|s| s == r.status))
        .collect();
    Ok(newest_first(
        runs,
        |r| (r.created_at, r.run_id.as_str()),
        filter.page,
    ))
}

#[async_trait]
impl WorkflowRecordStore for InMemoryStorage {
    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
        save(&mut self.state(), record)
    }

    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
        fence(&mut self.state(), workflow_id, run_id, token)
    }

    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>> {
        Ok(get(&self.state(), workflow_id, run_id))
    }

    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool> {
        Ok(claim(&mut self.state(), workflow_id, run_id, from, to))
    }

    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>> {
        list(&self.state(), filter)
    }

    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool> {
        let key = (workflow_id.to_owned(), run_id.to_owned());
        Ok(self.state().workflow_runs.remove(&key).is_some())
    }
}
