//! Datasets and experiments as every backend keeps them: what a write checks, and the JSON
//! the SQL backends store beside the columns they look up by.
//!
//! **What is stored.** Each record exactly as saved (read back equal; a dataset's `version`
//! and `updatedAt` are the store's). Ids must be non-empty text without NUL (PostgreSQL text
//! cannot hold one) and at most [`MAX_DATASET_ID_BYTES`] bytes; a record that breaks this is
//! refused with the field named. Every content of every item is kept, one row per dataset
//! version that changed it (a deletion is a row too), so any version reads back as it was.

use kestrel_core::store::{
    DatasetItemRecord, DatasetRecord, DatasetStoreError, ExperimentRecord, ExperimentResultRecord,
    ItemChange,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, StorageError};

/// The longest id (of a dataset, an item, an experiment or a result) in bytes.
pub const MAX_DATASET_ID_BYTES: usize = 512;

/// A storage error as the dataset store's.
pub(crate) fn dataset_err(error: StorageError) -> DatasetStoreError {
    match error {
        StorageError::InvalidArgument { .. } => DatasetStoreError::InvalidRecord(error.to_string()),
        other => DatasetStoreError::Backend(other.to_string()),
    }
}

pub(crate) fn check_id(argument: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(StorageError::invalid(argument, "must not be empty"));
    }
    if value.len() > MAX_DATASET_ID_BYTES {
        return Err(StorageError::invalid(
            argument,
            format!("is {} bytes, at most {MAX_DATASET_ID_BYTES}", value.len()),
        ));
    }
    if value.contains('\0') {
        return Err(StorageError::invalid(argument, "must not contain NUL"));
    }
    Ok(())
}

/// `record` as JSON text.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode<T: Serialize>(what: &'static str, record: &T) -> Result<String> {
    serde_json::to_string(record)
        .map_err(|e| StorageError::invalid(what, format!("cannot be encoded: {e}")))
}

/// A stored record's JSON read back.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, json: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| StorageError::corrupt(what, e))
}

/// Checks a dataset before it is created.
pub(crate) fn check_dataset(dataset: &DatasetRecord) -> Result<()> {
    check_id("id", &dataset.id)?;
    if dataset.name.contains('\0') {
        return Err(StorageError::invalid("name", "must not contain NUL"));
    }
    Ok(())
}

/// Checks the items of `changes` (the rest is core's `check_item_changes`).
pub(crate) fn check_changes(changes: &[ItemChange]) -> Result<()> {
    for change in changes {
        match change {
            ItemChange::Put(item) => check_item(item)?,
            ItemChange::Delete(id) => check_id("itemId", id)?,
        }
    }
    Ok(())
}

fn check_item(item: &DatasetItemRecord) -> Result<()> {
    check_id("itemId", &item.id)?;
    check_id("datasetId", &item.dataset_id)
}

/// Checks an experiment before it is saved.
pub(crate) fn check_experiment(experiment: &ExperimentRecord) -> Result<()> {
    check_id("id", &experiment.id)?;
    check_id("datasetId", &experiment.dataset_id)?;
    check_id("targetId", &experiment.target_id)?;
    check_id("targetType", &experiment.target_type)
}

/// Checks a result before it is saved.
pub(crate) fn check_result(result: &ExperimentResultRecord) -> Result<()> {
    check_id("id", &result.id)?;
    check_id("experimentId", &result.experiment_id)?;
    check_id("itemId", &result.item_id)
}

/// What a SQL backend's write found, beside success.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) enum Found<T> {
    /// Written (with this value).
    Done(T),
    /// What it belongs to is not kept.
    Missing,
    /// Its id is taken.
    Exists,
}

/// Milliseconds as a SQL integer.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Now, in milliseconds since the epoch.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
