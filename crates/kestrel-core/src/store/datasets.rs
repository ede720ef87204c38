//! Datasets and experiments: the items an agent or a workflow is tried on, versioned, and
//! what each experiment over them gave, item by item.
//!
//! A dataset's items change in versions: each change ([`DatasetStore::change_dataset_items`])
//! is one new version of the dataset, written whole or not at all, and an item's earlier
//! contents stay readable at the versions that had them
//! ([`DatasetStore::list_dataset_items`] with a version). An experiment names the version it
//! ran on, so a change to the dataset after it never changes what it was compared against.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatasetRecord {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Its current version: 0 while it has had no items, one more at each change of them.
    pub version: u32,
    /// When it was created (ms since the epoch).
    pub created_at: u64,
    /// When it last changed (ms since the epoch).
    pub updated_at: u64,
}

impl DatasetRecord {
    /// A new, empty dataset `id` named `name`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        let now = now_ms();
        Self {
            id: id.into(),
            name: name.into(),
            description: None,
            metadata: None,
            version: 0,
            created_at: now,
            updated_at: now,
        }
    }
}

/// An item of a dataset, as one version of the dataset has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatasetItemRecord {
    /// The item's id (stable across its versions).
    pub id: String,
    /// Its dataset.
    pub dataset_id: String,
    /// The dataset version this content of the item was written at.
    pub dataset_version: u32,
    /// What the target is given.
    pub input: Value,
    /// What it should answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// What it should do, step by step (an [`ExpectedTrajectory`](crate::eval::ExpectedTrajectory)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_trajectory: Option<Value>,
    /// What its tools answer instead of running, by tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_mocks: Option<Value>,
    /// What the answer should rest on (a list of passages): the context the faithfulness,
    /// hallucination and context judges check it against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// When this content was written (ms since the epoch).
    pub created_at: u64,
}

impl DatasetItemRecord {
    /// An item `id` of dataset `dataset_id` with `input` (its version is set when it is
    /// written).
    pub fn new(id: impl Into<String>, dataset_id: impl Into<String>, input: Value) -> Self {
        Self {
            id: id.into(),
            dataset_id: dataset_id.into(),
            dataset_version: 0,
            input,
            ground_truth: None,
            expected_trajectory: None,
            tool_mocks: None,
            context: None,
            metadata: None,
            created_at: now_ms(),
        }
    }
}

/// One change of a dataset's items.
// Puts are nearly every change, and a change list is short-lived: a box per put would cost
// more than the deletes' unused room.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ItemChange {
    /// Adds the item, or replaces the content of the item of its id.
    Put(DatasetItemRecord),
    /// Removes the item of this id (earlier versions keep it).
    Delete(String),
}

/// Where an experiment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Created, not started.
    Pending,
    /// Its items are being run.
    Running,
    /// Every item ran (some may have failed).
    Completed,
    /// It could not go on (its target or its store failed).
    Failed,
}

impl ExperimentStatus {
    /// The stored name (also its JSON form).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// An experiment: a target (an agent or a workflow) run over a version of a dataset, with
/// scorers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentRecord {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The dataset.
    pub dataset_id: String,
    /// The dataset's version it ran on.
    pub dataset_version: u32,
    /// `agent` or `workflow`.
    pub target_type: String,
    /// The agent's or workflow's id.
    pub target_id: String,
    /// The agent's version, when it ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The scorers each item's output was scored with.
    pub scorer_ids: Vec<String>,
    /// Where it stands.
    pub status: ExperimentStatus,
    /// Items in the dataset version.
    pub total_items: u32,
    /// Items whose run succeeded.
    pub succeeded_count: u32,
    /// Items whose run failed (after its retries).
    pub failed_count: u32,
    /// Items not run (the experiment stopped first).
    pub skipped_count: u32,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it was created (ms since the epoch).
    pub created_at: u64,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
}

/// One item's run in an experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentResultRecord {
    /// Its id.
    pub id: String,
    /// The experiment.
    pub experiment_id: String,
    /// The dataset item.
    pub item_id: String,
    /// What the target was given.
    pub input: Value,
    /// What it answered, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What it should have answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// Why its run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `success` or `failed`.
    pub status: String,
    /// How many times it was run again after a failure.
    pub retry_count: u32,
    /// The target's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The run's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Each scorer's score: `{scorerId, score, reason?, error?}`.
    #[serde(default)]
    pub scores: Vec<Value>,
    /// How long the run took (ms).
    pub duration_ms: u64,
    /// When it was written (ms since the epoch).
    pub created_at: u64,
}

/// Which datasets [`DatasetStore::list_datasets`] gives (newest first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatasetQuery {
    /// Zero-based page.
    pub page: u32,
    /// Per page (0: [`DEFAULT_DATASETS_PAGE`]; at most [`MAX_DATASETS_PAGE`]).
    pub per_page: u32,
}

/// Datasets or experiments per page by default.
pub const DEFAULT_DATASETS_PAGE: u32 = 20;
/// The most datasets or experiments a page gives.
pub const MAX_DATASETS_PAGE: u32 = 100;

impl DatasetQuery {
    /// Page `page` of `per_page`.
    pub fn page(page: u32, per_page: u32) -> Self {
        Self { page, per_page }
    }

    /// Per page, the default and the bound applied.
    pub fn page_size(&self) -> u32 {
        match self.per_page {
            0 => DEFAULT_DATASETS_PAGE,
            n => n.min(MAX_DATASETS_PAGE),
        }
    }
}

/// A page of datasets.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DatasetPage {
    /// The datasets, newest first.
    pub datasets: Vec<DatasetRecord>,
    /// How many there are in all.
    pub total: usize,
}

impl DatasetPage {
    /// A page of `datasets`, `total` in all.
    pub fn new(datasets: Vec<DatasetRecord>, total: usize) -> Self {
        Self { datasets, total }
    }
}

/// Why a dataset store refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetStoreError {
    /// A dataset of this id exists already.
    #[error("dataset {0:?} exists already")]
    DatasetExists(String),
    /// No dataset of this id.
    #[error("dataset {0:?} not found")]
    DatasetNotFound(String),
    /// No experiment of this id.
    #[error("experiment {0:?} not found")]
    ExperimentNotFound(String),
    /// A record the store refuses (an empty id, a NUL in text, an id past the bound).
    #[error("{0}")]
    InvalidRecord(String),
    /// A change names an item of another dataset, or an item twice.
    #[error("invalid change to dataset {dataset_id:?}: {message}")]
    InvalidChange {
        /// The dataset.
        dataset_id: String,
        /// What is wrong.
        message: String,
    },
    /// The backend failed.
    #[error("the dataset store failed: {0}")]
    Backend(String),
}

/// Kept datasets and experiments. `kestrel-storage`'s conformance suite checks its backends
/// (memory, SQLite, PostgreSQL) answer alike.
#[async_trait::async_trait]
pub trait DatasetStore: Send + Sync + std::fmt::Debug {
    /// Creates `dataset` (refused when its id is taken); its version starts at 0.
    async fn create_dataset(&self, dataset: &DatasetRecord) -> Result<(), DatasetStoreError>;

    /// The dataset `id`, if kept.
    async fn get_dataset(&self, id: &str) -> Result<Option<DatasetRecord>, DatasetStoreError>;

    /// A page of datasets, newest first (ties: the larger id first).
    async fn list_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage, DatasetStoreError>;

    /// Deletes dataset `id` with its items, experiments and their results; whether it was
    /// kept.
    async fn delete_dataset(&self, id: &str) -> Result<bool, DatasetStoreError>;

    /// Applies `changes` to dataset `dataset_id`'s items as one new version, all or none;
    /// returns the new version. An empty change list changes nothing and returns the current
    /// version.
    async fn change_dataset_items(
        &self,
        dataset_id: &str,
        changes: &[ItemChange],
    ) -> Result<u32, DatasetStoreError>;

    /// The items of dataset `dataset_id` at `version` (default: its current one), in id
    /// order.
    async fn list_dataset_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Vec<DatasetItemRecord>, DatasetStoreError>;

    /// Keeps `experiment` (saved again with the same id, it replaces the first). Its dataset
    /// must be kept.
    async fn save_experiment(&self, experiment: &ExperimentRecord)
    -> Result<(), DatasetStoreError>;

    /// The experiment `id`, if kept.
    async fn get_experiment(&self, id: &str)
    -> Result<Option<ExperimentRecord>, DatasetStoreError>;

    /// The experiments (of dataset `dataset_id` when given), newest first.
    async fn list_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize), DatasetStoreError>;

    /// Keeps `result` (saved again with the same id, it replaces the first). Its experiment
    /// must be kept.
    async fn save_experiment_result(
        &self,
        result: &ExperimentResultRecord,
    ) -> Result<(), DatasetStoreError>;

    /// The results of experiment `experiment_id`, in item id order.
    async fn list_experiment_results(
        &self,
        experiment_id: &str,
    ) -> Result<Vec<ExperimentResultRecord>, DatasetStoreError>;
}

/// A dataset store shared by an instance.
pub type SharedDatasetStore = std::sync::Arc<dyn DatasetStore>;

/// The items of `versions` (every content of every item, any order) as dataset version
/// `version` has them: each item's latest content at or before it, deleted ones left out;
/// in id order. `None` marks a deletion. Backends that keep every version in rows share this
/// rule.
pub fn items_at(
    versions: impl IntoIterator<Item = (u32, String, Option<DatasetItemRecord>)>,
    version: u32,
) -> Vec<DatasetItemRecord> {
    let mut latest: HashMap<String, (u32, Option<DatasetItemRecord>)> = HashMap::new();
    for (at, id, item) in versions {
        if at > version {
            continue;
        }
        match latest.get(&id) {
            Some((seen, _)) if *seen >= at => {}
            _ => {
                latest.insert(id, (at, item));
            }
        }
    }
    let mut items: Vec<DatasetItemRecord> =
        latest.into_values().filter_map(|(_, item)| item).collect();
    items.sort_by(|a, b| a.id.cmp(&b.id));
    items
}

/// Checks `changes` to dataset `dataset_id`: every item of it, no id twice.
pub fn check_item_changes(
    dataset_id: &str,
    changes: &[ItemChange],
) -> Result<(), DatasetStoreError> {
    let invalid = |message: String| DatasetStoreError::InvalidChange {
        dataset_id: dataset_id.to_owned(),
        message,
    };
    let mut seen = std::collections::HashSet::new();
    for change in changes {
        let id = match change {
            ItemChange::Put(item) => {
                if item.dataset_id != dataset_id {
                    return Err(invalid(format!(
                        "item {:?} belongs to dataset {:?}",
                        item.id, item.dataset_id
                    )));
                }
                &item.id
            }
            ItemChange::Delete(id) => id,
        };
        if id.is_empty() {
            return Err(invalid("an item id is empty".to_owned()));
        }
        if !seen.insert(id.as_str()) {
            return Err(invalid(format!("item {id:?} is changed twice")));
        }
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Datasets and experiments in this process's memory.
#[derive(Debug, Default)]
pub struct InMemoryDatasetStore {
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    datasets: HashMap<String, DatasetRecord>,
    /// Every content of every item: `(dataset, version, item id, content or deletion)`.
    items: Vec<(String, u32, String, Option<DatasetItemRecord>)>,
    experiments: HashMap<String, ExperimentRecord>,
    results: HashMap<String, ExperimentResultRecord>,
}

impl InMemoryDatasetStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A page of `records` (sorted newest first by `key`) and how many there are.
fn page_of<T: Clone>(
    mut records: Vec<&T>,
    key: impl Fn(&T) -> (u64, &str),
    query: &DatasetQuery,
) -> (Vec<T>, usize) {
    records.sort_by(|a, b| key(b).cmp(&key(a)));
    let size = query.page_size() as usize;
    let total = records.len();
    let page = records
        .into_iter()
        .skip(query.page as usize * size)
        .take(size)
        .cloned()
        .collect();
    (page, total)
}

#[async_trait::async_trait]
impl DatasetStore for InMemoryDatasetStore {
    async fn create_dataset(&self, dataset: &DatasetRecord) -> Result<(), DatasetStoreError> {
        let mut kept = self.lock();
        if kept.datasets.contains_key(&dataset.id) {
            return Err(DatasetStoreError::DatasetExists(dataset.id.clone()));
        }
        let mut dataset = dataset.clone();
        dataset.version = 0;
        kept.datasets.insert(dataset.id.clone(), dataset);
        Ok(())
    }

    async fn get_dataset(&self, id: &str) -> Result<Option<DatasetRecord>, DatasetStoreError> {
        Ok(self.lock().datasets.get(id).cloned())
    }

    async fn list_datasets(&self, query: &DatasetQuery) -> Result<DatasetPage, DatasetStoreError> {
        let kept = self.lock();
        let (datasets, total) = page_of(
            kept.datasets.values().collect(),
            |d: &DatasetRecord| (d.created_at, d.id.as_str()),
            query,
        );
        Ok(DatasetPage { datasets, total })
    }

    async fn delete_dataset(&self, id: &str) -> Result<bool, DatasetStoreError> {
        let mut kept = self.lock();
        if kept.datasets.remove(id).is_none() {
            return Ok(false);
        }
        kept.items.retain(|(dataset, ..)| dataset != id);
        let experiments: Vec<String> = kept
            .experiments
            .values()
            .filter(|e| e.dataset_id == id)
            .map(|e| e.id.clone())
            .collect();
        for experiment in &experiments {
            kept.experiments.remove(experiment);
        }
        kept.results
            .retain(|_, r| !experiments.contains(&r.experiment_id));
        Ok(true)
    }

    async fn change_dataset_items(
        &self,
        dataset_id: &str,
        changes: &[ItemChange],
    ) -> Result<u32, DatasetStoreError> {
        check_item_changes(dataset_id, changes)?;
        let mut kept = self.lock();
        let Some(dataset) = kept.datasets.get_mut(dataset_id) else {
            return Err(DatasetStoreError::DatasetNotFound(dataset_id.to_owned()));
        };
        if changes.is_empty() {
            return Ok(dataset.version);
        }
        dataset.version += 1;
        dataset.updated_at = now_ms();
        let version = dataset.version;
        for change in changes {
            let row = match change {
                ItemChange::Put(item) => {
                    let mut item = item.clone();
                    item.dataset_version = version;
                    (item.id.clone(), Some(item))
                }
                ItemChange::Delete(id) => (id.clone(), None),
            };
            kept.items
                .push((dataset_id.to_owned(), version, row.0, row.1));
        }
        Ok(version)
    }

    async fn list_dataset_items(
        &self,
        dataset_id: &str,
        version: Option<u32>,
    ) -> Result<Vec<DatasetItemRecord>, DatasetStoreError> {
        let kept = self.lock();
        let Some(dataset) = kept.datasets.get(dataset_id) else {
            return Err(DatasetStoreError::DatasetNotFound(dataset_id.to_owned()));
        };
        let version = version.unwrap_or(dataset.version);
        Ok(items_at(
            kept.items
                .iter()
                .filter(|(d, ..)| d == dataset_id)
                .map(|(_, at, id, item)| (*at, id.clone(), item.clone())),
            version,
        ))
    }

    async fn save_experiment(
        &self,
        experiment: &ExperimentRecord,
    ) -> Result<(), DatasetStoreError> {
        let mut kept = self.lock();
        if !kept.datasets.contains_key(&experiment.dataset_id) {
            return Err(DatasetStoreError::DatasetNotFound(
                experiment.dataset_id.clone(),
            ));
        }
        kept.experiments
            .insert(experiment.id.clone(), experiment.clone());
        Ok(())
    }

    async fn get_experiment(
        &self,
        id: &str,
    ) -> Result<Option<ExperimentRecord>, DatasetStoreError> {
        Ok(self.lock().experiments.get(id).cloned())
    }

    async fn list_experiments(
        &self,
        dataset_id: Option<&str>,
        query: &DatasetQuery,
    ) -> Result<(Vec<ExperimentRecord>, usize), DatasetStoreError> {
        let kept = self.lock();
        Ok(page_of(
            kept.experiments
                .values()
                .filter(|e| dataset_id.is_none_or(|d| e.dataset_id == d))
                .collect(),
            |e: &ExperimentRecord| (e.created_at, e.id.as_str()),
            query,
        ))
    }

    async fn save_experiment_result(
        &self,
        result: &ExperimentResultRecord,
    ) -> Result<(), DatasetStoreError> {
        let mut kept = self.lock();
        if !kept.experiments.contains_key(&result.experiment_id) {
            return Err(DatasetStoreError::ExperimentNotFound(
                result.experiment_id.clone(),
            ));
        }
        kept.results.insert(result.id.clone(), result.clone());
        Ok(())
    }

    async fn list_experiment_results(
        &self,
        experiment_id: &str,
    ) -> Result<Vec<ExperimentResultRecord>, DatasetStoreError> {
        let kept = self.lock();
        let mut results: Vec<ExperimentResultRecord> = kept
            .results
            .values()
            .filter(|r| r.experiment_id == experiment_id)
            .cloned()
            .collect();
        results.sort_by(|a, b| a.item_id.cmp(&b.item_id).then_with(|| a.id.cmp(&b.id)));
        Ok(results)
    }
}
