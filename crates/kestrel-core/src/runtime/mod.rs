//! Where agents run: the environment their runs share, and the machinery that runs them.
//!
//! A `Runtime` holds the stores ([`crate::store::Stores`]) and the runs in progress (`registry`:
//! aborts, pauses, thread leases, pub/sub, the background limit). An [`Agent`] is a
//! definition ([`crate::definition`]) bound to a runtime; its runs are [`AgentRun`]s, whose
//! `driver` performs what the run machine ([`crate::run`]) asks: model calls, tools, storage
//! and events.
//!
//! - `driver`: the loop of a run, [`AgentRun`];
//! - `stream`: [`AgentStream`], a run's events as they happen;
//! - `thread_handle`: [`ThreadHandle`], one thread and what can be done to it;
//! - `threads`: live threads: messages into a thread's active run, watching a thread;
//! - `background`: a run's side of its background delegations;
//! - `subrun`: what a delegation call learns from the run that makes it.

pub(crate) mod background;
pub(crate) mod driver;
mod queue;
pub(crate) mod registry;
mod stream;
pub(crate) mod subrun;
mod thread_handle;
mod threads;
mod versioned;

use std::sync::Arc;

pub use driver::{APPROVAL_RESUME_SCHEMA, AgentRun};

/// The id of a network's routing agent: a helper agent made from the network's agent,
/// which no instance registers (the recovery sweep closes its abandoned runs).
pub const ROUTING_AGENT_ID: &str = "routing-agent";
pub use queue::{MAX_QUEUED_PER_THREAD, Queued};
pub use stream::{AgentStream, TextStream};
pub use thread_handle::{SendRequest, ThreadHandle};
pub use threads::{IfActive, IfIdle, Sent, ThreadError, ThreadSubscription};

use crate::definition::{AgentDefinition, Instructions, ModelSource};
use crate::memory::AgentMemory;
use crate::model::ModelRegistry;
use crate::run::DelegationHop;
use crate::store::{SharedRunStore, Stores};
use crate::tool::{ApprovalContext, ToolSet};
use registry::RunRegistry;

/// The environment the runs of agents share: the storage (where stopped runs are saved, and
/// the memory the instance was given), the runs in progress (aborts, pauses, thread leases,
/// pub/sub and the background limit), and the model registry dynamic models resolve in. A
/// standalone agent has its own; a `Kestrel` instance gives all of its agents one, and a
/// sub-agent always runs in the runtime of the run that delegates to it.
pub(crate) struct Runtime {
    /// Where runs, workflow runs, queued messages and versions are kept.
    pub(crate) stores: Stores,
    /// The instance's memory, when it was given one.
    pub(crate) memory: Option<Arc<dyn AgentMemory>>,
    pub(crate) runs: Arc<RunRegistry>,
    pub(crate) models: ModelRegistry,
    /// The threads whose message queue this process is draining.
    pub(crate) drains: queue::Drains,
    /// The instance's default choice of versions, under each run's own.
    pub(crate) versions: crate::version::Versions,
    /// The network runs going on in this process, per agent: a network's workflow is built
    /// per call, and every build of one agent's shares them, so a cancel or a recovery sees
    /// the runs of any.
    pub(crate) network_live:
        std::sync::Mutex<std::collections::HashMap<String, Arc<crate::workflow::LiveRuns>>>,
    /// Records the runs' spans, when the instance traces.
    pub(crate) tracer: Option<crate::trace::Tracer>,
    /// Live scoring's counts and the scorings running.
    pub(crate) scoring: Arc<crate::eval::ScoringStats>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("stores", &self.stores)
            .field("memory", &self.memory.is_some())
            .field("runs", &self.runs)
            .field("models", &self.models)
            .finish()
    }
}

impl Runtime {
    /// A runtime of its own: these stores, an in-process registry, no instance memory.
    pub(crate) fn standalone(models: ModelRegistry, stores: Stores) -> Self {
        Self {
            stores,
            memory: None,
            runs: Default::default(),
            models,
            network_live: Default::default(),
            drains: queue::Drains::default(),
            versions: crate::version::Versions::default(),
            tracer: None,
            scoring: Default::default(),
        }
    }
}

/// An agent: instructions, a model and tools, and the runtime its runs use. Cheap to clone;
/// clones share everything, and no run mutates the agent, so one agent serves any number of
/// concurrent runs.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentDefinition>,
    pub(crate) runtime: Arc<Runtime>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.inner.id)
            .field("tools", &self.inner.tools)
            .finish()
    }
}

impl Agent {
    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The agent's display name (its id unless set).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The counts of the live scorers of the instance's agents (this agent's among them):
    /// runs eligible, sampled, scored and failed.
    pub fn scoring(&self) -> &Arc<crate::eval::ScoringStats> {
        &self.runtime.scoring
    }

    /// The scorers the agent runs on its finished runs.
    pub fn scorers(&self) -> &[crate::eval::LiveScorer] {
        &self.inner.scorers
    }

    /// The agent's input processors, in order.
    pub fn input_processors(&self) -> &[crate::processor::SharedProcessor] {
        self.inner.processors.input.processors()
    }

    /// The agent's output processors, in order.
    pub fn output_processors(&self) -> &[crate::processor::SharedProcessor] {
        self.inner.processors.output.processors()
    }

    /// Where the instance keeps scores.
    pub fn score_store(&self) -> &crate::store::SharedScoreStore {
        &self.runtime.stores.scores
    }

    /// What the agent does (used when it is offered to another agent).
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The agent's instructions, when they are fixed (not computed per request).
    pub fn static_instructions(&self) -> Option<&str> {
        match &self.inner.instructions {
            Instructions::Static(s) => Some(s),
            Instructions::Dynamic(_) => None,
        }
    }

    /// The agent's model as `provider/model`, when it is fixed (not chosen per request).
    pub fn model_name(&self) -> Option<String> {
        match &self.inner.model {
            ModelSource::Fixed(model) => Some(format!("{}/{}", model.provider(), model.model_id())),
            ModelSource::Dynamic(_) => None,
        }
    }

    /// The ids of the agent's sub-agents, sorted.
    pub fn sub_agent_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.inner.sub_agents.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// The agent's tools.
    pub fn tools(&self) -> &ToolSet {
        &self.inner.tools
    }

    /// The agent's skills for a run with this request context (none when it has none): the
    /// fixed ones, or what its skills function gives.
    pub async fn skills(
        &self,
        request_context: &crate::context::RequestContext,
    ) -> Result<Arc<crate::skill::SkillSet>, crate::skill::SkillError> {
        match &self.inner.skills {
            Some(source) => source.resolve(request_context).await,
            None => Ok(Arc::default()),
        }
    }

    /// Whether the agent has skills (fixed, or a skills function).
    pub fn has_skills(&self) -> bool {
        self.inner.skills.is_some()
    }

    /// The agent's memory, if it has one.
    pub fn memory(&self) -> Option<&Arc<dyn AgentMemory>> {
        self.inner.memory.as_ref()
    }

    /// The default bound on steps: the default options' `max_steps`, else the builder's.
    pub fn max_steps(&self) -> u32 {
        self.inner
            .defaults
            .max_steps
            .unwrap_or(self.inner.max_steps)
    }

    /// Whether a call of `tool_name` with `args` needs a person's approval under the agent's
    /// own policies: the tool's, or the agent's default run policy
    /// ([`crate::definition::RunOptions::require_tool_approval`] of its default options). A call's options may
    /// add a policy; this is what holds without one.
    pub fn requires_approval(&self, args: &serde_json::Value, ctx: &ApprovalContext<'_>) -> bool {
        let by_tool = self
            .inner
            .tools
            .get(ctx.tool_name)
            .is_some_and(|tool| tool.requires_approval(args, ctx));
        let by_agent = self
            .inner
            .defaults
            .require_tool_approval
            .as_ref()
            .is_some_and(|policy| policy.requires(args, ctx));
        by_tool || by_agent
    }

    /// The sub-agent with this id, among those given to [`crate::agent::AgentBuilder::agents`], in this
    /// agent's runtime (where its delegated runs run).
    pub fn sub_agent(&self, id: &str) -> Option<Agent> {
        let sub_agent = self.inner.sub_agents.get(id)?;
        Some(Agent {
            inner: Arc::clone(sub_agent),
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// The (sub-)agent at the end of a delegation path from this agent.
    pub(crate) fn agent_at(&self, via: &[DelegationHop]) -> Option<Agent> {
        let mut agent = self.clone();
        for hop in via {
            agent = agent.sub_agent(&hop.agent_id)?;
        }
        Some(agent)
    }

    /// This agent, running in `runtime`.
    pub(crate) fn in_runtime(&self, runtime: &Arc<Runtime>) -> Agent {
        Agent {
            inner: Arc::clone(&self.inner),
            runtime: Arc::clone(runtime),
        }
    }

    /// Where this agent's stopped runs are saved: its builder's store
    /// ([`crate::agent::AgentBuilder::run_store`]), else its instance's.
    pub fn run_store(&self) -> &SharedRunStore {
        self.inner
            .own_run_store
            .as_ref()
            .unwrap_or(&self.runtime.stores.runs)
    }

    /// The stores of the runtime this agent runs in: its instance's
    /// ([`crate::kestrel::KestrelBuilder::storage`]), or, on its own, its builder's
    /// ([`crate::agent::AgentBuilder::storage`]).
    pub fn stores(&self) -> &Stores {
        &self.runtime.stores
    }
}

impl Agent {
    /// The agent's instructions for a request: fixed, or computed from `ctx`.
    pub(crate) async fn instructions_for(
        &self,
        ctx: &crate::context::RequestContext,
    ) -> Result<String, crate::definition::BoxError> {
        match &self.inner.instructions {
            Instructions::Static(s) => Ok(s.to_string()),
            Instructions::Dynamic(f) => f(ctx.clone()).await,
        }
    }

    /// The ids of the tools given to the agent as tools (not its sub-agents', workflows'
    /// or memory's), in the order given.
    pub(crate) fn own_tool_ids(&self) -> &[String] {
        &self.inner.own_tools
    }

    /// An agent of the framework's own (a network's routing agent): this agent's model,
    /// registry and runtime with other instructions, and no tools, memory or sub-agents.
    pub(crate) fn helper(&self, id: &str, name: &str, instructions: String) -> Agent {
        use std::collections::{BTreeMap, HashMap};
        let tools = ToolSet::new();
        let tool_definitions =
            crate::definition::tools::ToolDefinitions::new(&tools, &HashMap::new(), &[]);
        let definition = AgentDefinition {
            id: id.to_owned(),
            name: name.to_owned(),
            description: String::new(),
            instructions: Instructions::Static(instructions.into()),
            model: self.inner.model.clone(),
            tools,
            max_steps: 1,
            defaults: crate::definition::RunOptions::default(),
            own_registry: self.inner.own_registry.clone(),
            memory: None,
            own_run_store: None,
            sub_agents: HashMap::new(),
            workflows: BTreeMap::new(),
            own_tools: Vec::new(),
            background: crate::definition::BackgroundTasks::new(),
            tool_definitions,
            skills: None,
            editable: crate::version::Editable::default(),
            versioning: Default::default(),
            scorers: Vec::new(),
            // The agent's input guardrails check what its helpers are asked too (a network's
            // task reaches its routing agent); their answers are decisions, not the agent's
            // answers, so its output processors stay out.
            processors: crate::definition::Processors {
                input: self.inner.processors.input.clone(),
                ..Default::default()
            },
        };
        Agent {
            inner: Arc::new(definition),
            runtime: Arc::clone(&self.runtime),
        }
    }
}
