//! The [`Kestrel`] instance: the registry of a deployment's agents (Mastra's `new Mastra({...})`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::Agent;
use crate::cluster::Cluster;
use crate::cluster::member::ClusterRuntime;
use crate::control::recovery;
use crate::memory::{AgentMemory, IntoAgentMemory};
use crate::model::ModelRegistry;
use crate::pubsub::SharedPubSub;
use crate::runtime::Runtime;
use crate::runtime::registry::{RunRegistry, ThreadKey};
use crate::store::{IntoStores, SharedRunStore, SharedWorkflowStore, Stores};
use crate::tool::{SharedTool, Tool};
use crate::workflow::Workflow;

mod stored;

/// Why a [`Kestrel`] instance could not be built or queried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KestrelError {
    /// Two agents share an id.
    #[error("duplicate agent id {id:?}: every registered agent needs a unique id")]
    DuplicateAgent {
        /// The id.
        id: String,
    },
    /// A [`KestrelBuilder::cluster`] instance reads its inbox on a task, so it must be
    /// built inside a tokio runtime.
    #[error("an instance in a cluster must be built inside a tokio runtime")]
    NoRuntime,
    /// A cluster instance id must have 1 to 200 bytes and no `/` (lease holders are
    /// `<instance>/<run>`).
    #[error("invalid cluster instance id {id:?}: it must have 1 to 200 bytes and no '/'")]
    InvalidInstanceId {
        /// The id given.
        id: String,
    },
    /// Two workflows share an id.
    #[error("duplicate workflow id {id:?}: every registered workflow needs a unique id")]
    DuplicateWorkflow {
        /// The id.
        id: String,
    },
    /// No workflow has this id.
    #[error("workflow {id:?} not found; registered workflows: {}", known.join(", "))]
    WorkflowNotFound {
        /// The id asked for.
        id: String,
        /// The registered ids.
        known: Vec<String>,
    },
    /// No agent has this id.
    #[error("agent {id:?} not found; registered agents: {}", known.join(", "))]
    AgentNotFound {
        /// The id asked for.
        id: String,
        /// The registered ids.
        known: Vec<String>,
    },
    /// Two tools given to [`KestrelBuilder::tool`] share an id.
    #[error("duplicate tool id {id:?}: every tool of the instance needs a unique id")]
    DuplicateTool {
        /// The id.
        id: String,
    },
    /// A memory cannot use the instance's storage ([`AgentMemory::attach`]): it already
    /// uses another instance's.
    #[error(
        "{}: {message}",
        agent.as_ref().map_or_else(|| "the instance's memory".to_owned(), |id| format!("the memory of agent {id:?}"))
    )]
    Memory {
        /// The agent whose memory it is; `None`: the instance's own ([`KestrelBuilder::memory`]).
        agent: Option<String>,
        /// Why.
        message: String,
    },
    /// An agent defined in the storage could not be read or built from its version.
    #[error("stored agent {id:?} cannot be used: {message}")]
    StoredAgent {
        /// The agent.
        id: String,
        /// Why.
        message: String,
    },
}

/// Registers agents and workflows and finds them by id. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Kestrel {
    inner: Arc<KestrelInner>,
}

#[derive(Debug)]
struct KestrelInner {
    agents: Arc<BTreeMap<String, Agent>>,
    /// The tools agents defined in the storage may name, by id.
    tools: BTreeMap<String, SharedTool>,
    workflows: BTreeMap<String, Workflow>,
    /// Shared by every agent of the instance.
    runtime: Arc<Runtime>,
    /// In a cluster: the task that continues the runs of instances that died.
    sweep: Option<tokio::task::JoinHandle<()>>,
    /// In a cluster: the same for workflow runs.
    workflow_sweep: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for KestrelInner {
    fn drop(&mut self) {
        for sweep in [self.sweep.take(), self.workflow_sweep.take()]
            .into_iter()
            .flatten()
        {
            sweep.abort();
        }
    }
}

impl Kestrel {
    /// Starts building an instance.
    pub fn builder() -> KestrelBuilder {
        KestrelBuilder::default()
    }

    /// The workflow with this id.
    pub fn workflow(&self, id: &str) -> Result<&Workflow, KestrelError> {
        self.inner
            .workflows
            .get(id)
            .ok_or_else(|| KestrelError::WorkflowNotFound {
                id: id.to_string(),
                known: self.inner.workflows.keys().cloned().collect(),
            })
    }

    /// Every registered workflow, by id.
    pub fn workflows(&self) -> impl Iterator<Item = &Workflow> {
        self.inner.workflows.values()
    }

    /// The tracer of the instance's runs, when it traces ([`KestrelBuilder::tracing`]).
    pub fn tracer(&self) -> Option<&crate::trace::Tracer> {
        self.inner.runtime.tracer.as_ref()
    }

    /// Where the instance's traces are kept, when it traces.
    pub fn span_store(&self) -> Option<&crate::trace::SharedSpanStore> {
        self.tracer().and_then(crate::trace::Tracer::store)
    }

    /// The agent with this id.
    pub fn agent(&self, id: &str) -> Result<&Agent, KestrelError> {
        self.inner
            .agents
            .get(id)
            .ok_or_else(|| KestrelError::AgentNotFound {
                id: id.to_string(),
                known: self.inner.agents.keys().cloned().collect(),
            })
    }

    /// Every registered agent, ordered by id.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.inner.agents.values()
    }

    /// The model registry the instance's agents resolve dynamic model strings with (unless
    /// an agent's builder was given its own).
    pub fn models(&self) -> &ModelRegistry {
        &self.inner.runtime.models
    }

    /// The memory the instance was given ([`KestrelBuilder::memory`]): the server's memory
    /// routes serve it.
    pub fn memory(&self) -> Option<&Arc<dyn AgentMemory>> {
        self.inner.runtime.memory.as_ref()
    }

    /// Where the instance saves stopped runs: its storage's run store, or the override
    /// given to [`KestrelBuilder::run_store`].
    pub fn run_store(&self) -> &SharedRunStore {
        &self.inner.runtime.stores.runs
    }
    /// Live scoring's counts (per agent and scorer: runs eligible, sampled, scored,
    /// failed) and the scorings still running.
    pub fn scoring(&self) -> &Arc<crate::eval::ScoringStats> {
        &self.inner.runtime.scoring
    }

    /// The instance's stores ([`KestrelBuilder::storage`], with the builder's overrides).
    pub fn stores(&self) -> &Stores {
        &self.inner.runtime.stores
    }

    /// Aborts a run of any of the instance's agents; `false` when no such run is in progress
    /// in this process.
    pub fn abort_run(&self, run_id: &str) -> bool {
        self.inner.runtime.runs.abort_run(run_id)
    }

    /// In a cluster: looks now for runs left `running` (or waiting for a sub-agent) by an
    /// instance that died, whose lease ran out, and continues them here from their last
    /// snapshot; returns the ids of the runs taken over. The instance does this every
    /// [`Cluster::sweep_interval`] by itself; outside a cluster it finds nothing.
    pub async fn recover_runs(&self) -> Vec<String> {
        recovery::recover_once(&self.inner.agents).await
    }

    /// Restarts the workflow runs left `running` or sleeping by a process that died
    /// ([`Workflow::restart_active_runs`] for each registered workflow), and ends the agents'
    /// network runs left so ([`Agent::recover_network_runs`]; their workflow is
    /// `agent-network-<agent id>`): call it when a process starts (`kestrel dev` does). In a cluster, runs another live instance drives
    /// are left to it, and the instance does this every [`Cluster::sweep_interval`] by
    /// itself. Returns `(workflow id, run id)` of each run restarted; a workflow whose store
    /// fails is logged and skipped.
    pub async fn recover_workflow_runs(&self) -> Vec<(String, String)> {
        let mut recovered = recover_workflows(self.inner.workflows.values()).await;
        recovered.extend(recover_networks(self.inner.agents.values()).await);
        recovered
    }

    /// Starts draining the message queues a previous process left (messages queued with
    /// [`ThreadHandle::queue`](crate::agent::ThreadHandle::queue) that no run took yet): call
    /// it when a process starts (`kestrel dev` does). Each thread's messages run in order, in
    /// the background, on the agent that queued them. Returns how many threads have a queue;
    /// without a storage that keeps queues, none.
    pub async fn drain_message_queues(&self) -> usize {
        let Some(queue) = self.inner.runtime.stores.queue.clone() else {
            return 0;
        };
        let threads = match queue.threads().await {
            Ok(threads) => threads,
            Err(e) => {
                tracing::warn!(error = %e, "the message queues could not be read");
                return 0;
            }
        };
        let mut draining = 0;
        for thread in threads {
            match self.inner.agents.get(&thread.agent_id) {
                Some(agent) => {
                    agent.drain(std::sync::Arc::clone(&queue), thread.scope);
                    draining += 1;
                }
                None => tracing::warn!(
                    agent = %thread.agent_id,
                    thread = %thread.scope.thread_id,
                    "messages are queued for an agent this instance does not have; left queued"
                ),
            }
        }
        draining
    }

    /// Scores the live scorings a previous process sampled but did not store (it stopped
    /// first): call it when a process starts (`kestrel dev` does). They run in the background,
    /// one after another, on the scorers of the instance's agents and workflows, and their
    /// scores take the ids they would have had ([`PendingScore::id_for`]), so one scored
    /// twice is stored once. One whose agent, workflow or scorer is not here any more, or
    /// that was started [`MAX_SCORING_ATTEMPTS`](crate::eval::MAX_SCORING_ATTEMPTS) times
    /// without ending, is stored as a failure saying so. Returns how many it found at first
    /// look (at most 64; the rest follow them); [`ScoringStats::idle`](crate::eval::ScoringStats::idle)
    /// waits for them. In a cluster, scorings another live instance is running may be scored
    /// twice: one score is kept.
    ///
    /// [`PendingScore::id_for`]: crate::store::PendingScore::id_for
    pub async fn resume_pending_scores(&self) -> usize {
        let agents = Arc::clone(&self.inner.agents);
        let workflows: BTreeMap<String, Vec<crate::eval::LiveScorer>> = self
            .inner
            .workflows
            .iter()
            .filter(|(_, w)| !w.scorers().is_empty())
            .map(|(id, w)| (id.clone(), w.scorers().to_vec()))
            .collect();
        let find = move |pending: &crate::store::PendingScore| {
            let scorers = match pending.entity_type.as_str() {
                "AGENT" => agents.get(&pending.entity_id)?.scorers(),
                "WORKFLOW" => workflows.get(&pending.entity_id)?.as_slice(),
                _ => return None,
            };
            scorers
                .iter()
                .find(|live| live.scorer.id() == pending.scorer_id)
                .map(|live| Arc::clone(&live.scorer))
        };
        let runtime = &self.inner.runtime;
        // Those made up to now, this millisecond included.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        crate::eval::live::resume_pending(
            now.saturating_add(1),
            Box::new(find),
            Arc::clone(&runtime.stores.scores),
            Arc::clone(&runtime.scoring),
        )
        .await
    }

    /// This instance's id in its cluster, if it is in one.
    pub fn instance_id(&self) -> Option<&str> {
        self.inner
            .runtime
            .runs
            .cluster
            .as_ref()
            .map(|c| c.instance())
    }

    /// How many runs of the instance's agents and workflows are in progress in this process
    /// (sub-agents' and background tasks' runs included).
    pub fn runs_in_progress(&self) -> usize {
        let workflows: usize = self.workflows().map(Workflow::runs_in_progress).sum();
        self.inner.runtime.runs.len() + workflows
    }

    /// Aborts every run in progress on a thread (running, or waiting for the thread), whatever
    /// agent runs it; returns how many.
    pub fn abort_thread(&self, resource_id: &str, thread_id: &str) -> usize {
        self.inner.runtime.runs.abort_thread(&ThreadKey {
            resource_id: resource_id.to_owned(),
            thread_id: thread_id.to_owned(),
        })
    }
}

/// Builds a [`Kestrel`] instance.
#[derive(Default)]
pub struct KestrelBuilder {
    agents: Vec<Agent>,
    tools: Vec<SharedTool>,
    workflows: Vec<Workflow>,
    workflow_store: Option<SharedWorkflowStore>,
    models: Option<ModelRegistry>,
    run_store: Option<SharedRunStore>,
    storage: Option<Stores>,
    memory: Option<Arc<dyn AgentMemory>>,
    pubsub: Option<SharedPubSub>,
    background_concurrency: Option<usize>,
    cluster: Option<Cluster>,
    versions: crate::version::Versions,
    tracing: Option<crate::trace::TracingConfig>,
    span_store: Option<crate::trace::SharedSpanStore>,
    span_sinks: Vec<Arc<dyn crate::trace::SpanSink>>,
}

impl KestrelBuilder {
    /// Traces the instance's runs (see [`crate::trace`]): every agent run, model call and
    /// tool call a span, kept in the span store ([`KestrelBuilder::span_store`], else in
    /// memory, bounded) and read back through [`Kestrel::span_store`].
    pub fn tracing(mut self, config: crate::trace::TracingConfig) -> Self {
        self.tracing = Some(config);
        self
    }

    /// Keeps the traces in `store` (with [`KestrelBuilder::tracing`]) instead of the
    /// storage's span store ([`Stores::spans`]) or memory.
    pub fn span_store(mut self, store: crate::trace::SharedSpanStore) -> Self {
        self.span_store = Some(store);
        self
    }

    /// Hands every finished span to `sink` as well (with [`KestrelBuilder::tracing`]): an
    /// exporter, such as `kestrel-otlp`'s. Sinks are called in batches, off the runs.
    pub fn span_sink(mut self, sink: Arc<dyn crate::trace::SpanSink>) -> Self {
        self.span_sinks.push(sink);
        self
    }

    /// The versions the instance's runs use unless a run chooses
    /// ([`RunOptions::versions`](crate::agent::RunOptions::versions)): Mastra's
    /// `new Mastra({versions})`. Agents it does not name use their published version.
    pub fn versions(mut self, versions: crate::version::Versions) -> Self {
        self.versions = versions;
        self
    }

    /// Registers an agent.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }

    /// Registers a tool that agents defined in the storage may name by id
    /// ([`Kestrel::find_agent`]). Agents written in code are given their tools by their
    /// builders.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Registers shared tools, as [`KestrelBuilder::tool`].
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Registers a workflow. Unless its builder was given a store, its runs are kept in the
    /// instance's ([`KestrelBuilder::storage`]).
    pub fn workflow(mut self, workflow: Workflow) -> Self {
        self.workflows.push(workflow);
        self
    }

    /// Keeps the runs of the registered workflows and of the agents' networks here, over the
    /// instance's storage: an override, usually not needed.
    pub fn workflow_store(mut self, store: SharedWorkflowStore) -> Self {
        self.workflow_store = Some(store);
        self
    }

    /// Uses this model registry (default: [`ModelRegistry::from_env`]).
    pub fn models(mut self, models: ModelRegistry) -> Self {
        self.models = Some(models);
        self
    }

    /// Saves the stopped runs of every registered agent here (unless an agent's builder was
    /// given its own store), over the instance's storage: an override, usually not needed.
    pub fn run_store(mut self, store: SharedRunStore) -> Self {
        self.run_store = Some(store);
        self
    }

    /// The instance's storage, given once (Mastra's `new Mastra({ storage })`): its agents'
    /// stopped runs, its workflows' and networks' runs, queued messages and agents' versions
    /// are kept there. With a durable storage (`kestrel-storage`'s SQLite or PostgreSQL) a
    /// run that waits for an approval survives a restart: a new instance on the same
    /// database continues it. Default: [`Stores::in_memory`].
    ///
    /// ```
    /// use kestrel_core::kestrel::Kestrel;
    /// use kestrel_core::store::{InMemoryRunStore, Stores};
    /// use std::sync::Arc;
    ///
    /// let stores = Stores::in_memory().with_runs(Arc::new(InMemoryRunStore::new()));
    /// let kestrel = Kestrel::builder().storage(stores).build()?;
    /// # Ok::<(), kestrel_core::kestrel::KestrelError>(())
    /// ```
    pub fn storage(mut self, storage: impl IntoStores) -> Self {
        self.storage = Some(storage.into_stores());
        self
    }

    /// The instance's memory: the server's memory routes serve it. Agents remember only with
    /// the memory their own builder was given (usually this one).
    pub fn memory(mut self, memory: impl IntoAgentMemory) -> Self {
        self.memory = Some(memory.into_agent_memory());
        self
    }

    /// How many background tasks (background sub-agents) run at once across the instance's
    /// agents (default [`crate::agent::background::DEFAULT_BACKGROUND_CONCURRENCY`]); more
    /// queue until one ends.
    pub fn background_concurrency(mut self, limit: usize) -> Self {
        self.background_concurrency = Some(limit);
        self
    }

    /// Carries thread events through this pub/sub (default: in-process).
    pub fn pubsub(mut self, pubsub: SharedPubSub) -> Self {
        self.pubsub = Some(pubsub);
        self
    }

    /// Shares this instance's runs with the other instances of `cluster` (same store, same
    /// leases and bus; see [`crate::cluster`]). Give the instances one shared pub/sub too
    /// ([`KestrelBuilder::pubsub`]), so thread subscribers see every instance's runs, and a
    /// durable store, so another instance can continue a run.
    pub fn cluster(mut self, cluster: Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Checks ids are unique and builds the instance.
    pub fn build(self) -> Result<Kestrel, KestrelError> {
        let mut registry = match self.pubsub {
            Some(pubsub) => RunRegistry::new(pubsub),
            None => RunRegistry::default(),
        };
        if let Some(limit) = self.background_concurrency {
            registry.background = Arc::new(tokio::sync::Semaphore::new(limit.max(1)));
        }
        let registry = match self.cluster {
            Some(cluster) => {
                let id = cluster.id();
                if id.is_empty() || id.len() > 200 || id.contains('/') {
                    return Err(KestrelError::InvalidInstanceId { id: id.to_owned() });
                }
                let handle =
                    tokio::runtime::Handle::try_current().map_err(|_| KestrelError::NoRuntime)?;
                Arc::new_cyclic(|weak: &std::sync::Weak<RunRegistry>| {
                    let live: std::sync::Weak<dyn crate::runtime::registry::LiveRuns> =
                        weak.clone();
                    registry.cluster = Some(ClusterRuntime::start(cluster, live, &handle));
                    registry
                })
            }
            None => Arc::new(registry),
        };
        // One runtime for every agent (and every sub-agent they delegate to): the store, the
        // runs in progress, the leases, the pub/sub and the background limit.
        // The storage, then the builder's overrides: nothing else decides.
        let mut stores = self.storage.unwrap_or_else(Stores::in_memory);
        if let Some(runs) = self.run_store {
            stores.runs = runs;
        }
        if let Some(workflows) = self.workflow_store {
            stores.workflows = workflows;
        }
        let tracer = self.tracing.map(|config| {
            // The builder's span store, else the storage's, else memory (bounded).
            let store = self
                .span_store
                .or_else(|| stores.spans.clone())
                .unwrap_or_else(|| Arc::new(crate::trace::InMemorySpanStore::default()));
            crate::trace::Tracer::storing(config, store, self.span_sinks)
        });
        let runtime = Arc::new(Runtime {
            stores,
            memory: self.memory,
            runs: registry,
            models: self.models.unwrap_or_else(ModelRegistry::from_env),
            network_live: Default::default(),
            drains: Default::default(),
            versions: self.versions.clone(),
            tracer,
            scoring: Default::default(),
        });
        // A memory without a store of its own uses the instance's.
        if let Some(memory) = &runtime.memory {
            memory
                .attach(&runtime.stores)
                .map_err(|error| KestrelError::Memory {
                    agent: None,
                    message: error.to_string(),
                })?;
        }
        for agent in &self.agents {
            agent
                .inner
                .attach_memories(&runtime.stores)
                .map_err(|(agent, error)| KestrelError::Memory {
                    agent: Some(agent),
                    message: error.to_string(),
                })?;
        }
        let mut agents = BTreeMap::new();
        for agent in self.agents {
            let agent = agent.in_runtime(&runtime);
            let id = agent.id().to_string();
            if agents.insert(id.clone(), agent).is_some() {
                return Err(KestrelError::DuplicateAgent { id });
            }
        }
        let agents = Arc::new(agents);
        let mut tools = BTreeMap::new();
        for tool in self.tools {
            let id = tool.id().to_owned();
            if tools.insert(id.clone(), tool).is_some() {
                return Err(KestrelError::DuplicateTool { id });
            }
        }
        let workflow_store = Arc::clone(&runtime.stores.workflows);
        let cluster = runtime.runs.cluster.clone();
        let mut workflows = BTreeMap::new();
        for workflow in self.workflows {
            let id = workflow.id().to_owned();
            let workflow = if workflow.has_own_store() {
                workflow
            } else {
                workflow.with_store(Arc::clone(&workflow_store))
            };
            let workflow = workflow
                .with_cluster(cluster.clone())
                .with_tracer(runtime.tracer.clone())
                .with_scoring(
                    Arc::clone(&runtime.stores.scores),
                    Arc::clone(&runtime.scoring),
                );
            if workflows.insert(id.clone(), workflow).is_some() {
                return Err(KestrelError::DuplicateWorkflow { id });
            }
        }
        if runtime.runs.cluster.is_some() {
            let lazy = recovery::LazyRecovery::new(Arc::downgrade(&agents));
            // Set once, here: the registry is this instance's own.
            let _ = runtime.runs.thread_recovery.set(Arc::new(lazy));
        }
        let sweep = runtime.runs.cluster.as_ref().and_then(|cluster| {
            let interval = cluster.config.sweep_interval;
            let handle = tokio::runtime::Handle::try_current().ok()?;
            (!interval.is_zero())
                .then(|| handle.spawn(recovery::sweep(Arc::downgrade(&agents), interval)))
        });
        let workflow_sweep = cluster.as_ref().and_then(|cluster| {
            let interval = cluster.config.sweep_interval;
            let handle = tokio::runtime::Handle::try_current().ok()?;
            let swept: Vec<Workflow> = workflows.values().cloned().collect();
            (!interval.is_zero())
                .then(|| handle.spawn(sweep_workflows(swept, Arc::downgrade(&agents), interval)))
        });
        Ok(Kestrel {
            inner: Arc::new(KestrelInner {
                agents,
                tools,
                workflows,
                runtime,
                sweep,
                workflow_sweep,
            }),
        })
    }
}

/// [`Kestrel::recover_workflow_runs`] over `workflows`.
async fn recover_workflows<'a>(
    workflows: impl Iterator<Item = &'a Workflow>,
) -> Vec<(String, String)> {
    let mut restarted = Vec::new();
    for workflow in workflows {
        match workflow.restart_active_runs().await {
            Ok(runs) => {
                restarted.extend(runs.into_iter().map(|run| (workflow.id().to_owned(), run)));
            }
            Err(error) => {
                tracing::warn!(workflow = %workflow.id(), %error, "looking for workflow runs to restart failed");
            }
        }
    }
    restarted
}

/// Ends the network runs of `agents` left behind by a process that died.
async fn recover_networks<'a>(agents: impl Iterator<Item = &'a Agent>) -> Vec<(String, String)> {
    let mut ended = Vec::new();
    for agent in agents {
        let workflow = format!("agent-network-{}", agent.id());
        ended.extend(
            agent
                .recover_network_runs()
                .await
                .into_iter()
                .map(|run| (workflow.clone(), run)),
        );
    }
    ended
}

/// In a cluster: every `interval`, restarts the workflow runs whose instance died (their
/// lease ran out), and ends such network runs of `agents`.
async fn sweep_workflows(
    workflows: Vec<Workflow>,
    agents: std::sync::Weak<BTreeMap<String, Agent>>,
    interval: std::time::Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        recover_workflows(workflows.iter()).await;
        let Some(agents) = agents.upgrade() else {
            return;
        };
        recover_networks(agents.values()).await;
    }
}
