//! What an agent is, before it runs: its instructions, model, tools, memory, sub-agents, default
//! options and hooks. A definition knows nothing of where its runs run ([`crate::runtime`]).
//!
//! - `options`: [`RunOptions`], the per-call options, and how they merge with the defaults;
//! - [`iteration`]: the hooks that steer the loop between iterations, and scorers;
//! - [`delegation`]: the hooks and options of delegation to sub-agents;
//! - [`background`]: which delegation tools run in the background;
//! - `tools`: the tools as models are offered them;
//! - `error`: the errors of building an agent and of running it.

pub mod background;
pub mod delegation;
mod error;
pub mod iteration;
mod options;
pub(crate) mod tools;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;

pub use background::{BackgroundTasks, BackgroundTool};
pub use delegation::{
    DelegationComplete, DelegationCompleteOutcome, DelegationOptions, DelegationStart,
    DelegationStartOutcome, HookErrorStrategy, MessageFilterContext, SubAgentResult,
};
pub use error::{AgentBuildError, AgentError, BoxError};
pub(crate) use options::approval_policy;
pub use options::{
    BusyThread, ErrorStrategy, MemoryOptions, OnIterationComplete, RunOptions, StructuredOutput,
    ToolMocks,
};
use tools::ToolDefinitions;

use crate::context::RequestContext;
use crate::memory::AgentMemory;
use crate::model::{ModelRegistry, ModelSpec, SharedModel};
use crate::store::SharedRunStore;
use crate::tool::ToolSet;

/// The default bound on steps per run.
pub const DEFAULT_MAX_STEPS: u32 = 5;

/// The default number of tool calls of one step that run at once.
pub const DEFAULT_TOOL_CONCURRENCY: usize = 10;

pub(crate) type DynInstructions =
    dyn Fn(RequestContext) -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync;
pub(crate) type DynModel =
    dyn Fn(RequestContext) -> BoxFuture<'static, Result<ModelSpec, BoxError>> + Send + Sync;

/// The system prompt: fixed, or computed from the request context.
#[derive(Clone)]
pub(crate) enum Instructions {
    Static(Arc<str>),
    Dynamic(Arc<DynInstructions>),
}

/// The model: fixed, or computed from the request context.
#[derive(Clone)]
pub(crate) enum ModelSource {
    Fixed(SharedModel),
    Dynamic(Arc<DynModel>),
}

pub(crate) struct AgentDefinition {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) instructions: Instructions,
    pub(crate) model: ModelSource,
    pub(crate) tools: ToolSet,
    pub(crate) max_steps: u32,
    pub(crate) defaults: RunOptions,
    /// The registry the builder was given: it stands over the runtime's for dynamic models.
    pub(crate) own_registry: Option<ModelRegistry>,
    pub(crate) memory: Option<Arc<dyn AgentMemory>>,
    /// The run store the builder was given: it stands over the runtime's.
    pub(crate) own_run_store: Option<SharedRunStore>,
    /// The sub-agents of `agents(..)`, by id (their delegation tools are in `tools`).
    pub(crate) sub_agents: HashMap<String, Arc<AgentDefinition>>,
    /// The workflows the agent holds, by id (each also a tool in `tools`).
    pub(crate) workflows: std::collections::BTreeMap<String, crate::workflow::Workflow>,
    /// The ids of the tools given as tools (not a sub-agent's, a workflow's or memory's).
    pub(crate) own_tools: Vec<String>,
    /// Which delegation tools run in the background.
    pub(crate) background: BackgroundTasks,
    /// The tools' definitions as models get them.
    pub(crate) tool_definitions: ToolDefinitions,
    /// The agent's skills (their tools are in `tools`).
    pub(crate) skills: Option<crate::skill::SkillsSource>,
    /// What its stored versions may change.
    pub(crate) editable: crate::version::Editable,
    /// Where it stands among versions: defined in code or in the storage, and the version
    /// it is seen through.
    pub(crate) versioning: Versioning,
    /// The scorers it runs on its finished runs.
    pub(crate) scorers: Vec<crate::eval::LiveScorer>,
    /// Its processors: the input pipeline, and the output one (stream, step, result, tool
    /// result and error hooks).
    pub(crate) processors: Processors,
}

/// An agent's processors (see [`crate::processor`]).
#[derive(Clone, Default)]
pub(crate) struct Processors {
    pub(crate) input: crate::processor::Pipeline,
    pub(crate) output: crate::processor::Pipeline,
    /// How many answers the output processors may send back for another try in one run.
    pub(crate) max_retries: u32,
}

impl Processors {
    /// Whether a step's streamed parts are held until the output hooks accepted them.
    pub(crate) fn holds_back(&self) -> bool {
        use crate::processor::{Phases, ProcessorPhase as P};
        self.output.phases().intersects(Phases::of(&[
            P::OutputStream,
            P::OutputStep,
            P::OutputResult,
        ]))
    }
}

impl AgentDefinition {
    /// Hands `stores` to the memory of this agent and of each sub-agent below it
    /// ([`AgentMemory::attach`]); on failure, the agent whose memory refused, and why.
    pub(crate) fn attach_memories(
        &self,
        stores: &crate::store::Stores,
    ) -> Result<(), (String, crate::memory::MemoryError)> {
        if let Some(memory) = &self.memory {
            memory
                .attach(stores)
                .map_err(|error| (self.id.clone(), error))?;
        }
        self.sub_agents
            .values()
            .try_for_each(|sub_agent| sub_agent.attach_memories(stores))
    }
}

/// Where a definition stands among stored versions.
#[derive(Clone, Default)]
pub(crate) struct Versioning {
    /// Defined in the storage alone (no code): every field comes from a version, and a
    /// version's tools and sub-agents are the ones it names (none when it names none).
    pub(crate) stored: bool,
    /// The definition versions apply to, when this one is already seen through a version:
    /// a version always applies to the base, never on top of another version.
    pub(crate) base: Option<Arc<AgentDefinition>>,
    /// The version this definition is seen through.
    pub(crate) version_id: Option<String>,
}
