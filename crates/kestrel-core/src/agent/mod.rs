//! Agents: instructions, a model and tools, run in a loop of steps.
//!
//! Build an [`Agent`] with [`Agent::builder`], then call [`Agent::generate`] for the final
//! result or [`Agent::stream`] for every [`crate::event::Event`] as it happens. A run is a
//! serialisable [`RunState`] advanced by an [`AgentRun`]; [`Agent::start_run`] and
//! [`Agent::continue_run`] expose that machinery to drive a run step by step, stop it, store it
//! and continue it in another process.

//!
//! This module is the surface users write against; what it re-exports lives in the layers
//! below it, each importing only those under it: [`crate::run`] (the run machine) <
//! [`crate::workflow`] (workflows, which an agent may hold) < [`crate::definition`] (what an
//! agent is) < [`crate::runtime`] (where and how it runs) <
//! delegation and [`crate::control`] (run control).

mod builder;
mod judge;
mod request;
mod step;
mod workflows;

pub use crate::control::{
    Continue, DEFAULT_DECLINE_REASON, Proceed, RunControlError, RunHandle, SuspendedRun,
    SuspendedRuns,
};
pub use crate::definition::{
    AgentBuildError, AgentError, BackgroundTasks, BackgroundTool, BoxError, BusyThread,
    DEFAULT_MAX_STEPS, DEFAULT_TOOL_CONCURRENCY, DelegationComplete, DelegationCompleteOutcome,
    DelegationOptions, DelegationStart, DelegationStartOutcome, ErrorStrategy, HookErrorStrategy,
    MemoryOptions, MessageFilterContext, OnIterationComplete, RunOptions, StructuredOutput,
    SubAgentResult, background, delegation, iteration,
};
pub use crate::run::{
    CallDecision, CallProgress, DelegatedBy, DelegationHop, GenerateResult, MIN_RUN_STATE_VERSION,
    RUN_STATE_VERSION, RunSettings, RunState, RunStatus, StepResult, SubRun, ToolCallRecord,
    ToolResultRecord, Waiting, WaitingCall,
};
pub use crate::runtime::{
    APPROVAL_RESUME_SCHEMA, Agent, AgentRun, AgentStream, IfActive, IfIdle, MAX_QUEUED_PER_THREAD,
    Queued, SendRequest, Sent, TextStream, ThreadError, ThreadHandle, ThreadSubscription,
};
pub use builder::AgentBuilder;
pub use request::{GenerateRequest, StreamRequest};
pub use step::AgentStep;

use crate::message::Input;

impl Agent {
    /// Starts building an agent with this id.
    pub fn builder(id: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(id)
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
