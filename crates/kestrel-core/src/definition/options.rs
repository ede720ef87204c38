//! Per-call options of `generate` and `stream`.

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::BoxError;
use super::delegation::DelegationOptions;
use super::iteration::{
    IterationContext, IterationDecision, IterationHook, TaskCompletion, iteration_hook,
};
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::message::Message;
use crate::model::{ModelSettings, ToolChoice};
use crate::run::SavedApproval;
use crate::tool::ApprovalPolicy;

pub use crate::run::{ErrorStrategy, StructuredOutput};

/// Memory coordinates of a run: the conversation (`thread`) and its owner (`resource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryOptions {
    /// The thread id.
    pub thread: String,
    /// The resource id.
    pub resource: String,
}

/// Options of one `generate` or `stream` call. Unset fields fall back to the agent's defaults.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Use this run id instead of a fresh one.
    pub run_id: Option<String>,
    /// Upper bound on steps (model calls).
    pub max_steps: Option<u32>,
    /// Cancels the run.
    pub abort_signal: Option<AbortSignal>,
    /// Values for dynamic instructions, models and tools.
    pub request_context: Option<RequestContext>,
    /// Ask for a JSON answer matching a schema.
    pub structured_output: Option<StructuredOutput>,
    /// Whether and which tool the model must call.
    pub tool_choice: Option<ToolChoice>,
    /// Sampling settings.
    pub model_settings: Option<ModelSettings>,
    /// How many tool calls of one step run at once (default 10).
    pub tool_concurrency: Option<usize>,
    /// The conversation this run belongs to.
    pub memory: Option<MemoryOptions>,
    /// The resource a run without a thread acts for (with `memory`, the thread's resource
    /// wins): stored with its snapshot, so decisions can be pinned to it.
    pub resource: Option<String>,
    /// Which tool calls need a person's approval, on top of each tool's own policy (a call
    /// needs approval when either says so).
    pub require_tool_approval: Option<ApprovalPolicy>,
    /// What a run on a thread busy with another run does: wait its turn (default) or fail.
    pub on_busy_thread: Option<BusyThread>,
    /// Hooks and settings of delegations to sub-agents.
    pub delegation: Option<DelegationOptions>,
    /// Messages the model sees before the input that memory never stores (a delegation passes
    /// the parent's conversation this way).
    pub context: Option<Vec<Message>>,
    /// Called after each iteration: go on or stop, with feedback.
    pub on_iteration_complete: Option<OnIterationComplete>,
    /// Scorers that judge each final answer; until they pass, the loop goes on.
    pub is_task_complete: Option<TaskCompletion>,
    /// Keep the run (and its stream) going until every background task it started has ended
    /// and its result was answered (Mastra's `untilIdle`).
    pub until_idle: Option<bool>,
    /// Which version of each agent the run and its delegations use (Mastra's `versions`);
    /// over the instance's defaults. Agents it does not name use their published version.
    pub versions: Option<crate::version::Versions>,
    /// Where the run's spans go in a trace: the caller's trace and parent span (an incoming
    /// `traceparent`, a delegating call), instead of a new trace.
    pub trace: Option<crate::trace::TraceContext>,
    /// Records the run's spans with this tracer when the agent's instance has none (an agent
    /// run by a traced workflow step, outside the instance that traces).
    pub tracer: Option<crate::trace::Tracer>,
    /// What the run's trace says of it: a name, tags, metadata, a user (Mastra's
    /// `tracingOptions`).
    pub tracing: Option<crate::trace::TracingOptions>,
    /// What tools answer instead of running, by tool name (an experiment item's
    /// `toolMocks`): a call of a mocked tool gets this value as its result, and the tool never
    /// runs.
    pub tool_mocks: Option<ToolMocks>,
}

/// Results standing in for tools, by tool name (see [`RunOptions::tool_mocks`]).
pub type ToolMocks = Arc<std::collections::HashMap<String, serde_json::Value>>;

/// An `on_iteration_complete` function (see [`RunOptions::on_iteration_complete`]).
#[derive(Clone)]
pub struct OnIterationComplete(pub(crate) Arc<IterationHook>);

impl std::fmt::Debug for OnIterationComplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnIterationComplete(<fn>)")
    }
}

/// What a run does when its thread is busy with another run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BusyThread {
    /// Wait until the runs before it are done (their messages first, then its own).
    #[default]
    Wait,
    /// Fail at once with [`crate::agent::AgentError::ThreadBusy`].
    Fail,
}

impl RunOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// These options, each unset one taken from `defaults` (an agent's default options):
    /// what a run uses. The abort signal, the context messages and the resource of a run
    /// without a thread are the call's own and never come from `defaults`.
    pub fn or(self, defaults: &RunOptions) -> RunOptions {
        let d = defaults;
        RunOptions {
            run_id: self.run_id.or_else(|| d.run_id.clone()),
            max_steps: self.max_steps.or(d.max_steps),
            abort_signal: self.abort_signal,
            request_context: self.request_context.or_else(|| d.request_context.clone()),
            structured_output: self
                .structured_output
                .or_else(|| d.structured_output.clone()),
            tool_choice: self.tool_choice.or_else(|| d.tool_choice.clone()),
            model_settings: self.model_settings.or_else(|| d.model_settings.clone()),
            tool_concurrency: self.tool_concurrency.or(d.tool_concurrency),
            memory: self.memory.or_else(|| d.memory.clone()),
            resource: self.resource,
            require_tool_approval: self
                .require_tool_approval
                .or_else(|| d.require_tool_approval.clone()),
            on_busy_thread: self.on_busy_thread.or(d.on_busy_thread),
            delegation: self.delegation.or_else(|| d.delegation.clone()),
            context: self.context,
            on_iteration_complete: self
                .on_iteration_complete
                .or_else(|| d.on_iteration_complete.clone()),
            is_task_complete: self.is_task_complete.or_else(|| d.is_task_complete.clone()),
            until_idle: self.until_idle.or(d.until_idle),
            versions: self.versions.or_else(|| d.versions.clone()),
            trace: self.trace,
            tracer: self.tracer,
            tracing: self.tracing.or_else(|| d.tracing.clone()),
            tool_mocks: self.tool_mocks.or_else(|| d.tool_mocks.clone()),
        }
    }

    /// Puts the run's spans in the caller's trace, under its span (see [`crate::trace`]):
    /// `TraceContext::from_traceparent(header)`, say. A run continued later stays in the
    /// trace it started in.
    pub fn trace(mut self, trace: crate::trace::TraceContext) -> Self {
        self.trace = Some(trace);
        self
    }

    /// Names the run's span, tags it, gives it metadata and a user (Mastra's
    /// `tracingOptions`; where the trace goes is [`RunOptions::trace`]).
    pub fn tracing_options(mut self, options: crate::trace::TracingOptions) -> Self {
        self.tracing = Some(options);
        self
    }

    /// Records the run's spans with `tracer` when the agent's instance does not trace.
    pub fn tracer(mut self, tracer: crate::trace::Tracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// Which version of each agent the run and every delegation in it use (see
    /// [`crate::version`]): `Versions::new().agent("writing", VersionChoice::id("…"))`.
    pub fn versions(mut self, versions: crate::version::Versions) -> Self {
        self.versions = Some(versions);
        self
    }

    /// Requires approval for every tool call (`true`), or for the calls a policy selects
    /// ([`ApprovalPolicy::when`]). A continued run (an approval, a resume, after a restart
    /// too) keeps `true`; a function cannot be saved, so unless the continuing call passes one
    /// again it is the agent's default function (its
    /// [`default_options`](crate::agent::AgentBuilder::default_options)), and without one every
    /// later call of that run needs approval (it never silently needs none).
    pub fn require_tool_approval(mut self, policy: impl Into<ApprovalPolicy>) -> Self {
        self.require_tool_approval = Some(policy.into());
        self
    }

    /// Called after each iteration (a model call and its tool calls): continue or stop, with
    /// feedback the model reads next (see [`crate::agent::iteration`]).
    pub fn on_iteration_complete<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(IterationContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<IterationDecision, BoxError>> + Send + 'static,
    {
        self.on_iteration_complete = Some(OnIterationComplete(iteration_hook(hook)));
        self
    }

    /// Judges each final answer with scorers; a failing answer's feedback enters the
    /// conversation and the loop goes on, within `max_steps`.
    pub fn is_task_complete(mut self, completion: TaskCompletion) -> Self {
        self.is_task_complete = Some(completion);
        self
    }

    /// Messages the model sees before the input, never stored in the run's thread.
    pub fn context(mut self, messages: Vec<Message>) -> Self {
        self.context = Some(messages);
        self
    }

    /// Hooks and settings of this run's delegations to sub-agents.
    pub fn delegation(mut self, delegation: DelegationOptions) -> Self {
        self.delegation = Some(delegation);
        self
    }

    /// The resource the run acts for when it has no thread (see [`RunOptions::resource`]).
    pub fn resource(mut self, resource_id: impl Into<String>) -> Self {
        self.resource = Some(resource_id.into());
        self
    }

    /// Waits for the run's background tasks before it finishes (see
    /// [`crate::agent::background`]).
    pub fn until_idle(mut self, until_idle: bool) -> Self {
        self.until_idle = Some(until_idle);
        self
    }

    /// Tools answer with these results instead of running, by tool name (an experiment's
    /// mocks): the calls are made, streamed and recorded as usual, only not executed.
    pub fn tool_mocks(
        mut self,
        mocks: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Self {
        self.tool_mocks = Some(Arc::new(mocks.into_iter().collect()));
        self
    }

    /// What the run does when its thread is busy with another run (default: wait).
    pub fn on_busy_thread(mut self, busy: BusyThread) -> Self {
        self.on_busy_thread = Some(busy);
        self
    }

    /// Uses this run id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Bounds the number of steps.
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = Some(max_steps);
        self
    }

    /// Cancels the run when `signal` fires.
    pub fn abort_signal(mut self, signal: AbortSignal) -> Self {
        self.abort_signal = Some(signal);
        self
    }

    /// Uses this request context.
    pub fn request_context(mut self, ctx: RequestContext) -> Self {
        self.request_context = Some(ctx);
        self
    }

    /// Asks for structured output.
    pub fn structured_output(mut self, output: StructuredOutput) -> Self {
        self.structured_output = Some(output);
        self
    }

    /// Sets the tool choice.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets the sampling settings.
    pub fn model_settings(mut self, settings: ModelSettings) -> Self {
        self.model_settings = Some(settings);
        self
    }

    /// Sets the tool concurrency limit (at least 1).
    pub fn tool_concurrency(mut self, limit: usize) -> Self {
        self.tool_concurrency = Some(limit.max(1));
        self
    }

    /// Attaches the run to a thread of a resource.
    pub fn memory(mut self, thread: impl Into<String>, resource: impl Into<String>) -> Self {
        self.memory = Some(MemoryOptions {
            thread: thread.into(),
            resource: resource.into(),
        });
        self
    }
}

/// The approval policy of a run: the call's, else the agent's default. A continued run
/// (`saved`: what its state recorded at the start) without a policy of the call keeps the one
/// it started with: a function is not saved, so one recorded as a function is the agent's
/// default function when it has one (the function the run most likely started with), and
/// otherwise every call needs approval: nothing is let through by default.
pub(crate) fn approval_policy(
    call: Option<ApprovalPolicy>,
    default: Option<&ApprovalPolicy>,
    saved: Option<SavedApproval>,
) -> ApprovalPolicy {
    if let Some(policy) = call {
        return policy;
    }
    match saved {
        None => default.cloned().unwrap_or_default(),
        Some(SavedApproval::Never) => ApprovalPolicy::Never,
        Some(SavedApproval::Always) => ApprovalPolicy::Always,
        Some(SavedApproval::Function) => match default {
            Some(policy @ ApprovalPolicy::When(_)) => policy.clone(),
            _ => ApprovalPolicy::Always,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::tool::ApprovalContext;
    use serde_json::json;

    fn asks(policy: &ApprovalPolicy, a: i64) -> bool {
        let request_context = RequestContext::new();
        let ctx = ApprovalContext {
            tool_name: "add",
            request_context: &request_context,
            thread_id: None,
            resource_id: None,
        };
        policy.requires(&json!({ "a": a }), &ctx)
    }

    fn over_100() -> ApprovalPolicy {
        ApprovalPolicy::when(|args, _| args["a"].as_i64().is_some_and(|a| a > 100))
    }

    #[test]
    fn a_new_run_takes_the_call_policy_else_the_default() {
        let default = over_100();
        let policy = approval_policy(None, Some(&default), None);
        assert!(asks(&policy, 200) && !asks(&policy, 1));
        let policy = approval_policy(Some(ApprovalPolicy::Never), Some(&default), None);
        assert!(!asks(&policy, 200));
        assert!(!asks(&approval_policy(None, None, None), 200));
    }

    #[test]
    fn a_continued_run_keeps_what_it_started_with() {
        let default = over_100();
        // A function is not saved: the agent's default function stands in for it...
        let policy = approval_policy(None, Some(&default), Some(SavedApproval::Function));
        assert!(asks(&policy, 200) && !asks(&policy, 1));
        // ...and without one, every call asks: nothing is let through by default.
        let policy = approval_policy(None, None, Some(SavedApproval::Function));
        assert!(asks(&policy, 1));
        let policy = approval_policy(None, Some(&default), Some(SavedApproval::Never));
        assert!(!asks(&policy, 200));
        let policy = approval_policy(None, None, Some(SavedApproval::Always));
        assert!(asks(&policy, 1));
        // The continuing call's own policy wins.
        let policy = approval_policy(
            Some(ApprovalPolicy::Never),
            Some(&default),
            Some(SavedApproval::Always),
        );
        assert!(!asks(&policy, 200));
    }

    #[test]
    fn the_calls_options_stand_over_the_defaults_and_fill_from_them() {
        let defaults = RunOptions::new()
            .max_steps(3)
            .run_id("from-defaults")
            .abort_signal(AbortSignal::new())
            .context(vec![Message::user("the defaults' context")])
            .resource("the defaults' resource")
            .until_idle(true);
        let merged = RunOptions::new().max_steps(7).or(&defaults);
        assert_eq!(merged.max_steps, Some(7), "the call's own stands");
        assert_eq!(merged.run_id.as_deref(), Some("from-defaults"));
        assert_eq!(merged.until_idle, Some(true));
        // A run's abort signal, context and thread-less resource are the call's alone.
        assert!(merged.abort_signal.is_none());
        assert!(merged.context.is_none());
        assert!(merged.resource.is_none());
    }
}
