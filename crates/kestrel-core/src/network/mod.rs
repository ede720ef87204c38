//! Agent networks (Mastra's `agent.network()`): a routing agent hands a task, iteration by
//! iteration, to one of the network agent's primitives (a sub-agent, a workflow or a tool),
//! with its reason, until a completion check finds the task done.
//!
//! Each iteration streams, `from: "NETWORK"`:
//!
//! 1. `routing-agent-start`, then `routing-agent-end` with the decision
//!    (`primitiveId`, `primitiveType`, `prompt`, `selectionReason`, usage);
//! 2. the primitive: `agent-execution-start`, every event of the sub-agent as
//!    `agent-execution-event-<type>`, `agent-execution-end` (likewise `workflow-execution-*`
//!    and `tool-execution-start` / `-end`); a router that chose `none` gives
//!    `network-execution-event-step-finish` instead;
//! 3. `network-validation-start`, the default check's `routing-agent-text-*` (the final
//!    answer), `network-validation-end`;
//!
//! and the run ends with `network-execution-event-finish`.
//!
//! A network needs memory (its thread holds the task, a record of each iteration and the
//! completion checks' feedback, which the router reads on the next iteration): an agent
//! without one fails with [`NetworkError::MemoryRequired`]. A sub-agent gets the thread's
//! conversation and the router's prompt; a workflow or a tool gets the prompt as JSON, checked
//! against its input schema (a prompt that does not fit is reported back to the router as a
//! failed execution). A sub-agent or a workflow that fails, a completion check or a routing
//! call that fails, is reported in the library's words (`agent "x" failed (its run …)`): the
//! router, the thread and the result never read the failure's own text, which may quote a
//! provider or a store, and goes to the log. [`NetworkOptions::max_steps`] bounds the
//! iterations: **1** unless set, as in Mastra (where the bound lets one more iteration run;
//! here it is exact).
//!
//! A tool call that waits for a person inside a delegated agent, a workflow that suspends or a
//! network tool that needs approval stops the network (`*-approval` / `*-suspended`); decide
//! with the network's run id, through its run's handle: `agent.run(run_id).network()` is a
//! [`NetworkRunHandle`] whose [`approve`](NetworkRunHandle::approve),
//! [`decline`](NetworkRunHandle::decline) and [`resume`](NetworkRunHandle::resume) continue
//! it, also in another process after a restart (the run is kept in the memory's workflow
//! store). Aborting the network ([`NetworkStream::abort`], its
//! [`NetworkOptions::abort_signal`], or by its run id with [`NetworkRunHandle::abort`], or
//! [`crate::agent::RunHandle::abort`] while it runs) aborts the primitive that runs.
//!
//! Mastra has since deprecated networks in favour of supervisor agents (an agent with
//! sub-agents, [`crate::agent::AgentBuilder::agents`]), which Kestrel has too: prefer one when
//! the model should call several sub-agents within one answer.

mod call;
mod completion;
mod primitives;
mod records;
mod routing;
mod run;
mod step;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::definition::iteration::{CompletionStrategy, Scorer};
use crate::model::ModelSettings;

pub use crate::event::{PrimitiveType, RoutingDecision, ScorerResult};
pub use run::{NetworkRequest, NetworkResult, NetworkRunHandle, NetworkStatus, NetworkStream};

pub use crate::runtime::ROUTING_AGENT_ID;

/// The default bound on a network's iterations (Mastra's).
pub const DEFAULT_NETWORK_MAX_STEPS: u32 = 1;

/// The longest the completion checks of one iteration may take, unless set (Mastra's 10 min).
pub const DEFAULT_COMPLETION_TIMEOUT: Duration = Duration::from_secs(600);

/// Options of one network run. The thread is required.
#[derive(Clone, Default)]
pub struct NetworkOptions {
    pub(crate) thread: Option<(String, String)>,
    pub(crate) max_steps: Option<u32>,
    pub(crate) run_id: Option<String>,
    pub(crate) request_context: Option<RequestContext>,
    pub(crate) abort_signal: Option<AbortSignal>,
    pub(crate) model_settings: Option<ModelSettings>,
    pub(crate) completion: NetworkCompletion,
    pub(crate) routing: RoutingOptions,
}

impl std::fmt::Debug for NetworkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkOptions")
            .field("thread", &self.thread)
            .field("max_steps", &self.max_steps)
            .field("run_id", &self.run_id)
            .field("completion", &self.completion)
            .field("routing", &self.routing)
            .finish_non_exhaustive()
    }
}

impl NetworkOptions {
    /// Default options (no thread yet: set one with [`NetworkOptions::memory`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The network's thread and its resource (required).
    pub fn memory(mut self, thread: impl Into<String>, resource: impl Into<String>) -> Self {
        self.thread = Some((thread.into(), resource.into()));
        self
    }

    /// The most iterations the network runs ([`DEFAULT_NETWORK_MAX_STEPS`] unless set).
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = Some(max_steps);
        self
    }

    /// Uses this run id instead of a fresh one.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The request context the router and the primitives see.
    pub fn request_context(mut self, ctx: RequestContext) -> Self {
        self.request_context = Some(ctx);
        self
    }

    /// Aborts the network, and the primitive that runs, when it fires.
    pub fn abort_signal(mut self, signal: AbortSignal) -> Self {
        self.abort_signal = Some(signal);
        self
    }

    /// Sampling settings of the routing agent's calls.
    pub fn model_settings(mut self, settings: ModelSettings) -> Self {
        self.model_settings = Some(settings);
        self
    }

    /// How each iteration's result is judged complete (default: the routing model is asked).
    pub fn completion(mut self, completion: NetworkCompletion) -> Self {
        self.completion = completion;
        self
    }

    /// How the routing agent decides.
    pub fn routing(mut self, routing: RoutingOptions) -> Self {
        self.routing = routing;
        self
    }
}

/// How the routing agent decides.
#[derive(Debug, Clone)]
pub struct RoutingOptions {
    pub(crate) additional_instructions: Option<String>,
    pub(crate) verbose_introspection: bool,
}

impl Default for RoutingOptions {
    fn default() -> Self {
        Self {
            additional_instructions: None,
            verbose_introspection: true,
        }
    }
}

impl RoutingOptions {
    /// Default routing: verbose reasons, no extra instructions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Instructions added to the routing agent's.
    pub fn additional_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.additional_instructions = Some(instructions.into());
        self
    }

    /// Whether each reason also says why the other primitives were not chosen (default: yes).
    pub fn verbose_introspection(mut self, verbose: bool) -> Self {
        self.verbose_introspection = verbose;
        self
    }
}

/// How a network decides that its task is complete, after each iteration. With no scorers,
/// the routing model is asked ("Default LLM Completion"); with scorers (yours, or the
/// [`crate::definition::iteration::RubricScorer`] Kestrel ships), every one or any one must
/// pass. A failed check's feedback enters the thread, so the router reads it next.
#[derive(Clone)]
pub struct NetworkCompletion {
    pub(crate) scorers: Vec<Arc<dyn Scorer>>,
    pub(crate) strategy: CompletionStrategy,
    pub(crate) timeout: Duration,
    pub(crate) parallel: bool,
    pub(crate) suppress_feedback: bool,
}

impl Default for NetworkCompletion {
    fn default() -> Self {
        Self {
            scorers: Vec::new(),
            strategy: CompletionStrategy::All,
            timeout: DEFAULT_COMPLETION_TIMEOUT,
            parallel: true,
            suppress_feedback: false,
        }
    }
}

impl std::fmt::Debug for NetworkCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkCompletion")
            .field(
                "scorers",
                &self.scorers.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field("strategy", &self.strategy)
            .field("timeout", &self.timeout)
            .field("parallel", &self.parallel)
            .field("suppress_feedback", &self.suppress_feedback)
            .finish()
    }
}

impl NetworkCompletion {
    /// The default check (the routing model judges).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a scorer; with any, the default check no longer runs.
    pub fn scorer(mut self, scorer: impl Scorer + 'static) -> Self {
        self.scorers.push(Arc::new(scorer));
        self
    }

    /// Every scorer must pass (default), or any one.
    pub fn strategy(mut self, strategy: CompletionStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The longest the checks of one iteration may take; a scorer still running then fails.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether the scorers run at once (default) or one after another (which stops at the
    /// first that decides).
    pub fn parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    /// Keeps the checks' feedback out of the thread (the router then does not read it).
    pub fn suppress_feedback(mut self, suppress: bool) -> Self {
        self.suppress_feedback = suppress;
        self
    }
}

/// Why a network could not run, or a decision for a stopped one could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// The agent has no memory (Mastra's `AGENT_NETWORK_MEMORY_REQUIRED`).
    #[error(
        "agent {agent:?} has no memory: a network keeps its task and each iteration in a \
         thread; give the agent a memory (AgentBuilder::memory)"
    )]
    MemoryRequired {
        /// The agent.
        agent: String,
    },
    /// No thread was given.
    #[error(
        "a network of agent {agent:?} needs a thread: NetworkOptions::memory(thread, resource)"
    )]
    ThreadRequired {
        /// The agent.
        agent: String,
    },
    /// The agent has nothing to route to.
    #[error("agent {agent:?} has no sub-agents, workflows or tools for a network to route to")]
    NoPrimitives {
        /// The agent.
        agent: String,
    },
    /// A start for a resource the caller may not act for ([`NetworkRequest::resource`]).
    #[error("this caller acts for another resource than {resource:?}")]
    ForeignResource {
        /// The thread's resource.
        resource: String,
    },
    /// `max_steps` of 0.
    #[error("max_steps must be at least 1 (a network runs at least one iteration)")]
    ZeroMaxSteps,
    /// No stopped network run has this id.
    #[error("no network run {run_id:?} of agent {agent:?} waits for a decision")]
    NotFound {
        /// The agent.
        agent: String,
        /// The run.
        run_id: String,
    },
    /// The run's workflow machinery refused (a run id taken, a run that is not suspended, a
    /// decision that lost a race, the store failing).
    #[error(transparent)]
    Run(#[from] crate::workflow::WorkflowRunError),
}

impl NetworkError {
    /// A stable machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            NetworkError::MemoryRequired { .. } => "AGENT_NETWORK_MEMORY_REQUIRED",
            NetworkError::ThreadRequired { .. } => "AGENT_NETWORK_THREAD_REQUIRED",
            NetworkError::NoPrimitives { .. } => "AGENT_NETWORK_NO_PRIMITIVES",
            NetworkError::ZeroMaxSteps => "AGENT_NETWORK_ZERO_MAX_STEPS",
            NetworkError::ForeignResource { .. } => "AGENT_NETWORK_FOREIGN_RESOURCE",
            NetworkError::NotFound { .. } => "AGENT_NETWORK_RUN_NOT_FOUND",
            NetworkError::Run(_) => "AGENT_NETWORK_RUN",
        }
    }
}

/// What resumes a stopped network run: a decision on an approval, or resume data.
pub(crate) fn approval(approved: bool, reason: Option<String>) -> Value {
    match reason {
        Some(reason) => serde_json::json!({"approved": approved, "reason": reason}),
        None => serde_json::json!({"approved": approved}),
    }
}
