//! The agent runs of [`super::InMemoryStorage`]: each run's snapshot by id, saved with a
//! compare-and-set on its version and fenced by its lease token, and listed.

use crate::storage::RunRecordStore;
use async_trait::async_trait;

use super::listing::{newest_first, run_matches};
use super::{InMemoryStorage, State};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, RunFilter, RunRecord};

/// Saves one run (see [`crate::RunRecordStore::save_run`]).
pub(super) fn save(
    state: &mut State,
    record: RunRecord,
    expected_version: Option<i64>,
) -> Result<RunRecord> {
    codec::check_id("run_id", &record.run_id)?;
    state.check_fence(&record.run_id, record.lease_token)?;
    let saved = next_run(
        state.runs.get(&record.run_id),
        record,
        expected_version,
        codec::now(),
    )?;
    state.raise_fence(&saved.run_id, saved.lease_token);
    state.runs.insert(saved.run_id.clone(), saved.clone());
    Ok(saved)
}

/// Saves several runs, all or none (see [`crate::RunRecordStore::save_runs`]).
pub(super) fn save_many(
    state: &mut State,
    saves: Vec<(RunRecord, Option<i64>)>,
) -> Result<Vec<RunRecord>> {
    let now = codec::now();
    // Every compare-and-set is checked before anything is written: all or nothing.
    let mut next = Vec::with_capacity(saves.len());
    for (record, expected_version) in saves {
        codec::check_id("run_id", &record.run_id)?;
        state.check_fence(&record.run_id, record.lease_token)?;
        next.push(next_run(
            state.runs.get(&record.run_id),
            record,
            expected_version,
            now,
        )?);
    }
    for saved in &next {
        state.raise_fence(&saved.run_id, saved.lease_token);
        state.runs.insert(saved.run_id.clone(), saved.clone());
    }
    Ok(next)
}

/// The runs `filter` selects, newest first.
pub(super) fn list(state: &State, filter: RunFilter) -> Result<Page<RunRecord>> {
    codec::check_page(filter.page)?;
    let runs: Vec<&RunRecord> = state
        .runs
        .values()
        .filter(|r| run_matches(r, &filter))
        .collect();
    Ok(newest_first(
        runs,
        |r| (r.created_at, r.run_id.as_str()),
        filter.page,
    ))
}

impl State {
    /// Refuses a write of `run_id` under `token` when a greater token was seen for the run.
    pub(super) fn check_fence(&self, run_id: &str, token: Option<i64>) -> Result<()> {
        match (token, self.fences.get(run_id)) {
            (Some(token), Some(&current)) if token < current => Err(StorageError::Fenced {
                run_id: run_id.to_owned(),
                token,
                current,
            }),
            _ => Ok(()),
        }
    }

    /// Records a write of `run_id` under `token` (checked by [`State::check_fence`]).
    pub(super) fn raise_fence(&mut self, run_id: &str, token: Option<i64>) {
        if let Some(token) = token {
            let current = self.fences.entry(run_id.to_owned()).or_insert(token);
            *current = (*current).max(token);
        }
    }
}

/// `record` as saved over `stored` with the compare-and-set on `expected_version`.
fn next_run(
    stored: Option<&RunRecord>,
    record: RunRecord,
    expected_version: Option<i64>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<RunRecord> {
    let saved = match (expected_version, stored) {
        (None, None) => RunRecord {
            version: 1,
            created_at: now,
            updated_at: now,
            ..record
        },
        (Some(v), Some(current)) if current.version == v => RunRecord {
            version: v + 1,
            created_at: current.created_at,
            updated_at: now,
            lease_token: record.lease_token.or(current.lease_token),
            ..record
        },
        (Some(_), None) => {
            return Err(StorageError::RunNotFound {
                run_id: record.run_id,
            });
        }
        (expected, Some(current)) => {
            return Err(StorageError::Conflict {
                run_id: record.run_id,
                expected,
                actual: Some(current.version),
            });
        }
    };
    Ok(saved)
}

#[async_trait]
impl RunRecordStore for InMemoryStorage {
    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        save(&mut self.state(), record, expected_version)
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        save_many(&mut self.state(), saves)
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        Ok(self.state().runs.get(run_id).cloned())
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        list(&self.state(), filter)
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        Ok(self.state().runs.remove(run_id).is_some())
    }
}
