//! Datasets and experiments: run an agent over a dataset's items, score each answer with
//! chosen scorers, and compare two experiments (two versions of an agent, two prompts).
//!
//! A [`Dataset`] is a named, versioned list of [`DatasetItem`]s (an input, and what the
//! answer should be: a ground truth, an expected trajectory). [`Experiment::run`] runs the
//! agent on every item — at most [`Experiment::concurrency`] at once, each retried up to
//! [`Experiment::retries`] times when the run fails — scores every answer with every scorer,
//! reports progress as items finish, and gives an [`ExperimentReport`]: per item the answer,
//! the run and trace ids, the attempts and the scores; per scorer the mean, min and max over
//! the items it scored, and how many it could not score or failed on. The scores are also
//! stored as `TEST` score records carrying the experiment, dataset and item ids when a score
//! store is given. [`compare`] sets two reports side by side, scorer by scorer and item by
//! item.
//!
//! With a [`DatasetStore`] (the instance's `stores().datasets`), a dataset is kept in
//! versions ([`Dataset::save`], [`Dataset::load`]) and an experiment records itself there
//! ([`Experiment::record_in`]): its record (status, counts) and each item's result with its
//! run, trace and scores, as the item finishes.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kestrel_core::agent::Agent;
use kestrel_core::eval::{
    AgentInput, ExpectedTrajectory, IntoScorer, ScorerRun, SharedScorer, score_record,
};
use kestrel_core::message::Message;
use kestrel_core::store::{
    DatasetItemRecord, DatasetRecord, DatasetStore, DatasetStoreError, ExperimentRecord,
    ExperimentResultRecord, ExperimentStatus, ItemChange, ScoreSource, SharedDatasetStore,
    SharedScoreStore,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most items an experiment runs at once by default.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// The most items an experiment runs at once at most (a bound on what a caller may ask).
pub const MAX_CONCURRENCY: usize = 64;

/// The most retries of one item.
pub const MAX_RETRIES: u32 = 10;

/// One case of a dataset (Mastra's dataset item). Unknown fields are refused: a misspelt
/// `groundTruth` must not silently score against nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetItem {
    /// The item's id (its line number, from 1, when read from JSONL without one).
    #[serde(default)]
    pub id: String,
    /// What the agent is asked: a string.
    pub input: String,
    /// The answer it should give, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// The steps it should take, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_trajectory: Option<ExpectedTrajectory>,
    /// What the agent's tools answer instead of running, by tool name (`{"get_weather":
    /// {"sky": "clear"}}`): the item's run is the same every time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_mocks: Option<serde_json::Map<String, Value>>,
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl DatasetItem {
    /// The item as a store keeps it (its input a JSON string).
    pub fn to_record(&self, dataset_id: &str) -> Result<DatasetItemRecord, DatasetError> {
        let mut record =
            DatasetItemRecord::new(&self.id, dataset_id, Value::String(self.input.clone()));
        record.ground_truth.clone_from(&self.ground_truth);
        record.expected_trajectory = self
            .expected_trajectory
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| DatasetError::Item {
                id: self.id.clone(),
                message: e.to_string(),
            })?;
        record.metadata.clone_from(&self.metadata);
        record.tool_mocks = self.tool_mocks.clone().map(Value::Object);
        Ok(record)
    }

    /// The item a store keeps: its input the JSON string, or the `prompt` or `input` string
    /// of an object, or else the JSON text.
    pub fn from_record(record: &DatasetItemRecord) -> Result<Self, DatasetError> {
        let input = match &record.input {
            Value::String(text) => text.clone(),
            Value::Object(map) => match map
                .get("prompt")
                .or_else(|| map.get("input"))
                .and_then(Value::as_str)
            {
                Some(text) => text.to_owned(),
                None => record.input.to_string(),
            },
            other => other.to_string(),
        };
        let expected_trajectory = record
            .expected_trajectory
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| DatasetError::Item {
                id: record.id.clone(),
                message: format!("expectedTrajectory: {e}"),
            })?;
        let tool_mocks = match &record.tool_mocks {
            None | Some(Value::Null) => None,
            Some(Value::Object(mocks)) => Some(mocks.clone()),
            Some(_) => {
                return Err(DatasetError::Item {
                    id: record.id.clone(),
                    message: "toolMocks must be an object of results by tool name".into(),
                });
            }
        };
        Ok(Self {
            id: record.id.clone(),
            input,
            ground_truth: record.ground_truth.clone(),
            expected_trajectory,
            tool_mocks,
            metadata: record.metadata.clone(),
        })
    }

    /// An item asking `input`.
    pub fn new(id: impl Into<String>, input: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            input: input.into(),
            ground_truth: None,
            expected_trajectory: None,
            tool_mocks: None,
            metadata: None,
        }
    }

    /// What tool `tool` answers instead of running, for this item.
    pub fn tool_mock(mut self, tool: impl Into<String>, result: impl Into<Value>) -> Self {
        self.tool_mocks
            .get_or_insert_with(Default::default)
            .insert(tool.into(), result.into());
        self
    }

    /// Sets the expected answer.
    pub fn ground_truth(mut self, ground_truth: impl Into<Value>) -> Self {
        self.ground_truth = Some(ground_truth.into());
        self
    }

    /// Sets the expected steps.
    pub fn expected_trajectory(mut self, expected: ExpectedTrajectory) -> Self {
        self.expected_trajectory = Some(expected);
        self
    }
}

/// Why a dataset could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A line is not an item.
    #[error("dataset line {line}: {message}")]
    Line {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Two items share an id.
    #[error("dataset line {line}: the id `{id}` is already used by an earlier item")]
    DuplicateId {
        /// The line, from 1.
        line: usize,
        /// The id.
        id: String,
    },
    /// No item at all.
    #[error("the dataset has no items")]
    Empty,
    /// A stored item cannot be read as an item (its expected trajectory is malformed).
    #[error("dataset item {id:?}: {message}")]
    Item {
        /// The item.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// The dataset store refused or failed.
    #[error(transparent)]
    Store(#[from] DatasetStoreError),
}

/// A named, versioned list of items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dataset {
    /// Its id.
    pub id: String,
    /// Its version (1 for a new dataset; [`Dataset::with_items`] makes the next).
    pub version: u32,
    /// Its items.
    pub items: Vec<DatasetItem>,
}

impl Dataset {
    /// Version 1 of dataset `id`, of `items`.
    pub fn new(id: impl Into<String>, items: Vec<DatasetItem>) -> Self {
        Self {
            id: id.into(),
            version: 1,
            items,
        }
    }

    /// The next version, of `items`.
    pub fn with_items(&self, items: Vec<DatasetItem>) -> Self {
        Self {
            id: self.id.clone(),
            version: self.version.saturating_add(1),
            items,
        }
    }

    /// Saves the items in `store` as a new version of dataset `id` (created, named after its
    /// id, when missing): items it has no longer are removed, the others put. This dataset
    /// then names the version saved.
    pub async fn save(&mut self, store: &dyn DatasetStore) -> Result<u32, DatasetError> {
        if store.get_dataset(&self.id).await?.is_none() {
            match store
                .create_dataset(&DatasetRecord::new(&self.id, &self.id))
                .await
            {
                // Created meanwhile by another caller: its versions go on.
                Ok(()) | Err(DatasetStoreError::DatasetExists(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let kept = store.list_dataset_items(&self.id, None).await?;
        let mut changes: Vec<ItemChange> = kept
            .iter()
            .filter(|k| !self.items.iter().any(|i| i.id == k.id))
            .map(|k| ItemChange::Delete(k.id.clone()))
            .collect();
        for item in &self.items {
            changes.push(ItemChange::Put(item.to_record(&self.id)?));
        }
        self.version = store.change_dataset_items(&self.id, &changes).await?;
        Ok(self.version)
    }

    /// Dataset `id` as `store` keeps it at `version` (default: its latest), its items in id
    /// order.
    pub async fn load(
        store: &dyn DatasetStore,
        id: &str,
        version: Option<u32>,
    ) -> Result<Self, DatasetError> {
        let Some(dataset) = store.get_dataset(id).await? else {
            return Err(DatasetStoreError::DatasetNotFound(id.to_owned()).into());
        };
        let version = version.unwrap_or(dataset.version);
        let items = store
            .list_dataset_items(id, Some(version))
            .await?
            .iter()
            .map(DatasetItem::from_record)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            id: id.to_owned(),
            version,
            items,
        })
    }

    /// Reads JSON Lines: one item a line (`{"input": ..., "groundTruth"?: ...,
    /// "expectedTrajectory"?: ..., "id"?: ...}`); blank lines are skipped; an item without an
    /// id gets its line number. Errors name the line.
    pub fn from_jsonl(id: impl Into<String>, text: &str) -> Result<Self, DatasetError> {
        let mut items: Vec<DatasetItem> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            if line.trim().is_empty() {
                continue;
            }
            let mut item: DatasetItem =
                serde_json::from_str(line).map_err(|e| DatasetError::Line {
                    line: number,
                    message: e.to_string(),
                })?;
            if item.input.trim().is_empty() {
                return Err(DatasetError::Line {
                    line: number,
                    message: "`input` is empty".into(),
                });
            }
            if item.id.is_empty() {
                item.id = number.to_string();
            }
            if items.iter().any(|i| i.id == item.id) {
                return Err(DatasetError::DuplicateId {
                    line: number,
                    id: item.id,
                });
            }
            items.push(item);
        }
        if items.is_empty() {
            return Err(DatasetError::Empty);
        }
        Ok(Self::new(id, items))
    }
}

/// One scorer's result on one item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemScore {
    /// The scorer.
    pub scorer_id: String,
    /// The score (`None`: not scorable, or the scorer failed).
    pub score: Option<f64>,
    /// Why, when the scorer said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the item was not scorable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_scorable: Option<String>,
    /// The scorer's error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one item gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    /// The item.
    pub item_id: String,
    /// What the agent was asked.
    pub input: String,
    /// Its answer (empty when every attempt failed).
    pub output: String,
    /// The last attempt's run.
    pub run_id: Option<String>,
    /// Its trace, when the instance traces.
    pub trace_id: Option<String>,
    /// How many runs it took (1 without retries).
    pub attempts: u32,
    /// The last attempt's error, when none succeeded.
    pub error: Option<String>,
    /// The scores, in the experiment's scorer order.
    pub scores: Vec<ItemScore>,
}

/// One scorer over the experiment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorerSummary {
    /// Items it scored.
    pub scored: usize,
    /// Items it could not score.
    pub not_scorable: usize,
    /// Items it failed on (or whose run failed).
    pub failed: usize,
    /// The mean of its scores (`None` without any).
    pub mean: Option<f64>,
    /// The lowest.
    pub min: Option<f64>,
    /// The highest.
    pub max: Option<f64>,
}

/// Where an experiment is, as items finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Items finished.
    pub done: usize,
    /// Items in all.
    pub total: usize,
    /// Items whose runs failed so far.
    pub failed: usize,
}

/// An experiment's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentReport {
    /// The experiment's id.
    pub experiment_id: String,
    /// Its name.
    pub name: String,
    /// The agent it ran.
    pub agent_id: String,
    /// The dataset and its version.
    pub dataset_id: String,
    /// The dataset's version.
    pub dataset_version: u32,
    /// Per item, in the dataset's order.
    pub items: Vec<ItemResult>,
    /// Per scorer.
    pub summary: BTreeMap<String, ScorerSummary>,
    /// Items whose every attempt failed.
    pub failed_items: usize,
}

impl ExperimentReport {
    /// The scorers whose mean is below `min` (or that scored nothing), for a CI gate.
    pub fn below(&self, min: f64) -> Vec<&str> {
        self.summary
            .iter()
            .filter(|(_, s)| s.mean.is_none_or(|mean| mean < min))
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// No scorer was given.
    #[error("an experiment needs at least one scorer")]
    NoScorer,
    /// Two scorers share an id.
    #[error("two scorers share the id `{0}`")]
    DuplicateScorer(String),
    /// The experiment could not be recorded (its dataset is not in the store, or the store
    /// failed).
    #[error("the experiment could not be recorded: {0}")]
    Record(#[from] DatasetStoreError),
}

type OnProgress = Arc<dyn Fn(Progress) + Send + Sync>;

/// An agent run over a dataset and scored: build with [`Experiment::new`], then
/// [`Experiment::run`].
#[must_use = "an experiment does nothing until it is run"]
pub struct Experiment {
    id: String,
    name: String,
    agent: Agent,
    dataset: Dataset,
    scorers: Vec<SharedScorer>,
    concurrency: usize,
    retries: u32,
    store: Option<SharedScoreStore>,
    record: Option<SharedDatasetStore>,
    on_progress: Option<OnProgress>,
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment")
            .field("id", &self.id)
            .field("agent", &self.agent.id())
            .field("dataset", &self.dataset.id)
            .finish_non_exhaustive()
    }
}

impl Experiment {
    /// `agent` over `dataset` (no scorer yet; [`DEFAULT_CONCURRENCY`] items at once, no
    /// retries, scores not stored).
    pub fn new(agent: Agent, dataset: Dataset) -> Self {
        let id = kestrel_core::id::new_id();
        Self {
            name: format!("{} on {} v{}", agent.id(), dataset.id, dataset.version),
            id,
            agent,
            dataset,
            scorers: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            retries: 0,
            store: None,
            record: None,
            on_progress: None,
        }
    }

    /// The experiment's id (a fresh one unless [`Experiment::id`] set it).
    pub fn experiment_id(&self) -> &str {
        &self.id
    }

    /// Gives it this id (a caller that answers before it ends, a server, names it first).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Records it in `store`: its record (running, then completed with its counts) and each
    /// item's result as the item finishes. The dataset must be kept there at the version the
    /// experiment runs ([`Dataset::save`]).
    pub fn record_in(mut self, store: SharedDatasetStore) -> Self {
        self.record = Some(store);
        self
    }

    /// Names it.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Scores every answer with `scorer` too.
    pub fn scorer(mut self, scorer: impl IntoScorer) -> Self {
        self.scorers.push(scorer.into_scorer());
        self
    }

    /// Runs at most `n` items at once (1 to [`MAX_CONCURRENCY`]).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.clamp(1, MAX_CONCURRENCY);
        self
    }

    /// Runs an item again, up to `n` times (at most [`MAX_RETRIES`]), when its run fails.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n.min(MAX_RETRIES);
        self
    }

    /// Stores every score in `store` (as `TEST` records with the experiment's ids).
    pub fn store(mut self, store: SharedScoreStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Calls `f` each time an item finishes.
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(f));
        self
    }

    /// Runs it.
    pub async fn run(self) -> Result<ExperimentReport, ExperimentError> {
        if self.scorers.is_empty() {
            return Err(ExperimentError::NoScorer);
        }
        for (i, scorer) in self.scorers.iter().enumerate() {
            if self.scorers[..i].iter().any(|s| s.id() == scorer.id()) {
                return Err(ExperimentError::DuplicateScorer(scorer.id().to_owned()));
            }
        }
        let total = self.dataset.items.len();
        let mut record = self.record.as_ref().map(|_| self.experiment_record(total));
        if let (Some(store), Some(record)) = (&self.record, &record) {
            store.save_experiment(record).await?;
        }
        let done = std::sync::atomic::AtomicUsize::new(0);
        let failed = std::sync::atomic::AtomicUsize::new(0);
        let this = &self;
        let mut results: Vec<(usize, ItemResult)> =
            // Owned items: a stream over borrowed ones makes a future that is `Send` for one
            // lifetime only, which a caller spawning the run cannot use.
            futures::stream::iter(self.dataset.items.clone().into_iter().enumerate())
                .map(|(index, item)| {
                    let (done, failed) = (&done, &failed);
                    async move {
                        let started = std::time::Instant::now();
                        let result = this.run_item(&item).await;
                        this.record_result(&item, &result, started.elapsed()).await;
                        if result.error.is_some() {
                            failed.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                        }
                        let finished = done.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
                        if let Some(report) = &this.on_progress {
                            report(Progress {
                                done: finished,
                                total,
                                failed: failed.load(std::sync::atomic::Ordering::Acquire),
                            });
                        }
                        (index, result)
                    }
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        results.sort_by_key(|(index, _)| *index);
        let items: Vec<ItemResult> = results.into_iter().map(|(_, r)| r).collect();
        let mut summary: BTreeMap<String, ScorerSummary> = BTreeMap::new();
        for scorer in &self.scorers {
            let mut s = ScorerSummary::default();
            let mut values = Vec::new();
            for item in &items {
                match item.scores.iter().find(|x| x.scorer_id == scorer.id()) {
                    Some(ItemScore { score: Some(v), .. }) => values.push(*v),
                    Some(ItemScore {
                        not_scorable: Some(_),
                        ..
                    }) => s.not_scorable += 1,
                    _ => s.failed += 1,
                }
            }
            s.scored = values.len();
            if !values.is_empty() {
                s.mean = Some(values.iter().sum::<f64>() / values.len() as f64);
                s.min = values.iter().copied().reduce(f64::min);
                s.max = values.iter().copied().reduce(f64::max);
            }
            summary.insert(scorer.id().to_owned(), s);
        }
        let failed_items = items.iter().filter(|i| i.error.is_some()).count();
        if let (Some(store), Some(record)) = (&self.record, &mut record) {
            record.status = ExperimentStatus::Completed;
            record.failed_count = u32::try_from(failed_items).unwrap_or(u32::MAX);
            record.succeeded_count = u32::try_from(items.len() - failed_items).unwrap_or(u32::MAX);
            record.completed_at = Some(now_ms());
            store.save_experiment(record).await?;
        }
        Ok(ExperimentReport {
            experiment_id: self.id.clone(),
            name: self.name.clone(),
            agent_id: self.agent.id().to_owned(),
            dataset_id: self.dataset.id.clone(),
            dataset_version: self.dataset.version,
            failed_items,
            items,
            summary,
        })
    }

    /// Its record, running.
    fn experiment_record(&self, total: usize) -> ExperimentRecord {
        let now = now_ms();
        ExperimentRecord {
            id: self.id.clone(),
            name: Some(self.name.clone()),
            dataset_id: self.dataset.id.clone(),
            dataset_version: self.dataset.version,
            target_type: "agent".to_owned(),
            target_id: self.agent.id().to_owned(),
            target_version: None,
            scorer_ids: self.scorers.iter().map(|s| s.id().to_owned()).collect(),
            status: ExperimentStatus::Running,
            total_items: u32::try_from(total).unwrap_or(u32::MAX),
            succeeded_count: 0,
            failed_count: 0,
            skipped_count: 0,
            error: None,
            created_at: now,
            started_at: Some(now),
            completed_at: None,
        }
    }

    /// Records an item's result (when the experiment is recorded); a store that fails is
    /// logged: the report still has the result.
    async fn record_result(
        &self,
        item: &DatasetItem,
        result: &ItemResult,
        took: std::time::Duration,
    ) {
        let Some(store) = &self.record else {
            return;
        };
        let record = ExperimentResultRecord {
            id: format!("{}:{}", self.id, item.id),
            experiment_id: self.id.clone(),
            item_id: item.id.clone(),
            input: Value::String(item.input.clone()),
            output: result
                .error
                .is_none()
                .then(|| Value::String(result.output.clone())),
            ground_truth: item.ground_truth.clone(),
            error: result.error.clone(),
            status: if result.error.is_some() {
                "failed"
            } else {
                "success"
            }
            .to_owned(),
            retry_count: result.attempts.saturating_sub(1),
            run_id: result.run_id.clone(),
            trace_id: result.trace_id.clone(),
            scores: result
                .scores
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect(),
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            created_at: now_ms(),
        };
        if let Err(error) = store.save_experiment_result(&record).await {
            tracing::warn!(%error, experiment = %self.id, item = %item.id, "an experiment's result could not be recorded");
        }
    }

    async fn run_item(&self, item: &DatasetItem) -> ItemResult {
        let mut attempts = 0;
        let mut last_error = None;
        let mut answer = None;
        while attempts <= self.retries {
            attempts += 1;
            let mut run = self.agent.generate(item.input.as_str());
            if let Some(mocks) = &item.tool_mocks {
                run = run.options(kestrel_core::agent::RunOptions::new().tool_mocks(mocks.clone()));
            }
            match run.await {
                Ok(result) => {
                    answer = Some(result);
                    break;
                }
                Err(error) => last_error = Some(error.to_string()),
            }
        }
        let mut out = ItemResult {
            item_id: item.id.clone(),
            input: item.input.clone(),
            output: String::new(),
            run_id: None,
            trace_id: None,
            attempts,
            error: None,
            scores: Vec::new(),
        };
        let Some(result) = answer else {
            out.error = last_error;
            out.scores = self
                .scorers
                .iter()
                .map(|s| ItemScore {
                    scorer_id: s.id().to_owned(),
                    score: None,
                    reason: None,
                    not_scorable: None,
                    error: Some("the run failed".into()),
                })
                .collect();
            return out;
        };
        out.output.clone_from(&result.text);
        out.run_id = Some(result.run_id.clone());
        out.trace_id.clone_from(&result.trace_id);
        let mut run = ScorerRun::agent(
            AgentInput {
                input_messages: vec![Message::user(item.input.as_str())],
                ..AgentInput::default()
            },
            result.response_messages.clone(),
        )
        .run_id(result.run_id.clone());
        if let Some(truth) = &item.ground_truth {
            run = run.ground_truth(truth.clone());
        }
        if let Some(expected) = &item.expected_trajectory {
            run = run.expected_trajectory(expected.clone());
        }
        if let Some(trace) = &result.trace_id {
            run = run.trace(trace.clone(), None);
        }
        for scorer in &self.scorers {
            let scored = scorer.run(run.clone()).await;
            let entry = match &scored {
                Ok(r) => ItemScore {
                    scorer_id: scorer.id().to_owned(),
                    score: r.score,
                    reason: r.reason.clone(),
                    not_scorable: r.not_scorable.clone(),
                    error: None,
                },
                Err(error) => ItemScore {
                    scorer_id: scorer.id().to_owned(),
                    score: None,
                    reason: None,
                    not_scorable: None,
                    error: Some(error.to_string()),
                },
            };
            if let (Some(store), Ok(r)) = (&self.store, scored) {
                let mut record = score_record(
                    &**scorer,
                    r,
                    "AGENT",
                    self.agent.id(),
                    ScoreSource::Test,
                    serde_json::to_value(&run.input).unwrap_or_default(),
                    serde_json::to_value(&run.output).unwrap_or_default(),
                );
                record.experiment_id = Some(self.id.clone());
                record.dataset_id = Some(self.dataset.id.clone());
                record.dataset_item_id = Some(item.id.clone());
                record.ground_truth.clone_from(&item.ground_truth);
                record.trace_id.clone_from(&result.trace_id);
                if let Err(error) = store.save_score(&record).await {
                    tracing::warn!(%error, item = %item.id, "an experiment's score could not be stored");
                }
            }
            out.scores.push(entry);
        }
        out
    }
}

/// One scorer in two experiments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorerComparison {
    /// The scorer.
    pub scorer_id: String,
    /// Its mean in the first experiment.
    pub baseline: Option<f64>,
    /// Its mean in the second.
    pub candidate: Option<f64>,
    /// `candidate − baseline`, when both scored.
    pub delta: Option<f64>,
    /// Items it scored lower in the second (by item id).
    pub regressed: Vec<String>,
    /// Items it scored higher in the second.
    pub improved: Vec<String>,
}

/// Two experiments side by side: per scorer present in both, the means, their difference,
/// and the items that moved.
pub fn compare(baseline: &ExperimentReport, candidate: &ExperimentReport) -> Vec<ScorerComparison> {
    let score_of = |report: &ExperimentReport, item: &str, scorer: &str| -> Option<f64> {
        report
            .items
            .iter()
            .find(|i| i.item_id == item)
            .and_then(|i| i.scores.iter().find(|s| s.scorer_id == scorer))
            .and_then(|s| s.score)
    };
    baseline
        .summary
        .iter()
        .filter(|(id, _)| candidate.summary.contains_key(*id))
        .map(|(id, before)| {
            let after = &candidate.summary[id];
            let mut regressed = Vec::new();
            let mut improved = Vec::new();
            for item in &baseline.items {
                if let (Some(a), Some(b)) = (
                    score_of(baseline, &item.item_id, id),
                    score_of(candidate, &item.item_id, id),
                ) {
                    if b < a {
                        regressed.push(item.item_id.clone());
                    } else if b > a {
                        improved.push(item.item_id.clone());
                    }
                }
            }
            ScorerComparison {
                scorer_id: id.clone(),
                baseline: before.mean,
                candidate: after.mean,
                delta: before.mean.zip(after.mean).map(|(a, b)| b - a),
                regressed,
                improved,
            }
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
