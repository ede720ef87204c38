//! One run, named by id: [`RunHandle`] (from [`Agent::run`]) is where everything that can be
//! done to a run is, whether it is in progress here, on another instance, or only stored.
//!
//! # Which call, when
//!
//! A run that is not over is in one of a few situations; each has one answer.
//!
//! | the run… | you see | call |
//! | --- | --- | --- |
//! | waits for a person to allow a tool call | `tool-call-approval`, finish reason `suspended` | [`RunHandle::approve`] or [`RunHandle::decline`] |
//! | waits because its tool suspended itself | `tool-call-suspended` | [`RunHandle::resume`] with data that matches the tool's resume schema |
//! | waits for a client tool's result (a tool without `execute`) | finish reason `tool-calls` | [`RunHandle::submit`] |
//! | is running, and should stop for now | | [`RunHandle::pause`]: it stops at its next step boundary |
//! | is paused, waits for a sub-agent, or its process died | | [`RunHandle::proceed`]: it goes on from its last stored step |
//! | should end, whatever it is doing | | [`RunHandle::abort`] |
//!
//! A decision names one waiting call ([`crate::agent::Continue::fingerprint`] pins it to the
//! very call a person saw), is checked before anything changes, and is recorded with a
//! compare-and-set: of two racing decisions one wins. Each decision, like `proceed`, awaits to
//! the run's result, or `.stream()`s its events.
//!
//! A network run (of [`Agent::network`](crate::agent::Agent::network)) is one workflow step
//! around its whole loop; [`RunHandle::network`] decides for it and aborts it.
//!
//! Messages are a thread's business, not a run's: to add a message to the active run, or to
//! queue one for the thread's next run, use the thread's handle ([`Agent::thread`]).
//!
//! ```no_run
//! # async fn demo(agent: kestrel_core::agent::Agent) -> Result<(), Box<dyn std::error::Error>> {
//! let stopped = agent.generate("email bob").await?;
//! // A person allowed the call the run waits on.
//! let done = agent
//!     .run(&stopped.run_id)
//!     .approve(&stopped.waiting[0].tool_call_id)
//!     .await?;
//! println!("{}", done.text);
//! # Ok(()) }
//! ```

use futures::future::BoxFuture;
use serde_json::Value;

use super::decisions::{CallTarget, Continue, Decision, RunControlError};
use super::lifecycle::RunTarget;
use crate::definition::RunOptions;
use crate::run::GenerateResult;
use crate::runtime::{Agent, AgentStream};

/// A run of an agent, named by id: decide for it, pause it, let it proceed, abort it. Made
/// by [`Agent::run`]; cheap to make, holds no lock, and may name a run that does not exist
/// (each call then answers [`RunControlError::RunNotFound`]).
#[derive(Debug, Clone)]
pub struct RunHandle {
    agent: Agent,
    run_id: String,
    resource_id: Option<String>,
    options: RunOptions,
}

impl Agent {
    /// The run `run_id` of this agent (see [`RunHandle`] for what can be done to it).
    pub fn run(&self, run_id: impl Into<String>) -> RunHandle {
        RunHandle {
            agent: self.clone(),
            run_id: run_id.into(),
            resource_id: None,
            options: RunOptions::default(),
        }
    }
}

impl RunHandle {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.run_id
    }

    /// The agent whose run this is.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The resource the handle acts for, if it was given one.
    pub fn resource_id(&self) -> Option<&str> {
        self.resource_id.as_deref()
    }

    /// Acts for `resource_id`: a run of another resource is not found (no one decides on,
    /// pauses or aborts another user's runs).
    pub fn resource(mut self, resource_id: impl Into<String>) -> Self {
        self.resource_id = Some(resource_id.into());
        self
    }

    /// Options of the run when it goes on after a decision or `proceed`: its abort signal,
    /// request context and run-level approval policy. Its own settings (model settings,
    /// memory, limits) are kept.
    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// The decision `decision` on the call `tool_call_id`, made when awaited.
    fn decide(&self, tool_call_id: impl Into<String>, decision: Decision) -> Continue {
        let call = CallTarget {
            run_id: self.run_id.clone(),
            tool_call_id: tool_call_id.into(),
            fingerprint: None,
            resource_id: self.resource_id.clone(),
            options: self.options.clone(),
        };
        self.agent.continue_with(call, decision)
    }

    fn target(&self) -> RunTarget {
        RunTarget {
            run_id: self.run_id.clone(),
            resource_id: self.resource_id.clone(),
            options: self.options.clone(),
        }
    }

    /// Allows the call `tool_call_id` the run waits on: its tool runs and the run goes on.
    pub fn approve(&self, tool_call_id: impl Into<String>) -> Continue {
        self.decide(tool_call_id, Decision::Approve)
    }

    /// Refuses the call: its tool never runs, and the model reads `reason` (default
    /// [`super::DEFAULT_DECLINE_REASON`]) as the call's failed result.
    pub fn decline(&self, tool_call_id: impl Into<String>, reason: Option<String>) -> Continue {
        self.decide(tool_call_id, Decision::Decline(reason))
    }

    /// Resumes the call whose tool suspended itself: the tool's `execute` runs again with
    /// `data` in [`crate::tool::ToolContext::resume_data`]. Data its resume schema refuses
    /// leaves the run as it was ([`RunControlError::InvalidResumeData`]).
    pub fn resume(&self, tool_call_id: impl Into<String>, data: Value) -> Continue {
        self.decide(tool_call_id, Decision::Resume(data))
    }

    /// Gives a client tool's call (a tool without `execute`) its result (`is_error`: the
    /// model reads it as a failure).
    pub fn submit(
        &self,
        tool_call_id: impl Into<String>,
        result: Value,
        is_error: bool,
    ) -> Continue {
        self.decide(tool_call_id, Decision::ClientResult { result, is_error })
    }

    /// Asks the run, in progress in this process, to stop at its next step boundary (an
    /// active delegation pauses its sub-agent, and the run with it); it is stored paused and
    /// [`RunHandle::proceed`] continues it. `false` when it is not in progress here.
    pub fn pause(&self) -> bool {
        self.agent.runtime.runs.pause_run(&self.run_id)
    }

    /// Continues the run from its last stored step: a paused run, one waiting for its
    /// sub-agent (which goes on first), or one whose process stopped. Await it for the
    /// result, or `.stream()` it. Refused for a run in progress, one that waits for a
    /// decision, a finished one, or a sub-agent's run (proceed with its parent); claiming the
    /// run is a compare-and-set on its snapshot, so of two processes proceeding one wins.
    pub fn proceed(&self) -> Proceed {
        Proceed {
            agent: self.agent.clone(),
            target: self.target(),
        }
    }

    /// Ends the run: in progress here, it gets its abort signal (its sub-agents stop at their
    /// next step, then it does); on another instance of the cluster, that instance stops it;
    /// stored and not finished, it and its unfinished sub-agents' runs are marked aborted,
    /// deepest first. Returns how many stored runs were marked (0 when a live run stops and
    /// records its own end). A network run is aborted with [`RunHandle::network`].
    pub async fn abort(&self) -> Result<usize, RunControlError> {
        self.agent.abort_by_id(self.target()).await
    }
}

/// A stored run about to go on ([`RunHandle::proceed`]): await it for the run's result, or
/// await [`Proceed::stream`] for its events. Nothing is claimed until then.
#[must_use = "a run proceeds only when this is awaited"]
#[derive(Debug)]
pub struct Proceed {
    agent: Agent,
    target: RunTarget,
}

impl Proceed {
    /// Claims the run and continues it as an event stream (same run id, no `start` event).
    pub async fn stream(self) -> Result<AgentStream, RunControlError> {
        Ok(self.agent.claim(self.target).await?.into_stream())
    }
}

impl std::future::IntoFuture for Proceed {
    type Output = Result<GenerateResult, RunControlError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let run = self.agent.claim(self.target).await?;
            run.run().await.map_err(RunControlError::Run)
        })
    }
}
