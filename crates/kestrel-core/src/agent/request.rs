//! The calls that start a run, as builders: `agent.generate("…").memory(thread, resource)
//! .max_steps(5).await?` and `agent.stream("…")….await?`.
//!
//! Each setter is the [`RunOptions`] setter of the same name; [`GenerateRequest::options`] takes
//! options built once and reused.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::definition::iteration::{IterationContext, IterationDecision, TaskCompletion};
use crate::definition::{
    AgentError, BoxError, BusyThread, DelegationOptions, RunOptions, StructuredOutput,
};
use crate::message::Message;
use crate::model::{ModelSettings, ToolChoice};
use crate::run::GenerateResult;
use crate::runtime::{Agent, AgentRun, AgentStream};
use crate::tool::ApprovalPolicy;

/// The [`RunOptions`] setters, on a builder that holds its options in `self.options`.
macro_rules! run_option_setters {
    () => {
        /// Uses these options, replacing those set so far (set the others after it).
        pub fn options(mut self, options: RunOptions) -> Self {
            self.options = options;
            self
        }

        /// Attaches the run to a thread of a resource ([`RunOptions::memory`]).
        pub fn memory(mut self, thread: impl Into<String>, resource: impl Into<String>) -> Self {
            self.options = self.options.memory(thread, resource);
            self
        }

        /// The resource the run acts for when it has no thread ([`RunOptions::resource`]).
        pub fn resource(mut self, resource_id: impl Into<String>) -> Self {
            self.options = self.options.resource(resource_id);
            self
        }

        /// Bounds the number of steps ([`RunOptions::max_steps`]).
        pub fn max_steps(mut self, max_steps: u32) -> Self {
            self.options = self.options.max_steps(max_steps);
            self
        }

        /// Which version of each agent the run uses ([`RunOptions::versions`]).
        pub fn versions(mut self, versions: crate::version::Versions) -> Self {
            self.options = self.options.versions(versions);
            self
        }

        /// Uses this run id ([`RunOptions::run_id`]).
        pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
            self.options = self.options.run_id(run_id);
            self
        }

        /// Cancels the run when `signal` fires ([`RunOptions::abort_signal`]).
        pub fn abort_signal(mut self, signal: AbortSignal) -> Self {
            self.options = self.options.abort_signal(signal);
            self
        }

        /// Uses this request context ([`RunOptions::request_context`]).
        pub fn request_context(mut self, ctx: RequestContext) -> Self {
            self.options = self.options.request_context(ctx);
            self
        }

        /// Asks for structured output ([`RunOptions::structured_output`]).
        pub fn structured_output(mut self, output: StructuredOutput) -> Self {
            self.options = self.options.structured_output(output);
            self
        }

        /// Sets the tool choice ([`RunOptions::tool_choice`]).
        pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
            self.options = self.options.tool_choice(choice);
            self
        }

        /// Sets the sampling settings ([`RunOptions::model_settings`]).
        pub fn model_settings(mut self, settings: ModelSettings) -> Self {
            self.options = self.options.model_settings(settings);
            self
        }

        /// Sets the tool concurrency limit ([`RunOptions::tool_concurrency`]).
        pub fn tool_concurrency(mut self, limit: usize) -> Self {
            self.options = self.options.tool_concurrency(limit);
            self
        }

        /// Requires approval for tool calls ([`RunOptions::require_tool_approval`]).
        pub fn require_tool_approval(mut self, policy: impl Into<ApprovalPolicy>) -> Self {
            self.options = self.options.require_tool_approval(policy);
            self
        }

        /// Steers the loop after each iteration ([`RunOptions::on_iteration_complete`]).
        pub fn on_iteration_complete<F, Fut>(mut self, hook: F) -> Self
        where
            F: Fn(IterationContext) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = Result<IterationDecision, BoxError>> + Send + 'static,
        {
            self.options = self.options.on_iteration_complete(hook);
            self
        }

        /// Judges each final answer ([`RunOptions::is_task_complete`]).
        pub fn is_task_complete(mut self, completion: TaskCompletion) -> Self {
            self.options = self.options.is_task_complete(completion);
            self
        }

        /// Messages the model sees before the input, never stored ([`RunOptions::context`]).
        pub fn context(mut self, messages: Vec<Message>) -> Self {
            self.options = self.options.context(messages);
            self
        }

        /// Hooks and settings of the run's delegations ([`RunOptions::delegation`]).
        pub fn delegation(mut self, delegation: DelegationOptions) -> Self {
            self.options = self.options.delegation(delegation);
            self
        }

        /// Waits for background tasks before finishing ([`RunOptions::until_idle`]).
        pub fn until_idle(mut self, until_idle: bool) -> Self {
            self.options = self.options.until_idle(until_idle);
            self
        }

        /// What to do when the thread is busy ([`RunOptions::on_busy_thread`]).
        pub fn on_busy_thread(mut self, busy: BusyThread) -> Self {
            self.options = self.options.on_busy_thread(busy);
            self
        }

        /// The run, prepared and not started, for driving it step by step
        /// ([`Agent::start_run`]).
        pub fn start(self) -> AgentRun {
            self.agent.start_run(self.input, self.options)
        }
    };
}

/// A run to the end: [`Agent::generate`]'s builder. Await it for the [`GenerateResult`].
#[must_use = "a run does nothing until it is awaited"]
#[derive(Debug)]
pub struct GenerateRequest {
    agent: Agent,
    input: Vec<Message>,
    options: RunOptions,
}

impl GenerateRequest {
    pub(crate) fn new(agent: Agent, input: Vec<Message>) -> Self {
        Self {
            agent,
            input,
            options: RunOptions::default(),
        }
    }

    run_option_setters!();
}

impl IntoFuture for GenerateRequest {
    type Output = Result<GenerateResult, AgentError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start().run())
    }
}

/// A streamed run: [`Agent::stream`]'s builder. Await it for the [`AgentStream`] (a run
/// whose id is taken is refused before any event), or take the stream at once with
/// [`StreamRequest::into_stream`].
#[must_use = "a run does nothing until it is awaited or streamed"]
#[derive(Debug)]
pub struct StreamRequest {
    agent: Agent,
    input: Vec<Message>,
    options: RunOptions,
}

impl StreamRequest {
    pub(crate) fn new(agent: Agent, input: Vec<Message>) -> Self {
        Self {
            agent,
            input,
            options: RunOptions::default(),
        }
    }

    run_option_setters!();

    /// The run's event stream at once, without waiting: a run that cannot start ends its
    /// stream with an `error` event instead. The run goes on if the stream is dropped. Must
    /// be called inside a tokio runtime.
    pub fn into_stream(self) -> AgentStream {
        self.start().into_stream()
    }
}

impl IntoFuture for StreamRequest {
    type Output = Result<AgentStream, AgentError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start().try_into_stream())
    }
}
