//! Where stopped runs wait: [`RunStore`] keeps run snapshots.
//!
//! A run that stops for a person (a tool call waiting for approval, a tool that suspended, a
//! client tool waiting for its result) is saved as a [`RunState`] snapshot, not kept as a live
//! task. Whoever continues it (another request, another process after a restart) loads the
//! snapshot, records the decision with a compare-and-set on the snapshot's version, and drives
//! the run on from there. The compare-and-set is what makes two racing decisions on one call
//! end with exactly one winner.
//!
//! [`InMemoryRunStore`] is the default (runs survive as long as the process); `kestrel-storage`
//! implements the trait on SQLite and PostgreSQL for runs that survive restarts.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::error::BoxError;
pub use crate::run::RunPhase;
use crate::run::RunState;

/// A snapshot as stored: the run's state, its phase, and the version the store gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run's state.
    pub state: RunState,
    /// Where it stands.
    pub phase: RunPhase,
    /// 1 on creation, +1 on every save.
    pub version: i64,
    /// When it was last saved (milliseconds since the Unix epoch).
    pub updated_at_ms: i64,
}

/// Which suspended runs [`RunStore::list_suspended`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuspendedRunsQuery {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only runs on this thread.
    pub thread_id: Option<String>,
    /// Only runs of this resource.
    pub resource_id: Option<String>,
    /// Zero-based page.
    pub page: u32,
    /// Runs per page: 0 means the default, [`DEFAULT_SUSPENDED_PAGE`]; more than
    /// [`MAX_SUSPENDED_PAGE`] means that many.
    pub per_page: u32,
}

/// The page size of [`SuspendedRunsQuery`] when none is asked for.
pub const DEFAULT_SUSPENDED_PAGE: u32 = 50;

/// The largest page of [`SuspendedRunsQuery`].
pub const MAX_SUSPENDED_PAGE: u32 = 1_000;

impl SuspendedRunsQuery {
    /// The page size asked for (at most [`MAX_SUSPENDED_PAGE`]), or the default.
    pub fn page_size(&self) -> u32 {
        match self.per_page {
            0 => DEFAULT_SUSPENDED_PAGE,
            n => n.min(MAX_SUSPENDED_PAGE),
        }
    }
}

/// A page of suspended runs, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct SuspendedRunsPage {
    /// The runs of this page.
    pub runs: Vec<StoredRun>,
    /// How many match in all.
    pub total: u64,
}

/// Why a run store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunStoreError {
    /// The saved version is not the one expected: someone else saved the run in between.
    #[error(
        "run {run_id:?} was changed concurrently (expected version {expected:?}, found {actual:?})"
    )]
    Conflict {
        /// The run.
        run_id: String,
        /// The version the caller read (`None`: it expected no run).
        expected: Option<i64>,
        /// The stored version (`None`: no run).
        actual: Option<i64>,
    },
    /// The save carries a lease token below one the store has seen for this run: the writer
    /// lost the run to another owner (see [`crate::lease::Fence`]).
    #[error(
        "run {run_id:?} has a newer owner: the save's lease token {token} is below the stored {current}"
    )]
    Fenced {
        /// The run.
        run_id: String,
        /// The token the save carried.
        token: u64,
        /// The greatest token the store has seen for the run.
        current: u64,
    },
    /// The store failed.
    #[error("run store failed: {0}")]
    Backend(#[source] BoxError),
}

/// Keeps run snapshots. Implementations must make [`RunStore::save`] an atomic
/// compare-and-set on the version, and keep per run the greatest
/// [`RunState::lease_token`] saved: a save whose token is below it is
/// [`RunStoreError::Fenced`] (a save without a token is not checked, and keeps the greatest).
#[async_trait::async_trait]
pub trait RunStore: Send + Sync + std::fmt::Debug {
    /// Saves `state` in `phase`. `expected_version` `None` creates the run (a
    /// [`RunStoreError::Conflict`] if it exists); `Some(v)` replaces version `v` (a conflict if
    /// the stored version differs). Returns the new version.
    async fn save(
        &self,
        state: &RunState,
        phase: RunPhase,
        expected_version: Option<i64>,
    ) -> Result<i64, RunStoreError>;

    /// Saves several distinct runs together, each as [`RunStore::save`] would: all of them,
    /// or (on the first conflict or failure, which is returned) none. A decision on a
    /// sub-agent's call is recorded in the parent and its sub-agents' runs this way, so a
    /// conflict never leaves a parent decided and its sub-agent not. Returns the new
    /// versions, in order.
    async fn save_all(
        &self,
        saves: &[(&RunState, RunPhase, Option<i64>)],
    ) -> Result<Vec<i64>, RunStoreError>;

    /// The run's snapshot, if stored.
    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, RunStoreError>;

    /// Suspended runs matching `query`, newest first.
    async fn list_suspended(
        &self,
        query: &SuspendedRunsQuery,
    ) -> Result<SuspendedRunsPage, RunStoreError> {
        self.list_in_phases(&[RunPhase::Suspended], query).await
    }

    /// Runs in one of `phases` matching `query`'s filters and page, newest first: how a
    /// cluster finds the runs an instance that died left `running`.
    async fn list_in_phases(
        &self,
        phases: &[RunPhase],
        query: &SuspendedRunsQuery,
    ) -> Result<SuspendedRunsPage, RunStoreError>;

    /// Whether snapshots outlive this process. Runs save the snapshots that only serve a
    /// restart (a delegating parent waiting for its sub-agent, a sub-agent after each step)
    /// only to a durable store; stops for a person and pauses are saved to every store.
    fn is_durable(&self) -> bool {
        true
    }
}

/// A shared run store.
pub type SharedRunStore = Arc<dyn RunStore>;

/// Run snapshots in this process's memory (the default store).
///
/// Bounded, so a long-lived process does not grow without end: of the finished runs only the
/// most recent [`InMemoryRunStore::DEFAULT_FINISHED_CAPACITY`] are kept (so a late decision
/// on one is told it is finished), and a run that waits (for a decision, a resume, its
/// sub-agent) is forgotten once it has not changed for
/// [`InMemoryRunStore::DEFAULT_UNFINISHED_TTL`] (24 hours; [`InMemoryRunStore::with_unfinished_ttl`]).
/// Nothing here survives the process anyway: a run that must wait longer, or outlive a
/// restart, belongs in a durable store (SQLite, PostgreSQL), which keeps every run.
#[derive(Debug)]
pub struct InMemoryRunStore {
    runs: Mutex<Runs>,
    finished_capacity: usize,
    unfinished_ttl: std::time::Duration,
}

#[derive(Debug, Default)]
struct Runs {
    by_id: HashMap<String, StoredRun>,
    /// Finished runs, oldest first.
    finished: VecDeque<String>,
    /// When waiting runs were last checked for expiry.
    last_expiry_ms: i64,
}

impl Default for InMemoryRunStore {
    fn default() -> Self {
        Self::with_finished_capacity(Self::DEFAULT_FINISHED_CAPACITY)
    }
}

impl InMemoryRunStore {
    /// How many finished runs the default store keeps.
    pub const DEFAULT_FINISHED_CAPACITY: usize = 1_000;

    /// How long the default store keeps a run that waits and does not change.
    pub const DEFAULT_UNFINISHED_TTL: std::time::Duration =
        std::time::Duration::from_secs(24 * 60 * 60);

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that keeps at most `capacity` finished runs.
    pub fn with_finished_capacity(capacity: usize) -> Self {
        Self {
            runs: Mutex::new(Runs::default()),
            finished_capacity: capacity,
            unfinished_ttl: Self::DEFAULT_UNFINISHED_TTL,
        }
    }

    /// Forgets a run that is not finished once it has not changed for `ttl` (a suspended run
    /// nobody decided, a paused one nobody resumed): deciding it afterwards finds no run.
    pub fn with_unfinished_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.unfinished_ttl = ttl;
        self
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.unfinished_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether `run` waited longer than the TTL.
    fn expired(&self, run: &StoredRun, now: i64) -> bool {
        !run.phase.is_ended() && now.saturating_sub(run.updated_at_ms) > self.ttl_ms()
    }

    /// Stores one snapshot (its compare-and-set already checked), keeping the finished runs
    /// within their capacity.
    fn insert(&self, runs: &mut Runs, state: &RunState, phase: RunPhase, version: i64, now: i64) {
        let run_id = state.run_id.as_str();
        let mut state = state.clone();
        let seen = runs
            .by_id
            .get(&state.run_id)
            .and_then(|r| r.state.lease_token);
        state.lease_token = state.lease_token.max(seen);
        runs.by_id.insert(
            state.run_id.clone(),
            StoredRun {
                state,
                phase,
                version,
                updated_at_ms: now,
            },
        );
        if phase.is_ended() {
            runs.finished.push_back(run_id.to_owned());
            while runs.finished.len() > self.finished_capacity {
                let Some(oldest) = runs.finished.pop_front() else {
                    break;
                };
                if runs.by_id.get(&oldest).is_some_and(|r| r.phase.is_ended()) {
                    runs.by_id.remove(&oldest);
                }
            }
        }
    }

    /// Drops the expired waiting runs, at most once a second (a scan of every run).
    fn expire(&self, runs: &mut Runs, now: i64) {
        if now.saturating_sub(runs.last_expiry_ms) < 1_000 {
            return;
        }
        runs.last_expiry_ms = now;
        let before = runs.by_id.len();
        runs.by_id.retain(|_, run| !self.expired(run, now));
        let dropped = before - runs.by_id.len();
        if dropped > 0 {
            tracing::info!(dropped, ttl = ?self.unfinished_ttl, "forgot waiting runs past their time to live");
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[async_trait::async_trait]
impl RunStore for InMemoryRunStore {
    async fn save(
        &self,
        state: &RunState,
        phase: RunPhase,
        expected_version: Option<i64>,
    ) -> Result<i64, RunStoreError> {
        let mut versions = self.save_all(&[(state, phase, expected_version)]).await?;
        versions
            .pop()
            .ok_or_else(|| RunStoreError::Backend("no run was saved".into()))
    }

    async fn save_all(
        &self,
        saves: &[(&RunState, RunPhase, Option<i64>)],
    ) -> Result<Vec<i64>, RunStoreError> {
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        let now = now_ms();
        // Every compare-and-set is checked before anything is written: all or nothing.
        let mut versions = Vec::with_capacity(saves.len());
        for (state, _, expected_version) in saves {
            // An expired run is gone, though not yet dropped from memory.
            let actual = runs
                .by_id
                .get(&state.run_id)
                .filter(|r| !self.expired(r, now))
                .map(|r| r.version);
            if let Some(token) = state.lease_token
                && let Some(current) = runs
                    .by_id
                    .get(&state.run_id)
                    .and_then(|r| r.state.lease_token)
                && token < current
            {
                return Err(RunStoreError::Fenced {
                    run_id: state.run_id.clone(),
                    token,
                    current,
                });
            }
            if actual != *expected_version {
                return Err(RunStoreError::Conflict {
                    run_id: state.run_id.clone(),
                    expected: *expected_version,
                    actual,
                });
            }
            versions.push(actual.unwrap_or(0) + 1);
        }
        self.expire(&mut runs, now);
        for ((state, phase, _), version) in saves.iter().zip(&versions) {
            self.insert(&mut runs, state, *phase, *version, now);
        }
        Ok(versions)
    }

    fn is_durable(&self) -> bool {
        false
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, RunStoreError> {
        let runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        let now = now_ms();
        Ok(runs
            .by_id
            .get(run_id)
            .filter(|run| !self.expired(run, now))
            .cloned())
    }

    async fn list_in_phases(
        &self,
        phases: &[RunPhase],
        query: &SuspendedRunsQuery,
    ) -> Result<SuspendedRunsPage, RunStoreError> {
        let runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        let now = now_ms();
        let matches = |expected: &Option<String>, actual: &Option<String>| {
            expected.is_none() || expected == actual
        };
        let mut found: Vec<StoredRun> = runs
            .by_id
            .values()
            .filter(|r| phases.contains(&r.phase) && !self.expired(r, now))
            .filter(|r| {
                query
                    .agent_id
                    .as_ref()
                    .is_none_or(|a| *a == r.state.agent_id)
                    && matches(&query.thread_id, &r.state.settings.thread_id)
                    && matches(&query.resource_id, &r.state.settings.resource_id)
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| {
            b.updated_at_ms
                .cmp(&a.updated_at_ms)
                .then_with(|| b.state.run_id.cmp(&a.state.run_id))
        });
        let total = found.len() as u64;
        let size = query.page_size() as usize;
        let runs = found
            .into_iter()
            .skip((query.page as usize).saturating_mul(size))
            .take(size)
            .collect();
        Ok(SuspendedRunsPage { runs, total })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::run::RunSettings;

    fn state(run_id: &str) -> RunState {
        RunState::new(
            run_id.to_owned(),
            "agent".to_owned(),
            Vec::new(),
            5,
            RunSettings::default(),
        )
    }

    #[tokio::test]
    async fn waiting_runs_expire_and_finished_ones_stay_bounded() {
        let store =
            InMemoryRunStore::new().with_unfinished_ttl(std::time::Duration::from_millis(1));
        store
            .save(&state("waits"), RunPhase::Suspended, None)
            .await
            .unwrap();
        store
            .save(&state("done"), RunPhase::Completed, None)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(store.load("waits").await.unwrap().is_none(), "expired");
        assert!(
            store.load("done").await.unwrap().is_some(),
            "finished runs do not expire"
        );
        let listed = store
            .list_suspended(&SuspendedRunsQuery::default())
            .await
            .unwrap();
        assert_eq!(listed.total, 0);
        // Its id can be used again.
        store
            .save(&state("waits"), RunPhase::Paused, None)
            .await
            .unwrap();
        assert_eq!(store.load("waits").await.unwrap().unwrap().version, 1);
        // The default keeps a waiting run for a day.
        let default = InMemoryRunStore::new();
        default
            .save(&state("waits"), RunPhase::Suspended, None)
            .await
            .unwrap();
        assert!(default.load("waits").await.unwrap().is_some());
    }
}
