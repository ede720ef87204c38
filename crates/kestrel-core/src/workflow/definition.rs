//! A committed workflow ([`Workflow`]): its id, schemas, graph and store, shared by its runs;
//! the same workflow given another store, cluster or set of live runs.

use std::sync::Arc;

use serde_json::Value;

use super::entry::Entry;
use super::step::Step;
use crate::store::SharedWorkflowStore;

/// How failed steps are retried: `attempts` more times, `delay` apart.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Retry {
    pub attempts: u32,
    pub delay: std::time::Duration,
}

/// A committed workflow: cheap to clone, shared by its runs.
#[derive(Clone)]
pub struct Workflow {
    pub(crate) inner: Arc<WorkflowInner>,
}

pub(crate) struct WorkflowInner {
    pub id: Arc<str>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub entries: Vec<Entry>,
    pub store: SharedWorkflowStore,
    /// The builder was given the store (a `Kestrel` instance keeps it).
    pub own_store: bool,
    /// How failed steps are retried, unless a step says otherwise.
    pub retry: Retry,
    /// The input schema, compiled once.
    pub input_validator: Arc<jsonschema::Validator>,
    /// The runs going on in this process.
    pub live: Arc<super::live::LiveRuns>,
    /// The cluster of the instance it is registered on, if any: runs hold leases in it, and
    /// requests about them reach the instance driving them through it.
    pub cluster: Option<Arc<crate::cluster::member::ClusterRuntime>>,
    /// Which snapshots the store keeps (none: all).
    pub persist: Option<Arc<super::persist::PersistFn>>,
    /// The tracer of the instance it is registered on, when it traces.
    pub tracer: Option<crate::trace::Tracer>,
    /// The scorers it runs on its successful runs.
    pub scorers: Vec<crate::eval::LiveScorer>,
    /// Where its live scores go: the instance's score store and counts, once registered.
    pub scoring: Option<WorkflowScoring>,
}

/// Where a registered workflow's live scores go.
#[derive(Clone)]
pub(crate) struct WorkflowScoring {
    pub store: crate::store::SharedScoreStore,
    pub stats: Arc<crate::eval::ScoringStats>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("id", &self.inner.id)
            .field("entries", &self.inner.entries.len())
            .finish_non_exhaustive()
    }
}

impl Workflow {
    /// The same workflow keeping its runs in `store` (a `Kestrel` instance gives its
    /// workflows its store this way, unless their builder was given one).
    pub fn with_store(&self, store: SharedWorkflowStore) -> Workflow {
        self.rebuilt(store, self.inner.cluster.clone())
    }

    /// The same workflow, its runs leased in `cluster` (a `Kestrel` instance in a cluster
    /// gives its workflows its cluster this way).
    pub(crate) fn with_cluster(
        &self,
        cluster: Option<Arc<crate::cluster::member::ClusterRuntime>>,
    ) -> Workflow {
        if let Some(cluster) = &cluster {
            // Another instance's cancel of one of its runs reaches it here.
            cluster.register_workflow(&self.inner.id, self.inner.live.clone());
        }
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), cluster);
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
        }
        workflow
    }

    /// The same workflow, its runs going on in this process kept in `live` (shared by several
    /// builds of one workflow: an agent's networks).
    /// The same workflow, its runs traced by `tracer` (a `Kestrel` instance that traces
    /// gives its workflows its tracer this way).
    pub(crate) fn with_tracer(&self, tracer: Option<crate::trace::Tracer>) -> Workflow {
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), self.inner.cluster.clone());
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
            inner.tracer = tracer;
        }
        workflow
    }

    /// The same workflow, its live scores kept in `store` and counted in `stats` (a `Kestrel`
    /// instance gives its workflows its score store this way).
    pub(crate) fn with_scoring(
        &self,
        store: crate::store::SharedScoreStore,
        stats: Arc<crate::eval::ScoringStats>,
    ) -> Workflow {
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), self.inner.cluster.clone());
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
            inner.scoring = Some(WorkflowScoring { store, stats });
        }
        workflow
    }

    /// Whether its runs are traced (it is registered on an instance that traces).
    pub fn is_traced(&self) -> bool {
        self.inner.tracer.is_some()
    }

    /// The scorers it runs on its successful runs.
    pub fn scorers(&self) -> &[crate::eval::LiveScorer] {
        &self.inner.scorers
    }

    pub(crate) fn with_live(&self, live: Arc<super::live::LiveRuns>) -> Workflow {
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), self.inner.cluster.clone());
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
            inner.live = live;
        }
        workflow
    }

    fn rebuilt(
        &self,
        store: SharedWorkflowStore,
        cluster: Option<Arc<crate::cluster::member::ClusterRuntime>>,
    ) -> Workflow {
        let inner = &self.inner;
        Workflow {
            inner: Arc::new(WorkflowInner {
                id: Arc::clone(&inner.id),
                description: inner.description.clone(),
                input_schema: inner.input_schema.clone(),
                output_schema: inner.output_schema.clone(),
                entries: inner.entries.clone(),
                store,
                own_store: true,
                retry: inner.retry,
                input_validator: Arc::clone(&inner.input_validator),
                live: Arc::clone(&inner.live),
                cluster,
                persist: inner.persist.clone(),
                tracer: inner.tracer.clone(),
                scorers: inner.scorers.clone(),
                scoring: inner.scoring.clone(),
            }),
        }
    }

    /// Where the workflow's runs are kept.
    pub fn store(&self) -> &SharedWorkflowStore {
        &self.inner.store
    }

    /// Whether its builder was given a store ([`WorkflowBuilder::store`]).
    pub fn has_own_store(&self) -> bool {
        self.inner.own_store
    }

    /// The step `id`, wherever it is in the graph.
    pub fn step(&self, id: &str) -> Option<&Arc<dyn Step>> {
        self.inner
            .entries
            .iter()
            .flat_map(Entry::steps)
            .find(|step| step.id() == id)
    }

    /// The workflow's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What it does.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The JSON schema of a run's input.
    pub fn input_schema(&self) -> &Value {
        &self.inner.input_schema
    }

    /// The JSON schema of a run's output.
    pub fn output_schema(&self) -> &Value {
        &self.inner.output_schema
    }
}
