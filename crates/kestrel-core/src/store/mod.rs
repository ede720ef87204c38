//! The durable ports: where an instance keeps what must outlive a run's task.
//!
//! One concept a module, one trait each:
//!
//! - [`RunStore`] (`runs`): stopped agent runs (approvals, suspended tools, paused runs) as
//!   versioned snapshots a decision compares and sets;
//! - [`WorkflowStore`] (`workflows`): workflow and network runs, as snapshots a resume claims;
//! - [`MessageQueue`] (`queue`): messages waiting for a thread's next runs;
//! - [`AgentVersionStore`] (`versions`): which stored version of an agent a run uses;
//! - [`ScoreStore`] (`scores`): scorers' results, live and from experiments;
//! - [`DatasetStore`] (`datasets`): datasets (items in versions), experiments over them and
//!   their results item by item.
//!
//! An instance holds them together as [`Stores`], given once
//! ([`KestrelBuilder::storage`](crate::kestrel::KestrelBuilder::storage)), and every agent,
//! workflow and network of the instance finds them there. [`Stores::in_memory`] is the
//! default: runs and workflow runs in this process's memory, no message queue and no stored
//! versions. `kestrel-storage` implements every port on SQLite, PostgreSQL and in memory, and
//! turns any of its backends into `Stores` ([`IntoStores`]); each backend passes the suites of
//! `store::testing` (feature `testing`).
//!
//! ```
//! use kestrel_core::kestrel::Kestrel;
//! use kestrel_core::store::Stores;
//!
//! // What `Kestrel::builder()` uses when it is given no storage.
//! let kestrel = Kestrel::builder().storage(Stores::in_memory()).build()?;
//! assert!(!kestrel.stores().runs.is_durable());
//! # Ok::<(), kestrel_core::kestrel::KestrelError>(())
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

mod datasets;
mod queue;
mod runs;
mod scores;
mod versions;
mod workflows;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use datasets::{
    DEFAULT_DATASETS_PAGE, DatasetItemRecord, DatasetPage, DatasetQuery, DatasetRecord,
    DatasetStore, DatasetStoreError, ExperimentRecord, ExperimentResultRecord, ExperimentStatus,
    InMemoryDatasetStore, ItemChange, MAX_DATASETS_PAGE, SharedDatasetStore, check_item_changes,
    items_at,
};
pub use queue::{MessageQueue, QueueError, QueuedMessage, QueuedThread, SharedMessageQueue};
pub use runs::{
    DEFAULT_SUSPENDED_PAGE, InMemoryRunStore, MAX_SUSPENDED_PAGE, RunPhase, RunStore,
    RunStoreError, SharedRunStore, StoredRun, SuspendedRunsPage, SuspendedRunsQuery,
};
pub use scores::{
    DEFAULT_IN_MEMORY_SCORES, DEFAULT_SCORES_PAGE, InMemoryScoreStore,
    MAX_IN_MEMORY_PENDING_SCORES, MAX_SCORES_PAGE, PendingScore, ScorePage, ScoreQuery,
    ScoreRecord, ScoreSource, ScoreStore, ScoreStoreError, SharedScoreStore,
};
pub use versions::{AgentVersionStore, SharedAgentVersions};
pub use workflows::{
    InMemoryWorkflowStore, SharedWorkflowStore, StepResult, StepResults, WorkflowFenced,
    WorkflowRunList, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStore, WorkflowStoreError,
};

/// The stores of an instance, given once and shared by its agents, workflows and networks.
/// Cheap to clone.
#[derive(Clone)]
#[non_exhaustive]
pub struct Stores {
    /// Where stopped agent runs are saved.
    pub runs: SharedRunStore,
    /// Where workflow runs (and agents' network runs) are kept.
    pub workflows: SharedWorkflowStore,
    /// Where messages queued for a thread's next runs wait; `None`: agents cannot queue.
    pub queue: Option<SharedMessageQueue>,
    /// Where agents' versions are kept; `None`: every run uses its agent's own definition.
    pub versions: Option<SharedAgentVersions>,
    /// Where traces are kept when the instance traces; `None`: in memory.
    pub spans: Option<crate::trace::SharedSpanStore>,
    /// Where scores are kept (live scoring, experiments): in memory unless given
    /// ([`Stores::with_scores`]).
    pub scores: SharedScoreStore,
    /// Where datasets, experiments and their results are kept: in memory unless given
    /// ([`Stores::with_datasets`]).
    pub datasets: SharedDatasetStore,
    /// The backend the ports came from, as the crates above core know it (see
    /// [`Stores::backend`]).
    backends: Backends,
}

/// Values kept beside the ports, one per type.
type Backends = Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>;

impl Stores {
    /// Stores in this process's memory: runs and workflow runs last as long as the process;
    /// no message queue and no stored versions.
    pub fn in_memory() -> Self {
        Self {
            runs: Arc::new(InMemoryRunStore::new()),
            workflows: Arc::new(InMemoryWorkflowStore::new()),
            queue: None,
            versions: None,
            spans: None,
            scores: Arc::new(InMemoryScoreStore::new()),
            datasets: Arc::new(InMemoryDatasetStore::new()),
            backends: Backends::default(),
        }
    }

    /// Every port on one store (a storage backend that implements them all).
    pub fn on<S>(store: Arc<S>) -> Self
    where
        S: RunStore + WorkflowStore + MessageQueue + AgentVersionStore + 'static,
    {
        Self {
            runs: Arc::clone(&store) as SharedRunStore,
            workflows: Arc::clone(&store) as SharedWorkflowStore,
            queue: Some(Arc::clone(&store) as SharedMessageQueue),
            versions: Some(store as SharedAgentVersions),
            spans: None,
            scores: Arc::new(InMemoryScoreStore::new()),
            datasets: Arc::new(InMemoryDatasetStore::new()),
            backends: Backends::default(),
        }
    }

    /// These stores with `backend` kept beside them, found again by its type with
    /// [`Stores::backend`]. A storage crate keeps its own handle on the store here, so what
    /// needs more than the ports (a memory's threads and messages) can use the instance's
    /// store instead of being given one of its own: `kestrel-storage` keeps an
    /// `Arc<dyn Storage>`. One value per type; a second replaces the first.
    pub fn with_backend<T: Any + Send + Sync>(mut self, backend: T) -> Self {
        Arc::make_mut(&mut self.backends).insert(TypeId::of::<T>(), Arc::new(backend));
        self
    }

    /// The value of type `T` kept with [`Stores::with_backend`], if any.
    ///
    /// ```
    /// use kestrel_core::store::Stores;
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Pool(&'static str);
    ///
    /// let stores = Stores::in_memory().with_backend(Pool("main"));
    /// assert_eq!(stores.backend::<Pool>(), Some(&Pool("main")));
    /// assert_eq!(Stores::in_memory().backend::<Pool>(), None);
    /// ```
    pub fn backend<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.backends
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// These stores with stopped runs saved in `runs` instead.
    pub fn with_runs(mut self, runs: SharedRunStore) -> Self {
        self.runs = runs;
        self
    }

    /// These stores with workflow runs kept in `workflows` instead.
    pub fn with_workflows(mut self, workflows: SharedWorkflowStore) -> Self {
        self.workflows = workflows;
        self
    }

    /// These stores with queued messages kept in `queue` instead.
    pub fn with_queue(mut self, queue: SharedMessageQueue) -> Self {
        self.queue = Some(queue);
        self
    }

    /// These stores with traces kept in `spans` instead.
    pub fn with_spans(mut self, spans: crate::trace::SharedSpanStore) -> Self {
        self.spans = Some(spans);
        self
    }

    /// These stores with scores kept in `scores` instead.
    pub fn with_scores(mut self, scores: SharedScoreStore) -> Self {
        self.scores = scores;
        self
    }

    /// These stores with datasets and experiments kept in `datasets` instead.
    pub fn with_datasets(mut self, datasets: SharedDatasetStore) -> Self {
        self.datasets = datasets;
        self
    }

    /// These stores with agents' versions read from `versions` instead.
    pub fn with_versions(mut self, versions: SharedAgentVersions) -> Self {
        self.versions = Some(versions);
        self
    }
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("runs", &self.runs)
            .field("workflows", &self.workflows)
            .field("queue", &self.queue.is_some())
            .field("versions", &self.versions.is_some())
            .field("spans", &self.spans.is_some())
            .field("backends", &self.backends.len())
            .finish()
    }
}

impl Default for Stores {
    fn default() -> Self {
        Self::in_memory()
    }
}

/// What [`KestrelBuilder::storage`](crate::kestrel::KestrelBuilder::storage) takes: [`Stores`]
/// themselves, or a storage backend that implements every port (`kestrel-storage`'s
/// `SqliteStorage`, `PostgresStorage`, `InMemoryStorage`, or an `Arc<dyn Storage>`).
pub trait IntoStores {
    /// The stores.
    fn into_stores(self) -> Stores;
}

impl IntoStores for Stores {
    fn into_stores(self) -> Stores {
        self
    }
}

/// A store that implements every port and can hand them out from a shared pointer, so an
/// `Arc` of it (of a trait object too) is [`IntoStores`].
pub trait DurableStore: RunStore + WorkflowStore + MessageQueue + AgentVersionStore {
    /// Every port on this store. Implementations write `Stores::on(self)`.
    fn stores(self: Arc<Self>) -> Stores;
}

impl<S: DurableStore + ?Sized> IntoStores for Arc<S> {
    fn into_stores(self) -> Stores {
        self.stores()
    }
}
