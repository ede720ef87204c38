//! Agents: instructions, a model and tools, run in a loop of steps.
//!
//! Build an [`Agent`] with [`Agent::builder`], then call [`Agent::generate`] for the final
//! result or [`Agent::stream`] for every [`crate::event::Event`] as it happens. A run is a
//! serialisable [`RunState`] advanced by an [`AgentRun`]; [`Agent::start_run`] and
//! [`Agent::continue_run`] expose that machinery to drive a run step by step, stop it, store it
//! and continue it in another process.

pub mod background;
mod builder;
mod control;
pub mod delegation;
mod driver;
mod error;
pub mod iteration;
mod lifecycle;
mod options;
pub(crate) mod registry;
mod request;
mod stream;
mod threads;

pub use crate::run::GenerateResult;
pub use crate::run::{
    CallDecision, CallProgress, DelegatedBy, DelegationHop, MIN_RUN_STATE_VERSION,
    RUN_STATE_VERSION, RunSettings, RunState, RunStatus, StepResult, SubRun, ToolCallRecord,
    ToolResultRecord, Waiting, WaitingCall,
};
pub use background::{BackgroundTasks, BackgroundTool};
pub use builder::AgentBuilder;
pub use control::{
    Continue, DEFAULT_DECLINE_REASON, RunControlError, SuspendedRun, SuspendedRuns, ToolCallRef,
};
pub use delegation::{
    DelegationComplete, DelegationCompleteOutcome, DelegationOptions, DelegationStart,
    DelegationStartOutcome, HookErrorStrategy, MessageFilterContext, SubAgentResult,
};
pub use driver::{APPROVAL_RESUME_SCHEMA, AgentRun};
pub use error::{AgentBuildError, AgentError, BoxError};
pub use lifecycle::RunRef;
pub use options::{
    BusyThread, ErrorStrategy, MemoryOptions, OnIterationComplete, RunOptions, StructuredOutput,
};
pub use request::{GenerateRequest, StreamRequest};
pub use stream::{AgentStream, TextStream};
pub use threads::{IfActive, IfIdle, SendMessage, Sent, ThreadError, ThreadSubscription};

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::context::RequestContext;
use crate::memory::AgentMemory;
use crate::message::Input;
use crate::model::{ModelRegistry, ModelSpec, SharedModel};
use crate::run_store::SharedRunStore;
use crate::tool::{ApprovalContext, ToolSet};

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

pub(crate) struct AgentInner {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) instructions: Instructions,
    pub(crate) model: ModelSource,
    pub(crate) tools: ToolSet,
    pub(crate) max_steps: u32,
    pub(crate) defaults: RunOptions,
    pub(crate) registry: ModelRegistry,
    pub(crate) memory: Option<Arc<dyn AgentMemory>>,
    /// The run store the builder was given: it stands over the runtime's.
    pub(crate) own_run_store: Option<SharedRunStore>,
    /// The sub-agents of `agents(..)`, by id (their delegation tools are in `tools`).
    pub(crate) sub_agents: std::collections::HashMap<String, Agent>,
    /// Which delegation tools run in the background.
    pub(crate) background: background::BackgroundTasks,
    /// The tools' definitions as models get them.
    pub(crate) tool_definitions: delegation::ToolDefinitions,
}

/// What the runs of agents share: where stopped runs are saved, and the runs in progress
/// (aborts, pauses), thread leases, pub/sub and the background limit. A standalone agent has
/// its own; a `Kestrel` instance gives all of its agents one, and a sub-agent always runs in
/// the runtime of the run that delegates to it.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) run_store: SharedRunStore,
    pub(crate) runs: Arc<registry::RunRegistry>,
}

impl Runtime {
    /// A runtime of its own: an in-process run store (unless given one) and registry.
    pub(crate) fn standalone(run_store: Option<SharedRunStore>) -> Self {
        Self {
            run_store: run_store
                .unwrap_or_else(|| Arc::new(crate::run_store::InMemoryRunStore::new())),
            runs: Default::default(),
        }
    }
}

/// An agent: instructions, a model and tools, and the runtime its runs use. Cheap to clone;
/// clones share everything, and no run mutates the agent, so one agent serves any number of
/// concurrent runs.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentInner>,
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
    /// Starts building an agent with this id.
    pub fn builder(id: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(id)
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The agent's display name (its id unless set).
    pub fn name(&self) -> &str {
        &self.inner.name
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
    /// ([`RunOptions::require_tool_approval`] of its default options). A call's options may
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

    /// The sub-agent with this id, among those given to [`AgentBuilder::agents`], in this
    /// agent's runtime (where its delegated runs run).
    pub fn sub_agent(&self, id: &str) -> Option<Agent> {
        let sub_agent = self.inner.sub_agents.get(id)?;
        Some(sub_agent.in_runtime(&self.runtime))
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

    /// Where this agent's stopped runs are saved: its builder's store, else its runtime's.
    pub fn run_store(&self) -> &SharedRunStore {
        self.inner
            .own_run_store
            .as_ref()
            .unwrap_or(&self.runtime.run_store)
    }

    /// Runs to completion: await the builder for the result.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use kestrel_core::agent::Agent;
    /// # use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("Hi!")));
    /// let agent = Agent::builder("greeter").model(model).build()?;
    /// let result = agent.generate("Say hi").max_steps(3).await?;
    /// assert_eq!(result.text, "Hi!");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The setters are [`RunOptions`]'s; [`GenerateRequest::options`] takes options built once.
    pub fn generate(&self, input: impl Into<Input>) -> GenerateRequest {
        GenerateRequest::new(self.clone(), input.into().0)
    }

    /// Runs with every [`crate::event::Event`] streamed: await the builder for the
    /// [`AgentStream`] (refused at once, with [`AgentError::RunIdTaken`], when its
    /// [`RunOptions::run_id`] is taken by a run in progress or stored), or take the stream
    /// without waiting with [`StreamRequest::into_stream`]. The run goes on if the stream is dropped.
    pub fn stream(&self, input: impl Into<Input>) -> StreamRequest {
        StreamRequest::new(self.clone(), input.into().0)
    }

    /// Prepares a run without starting it, for driving it step by step.
    pub fn start_run(&self, input: impl Into<Input>, options: RunOptions) -> AgentRun {
        AgentRun::start(self.clone(), input.into().0, options)
    }

    /// Continues a run from its serialised state.
    ///
    /// The state must come from this agent (same id), have a supported version and not be
    /// finished. `options` supply what is not serialised: the abort signal and, optionally, a
    /// request context (else the state's entries are used).
    pub fn continue_run(
        &self,
        state: RunState,
        options: RunOptions,
    ) -> Result<AgentRun, AgentError> {
        AgentRun::resume(self.clone(), state, options)
    }
}
