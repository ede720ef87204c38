//! Live scoring: scorers an agent runs on its own finished runs, sampled, off the run's path.
//!
//! When a run of an agent with scorers ends with an answer, each scorer's sampling decides
//! (from the run's trace id, else its run id: [`ScoreSampling`]); the sampled ones run in a
//! task of their own after the `finish` event, and their results go to the instance's score
//! store ([`Stores::scores`](crate::store::Stores)) as `LIVE` scores linked to the run and
//! its trace. A scorer that fails leaves a score without a value whose metadata says why:
//! failures are as visible as scores. [`ScoringStats`] keeps the denominator per agent and
//! scorer: runs eligible, sampled, scored and failed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::json;

use super::{ScoreSampling, ScorerRun, SharedScorer};
use crate::store::{ScoreSource, SharedScoreStore};

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

    /// Waits until no scoring is running.
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

/// Decides each scorer's sampling for `finished` and scores the sampled ones in a task of
/// their own (nothing is spawned when none is sampled, or outside a Tokio runtime).
pub(crate) fn score_finished(
    scorers: &[LiveScorer],
    finished: FinishedRun,
    store: SharedScoreStore,
    stats: Arc<ScoringStats>,
) {
    let sampled: Vec<SharedScorer> = scorers
        .iter()
        .filter(|live| {
            let id = live.scorer.id();
            stats.update(&finished.entity_id, id, |c| c.eligible += 1);
            let chosen = live
                .sampling
                .samples(finished.run.trace_id.as_deref(), &finished.run.run_id);
            if chosen {
                stats.update(&finished.entity_id, id, |c| c.sampled += 1);
            }
            chosen
        })
        .map(|live| Arc::clone(&live.scorer))
        .collect();
    if sampled.is_empty() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        for scorer in &sampled {
            stats.update(&finished.entity_id, scorer.id(), |c| c.failed += 1);
        }
        tracing::warn!(
            run_id = %finished.run.run_id,
            "live scorers need a Tokio runtime; the run was not scored"
        );
        return;
    };
    stats.begin();
    handle.spawn(async move {
        for scorer in sampled {
            score_one(&*scorer, &finished, &store, &stats).await;
        }
        stats.end();
    });
}

async fn score_one(
    scorer: &dyn super::Scorer,
    finished: &FinishedRun,
    store: &SharedScoreStore,
    stats: &ScoringStats,
) {
    let run = &finished.run;
    let input = serde_json::to_value(&run.input).unwrap_or_default();
    let output = serde_json::to_value(&run.output).unwrap_or_default();
    let (mut record, failed) = match scorer.run(run.clone()).await {
        Ok(result) => (
            super::score_record(
                scorer,
                result,
                finished.entity_type,
                &finished.entity_id,
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
                finished.entity_type,
                &finished.entity_id,
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
    record.trace_id.clone_from(&run.trace_id);
    record.span_id.clone_from(&run.span_id);
    record.resource_id.clone_from(&finished.resource_id);
    record.thread_id.clone_from(&finished.thread_id);
    let saved = store.save_score(&record).await;
    if let Err(error) = &saved {
        tracing::warn!(run_id = %run.run_id, scorer = scorer.id(), %error, "a live score could not be stored");
    }
    stats.update(&finished.entity_id, scorer.id(), |c| {
        if failed || saved.is_err() {
            c.failed += 1;
        } else {
            c.scored += 1;
        }
    });
}
