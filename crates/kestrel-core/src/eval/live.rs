//! Live scoring: scorers an agent runs on its own finished runs, sampled, off the run's path.
//!
//! When a run of an agent with scorers ends with an answer, each scorer's sampling decides
//! (from the run's trace id, else its run id: [`ScoreSampling`]); the sampled ones run in a
//! task of their own after the `finish` event, and their results go to the instance's score
//! store ([`Stores::scores`](crate::store::Stores)) as `LIVE` scores linked to the run and
//! its trace. A scorer that fails leaves a score without a value whose metadata says why:
//! failures are as visible as scores. [`ScoringStats`] keeps the denominator per agent and
//! scorer: runs eligible, sampled, scored and failed.
//!
//! **Durable.** The sampled scorings are kept in the score store as [`PendingScore`]s before
//! the run's end is stored, and each is forgotten in the same write that stores its score. A
//! process that dies between the two leaves them pending;
//! [`Kestrel::resume_pending_scores`](crate::kestrel::Kestrel::resume_pending_scores) scores
//! them at the next start (`kestrel dev` calls it). A score's id is fixed by its run and
//! scorer, so a scoring done twice (a restart racing a slow scorer in a cluster) stores one
//! score. A scoring started [`MAX_SCORING_ATTEMPTS`] times after restarts without ending is
//! given up on, with a failure stored in its place.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;

use super::{ScoreSampling, ScorerRun, SharedScorer};
use crate::store::{PendingScore, ScoreRecord, ScoreSource, SharedScoreStore};

/// How many times a pending scoring is started after restarts before it is given up on (a
/// scorer that takes its process down must not do so at every start).
pub const MAX_SCORING_ATTEMPTS: u32 = 3;

/// How many pending scorings a resumption reads at a time.
const RESUME_BATCH: usize = 64;

/// A scorer an agent runs on its live runs, and which of them.
#[derive(Clone, Debug)]
pub struct LiveScorer {
    /// The scorer.
    pub scorer: SharedScorer,
    /// Which runs it scores.
    pub sampling: ScoreSampling,
}

impl LiveScorer {
    /// `scorer` on the runs `sampling` chooses.
    pub fn new(scorer: impl super::IntoScorer, sampling: ScoreSampling) -> Self {
        Self {
            scorer: scorer.into_scorer(),
            sampling,
        }
    }
}

/// How many runs a scorer saw, per agent and scorer: the denominator of its scores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreCounts {
    /// Runs that ended with an answer while the scorer was attached.
    pub eligible: u64,
    /// Those its sampling chose.
    pub sampled: u64,
    /// Those it scored (a score, or not scorable), stored.
    pub scored: u64,
    /// Those it failed on (or whose score could not be stored).
    pub failed: u64,
}

/// The instance's live-scoring counts, and the scorings still running.
#[derive(Debug, Default)]
pub struct ScoringStats {
    counts: Mutex<BTreeMap<(String, String), ScoreCounts>>,
    pending: AtomicU64,
    idle: tokio::sync::Notify,
}

impl ScoringStats {
    fn update(&self, entity: &str, scorer: &str, f: impl FnOnce(&mut ScoreCounts)) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        f(counts
            .entry((entity.to_owned(), scorer.to_owned()))
            .or_default());
    }

    /// The counts of `scorer` on agent `entity`'s runs.
    pub fn counts(&self, entity: &str, scorer: &str) -> ScoreCounts {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .get(&(entity.to_owned(), scorer.to_owned()))
            .copied()
            .unwrap_or_default()
    }

    /// Every (entity, scorer) and its counts.
    pub fn all(&self) -> Vec<(String, String, ScoreCounts)> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .iter()
            .map(|((entity, scorer), c)| (entity.clone(), scorer.clone(), *c))
            .collect()
    }

    /// How many scorings are running.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }

    /// Waits until no scoring is running (resumed ones included).
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.pending() == 0 {
                return;
            }
            notified.await;
        }
    }

    fn begin(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    fn end(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

/// What a live scoring needs of the finished run.
pub(crate) struct FinishedRun {
    /// `AGENT` or `WORKFLOW`.
    pub(crate) entity_type: &'static str,
    pub(crate) entity_id: String,
    pub(crate) run: ScorerRun,
    pub(crate) resource_id: Option<String>,
    pub(crate) thread_id: Option<String>,
}

/// The scorings a finished run's sampling chose, kept pending: [`Sampled::start`] runs them.
pub(crate) struct Sampled {
    scorings: Vec<(SharedScorer, PendingScore)>,
    run: ScorerRun,
    store: SharedScoreStore,
    stats: Arc<ScoringStats>,
}

/// Decides each scorer's sampling for `finished` and keeps the sampled scorings pending in
/// `store` (so a restart before they are stored does not lose them); `None` when none was
/// sampled. Call it before the run's end is stored, and [`Sampled::start`] after.
pub(crate) async fn sample_finished(
    scorers: &[LiveScorer],
    finished: FinishedRun,
    store: SharedScoreStore,
    stats: Arc<ScoringStats>,
) -> Option<Sampled> {
    let entity = &finished.entity_id;
    let mut chosen = Vec::new();
    for live in scorers {
        let id = live.scorer.id();
        stats.update(entity, id, |c| c.eligible += 1);
        if live
            .sampling
            .samples(finished.run.trace_id.as_deref(), &finished.run.run_id)
        {
            stats.update(entity, id, |c| c.sampled += 1);
            chosen.push(Arc::clone(&live.scorer));
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let run_json = serde_json::to_value(&finished.run).unwrap_or_default();
    let scorings: Vec<(SharedScorer, PendingScore)> = chosen
        .into_iter()
        .map(|scorer| {
            let mut pending = PendingScore::new(
                scorer.id(),
                finished.entity_type,
                entity.clone(),
                finished.run.run_id.clone(),
                run_json.clone(),
            );
            pending.resource_id.clone_from(&finished.resource_id);
            pending.thread_id.clone_from(&finished.thread_id);
            (scorer, pending)
        })
        .collect();
    let pending: Vec<PendingScore> = scorings.iter().map(|(_, p)| p.clone()).collect();
    if let Err(error) = store.save_pending_scores(&pending).await {
        tracing::warn!(
            run_id = %finished.run.run_id,
            %error,
            "the run's sampled scorings could not be kept pending; they are scored now, but a \
             restart before they are stored loses them"
        );
    }
    Some(Sampled {
        scorings,
        run: finished.run,
        store,
        stats,
    })
}

impl Sampled {
    /// Scores the sampled scorings one after another in a task of their own (outside a Tokio
    /// runtime they stay pending, counted failed here).
    pub(crate) fn start(self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            for (scorer, pending) in &self.scorings {
                self.stats
                    .update(&pending.entity_id, scorer.id(), |c| c.failed += 1);
            }
            tracing::warn!(
                run_id = %self.run.run_id,
                "live scorers need a Tokio runtime; the run's scorings stay pending"
            );
            return;
        };
        self.stats.begin();
        handle.spawn(async move {
            for (scorer, pending) in &self.scorings {
                score_one(&**scorer, &self.run, pending, &self.store, &self.stats).await;
            }
            self.stats.end();
        });
    }
}

/// Scores `run` with `scorer` and stores the score in place of `pending`.
async fn score_one(
    scorer: &dyn super::Scorer,
    run: &ScorerRun,
    pending: &PendingScore,
    store: &SharedScoreStore,
    stats: &ScoringStats,
) {
    let input = serde_json::to_value(&run.input).unwrap_or_default();
    let output = serde_json::to_value(&run.output).unwrap_or_default();
    let (mut record, failed) = match scorer.run(run.clone()).await {
        Ok(result) => (
            super::score_record(
                scorer,
                result,
                &pending.entity_type,
                &pending.entity_id,
                ScoreSource::Live,
                input,
                output,
            ),
            false,
        ),
        Err(error) => {
            tracing::warn!(run_id = %run.run_id, scorer = scorer.id(), %error, "a live scorer failed");
            let mut record = super::score_record(
                scorer,
                super::ScoreResult {
                    run_id: run.run_id.clone(),
                    ..Default::default()
                },
                &pending.entity_type,
                &pending.entity_id,
                ScoreSource::Live,
                input,
                output,
            );
            let step = match &error {
                super::ScorerError::Step { failed_step, .. } => Some(failed_step.to_string()),
                _ => None,
            };
            record.metadata = Some(json!({
                "error": {"message": error.to_string(), "kind": error.kind(), "failedStep": step}
            }));
            (record, true)
        }
    };
    record.id.clone_from(&pending.id);
    record.trace_id.clone_from(&run.trace_id);
    record.span_id.clone_from(&run.span_id);
    record.resource_id.clone_from(&pending.resource_id);
    record.thread_id.clone_from(&pending.thread_id);
    let saved = store.complete_pending_score(&record).await;
    if let Err(error) = &saved {
        tracing::warn!(run_id = %run.run_id, scorer = scorer.id(), %error, "a live score could not be stored");
    }
    stats.update(&pending.entity_id, scorer.id(), |c| {
        if failed || saved.is_err() {
            c.failed += 1;
        } else {
            c.scored += 1;
        }
    });
}

/// Finds the scorer a pending scoring names (`None`: its entity or scorer is not here).
pub(crate) type FindScorer = dyn Fn(&PendingScore) -> Option<SharedScorer> + Send + Sync;

/// Stores, in place of `pending`, a score without a value whose metadata says why it was
/// given up on; `Err` when the store failed.
async fn give_up(
    pending: &PendingScore,
    kind: &str,
    message: String,
    store: &SharedScoreStore,
    stats: &ScoringStats,
) -> Result<(), crate::store::ScoreStoreError> {
    tracing::warn!(run_id = %pending.run_id, scorer = %pending.scorer_id, %message, "a pending live scoring was given up on");
    let run: Option<ScorerRun> = serde_json::from_value(pending.run.clone()).ok();
    let mut record = ScoreRecord::new(
        pending.scorer_id.clone(),
        json!({"id": pending.scorer_id, "name": pending.scorer_id, "description": ""}),
        pending.run_id.clone(),
        pending.entity_type.clone(),
        pending.entity_id.clone(),
        ScoreSource::Live,
        run.as_ref()
            .and_then(|r| serde_json::to_value(&r.input).ok())
            .unwrap_or_default(),
        run.as_ref()
            .and_then(|r| serde_json::to_value(&r.output).ok())
            .unwrap_or_default(),
    );
    record.id.clone_from(&pending.id);
    if let Some(run) = &run {
        record.trace_id.clone_from(&run.trace_id);
        record.span_id.clone_from(&run.span_id);
    }
    record.resource_id.clone_from(&pending.resource_id);
    record.thread_id.clone_from(&pending.thread_id);
    record.metadata = Some(json!({"error": {"message": message, "kind": kind}}));
    stats.update(&pending.entity_id, &pending.scorer_id, |c| c.failed += 1);
    store.complete_pending_score(&record).await
}

/// Scores, one after another, the scorings left pending before `before` (Unix ms), in a task
/// of its own; returns how many it found at first look (at most a batch; the rest follow).
pub(crate) async fn resume_pending(
    before: u64,
    find: Box<FindScorer>,
    store: SharedScoreStore,
    stats: Arc<ScoringStats>,
) -> usize {
    let first = match store.pending_scores(before, RESUME_BATCH).await {
        Ok(first) => first,
        Err(error) => {
            tracing::warn!(%error, "the pending live scorings could not be read");
            return 0;
        }
    };
    let found = first.len();
    if found == 0 {
        return 0;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("resuming live scorings needs a Tokio runtime; they stay pending");
        return 0;
    };
    stats.begin();
    handle.spawn(async move {
        let mut batch = first;
        loop {
            let mut done = 0;
            for pending in &batch {
                match resume_one(pending, &*find, &store, &stats).await {
                    Ok(()) => done += 1,
                    Err(error) => tracing::warn!(run_id = %pending.run_id, scorer = %pending.scorer_id, %error, "a pending live scoring could not be settled; it stays pending"),
                }
            }
            // Each one settled leaves the store; none settled means the store is failing.
            if done == 0 {
                break;
            }
            batch = match store.pending_scores(before, RESUME_BATCH).await {
                Ok(batch) if !batch.is_empty() => batch,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(%error, "the pending live scorings could not be read");
                    break;
                }
            };
        }
        stats.end();
    });
    found
}

async fn resume_one(
    pending: &PendingScore,
    find: &FindScorer,
    store: &SharedScoreStore,
    stats: &ScoringStats,
) -> Result<(), crate::store::ScoreStoreError> {
    if pending.attempts >= MAX_SCORING_ATTEMPTS {
        let message = format!(
            "the scoring was started {} times after restarts and never ended",
            pending.attempts
        );
        return give_up(pending, "abandoned", message, store, stats).await;
    }
    let Some(scorer) = find(pending) else {
        let message = format!(
            "no scorer {:?} is attached to {} {:?} any more",
            pending.scorer_id,
            pending.entity_type.to_lowercase(),
            pending.entity_id
        );
        return give_up(pending, "unknown-scorer", message, store, stats).await;
    };
    let run: ScorerRun = match serde_json::from_value(pending.run.clone()) {
        Ok(run) => run,
        Err(error) => {
            let message = format!("the kept run cannot be read: {error}");
            return give_up(pending, "corrupt", message, store, stats).await;
        }
    };
    // Counted before it runs: a scorer that takes the process down uses up an attempt.
    let mut attempt = pending.clone();
    attempt.attempts += 1;
    store
        .save_pending_scores(std::slice::from_ref(&attempt))
        .await?;
    score_one(&*scorer, &run, &attempt, store, stats).await;
    Ok(())
}
