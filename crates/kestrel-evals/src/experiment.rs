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

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kestrel_core::agent::Agent;
use kestrel_core::eval::{
    AgentInput, ExpectedTrajectory, IntoScorer, ScorerRun, SharedScorer, score_record,
};
use kestrel_core::message::Message;
use kestrel_core::store::{ScoreSource, SharedScoreStore};
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
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl DatasetItem {
    /// An item asking `input`.
    pub fn new(id: impl Into<String>, input: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            input: input.into(),
            ground_truth: None,
            expected_trajectory: None,
            metadata: None,
        }
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
            on_progress: None,
        }
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
        let done = std::sync::atomic::AtomicUsize::new(0);
        let failed = std::sync::atomic::AtomicUsize::new(0);
        let this = &self;
        let mut results: Vec<(usize, ItemResult)> =
            futures::stream::iter(self.dataset.items.iter().enumerate())
                .map(|(index, item)| {
                    let (done, failed) = (&done, &failed);
                    async move {
                        let result = this.run_item(item).await;
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
        Ok(ExperimentReport {
            experiment_id: self.id.clone(),
            name: self.name.clone(),
            agent_id: self.agent.id().to_owned(),
            dataset_id: self.dataset.id.clone(),
            dataset_version: self.dataset.version,
            failed_items: items.iter().filter(|i| i.error.is_some()).count(),
            items,
            summary,
        })
    }

    async fn run_item(&self, item: &DatasetItem) -> ItemResult {
        let mut attempts = 0;
        let mut last_error = None;
        let mut answer = None;
        while attempts <= self.retries {
            attempts += 1;
            match self.agent.generate(item.input.as_str()).await {
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
