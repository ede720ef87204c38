//! Sub-agents as tools: the supervisor pattern.
//!
//! [`AgentBuilder::agents`](crate::agent::AgentBuilder::agents) gives an agent one delegation tool per
//! sub-agent, named `agent-<id>` and described by the sub-agent's description, with input
//! `{prompt}`. When the model calls it, the sub-agent runs on:
//!
//! - the parent's conversation so far, as text (user and assistant text; tool calls and results
//!   stay with the parent), then the delegation prompt as the user's message;
//! - a shallow copy of the parent's request context: the sub-agent reads the parent's entries,
//!   and what it sets does not leak back;
//! - a child of the parent's abort signal: aborting the parent stops the sub-agent at its next
//!   step.
//!
//! The parent model sees only the sub-agent's final text. While the parent is streamed, every
//! event of the sub-agent reaches the parent's stream as a `tool-output` event under the
//! delegation's tool call id, so a UI can fill one card per delegation live. A sub-agent that
//! fails gives the parent a failed tool result with a generic message: provider error text is
//! logged, not forwarded to the parent model.
//!
//! **Hooks** ([`DelegationOptions`], in the agent's default options or per call):
//! `on_delegation_start` (proceed, reject with a reason, change the prompt or the step limit),
//! `message_filter` (what the sub-agent receives), `on_delegation_complete` (replace the text
//! the parent model sees now, save feedback for the next turn, stop the parent's loop). A
//! failing hook is skipped by default ([`HookErrorStrategy::Continue`]) or fails the delegation
//! ([`HookErrorStrategy::Throw`]); either way it is recorded in the run's request context under
//! [`DELEGATION_HOOK_ERRORS_KEY`]. Hooks are functions: a run continued after a restart has
//! them only if the continuing call passes them again.
//!
//! **Memory isolation.** The parent's conversation reaches the sub-agent as context that is
//! never stored. A sub-agent with memory runs each delegation in a fresh thread of its own
//! (`<agent id>:<uuid>`, or one per parent thread with
//! [`DelegationOptions::stable_sub_agent_threads`]) under the parent's resource, whose metadata
//! holds `agentId`, `delegatedBy` (the parent run), `delegationToolCallId`, `parentThreadId`
//! and the start hook's `thread_metadata`; only the prompt and the sub-agent's own run are
//! stored there. Nothing of the sub-agent's run is written to the parent's thread: only the
//! parent's delegation call and its result are.
//!
//! **People in the loop, at any depth.** A sub-agent's tool that needs approval, or that
//! suspends, stops the sub-agent and then the parent: the parent's stream carries the
//! `tool-call-approval` / `tool-call-suspended` event (with `via`, the delegation path), its
//! result lists the call in `waiting`, and the decision is taken with the parent's run id
//! (`supervisor.run(parent_run_id).approve(call_id).stream()`): it is recorded in each run on
//! the way down, the sub-agent's run continues, then the parent's. Client tools alone do not
//! stop the parent: the sub-agent cannot get their results, so the delegation reports them as
//! pending (with a warning).
//!
//! **Durable delegation** (see [`crate::agent::RunHandle::proceed`]). Before a delegation
//! starts, the parent's snapshot is saved as waiting for the sub-agent's run, whose id it
//! names; the sub-agent's run saves a snapshot after every step, in the same store. A new
//! process on that store resumes the parent, which continues the sub-agent from its last
//! finished step, then itself. Pause and abort by id reach the sub-agents.
//!
//! **Background delegations** return at once and report later: see
//! [`super::background`].
//!
//! A sub-agent is shared by every run that delegates to it and is never changed by them.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::context::RequestContext;
use crate::error::BoxError;
use crate::message::Message;
use crate::model::{FinishReason, Usage};
use crate::run::{ToolResultRecord, WaitingCall};

pub use crate::context::DELEGATION_HOOK_ERRORS_KEY;

/// The request context key holding how deep a run is in a chain of delegations.
pub const DELEGATION_DEPTH_KEY: &str = "kestrel.delegationDepth";

/// How deep delegations may nest (a sub-agent delegating to a sub-agent…): agents that
/// delegate to each other in a cycle stop here with a clear error.
pub const MAX_DELEGATION_DEPTH: u64 = 8;

type HookFuture<T> = BoxFuture<'static, Result<T, BoxError>>;
type StartHook = dyn Fn(DelegationStart) -> HookFuture<DelegationStartOutcome> + Send + Sync;
type CompleteHook =
    dyn Fn(DelegationComplete) -> HookFuture<DelegationCompleteOutcome> + Send + Sync;
type FilterHook = dyn Fn(MessageFilterContext) -> HookFuture<Vec<Message>> + Send + Sync;

/// What happens when a delegation hook fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HookErrorStrategy {
    /// The delegation goes on as if the hook were not there (default): the start hook's
    /// original prompt, the unfiltered messages, the sub-agent's raw result.
    #[default]
    Continue,
    /// The delegation fails (a start hook failure keeps the sub-agent from running at all).
    Throw,
}

/// Hooks and settings of delegations (Mastra's `delegation` option), in an agent's default
/// options or per call ([`RunOptions::delegation`](crate::agent::RunOptions::delegation)).
#[derive(Clone, Default)]
pub struct DelegationOptions {
    pub(crate) on_start: Option<Arc<StartHook>>,
    pub(crate) on_complete: Option<Arc<CompleteHook>>,
    pub(crate) message_filter: Option<Arc<FilterHook>>,
    pub(crate) hook_error_strategy: HookErrorStrategy,
    pub(crate) include_tool_results: bool,
    pub(crate) stable_threads: bool,
    pub(crate) references: bool,
}

impl std::fmt::Debug for DelegationOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationOptions")
            .field("on_delegation_start", &self.on_start.is_some())
            .field("on_delegation_complete", &self.on_complete.is_some())
            .field("message_filter", &self.message_filter.is_some())
            .field("hook_error_strategy", &self.hook_error_strategy)
            .field("include_tool_results", &self.include_tool_results)
            .field("stable_threads", &self.stable_threads)
            .field("result_references", &self.references)
            .finish()
    }
}

impl DelegationOptions {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called before each delegation: proceed, reject with a reason, or change the prompt or the
    /// sub-agent's step limit.
    pub fn on_delegation_start<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(DelegationStart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<DelegationStartOutcome, BoxError>> + Send + 'static,
    {
        self.on_start = Some(Arc::new(move |ctx| hook(ctx).boxed()));
        self
    }

    /// Called after each delegation (succeeded or failed): replace the text the parent model
    /// sees now, save feedback for the next turn, or stop the parent's loop.
    pub fn on_delegation_complete<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(DelegationComplete) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<DelegationCompleteOutcome, BoxError>> + Send + 'static,
    {
        self.on_complete = Some(Arc::new(move |ctx| hook(ctx).boxed()));
        self
    }

    /// Chooses the messages of the parent's conversation the sub-agent receives.
    pub fn message_filter<F, Fut>(mut self, filter: F) -> Self
    where
        F: Fn(MessageFilterContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Message>, BoxError>> + Send + 'static,
    {
        self.message_filter = Some(Arc::new(move |ctx| filter(ctx).boxed()));
        self
    }

    /// What a failing hook does (default: the delegation goes on without it).
    pub fn hook_error_strategy(mut self, strategy: HookErrorStrategy) -> Self {
        self.hook_error_strategy = strategy;
        self
    }

    /// Keeps one thread per sub-agent and parent thread (`<parent thread>:<agent id>`), so a
    /// sub-agent with memory sees its earlier delegations of the conversation; by default each
    /// delegation gets a fresh thread.
    pub fn stable_sub_agent_threads(mut self, stable: bool) -> Self {
        self.stable_threads = stable;
        self
    }

    /// Gives each successful, non-empty result an id (`<agent>-<n>`, shown to the parent model
    /// as `[ref: <id>]` after the text) that later delegations can pass in `contextFromRefs`:
    /// the referenced text is put before their prompt verbatim, each in a block with a fresh,
    /// unpredictable label and an instruction to treat it as data. References live for one
    /// parent run; unknown ids are skipped with a warning.
    pub fn enable_result_references(mut self, enable: bool) -> Self {
        self.references = enable;
        self
    }

    /// Also shows the parent model the sub-agent's tool calls and results, after its text.
    pub fn include_sub_agent_tool_results_in_model_context(mut self, include: bool) -> Self {
        self.include_tool_results = include;
        self
    }
}

/// What `on_delegation_start` sees.
#[derive(Debug, Clone)]
pub struct DelegationStart {
    /// The sub-agent's id.
    pub primitive_id: String,
    /// The prompt the parent wrote.
    pub prompt: String,
    /// The parent's step (0 for the first model call).
    pub iteration: u32,
    /// The request context the sub-agent will run with (a copy of the parent's): set entries
    /// here to pass values to it.
    pub request_context: RequestContext,
    /// The delegation's tool call id.
    pub tool_call_id: String,
    /// The parent's run id.
    pub run_id: String,
}

/// What `on_delegation_start` decides. [`DelegationStartOutcome::proceed`] is the default.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationStartOutcome {
    /// Whether the delegation happens.
    pub proceed: bool,
    /// Why not (the parent model reads it).
    pub rejection_reason: Option<String>,
    /// The prompt to send instead.
    pub modified_prompt: Option<String>,
    /// A tighter step limit for the sub-agent.
    pub modified_max_steps: Option<u32>,
    /// Metadata for the sub-agent's thread (when it has memory), to find it again with a
    /// `list_threads` metadata filter.
    pub thread_metadata: Option<serde_json::Map<String, Value>>,
}

impl Default for DelegationStartOutcome {
    fn default() -> Self {
        Self::proceed()
    }
}

impl DelegationStartOutcome {
    /// Let the delegation happen as asked.
    pub fn proceed() -> Self {
        Self {
            proceed: true,
            rejection_reason: None,
            modified_prompt: None,
            modified_max_steps: None,
            thread_metadata: None,
        }
    }

    /// Refuse it; the parent model reads `reason`.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self {
            proceed: false,
            rejection_reason: Some(reason.into()),
            ..Self::proceed()
        }
    }

    /// Send this prompt instead.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.modified_prompt = Some(prompt.into());
        self
    }

    /// Limit the sub-agent to this many steps.
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.modified_max_steps = Some(max_steps);
        self
    }

    /// Metadata for the sub-agent's thread.
    pub fn thread_metadata(mut self, metadata: serde_json::Map<String, Value>) -> Self {
        self.thread_metadata = Some(metadata);
        self
    }

    /// Refuses an outcome that says two things at once.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !self.proceed && (self.modified_prompt.is_some() || self.modified_max_steps.is_some()) {
            return Err("the start hook both rejected the delegation and changed it".into());
        }
        if self.proceed && self.rejection_reason.is_some() {
            return Err(
                "the start hook gave a rejection reason but let the delegation proceed".into(),
            );
        }
        if self.modified_max_steps == Some(0) {
            return Err("the start hook set the sub-agent's max steps to 0".into());
        }
        Ok(())
    }
}

/// The sub-agent's result, as `on_delegation_complete` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubAgentResult {
    /// Its final text.
    pub text: String,
    /// Its token usage.
    pub usage: Usage,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Its tool results.
    pub sub_agent_tool_results: Vec<ToolResultRecord>,
    /// Calls it stopped on (approvals, suspensions, client tools).
    pub sub_agent_pending_tool_calls: Vec<WaitingCall>,
    /// Its run id.
    pub sub_agent_run_id: String,
    /// The thread the delegation ran in, when the sub-agent has memory.
    pub sub_agent_thread_id: Option<String>,
    /// That thread's resource.
    pub sub_agent_resource_id: Option<String>,
}

/// What `on_delegation_complete` sees.
#[derive(Debug, Clone)]
pub struct DelegationComplete {
    /// The sub-agent's id.
    pub primitive_id: String,
    /// Its result, when it produced one.
    pub result: Option<SubAgentResult>,
    /// Whether the delegation succeeded.
    pub success: bool,
    /// The original error, when it failed (do not forward it to the model as is: provider
    /// errors may hold sensitive text).
    pub error: Option<String>,
    /// The messages the sub-agent's run produced.
    pub messages: Vec<Message>,
    /// The delegation's tool call id.
    pub tool_call_id: String,
    /// The parent's run id.
    pub run_id: String,
}

/// What `on_delegation_complete` decides (default: nothing changes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DelegationCompleteOutcome {
    /// Feedback saved to the parent's thread for the next turn.
    pub feedback: Option<String>,
    /// Text the parent model sees now instead of the result (a failed delegation stays failed).
    pub result_text: Option<String>,
    /// Stop the parent's loop after this step.
    pub bail: bool,
}

impl DelegationCompleteOutcome {
    /// Change nothing.
    pub fn keep() -> Self {
        Self::default()
    }

    /// Save feedback for the next turn.
    pub fn feedback(mut self, feedback: impl Into<String>) -> Self {
        self.feedback = Some(feedback.into());
        self
    }

    /// Show the parent model this text now.
    pub fn result_text(mut self, text: impl Into<String>) -> Self {
        self.result_text = Some(text.into());
        self
    }

    /// Stop the parent's loop after this step.
    pub fn bail(mut self) -> Self {
        self.bail = true;
        self
    }
}

/// What a message filter sees.
#[derive(Debug, Clone)]
pub struct MessageFilterContext {
    /// The parent's conversation as the sub-agent would get it.
    pub messages: Vec<Message>,
    /// The sub-agent's id.
    pub primitive_id: String,
    /// The delegation prompt.
    pub prompt: String,
}
