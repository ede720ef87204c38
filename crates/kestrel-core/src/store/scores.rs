//! Scores as they are kept: one [`ScoreRecord`] per scorer run (Mastra's `mastra_scorers`
//! row), read back by run, scorer or entity.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a score came from (Mastra's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ScoreSource {
    /// A live run, sampled.
    Live,
    /// A test: an experiment, a caller's own scoring.
    Test,
}

/// One scorer's result on one run, with what it read: Mastra's `mastra_scorers` row, its
/// fields in camelCase on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ScoreRecord {
    /// The score's id.
    pub id: String,
    /// The scorer's id.
    pub scorer_id: String,
    /// The scorer as listed (`{id, name, description}`).
    pub scorer: Value,
    /// The scored run.
    pub run_id: String,
    /// The run's trace, when it was traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The run's span in that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// `AGENT`, `WORKFLOW`, ...
    pub entity_type: String,
    /// The agent's or workflow's id.
    pub entity_id: String,
    /// Where the score came from.
    pub source: ScoreSource,
    /// The score; `None` when the run was not scorable.
    #[serde(default)]
    pub score: Option<f64>,
    /// Why, when the scorer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the run could not be scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_scorable: Option<String>,
    /// What the preprocess step gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_step_result: Option<Value>,
    /// What the analyze step gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyze_step_result: Option<Value>,
    /// The judge's prompt of the preprocess step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_prompt: Option<String>,
    /// The judge's prompt of the analyze step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyze_prompt: Option<String>,
    /// The judge's prompt of the score step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_score_prompt: Option<String>,
    /// The judge's prompt of the reason step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_reason_prompt: Option<String>,
    /// What the scorer read as the run's input.
    pub input: Value,
    /// What the scorer read as the run's output.
    pub output: Value,
    /// The expected answer, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// More the scorer read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<Value>,
    /// The run's request context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_context: Option<Value>,
    /// The run's resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// The run's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The dataset the run's item came from (an experiment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    /// The dataset item (an experiment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_item_id: Option<String>,
    /// The experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment_id: Option<String>,
    /// Anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// When it was made (Unix milliseconds).
    pub created_at: u64,
    /// When it last changed (Unix milliseconds).
    pub updated_at: u64,
}

impl ScoreRecord {
    /// A score of `scorer_id` (described by `scorer`, `{id, name, description}`) on run
    /// `run_id` of entity `entity_type` `entity_id`, which read `input` and gave `output`; no
    /// value yet, made now.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scorer_id: impl Into<String>,
        scorer: Value,
        run_id: impl Into<String>,
        entity_type: impl Into<String>,
        entity_id: impl Into<String>,
        source: ScoreSource,
        input: Value,
        output: Value,
    ) -> Self {
        let now = now_ms();
        Self {
            id: crate::id::new_id(),
            scorer_id: scorer_id.into(),
            scorer,
            run_id: run_id.into(),
            trace_id: None,
            span_id: None,
            entity_type: entity_type.into(),
            entity_id: entity_id.into(),
            source,
            score: None,
            reason: None,
            not_scorable: None,
            preprocess_step_result: None,
            analyze_step_result: None,
            preprocess_prompt: None,
            analyze_prompt: None,
            generate_score_prompt: None,
            generate_reason_prompt: None,
            input,
            output,
            ground_truth: None,
            additional_context: None,
            request_context: None,
            resource_id: None,
            thread_id: None,
            dataset_id: None,
            dataset_item_id: None,
            experiment_id: None,
            metadata: None,
            created_at: now,
            updated_at: now,
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Which scores [`ScoreStore::list`] gives: those matching every filter set, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ScoreQuery {
    /// Zero-based page.
    pub page: u32,
    /// Scores per page (0: [`DEFAULT_SCORES_PAGE`]; at most [`MAX_SCORES_PAGE`]).
    pub per_page: u32,
    /// The scored run.
    pub run_id: Option<String>,
    /// The scorer.
    pub scorer_id: Option<String>,
    /// `AGENT`, `WORKFLOW`...
    pub entity_type: Option<String>,
    /// The agent's or workflow's id.
    pub entity_id: Option<String>,
    /// Live or test scores.
    pub source: Option<ScoreSource>,
    /// The experiment.
    pub experiment_id: Option<String>,
}

/// Scores per page by default.
pub const DEFAULT_SCORES_PAGE: u32 = 20;
/// The most scores a page gives.
pub const MAX_SCORES_PAGE: u32 = 100;

impl ScoreQuery {
    /// Every score, first page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scores of run `run_id`.
    pub fn run(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Scores by scorer `scorer_id`.
    pub fn scorer(mut self, scorer_id: impl Into<String>) -> Self {
        self.scorer_id = Some(scorer_id.into());
        self
    }

    /// Scores of entity `entity_id` of type `entity_type`.
    pub fn entity(mut self, entity_type: impl Into<String>, entity_id: impl Into<String>) -> Self {
        self.entity_type = Some(entity_type.into());
        self.entity_id = Some(entity_id.into());
        self
    }

    /// Page `page` of `per_page`.
    pub fn page(mut self, page: u32, per_page: u32) -> Self {
        self.page = page;
        self.per_page = per_page;
        self
    }

    /// Scores per page, the default and the bound applied.
    pub fn page_size(&self) -> u32 {
        match self.per_page {
            0 => DEFAULT_SCORES_PAGE,
            n => n.min(MAX_SCORES_PAGE),
        }
    }

    /// Whether `score` matches the filters.
    pub fn matches(&self, score: &ScoreRecord) -> bool {
        let same = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        same(&self.run_id, &score.run_id)
            && same(&self.scorer_id, &score.scorer_id)
            && same(&self.entity_type, &score.entity_type)
            && same(&self.entity_id, &score.entity_id)
            && self.source.is_none_or(|s| s == score.source)
            && self
                .experiment_id
                .as_deref()
                .is_none_or(|e| score.experiment_id.as_deref() == Some(e))
    }
}

/// A page of scores.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScorePage {
    /// The scores, newest first.
    pub scores: Vec<ScoreRecord>,
    /// How many match in all.
    pub total: usize,
}

impl ScorePage {
    /// A page of `scores`, `total` matching in all.
    pub fn new(scores: Vec<ScoreRecord>, total: usize) -> Self {
        Self { scores, total }
    }
}

/// A live scoring decided but not yet stored: kept (beside the scores) from the moment a run's
/// sampling chose it until its score is stored, so a process that dies between the two does not
/// lose it ([`Kestrel::resume_pending_scores`](crate::kestrel::Kestrel) scores it at the next
/// start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingScore {
    /// The id the score will have: one per run and scorer, so scoring it twice (a restart
    /// racing a slow scorer) stores one score, not two.
    pub id: String,
    /// The scorer.
    pub scorer_id: String,
    /// `AGENT` or `WORKFLOW`.
    pub entity_type: String,
    /// The agent's or workflow's id.
    pub entity_id: String,
    /// The scored run.
    pub run_id: String,
    /// The run as the scorer reads it (an [`eval::ScorerRun`](crate::eval::ScorerRun), as
    /// JSON).
    pub run: Value,
    /// The run's resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// The run's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// How many times a scoring of it was started after a restart (a scorer that takes its
    /// process down is given up on after a few).
    #[serde(default)]
    pub attempts: u32,
    /// When the run was sampled (Unix milliseconds).
    pub created_at: u64,
}

impl PendingScore {
    /// The pending scoring by `scorer_id` of run `run_id` of entity `entity_type` `entity_id`,
    /// which the scorer will read as `run`; made now, its id [`PendingScore::id_for`].
    pub fn new(
        scorer_id: impl Into<String>,
        entity_type: impl Into<String>,
        entity_id: impl Into<String>,
        run_id: impl Into<String>,
        run: Value,
    ) -> Self {
        let scorer_id = scorer_id.into();
        let run_id = run_id.into();
        Self {
            id: Self::id_for(&run_id, &scorer_id),
            scorer_id,
            entity_type: entity_type.into(),
            entity_id: entity_id.into(),
            run_id,
            run,
            resource_id: None,
            thread_id: None,
            attempts: 0,
            created_at: now_ms(),
        }
    }

    /// The id of the live score of `scorer_id` on run `run_id`: the same for the same pair,
    /// 32 hex digits whatever the ids' length.
    pub fn id_for(run_id: &str, scorer_id: &str) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(run_id.as_bytes());
        hash.update([0]);
        hash.update(scorer_id.as_bytes());
        let digest = hash.finalize();
        digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// Why a score store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScoreStoreError {
    /// The backend failed.
    #[error("the score store failed: {0}")]
    Backend(String),
}

/// Kept scores. `kestrel-storage`'s conformance suite checks its backends (memory, SQLite,
/// PostgreSQL) answer alike.
#[async_trait::async_trait]
pub trait ScoreStore: Send + Sync + std::fmt::Debug {
    /// Keeps `score` (a score saved again with the same id replaces the first).
    async fn save_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError>;

    /// The score `id`, if kept.
    async fn get_score(&self, id: &str) -> Result<Option<ScoreRecord>, ScoreStoreError>;

    /// A page of scores, newest first (ties: the larger id first).
    async fn list_scores(&self, query: &ScoreQuery) -> Result<ScorePage, ScoreStoreError>;

    /// Keeps `pending` (all at once: a run's sampled scorers are kept together or not at
    /// all); one saved again with the same id replaces the first.
    async fn save_pending_scores(&self, pending: &[PendingScore]) -> Result<(), ScoreStoreError>;

    /// Stores `score` and forgets the pending scoring of the same id, both at once.
    async fn complete_pending_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError>;

    /// At most `limit` pending scorings made before `before` (Unix milliseconds), oldest
    /// first (ties: the smaller id first).
    async fn pending_scores(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PendingScore>, ScoreStoreError>;
}

/// A score store shared by an instance.
pub type SharedScoreStore = Arc<dyn ScoreStore>;

/// The most scores [`InMemoryScoreStore`] keeps by default; past it the oldest go.
pub const DEFAULT_IN_MEMORY_SCORES: usize = 100_000;

/// The most pending scorings [`InMemoryScoreStore`] keeps; past it a save is refused (the
/// scorings are then counted failed, never dropped unseen).
pub const MAX_IN_MEMORY_PENDING_SCORES: usize = 100_000;

/// Scores in this process's memory, bounded: past its bound the oldest go. Its pending
/// scorings live as long as the process, so they carry nothing over a restart: keeping them
/// is what the database backends are for.
#[derive(Debug)]
pub struct InMemoryScoreStore {
    max: usize,
    scores: Mutex<VecDeque<ScoreRecord>>,
    pending: Mutex<BTreeMap<String, PendingScore>>,
}

impl Default for InMemoryScoreStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryScoreStore {
    /// A store of at most [`DEFAULT_IN_MEMORY_SCORES`] scores.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_IN_MEMORY_SCORES)
    }

    /// A store of at most `max` scores (at least one).
    pub fn with_capacity(max: usize) -> Self {
        Self {
            max: max.max(1),
            scores: Mutex::new(VecDeque::new()),
            pending: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ScoreRecord>> {
        self.scores.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl ScoreStore for InMemoryScoreStore {
    async fn save_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        self.keep(score);
        Ok(())
    }

    async fn get_score(&self, id: &str) -> Result<Option<ScoreRecord>, ScoreStoreError> {
        Ok(self.lock().iter().find(|s| s.id == id).cloned())
    }

    async fn list_scores(&self, query: &ScoreQuery) -> Result<ScorePage, ScoreStoreError> {
        let scores = self.lock();
        let mut matching: Vec<&ScoreRecord> = scores.iter().filter(|s| query.matches(s)).collect();
        matching.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        let size = query.page_size() as usize;
        let page = matching
            .iter()
            .skip(query.page as usize * size)
            .take(size)
            .map(|s| (*s).clone())
            .collect();
        Ok(ScorePage {
            scores: page,
            total: matching.len(),
        })
    }

    async fn save_pending_scores(&self, pending: &[PendingScore]) -> Result<(), ScoreStoreError> {
        let mut kept = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let new = pending.iter().filter(|p| !kept.contains_key(&p.id)).count();
        if kept.len() + new > MAX_IN_MEMORY_PENDING_SCORES {
            return Err(ScoreStoreError::Backend(format!(
                "{MAX_IN_MEMORY_PENDING_SCORES} scorings are pending already; \
                 the scorers are not keeping up with the runs"
            )));
        }
        for p in pending {
            kept.insert(p.id.clone(), p.clone());
        }
        Ok(())
    }

    async fn complete_pending_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        self.keep(score);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&score.id);
        Ok(())
    }

    async fn pending_scores(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PendingScore>, ScoreStoreError> {
        let kept = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut due: Vec<&PendingScore> = kept.values().filter(|p| p.created_at < before).collect();
        due.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(due.into_iter().take(limit).cloned().collect())
    }
}

impl InMemoryScoreStore {
    fn keep(&self, score: &ScoreRecord) {
        let mut scores = self.lock();
        if let Some(kept) = scores.iter_mut().find(|s| s.id == score.id) {
            *kept = score.clone();
            return;
        }
        if scores.len() >= self.max {
            scores.pop_front();
        }
        scores.push_back(score.clone());
    }
}
