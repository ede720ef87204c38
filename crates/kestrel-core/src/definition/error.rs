//! Errors of building an agent and of running it.

use crate::model::{ModelError, UnknownModel};
use crate::tool::ToolDefinitionError;

/// Why an agent could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentBuildError {
    /// No model was given and none is configured (see [`crate::model::default_model`]).
    #[error(
        "agent {agent:?} has no model: call .model(\"provider/model\"), set KESTREL_MODEL or an \
         API key (OPENAI_API_KEY, ANTHROPIC_API_KEY), or enable the `local` feature for the \
         embedded model"
    )]
    MissingModel {
        /// The agent id.
        agent: String,
    },
    /// The model string could not be resolved.
    #[error("agent {agent:?}: {source}")]
    Model {
        /// The agent id.
        agent: String,
        /// Why.
        source: UnknownModel,
    },
    /// A tool could not be added.
    #[error("agent {agent:?}: {source}")]
    Tool {
        /// The agent id.
        agent: String,
        /// Why.
        source: ToolDefinitionError,
    },
    /// Two skills of the agent share a name.
    #[error("agent {agent:?}: two skills are named {name:?}: {first} and {second}")]
    DuplicateSkill {
        /// The agent id.
        agent: String,
        /// The name.
        name: String,
        /// Where the first is.
        first: String,
        /// Where the second is.
        second: String,
    },
    /// The agent's memory cannot use the agent's stores
    /// ([`crate::memory::AgentMemory::attach`]).
    #[error("agent {agent:?}: its memory cannot use the agent's storage: {message}")]
    Memory {
        /// The agent id.
        agent: String,
        /// Why.
        message: String,
    },
    /// The agent id is empty.
    #[error("an agent needs a non-empty id")]
    EmptyId,
    /// `max_steps` is zero.
    #[error("agent {agent:?}: max_steps must be at least 1")]
    ZeroMaxSteps {
        /// The agent id.
        agent: String,
    },
    /// `background_tasks` names tools that are not delegations to this agent's sub-agents.
    #[error(
        "agent {agent:?}: background_tasks names {}, which {} not among its sub-agents ({})",
        unknown.join(", "),
        if unknown.len() == 1 { "is" } else { "are" },
        if known.is_empty() { "it has none".to_owned() } else { known.join(", ") }
    )]
    UnknownBackgroundTool {
        /// The agent id.
        agent: String,
        /// The names that match no sub-agent.
        unknown: Vec<String>,
        /// The sub-agents' ids.
        known: Vec<String>,
    },
}

/// What holds a taken run id.
fn holder(live: &bool) -> &'static str {
    if *live { "in progress" } else { "stored" }
}

pub use crate::error::BoxError;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed (after the provider's retries).
    #[error("run {run_id}: model call failed: {source}")]
    Model {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: ModelError,
    },
    /// A dynamic model resolved to a string that could not be resolved.
    #[error("run {run_id}: {source}")]
    ModelResolution {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: UnknownModel,
    },
    /// The dynamic instructions or model function failed.
    #[error("run {run_id}: {what} failed: {source}")]
    Dynamic {
        /// The run.
        run_id: String,
        /// `instructions` or `model`.
        what: &'static str,
        /// The function's error.
        #[source]
        source: BoxError,
    },
    /// The final answer did not match the structured output schema (strict strategy).
    #[error("run {run_id}: structured output invalid: {message}")]
    StructuredOutput {
        /// The run.
        run_id: String,
        /// What was wrong.
        message: String,
        /// The model's text.
        text: String,
    },
    /// Memory could not load the thread's context or store the run's messages.
    #[error("run {run_id}: memory failed: {source}")]
    Memory {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: crate::memory::MemoryError,
    },
    /// The run was aborted.
    #[error("run {run_id} was aborted")]
    Aborted {
        /// The run.
        run_id: String,
    },
    /// A run state could not be continued.
    #[error("cannot continue run {run_id}: {message}")]
    InvalidRunState {
        /// The run.
        run_id: String,
        /// Why.
        message: String,
    },
    /// The run's thread is busy with another run and the run was asked not to wait.
    #[error("run {run_id}: thread {thread_id:?} is busy with run {active_run_id}")]
    ThreadBusy {
        /// The run.
        run_id: String,
        /// The thread.
        thread_id: String,
        /// The run holding the thread.
        active_run_id: String,
    },
    /// The run's snapshot could not be saved (a stopped run could not be kept for later).
    #[error("run {run_id}: saving the run failed: {source}")]
    RunStore {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: crate::store::RunStoreError,
    },
    /// A new run was given the id of a run that is in progress or stored: one id names one
    /// run. Leave [`crate::agent::RunOptions::run_id`] unset for a fresh id.
    #[error("run id {run_id:?} is taken by a run that is {}", holder(.live))]
    RunIdTaken {
        /// The id asked for.
        run_id: String,
        /// Whether the run holding it is in progress (else it is stored).
        live: bool,
        /// The resource the run holding the id acts for, so a server can refuse a caller of
        /// another resource without telling it more.
        owner: Option<String>,
    },
    /// Another live instance of the cluster drives the run: one owner per run.
    #[error("run {run_id} is in progress on instance {instance:?}")]
    RunDrivenElsewhere {
        /// The run.
        run_id: String,
        /// The instance holding the run's lease.
        instance: String,
    },
    /// Another instance took the run over (this one lost its lease: it was paused or cut
    /// off too long), and the stores refuse this instance's writes for it. The run goes on
    /// there; nothing more happens here.
    #[error("run {run_id} was taken over by another instance; this instance's writes are refused")]
    RunTakenOver {
        /// The run.
        run_id: String,
    },
    /// The cluster's leases or bus failed.
    #[error("run {run_id}: the cluster failed: {source}")]
    Cluster {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: crate::cluster::ClusterError,
    },
    /// The version chosen for the run's agent cannot be used (an unknown version id, fields
    /// the agent does not let versions change, tools it does not have).
    #[error("run {run_id}: {source}")]
    Version {
        /// The run.
        run_id: String,
        /// Why.
        #[source]
        source: crate::version::VersionError,
    },
    /// A processor stopped the run (a guardrail blocked its input or its answer). The run
    /// ended with a `tripwire` event; this is not a failure of the run but its refusal.
    #[error("run {run_id}: {tripwire}")]
    Tripwire {
        /// The run.
        run_id: String,
        /// Why, and which processor.
        tripwire: Box<crate::processor::Tripwire>,
    },
    /// A processor failed (it could not check): the run fails rather than let unchecked
    /// input or output through.
    #[error("run {run_id}: {source}")]
    Processor {
        /// The run.
        run_id: String,
        /// Which processor, in which hook, and why.
        #[source]
        source: Box<crate::processor::ProcessorFailure>,
    },
    /// The run's task failed unexpectedly.
    #[error("run {run_id}: internal error: {message}")]
    Internal {
        /// The run.
        run_id: String,
        /// What happened.
        message: String,
    },
}

impl AgentError {
    /// The tripwire that stopped the run, when a processor did.
    pub fn tripwire(&self) -> Option<&crate::processor::Tripwire> {
        match self {
            AgentError::Tripwire { tripwire, .. } => Some(tripwire),
            _ => None,
        }
    }

    /// The description without the `run <id>:` prefix, as `error` events carry it (the event
    /// already names its run).
    pub fn detail(&self) -> String {
        match self {
            AgentError::Model { source, .. } => format!("model call failed: {source}"),
            AgentError::ModelResolution { source, .. } => source.to_string(),
            AgentError::Dynamic { what, source, .. } => format!("{what} failed: {source}"),
            AgentError::StructuredOutput { message, .. } => {
                format!("structured output invalid: {message}")
            }
            AgentError::Memory { source, .. } => format!("memory failed: {source}"),
            AgentError::Aborted { .. } => "the run was aborted".into(),
            AgentError::InvalidRunState { message, .. } => message.clone(),
            AgentError::RunStore { source, .. } => format!("saving the run failed: {source}"),
            AgentError::ThreadBusy {
                thread_id,
                active_run_id,
                ..
            } => format!("thread {thread_id:?} is busy with run {active_run_id}"),
            AgentError::RunIdTaken { live, .. } => {
                format!("the run id is taken by a run that is {}", holder(live))
            }
            AgentError::RunDrivenElsewhere { instance, .. } => {
                format!("the run is in progress on instance {instance:?}")
            }
            AgentError::Cluster { source, .. } => format!("the cluster failed: {source}"),
            AgentError::RunTakenOver { .. } => {
                "the run was taken over by another instance".to_owned()
            }
            AgentError::Version { source, .. } => source.to_string(),
            AgentError::Tripwire { tripwire, .. } => tripwire.to_string(),
            AgentError::Processor { source, .. } => source.to_string(),
            AgentError::Internal { message, .. } => format!("internal error: {message}"),
        }
    }

    /// The run the error belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            AgentError::Model { run_id, .. }
            | AgentError::ModelResolution { run_id, .. }
            | AgentError::Dynamic { run_id, .. }
            | AgentError::StructuredOutput { run_id, .. }
            | AgentError::Memory { run_id, .. }
            | AgentError::Aborted { run_id }
            | AgentError::InvalidRunState { run_id, .. }
            | AgentError::RunStore { run_id, .. }
            | AgentError::ThreadBusy { run_id, .. }
            | AgentError::RunIdTaken { run_id, .. }
            | AgentError::RunDrivenElsewhere { run_id, .. }
            | AgentError::Cluster { run_id, .. }
            | AgentError::RunTakenOver { run_id }
            | AgentError::Version { run_id, .. }
            | AgentError::Tripwire { run_id, .. }
            | AgentError::Processor { run_id, .. }
            | AgentError::Internal { run_id, .. } => run_id,
        }
    }

    /// A stable machine-readable kind, used in `error` events.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Model { .. } => "model",
            AgentError::ModelResolution { .. } => "model-resolution",
            AgentError::Dynamic { .. } => "dynamic-config",
            AgentError::StructuredOutput { .. } => "structured-output",
            AgentError::Memory { .. } => "memory",
            AgentError::Aborted { .. } => "abort",
            AgentError::InvalidRunState { .. } => "invalid-run-state",
            AgentError::RunStore { .. } => "run-store",
            AgentError::ThreadBusy { .. } => "thread-busy",
            AgentError::RunIdTaken { .. } => "run-id-taken",
            AgentError::RunDrivenElsewhere { .. } => "run-driven-elsewhere",
            AgentError::Cluster { .. } => "cluster",
            AgentError::RunTakenOver { .. } => "run-taken-over",
            AgentError::Version { .. } => "version",
            AgentError::Tripwire { .. } => "tripwire",
            AgentError::Processor { .. } => "processor",
            AgentError::Internal { .. } => "internal",
        }
    }
}
