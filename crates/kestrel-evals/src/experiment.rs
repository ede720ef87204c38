//! Experiments: run an agent or a workflow over a dataset's items, score each answer with
//! chosen scorers, and compare two experiments (two versions of an agent, two prompts).
//!
//! A [`Dataset`] is a named, versioned list of [`DatasetItem`]s (an input, and what the
//! answer should be: a ground truth, an expected trajectory). [`Experiment::run`] runs its
//! [`Target`] — an agent asked each item's prompt, or a workflow started with each item's
//! input — on every item — at most [`Experiment::concurrency`] at once, each retried up to
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
    AgentInput, IntoScorer, ScorerInput, ScorerOutput, ScorerRun, SharedScorer, score_record,
};
use kestrel_core::message::Message;
use kestrel_core::store::{
    DatasetStoreError, ExperimentRecord, ExperimentResultRecord, ExperimentStatus, ScoreSource,
    SharedDatasetStore, SharedScoreStore,
};
use kestrel_core::workflow::{Workflow, WorkflowStatus};
use serde::Serialize;
use serde_json::Value;

pub use crate::dataset::{Dataset, DatasetError, DatasetItem};

/// The most items an experiment runs at once by default.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// The most items an experiment runs at once at most (a bound on what a caller may ask).
pub const MAX_CONCURRENCY: usize = 64;

/// The most retries of one item.
pub const MAX_RETRIES: u32 = 10;

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
    /// What the run was given (an agent: the prompt asked, as a string).
    pub input: Value,
    /// Its answer: an agent's text, a workflow's result (`null` when every attempt failed).
    pub output: Value,
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
    /// What it ran: `agent` or `workflow`.
    pub target_type: String,
    /// The agent's or workflow's id.
    pub target_id: String,
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

/// What an experiment runs on each item.
#[derive(Clone)]
#[non_exhaustive]
pub enum Target {
    /// An agent, asked each item's prompt ([`DatasetItem::prompt`]), its tools mocked as the
    /// item says.
    Agent(Agent),
    /// A workflow, started with each item's input; a run that does not end successfully is
    /// a failed attempt.
    Workflow(Workflow),
}

impl Target {
    /// `agent` or `workflow` (Mastra's `targetType`).
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Agent(_) => "agent",
            Target::Workflow(_) => "workflow",
        }
    }

    /// The agent's or workflow's id.
    pub fn id(&self) -> &str {
        match self {
            Target::Agent(agent) => agent.id(),
            Target::Workflow(workflow) => workflow.id(),
        }
    }

    /// The entity type of its scores (`AGENT`, `WORKFLOW`).
    fn entity_type(&self) -> &'static str {
        match self {
            Target::Agent(_) => "AGENT",
            Target::Workflow(_) => "WORKFLOW",
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:?})", self.kind(), self.id())
    }
}

impl From<Agent> for Target {
    fn from(agent: Agent) -> Self {
        Target::Agent(agent)
    }
}

impl From<Workflow> for Target {
    fn from(workflow: Workflow) -> Self {
        Target::Workflow(workflow)
    }
}

/// A run of the target on one item, ready to score.
struct Answered {
    run: ScorerRun,
    output: Value,
    run_id: String,
    trace_id: Option<String>,
}

/// An agent or workflow run over a dataset and scored: build with [`Experiment::new`], then
/// [`Experiment::run`].
#[must_use = "an experiment does nothing until it is run"]
pub struct Experiment {
    id: String,
    name: String,
    target: Target,
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
            .field("target", &self.target)
            .field("dataset", &self.dataset.id)
            .finish_non_exhaustive()
    }
}

impl Experiment {
    /// `target` (an [`Agent`] or a [`Workflow`]) over `dataset` (no scorer yet;
    /// [`DEFAULT_CONCURRENCY`] items at once, no retries, scores not stored).
    pub fn new(target: impl Into<Target>, dataset: Dataset) -> Self {
        let target = target.into();
        let id = kestrel_core::id::new_id();
        Self {
            name: format!("{} on {} v{}", target.id(), dataset.id, dataset.version),
            id,
            target,
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
            target_type: self.target.kind().to_owned(),
            target_id: self.target.id().to_owned(),
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
            target_type: self.target.kind().to_owned(),
            target_id: self.target.id().to_owned(),
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
            input: result.input.clone(),
            output: result.error.is_none().then(|| result.output.clone()),
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

    /// What the target is given for `item`.
    fn input_of(&self, item: &DatasetItem) -> Value {
        match &self.target {
            Target::Agent(_) => Value::String(item.prompt()),
            Target::Workflow(_) => item.input.clone(),
        }
    }

    /// One attempt of the target on `item`.
    async fn attempt(&self, item: &DatasetItem) -> Result<Answered, String> {
        match &self.target {
            Target::Agent(agent) => {
                let prompt = item.prompt();
                let mut run = agent.generate(prompt.as_str());
                if let Some(mocks) = &item.tool_mocks {
                    run = run
                        .options(kestrel_core::agent::RunOptions::new().tool_mocks(mocks.clone()));
                }
                let result = run.await.map_err(|e| e.to_string())?;
                let scored = ScorerRun::agent(
                    AgentInput {
                        input_messages: vec![Message::user(prompt.as_str())],
                        ..AgentInput::default()
                    },
                    result.response_messages.clone(),
                )
                .run_id(result.run_id.clone());
                Ok(Answered {
                    run: scored,
                    output: Value::String(result.text),
                    run_id: result.run_id,
                    trace_id: result.trace_id,
                })
            }
            Target::Workflow(workflow) => {
                if item.tool_mocks.is_some() {
                    return Err("toolMocks apply to agent targets; this item's target is a \
                                workflow (mock its tools in the workflow's agents instead)"
                        .to_owned());
                }
                let mut run = workflow.create_run();
                let trace = workflow
                    .is_traced()
                    .then(kestrel_core::trace::TraceContext::new_trace);
                if let Some(context) = &trace {
                    run = run.trace(context.clone());
                }
                let result = run
                    .start(item.input.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                if result.status != WorkflowStatus::Success {
                    let status = serde_json::to_value(result.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| format!("{:?}", result.status));
                    return Err(match &result.error {
                        Some(error) => {
                            format!("the workflow run ended {status}: {}", error.message)
                        }
                        None => format!("the workflow run ended {status}"),
                    });
                }
                let output = result.result.unwrap_or(Value::Null);
                let scored = ScorerRun::new(
                    ScorerInput::Value(item.input.clone()),
                    ScorerOutput::Value(output.clone()),
                )
                .run_id(result.run_id.clone());
                Ok(Answered {
                    run: scored,
                    output,
                    run_id: result.run_id,
                    trace_id: trace.map(|t| t.trace_id),
                })
            }
        }
    }

    async fn run_item(&self, item: &DatasetItem) -> ItemResult {
        let mut attempts = 0;
        let mut last_error = None;
        let mut answer = None;
        while attempts <= self.retries {
            attempts += 1;
            match self.attempt(item).await {
                Ok(answered) => {
                    answer = Some(answered);
                    break;
                }
                Err(error) => last_error = Some(error),
            }
        }
        let mut out = ItemResult {
            item_id: item.id.clone(),
            input: self.input_of(item),
            output: Value::Null,
            run_id: None,
            trace_id: None,
            attempts,
            error: None,
            scores: Vec::new(),
        };
        let Some(answered) = answer else {
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
        out.output = answered.output;
        out.run_id = Some(answered.run_id);
        out.trace_id.clone_from(&answered.trace_id);
        let mut run = answered.run;
        if let Some(truth) = &item.ground_truth {
            run = run.ground_truth(truth.clone());
        }
        if let Some(expected) = &item.expected_trajectory {
            run = run.expected_trajectory(expected.clone());
        }
        if let Some(context) = &item.context {
            run = run.additional_context(context.clone());
        }
        if let Some(trace) = &answered.trace_id {
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
                    self.target.entity_type(),
                    self.target.id(),
                    ScoreSource::Test,
                    serde_json::to_value(&run.input).unwrap_or_default(),
                    serde_json::to_value(&run.output).unwrap_or_default(),
                );
                record.experiment_id = Some(self.id.clone());
                record.dataset_id = Some(self.dataset.id.clone());
                record.dataset_item_id = Some(item.id.clone());
                record.ground_truth.clone_from(&item.ground_truth);
                record.trace_id.clone_from(&answered.trace_id);
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
