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

use serde::{Deserialize, Serialize};

use crate::agent::BoxError;
use crate::agent::RunState;

/// Where a stored run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunPhase {
    /// Being driven by some process.
    Running,
    /// Stopped, waiting for a decision, resume data or a client tool's result.
    Suspended,
    /// Waiting for a delegated sub-agent's run (the parent holds no task while it waits
    /// in another process; it is continued once the sub-agent's run ends).
    WaitingForSubtask,
    /// Paused at a step boundary ([`crate::agent::Agent::pause_run`]), until resumed.
    Paused,
    /// Finished (normally, with an error, or aborted).
    Finished,
}

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
    /// Runs per page (0 means the default, 50).
    pub per_page: u32,
}

impl SuspendedRunsQuery {
    /// The page size asked for, or the default.
    pub fn page_size(&self) -> u32 {
        if self.per_page == 0 {
            50
        } else {
            self.per_page
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
    /// The store failed.
    #[error("run store failed: {0}")]
    Backend(#[source] BoxError),
}

/// Keeps run snapshots. Implementations must make [`RunStore::save`] an atomic
/// compare-and-set on the version.
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

    /// The run's snapshot, if stored.
    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, RunStoreError>;

    /// Suspended runs matching `query`, newest first.
    async fn list_suspended(
        &self,
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
/// Runs that can still continue are kept until they finish; of the finished ones only the
/// most recent [`InMemoryRunStore::DEFAULT_FINISHED_CAPACITY`] are kept (so a late decision
/// on one is told it is finished), so a long-lived process does not grow without bound.
#[derive(Debug)]
pub struct InMemoryRunStore {
    runs: Mutex<Runs>,
    finished_capacity: usize,
}

#[derive(Debug, Default)]
struct Runs {
    by_id: HashMap<String, StoredRun>,
    /// Finished runs, oldest first.
    finished: VecDeque<String>,
}

impl Default for InMemoryRunStore {
    fn default() -> Self {
        Self::with_finished_capacity(Self::DEFAULT_FINISHED_CAPACITY)
    }
}

impl InMemoryRunStore {
    /// How many finished runs the default store keeps.
    pub const DEFAULT_FINISHED_CAPACITY: usize = 1_000;

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that keeps at most `capacity` finished runs.
    pub fn with_finished_capacity(capacity: usize) -> Self {
        Self {
            runs: Mutex::new(Runs::default()),
            finished_capacity: capacity,
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
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        let actual = runs.by_id.get(&state.run_id).map(|r| r.version);
        if actual != expected_version {
            return Err(RunStoreError::Conflict {
                run_id: state.run_id.clone(),
                expected: expected_version,
                actual,
            });
        }
        let version = actual.unwrap_or(0) + 1;
        runs.by_id.insert(
            state.run_id.clone(),
            StoredRun {
                state: state.clone(),
                phase,
                version,
                updated_at_ms: now_ms(),
            },
        );
        if phase == RunPhase::Finished {
            runs.finished.push_back(state.run_id.clone());
            while runs.finished.len() > self.finished_capacity {
                let Some(oldest) = runs.finished.pop_front() else {
                    break;
                };
                if runs
                    .by_id
                    .get(&oldest)
                    .is_some_and(|r| r.phase == RunPhase::Finished)
                {
                    runs.by_id.remove(&oldest);
                }
            }
        }
        Ok(version)
    }

    fn is_durable(&self) -> bool {
        false
    }

    async fn load(&self, run_id: &str) -> Result<Option<StoredRun>, RunStoreError> {
        let runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        Ok(runs.by_id.get(run_id).cloned())
    }

    async fn list_suspended(
        &self,
        query: &SuspendedRunsQuery,
    ) -> Result<SuspendedRunsPage, RunStoreError> {
        let runs = self
            .runs
            .lock()
            .map_err(|_| RunStoreError::Backend("the run store's lock is poisoned".into()))?;
        let matches = |expected: &Option<String>, actual: &Option<String>| {
            expected.is_none() || expected == actual
        };
        let mut found: Vec<StoredRun> = runs
            .by_id
            .values()
            .filter(|r| r.phase == RunPhase::Suspended)
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
            .skip(query.page as usize * size)
            .take(size)
            .collect();
        Ok(SuspendedRunsPage { runs, total })
    }
}
