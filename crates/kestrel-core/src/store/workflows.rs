//! Where workflow runs are kept: [`WorkflowSnapshot`]s in a [`WorkflowStore`].
//!
//! A run's snapshot says where it stands (its status, every step's result, the state, the
//! entry it runs or waits at, and that entry's input), so a suspended run can be resumed by
//! whoever loads it, and a run can be read back when it ended. A resume claims the run with a
//! compare-and-set on its status (`suspended` → `running`): of two resumers, one wins.
//!
//! [`InMemoryWorkflowStore`] is the default; `kestrel-storage` keeps snapshots in SQLite and
//! PostgreSQL, where a durable store also gets a snapshot at every step boundary. The
//! workflows themselves are in [`crate::workflow`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::BoxError;
use crate::event::{StepErrorInfo, StepStatus, WorkflowStatus};

/// A run's step results, by step id. Each is boxed: a result is about 200 bytes, and a map
/// of them inline makes nodes of over two kilobytes, which the system allocator serves
/// slowly (field access reads through the box as it would without it).
pub type StepResults = BTreeMap<String, Box<StepResult>>;

/// One step's result in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// Where it stands (a bailed step is stored as `success`).
    pub status: StepStatus,
    /// Its input. Shared, not copied: the entry before it, the step, its events and the
    /// snapshots hold the same value.
    pub payload: Arc<Value>,
    /// Its output (shared with the next entry's input, as `payload` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Arc<Value>>,
    /// What it suspended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_payload: Option<Value>,
    /// The data it was resumed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_payload: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepErrorInfo>,
    /// When it first started (milliseconds since the Unix epoch).
    pub started_at: u64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// When it suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<u64>,
    /// When it was resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<u64>,
}

impl StepResult {
    /// A step's result that is only begun: its input and start time, status `success`
    /// until the step says otherwise, nothing else.
    pub fn begun(payload: impl Into<Arc<Value>>, started_at: u64) -> Self {
        Self {
            status: StepStatus::Success,
            payload: payload.into(),
            output: None,
            suspend_payload: None,
            resume_payload: None,
            error: None,
            started_at,
            ended_at: None,
            suspended_at: None,
            resumed_at: None,
        }
    }

    /// Its output, if it succeeded.
    pub fn success_output(&self) -> Option<&Value> {
        match self.status {
            StepStatus::Success => self.output.as_deref(),
            _ => None,
        }
    }
}

/// A workflow run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSnapshot {
    /// The workflow.
    pub workflow_id: String,
    /// The run.
    pub run_id: String,
    /// The resource the run acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    /// Where it stands.
    pub status: WorkflowStatus,
    /// The run's input.
    pub input: Arc<Value>,
    /// Each step's result so far.
    pub steps: StepResults,
    /// The workflow state.
    pub state: Arc<Value>,
    /// The index of the entry the run is at (the next to run, or the one it is suspended in).
    pub position: usize,
    /// That entry's input.
    pub entry_input: Arc<Value>,
    /// The top-level steps that ran, in order.
    pub step_execution_path: Vec<String>,
    /// The output, once it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<Value>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepErrorInfo>,
    /// The request context's entries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub request_context: BTreeMap<String, Value>,
    /// When it was created (milliseconds since the Unix epoch; set by the store).
    #[serde(default)]
    pub created_at_ms: i64,
    /// When it was last saved (set by the store).
    #[serde(default)]
    pub updated_at_ms: i64,
    /// In a cluster: the lease token of the instance that saved it. A store refuses a save
    /// whose token is below the greatest it has seen for the run ([`WorkflowFenced`]): the
    /// writer lost the run to another instance. A save without a token is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<u64>,
}

/// Which runs [`WorkflowStore::list`] returns, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunsQuery {
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Only runs of this resource.
    pub resource_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<WorkflowStatus>,
    /// Zero-based page.
    pub page: u32,
    /// Runs per page (0: 50; at most 1,000).
    pub per_page: u32,
}

impl WorkflowRunsQuery {
    /// The page size asked for, or the default.
    pub fn page_size(&self) -> u32 {
        match self.per_page {
            0 => 50,
            n => n.min(1_000),
        }
    }
}

/// One page of runs, and how many match in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowRunList {
    /// The runs of the page.
    pub runs: Vec<WorkflowSnapshot>,
    /// How many runs match the query.
    pub total: u64,
}

/// A store failed.
#[derive(Debug, thiserror::Error)]
#[error("the workflow store failed: {0}")]
pub struct WorkflowStoreError(#[source] pub BoxError);

impl WorkflowStoreError {
    /// A save or fence refused for carrying a stale lease token.
    pub fn fenced(fenced: WorkflowFenced) -> Self {
        Self(Box::new(fenced))
    }

    /// Whether the store refused the write for its stale lease token: another instance
    /// drives the run now, and this writer must stop.
    pub fn is_fenced(&self) -> bool {
        self.0.downcast_ref::<WorkflowFenced>().is_some()
    }
}

/// A write refused by a store's fence: it carried a lease token below one the store has seen
/// for the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "workflow run {workflow_id}/{run_id} has a newer owner: the write's lease token {token} is below the stored {current}"
)]
pub struct WorkflowFenced {
    /// The workflow.
    pub workflow_id: String,
    /// The run.
    pub run_id: String,
    /// The token the write carried.
    pub token: u64,
    /// The greatest token the store has seen for the run.
    pub current: u64,
}

/// Keeps workflow runs' snapshots.
#[async_trait::async_trait]
pub trait WorkflowStore: Send + Sync + std::fmt::Debug {
    /// Stores `snapshot` as its run's current one (creating the run or replacing it). A
    /// snapshot with a [`WorkflowSnapshot::lease_token`] raises the run's fence to it, and is
    /// refused ([`WorkflowStoreError::is_fenced`], nothing written) when the fence is above.
    async fn save(&self, snapshot: &WorkflowSnapshot) -> Result<(), WorkflowStoreError>;

    /// Raises the fence of the run to `token` (an instance that just took the run's lease
    /// does, before it reads the run): every later write with a smaller token is refused.
    /// Refused itself ([`WorkflowStoreError::is_fenced`]) when the fence is above `token`.
    /// The fence outlives the run's snapshot (a deleted run stays fenced).
    async fn fence(
        &self,
        workflow_id: &str,
        run_id: &str,
        token: u64,
    ) -> Result<(), WorkflowStoreError>;

    /// The run's snapshot, if it is stored.
    async fn load(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowSnapshot>, WorkflowStoreError>;

    /// Moves the run from status `from` to `to` if it is in `from` (a compare-and-set):
    /// `false` when it is not (another resumer was first, or it never was).
    async fn claim(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool, WorkflowStoreError>;

    /// The runs matching `query`, newest first.
    async fn list(&self, query: &WorkflowRunsQuery) -> Result<WorkflowRunList, WorkflowStoreError>;

    /// Deletes a run; `false` when there was none.
    async fn delete(&self, workflow_id: &str, run_id: &str) -> Result<bool, WorkflowStoreError>;

    /// Whether snapshots outlive the process: a durable store gets one at every step
    /// boundary (so a run can be continued after a crash), the in-memory one only when a run
    /// stops or ends.
    fn is_durable(&self) -> bool {
        true
    }
}

/// A shared workflow store.
pub type SharedWorkflowStore = Arc<dyn WorkflowStore>;

/// Workflow runs in this process's memory (the default): at most
/// [`InMemoryWorkflowStore::DEFAULT_CAPACITY`] runs, the oldest forgotten first.
///
/// Each run is kept as its snapshot's JSON text beside the fields runs are found by: a run's
/// JSON tree takes about ten times the memory of its text (every small object is a B-tree
/// node), and forgetting a run frees one string instead of a tree.
#[derive(Debug)]
pub struct InMemoryWorkflowStore {
    runs: Mutex<Runs>,
    capacity: usize,
    /// The length of the last snapshot's text: the next one is written into a buffer of
    /// about that size, not one grown four or five times.
    last_len: std::sync::atomic::AtomicUsize,
}

/// A run as the in-memory store keeps it. Cheap to clone: reads take a clone under the lock
/// and parse it after.
#[derive(Debug, Clone)]
struct Kept {
    resource_id: Option<String>,
    status: WorkflowStatus,
    created_at_ms: i64,
    updated_at_ms: i64,
    /// The snapshot, serialised (its status and times are the fields above).
    json: Arc<String>,
}

impl Kept {
    fn snapshot(&self) -> Result<WorkflowSnapshot, WorkflowStoreError> {
        let mut snapshot: WorkflowSnapshot =
            serde_json::from_str(&self.json).map_err(|e| WorkflowStoreError(Box::new(e)))?;
        snapshot.status = self.status;
        snapshot.created_at_ms = self.created_at_ms;
        snapshot.updated_at_ms = self.updated_at_ms;
        Ok(snapshot)
    }
}

#[derive(Debug, Default)]
struct Runs {
    by_key: HashMap<(String, String), Kept>,
    /// The greatest lease token seen per run (kept when the run is forgotten).
    fences: HashMap<(String, String), u64>,
    /// The runs in the order they were created, oldest first: the first to forget.
    created: std::collections::VecDeque<(String, String)>,
}

impl Default for InMemoryWorkflowStore {
    fn default() -> Self {
        Self {
            runs: Mutex::new(Runs::default()),
            capacity: Self::DEFAULT_CAPACITY,
            last_len: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl InMemoryWorkflowStore {
    /// How many runs the default store keeps.
    pub const DEFAULT_CAPACITY: usize = 10_000;

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        // Only plain data lives behind the lock; a panic elsewhere leaves it consistent.
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `snapshot` as its run's, making room (the oldest runs go) when full.
    fn put(&self, snapshot: &WorkflowSnapshot) -> Result<(), WorkflowStoreError> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut text = Vec::with_capacity(self.last_len.load(Relaxed) + 256);
        serde_json::to_writer(&mut text, snapshot).map_err(|e| WorkflowStoreError(Box::new(e)))?;
        self.last_len.store(text.len(), Relaxed);
        if text.capacity() - text.len() > text.len() / 4 {
            // A much smaller snapshot than the last one: kept without the slack.
            text.shrink_to_fit();
        }
        let json = Arc::new(String::from_utf8(text).map_err(|e| WorkflowStoreError(Box::new(e)))?);
        let mut evicted = Vec::new();

        let now = now_ms();
        let mut runs = self.lock();
        let key = key(&snapshot.workflow_id, &snapshot.run_id);
        if let Some(token) = snapshot.lease_token {
            runs.raise_fence(&key, token)?;
        }
        let created = match runs.by_key.get(&key) {
            Some(stored) => stored.created_at_ms,
            None => {
                // The oldest runs make room (a deleted one may still be in the queue).
                while runs.by_key.len() >= self.capacity {
                    let Some(oldest) = runs.created.pop_front() else {
                        break;
                    };
                    // A forgotten run's fence goes too: the map stays bounded.
                    runs.fences.remove(&oldest);
                    evicted.extend(runs.by_key.remove(&oldest));
                }
                runs.created.push_back(key.clone());
                now
            }
        };
        let kept = Kept {
            resource_id: snapshot.resource_id.clone(),
            status: snapshot.status,
            created_at_ms: created,
            updated_at_ms: now,
            json,
        };
        evicted.extend(runs.by_key.insert(key, kept));
        drop(runs);
        // Freed outside the lock.
        drop(evicted);
        Ok(())
    }
}

fn key(workflow_id: &str, run_id: &str) -> (String, String) {
    (workflow_id.to_owned(), run_id.to_owned())
}

impl Runs {
    /// Raises the fence of run `key` to `token`, or refuses when it is above.
    fn raise_fence(
        &mut self,
        key: &(String, String),
        token: u64,
    ) -> Result<(), WorkflowStoreError> {
        let current = self.fences.entry(key.clone()).or_insert(0);
        if *current > token {
            return Err(WorkflowStoreError::fenced(WorkflowFenced {
                workflow_id: key.0.clone(),
                run_id: key.1.clone(),
                token,
                current: *current,
            }));
        }
        *current = token;
        Ok(())
    }
}

#[async_trait::async_trait]
impl WorkflowStore for InMemoryWorkflowStore {
    async fn save(&self, snapshot: &WorkflowSnapshot) -> Result<(), WorkflowStoreError> {
        self.put(snapshot)
    }

    async fn fence(
        &self,
        workflow_id: &str,
        run_id: &str,
        token: u64,
    ) -> Result<(), WorkflowStoreError> {
        self.lock().raise_fence(&key(workflow_id, run_id), token)
    }

    async fn load(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowSnapshot>, WorkflowStoreError> {
        let kept = self.lock().by_key.get(&key(workflow_id, run_id)).cloned();
        kept.as_ref().map(Kept::snapshot).transpose()
    }

    async fn claim(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool, WorkflowStoreError> {
        let mut runs = self.lock();
        match runs.by_key.get_mut(&key(workflow_id, run_id)) {
            Some(run) if run.status == from => {
                run.status = to;
                run.updated_at_ms = now_ms();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn list(&self, query: &WorkflowRunsQuery) -> Result<WorkflowRunList, WorkflowStoreError> {
        let runs = self.lock();
        let mut matching: Vec<(&(String, String), &Kept)> = runs
            .by_key
            .iter()
            .filter(|((workflow_id, _), _)| {
                query.workflow_id.as_ref().is_none_or(|w| w == workflow_id)
            })
            .filter(|(_, s)| query.resource_id.is_none() || query.resource_id == s.resource_id)
            .filter(|(_, s)| query.status.is_none_or(|status| status == s.status))
            .collect();
        matching.sort_by(|((_, a_run), a), ((_, b_run), b)| {
            (b.created_at_ms, b_run).cmp(&(a.created_at_ms, a_run))
        });
        let size = query.page_size() as usize;
        let total = matching.len() as u64;
        let page: Vec<Kept> = matching
            .into_iter()
            .skip(query.page as usize * size)
            .take(size)
            .map(|(_, kept)| kept.clone())
            .collect();
        // Parsed after the lock is let go: a page of a thousand runs takes a while.
        drop(runs);
        let runs = page.iter().map(Kept::snapshot).collect::<Result<_, _>>()?;
        Ok(WorkflowRunList { runs, total })
    }

    async fn delete(&self, workflow_id: &str, run_id: &str) -> Result<bool, WorkflowStoreError> {
        let mut runs = self.lock();
        let key = key(workflow_id, run_id);
        runs.created.retain(|k| *k != key);
        Ok(runs.by_key.remove(&key).is_some())
    }

    fn is_durable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn snapshot(run_id: &str, status: WorkflowStatus) -> WorkflowSnapshot {
        let mut step = StepResult::begun(json!({"x": 0.1 + 0.2, "tiny": 5e-324}), 7);
        step.output =
            Some(json!({"big": u64::MAX, "text": "naïve \u{1F426}", "list": [1, null]}).into());
        step.ended_at = Some(9);
        WorkflowSnapshot {
            workflow_id: "w".into(),
            run_id: run_id.into(),
            resource_id: Some("alice".into()),
            status,
            input: json!({"v": -1.5e300}).into(),
            steps: BTreeMap::from([("s1".to_owned(), Box::new(step))]),
            state: json!({"n": 3}).into(),
            position: 1,
            entry_input: json!({"v": 2}).into(),
            step_execution_path: vec!["s1".into()],
            result: None,
            error: None,
            request_context: BTreeMap::new(),
            created_at_ms: 0,
            updated_at_ms: 0,
            lease_token: None,
        }
    }

    #[tokio::test]
    async fn the_in_memory_store_gives_back_what_it_was_given() {
        let store = InMemoryWorkflowStore::new();
        let saved = snapshot("r1", WorkflowStatus::Suspended);
        store.save(&saved).await.unwrap();
        let loaded = store.load("w", "r1").await.unwrap().unwrap();
        assert!(loaded.created_at_ms > 0 && loaded.updated_at_ms >= loaded.created_at_ms);
        let times = (loaded.created_at_ms, loaded.updated_at_ms);
        assert_eq!(
            WorkflowSnapshot {
                created_at_ms: 0,
                updated_at_ms: 0,
                ..loaded
            },
            saved,
            "every value, floats to the last bit, comes back"
        );
        assert!(store.load("w", "r2").await.unwrap().is_none());

        // A claim moves the status that loads and lists see; a later save keeps the creation.
        let claim = || {
            store.claim(
                "w",
                "r1",
                WorkflowStatus::Suspended,
                WorkflowStatus::Running,
            )
        };
        let claims = (claim().await.unwrap(), claim().await.unwrap());
        assert_eq!(claims, (true, false), "claimed once");
        let loaded = store.load("w", "r1").await.unwrap().unwrap();
        assert_eq!(loaded.status, WorkflowStatus::Running);
        let running = WorkflowRunsQuery {
            status: Some(WorkflowStatus::Running),
            ..Default::default()
        };
        assert_eq!(store.list(&running).await.unwrap().total, 1);
        store
            .save(&snapshot("r1", WorkflowStatus::Success))
            .await
            .unwrap();
        let loaded = store.load("w", "r1").await.unwrap().unwrap();
        assert_eq!(
            (loaded.status, loaded.created_at_ms),
            (WorkflowStatus::Success, times.0)
        );
        assert_eq!(store.list(&running).await.unwrap().total, 0);
    }

    #[tokio::test]
    async fn the_in_memory_store_forgets_its_oldest_runs_first_when_full() {
        let store = InMemoryWorkflowStore {
            capacity: 2,
            ..InMemoryWorkflowStore::default()
        };
        for run in ["r1", "r2", "r3"] {
            store
                .save(&snapshot(run, WorkflowStatus::Success))
                .await
                .unwrap();
        }
        // Saving a kept run again makes no room.
        store
            .save(&snapshot("r2", WorkflowStatus::Success))
            .await
            .unwrap();
        assert!(store.load("w", "r1").await.unwrap().is_none());
        let listed = store.list(&WorkflowRunsQuery::default()).await.unwrap();
        let mut ids: Vec<String> = listed.runs.into_iter().map(|s| s.run_id).collect();
        ids.sort();
        assert_eq!((ids, listed.total), (vec!["r2".into(), "r3".into()], 2));
        assert!(store.delete("w", "r2").await.unwrap());
        assert!(!store.delete("w", "r2").await.unwrap());
    }
}
