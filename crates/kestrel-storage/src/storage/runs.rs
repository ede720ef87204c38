//! Snapshots of stopped or running agent runs, saved with a version compare-and-set.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{Page, RunFilter, RunRecord};

/// Snapshots of stopped or running agent runs, saved with a version compare-and-set.
///
/// Several instances may share one database: of two saves against one version, one wins.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait RunRecordStore: Send + Sync {
    /// Saves a run with a compare-and-set on its version.
    ///
    /// `expected_version: None` creates it (version 1); an existing run is a
    /// [`StorageError::Conflict`](crate::StorageError::Conflict). `Some(v)` updates it only if
    /// its stored version is `v` (the new version is `v + 1`); otherwise `Conflict` and nothing
    /// changes, or `RunNotFound`. The record's `version`, `created_at` and `updated_at` are
    /// assigned by the store; the saved record is returned.
    async fn save_run(&self, record: RunRecord, expected_version: Option<i64>)
    -> Result<RunRecord>;

    /// Saves several distinct runs together, each with its compare-and-set as in
    /// [`RunRecordStore::save_run`]: all of them, or (on the first conflict or failure) none. A
    /// decision on a sub-agent's call records it in the parent and the sub-agents' runs this
    /// way, so a conflict leaves nothing half-decided. The saved records are returned in
    /// order.
    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>>;

    /// The run with this id, if any.
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>>;

    /// Runs matching the filter, newest first (ties by run id, descending).
    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>>;

    /// Deletes a run; `false` when there was none.
    async fn delete_run(&self, run_id: &str) -> Result<bool>;
}
