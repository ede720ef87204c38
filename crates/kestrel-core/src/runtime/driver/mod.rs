//! The async driver: performs what the run machine ([`crate::run`]) asks for (model calls,
//! tools, memory, snapshots) and emits the run's events.
//!
//! [`AgentRun::step`] asks the state for its [`Action`] and performs it: the model call
//! ([`model_step`]), the tools ([`tools_step`]), the hooks and the wrap-up ([`between_steps`]);
//! memory I/O is in [`memory_io`]; what comes before the first step and after the last
//! (registration, the thread, the cluster's lease) is in [`lifecycle`]. Every error of a step
//! goes through one place, `fail`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use tracing::Instrument;

use super::Agent;
use super::background::BackgroundRuntime;
use super::registry::Lease;
use super::stream::AgentStream;
use super::subrun::{DelegationRuntime, SubRunContext};
use crate::abort::AbortSignal;
use crate::cluster::member::Hold;
use crate::context::RequestContext;
use crate::definition::iteration::TaskCompletion;
use crate::definition::{
    AgentError, BusyThread, DEFAULT_TOOL_CONCURRENCY, DelegationOptions, OnIterationComplete,
    RunOptions, approval_policy,
};
use crate::event::*;
use crate::message::Message;
use crate::model::{FinishReason, SharedModel};
use crate::run::{
    Action, MIN_RUN_STATE_VERSION, RUN_STATE_VERSION, RunSettings, RunState, SavedApproval,
};
use crate::sink::{EventQueue, EventSink};
use crate::store::{RunPhase, SharedRunStore};
use crate::tool::ApprovalPolicy;

/// Emits an event only when someone observes the sink, so `generate` builds no events.
macro_rules! emit {
    ($sink:expr, $run_id:expr, $kind:expr) => {
        if $sink.is_observed() {
            $sink
                .emit($crate::event::Event::agent($run_id.clone(), $kind))
                .await;
        }
    };
}

/// `$work.await`; on an error, the run is failed with it ([`AgentRun::fail`]) and the error
/// returned. The error is consumed in the statement that awaited it: an `if let Err(e) =
/// work.await { return Err(self.fail(e).await) }` keeps the `Result` (112 bytes or more)
/// alive across `fail`'s await, which gives it room of its own in every run's future.
macro_rules! or_fail {
    ($run:expr, $work:expr) => {{
        let outcome = match $work.await {
            Ok(value) => Ok(value),
            Err(e) => Err($run.fail(e)),
        };
        match outcome {
            Ok(value) => value,
            Err(failing) => return Err(failing.await),
        }
    }};
}

mod between_steps;
mod lifecycle;
mod memory_io;
mod model_step;
mod processors;
mod tools_step;
pub(crate) use tools_step::RunVersions;

/// How long tools that watch the abort signal may take to return after an abort.
const ABORT_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// A run being driven: its [`RunState`] plus what is not serialised (the resolved model and
/// instructions, the abort signal, the live request context, where events go).
///
/// [`AgentRun::step`] advances one step; [`AgentRun::run`] runs to the end; [`AgentRun::state`]
/// gives the state to store; [`AgentRun::into_stream`] continues in the background.
pub struct AgentRun {
    agent: Agent,
    state: RunState,
    run_id: Arc<str>,
    abort: AbortSignal,
    request_context: RequestContext,
    sink: EventSink,
    model: Option<SharedModel>,
    system: Option<Option<String>>,
    /// The skills' catalog and how to use it (system messages after the instructions),
    /// resolved with the instructions.
    skill_system: Vec<String>,
    /// The run-level approval policy (the tools' own are asked too).
    approval: ApprovalPolicy,
    /// The version of the run's saved snapshot, once it has one.
    snapshot_version: Option<i64>,
    /// What to do when the thread is busy with another run.
    busy: BusyThread,
    /// The run's hold on its thread, while `run` drives it.
    lease: Option<Lease>,
    /// In a cluster: the run's lease, while this instance drives it.
    hold: Option<Hold>,
    /// Delegation hooks, and what they asked of the loop.
    delegation: Option<Arc<DelegationRuntime>>,
    /// `on_iteration_complete`.
    iteration_hook: Option<OnIterationComplete>,
    /// `is_task_complete`.
    task_completion: Option<TaskCompletion>,
    /// The next model call is the last: no tools, then the run ends.
    last_turn: bool,
    /// Whether the current step's error has been through `fail`, so [`AgentRun::step`] does
    /// not end the run a second time.
    error_handled: bool,
    /// The run stopped at a pause, saved.
    paused: bool,
    /// Where the run's snapshots go: the agent's store, or the delegating parent's.
    store: SharedRunStore,
    /// Fired to pause the run at its next step boundary.
    pause: AbortSignal,
    /// Save a snapshot after every step (delegated runs, so a restart loses no finished step).
    durable_steps: bool,
    /// The run's background tasks, once it started one.
    background: Option<Arc<BackgroundRuntime>>,
    /// Wait for the background tasks before finishing.
    until_idle: bool,
    /// The caller chose the run id of this new run: it must not be a stored run's.
    chosen_id: bool,
    /// The caller (or the agent's defaults) chose the bound on steps: a version's does not
    /// apply.
    max_steps_chosen: bool,
    /// Whether the agent's version was looked up for this run (in this process).
    version_resolved: bool,
    /// The span of this drive of the run, when the instance traces.
    span: Option<crate::trace::ActiveSpan>,
    /// What records the run's spans: the instance's tracer, else the caller's
    /// ([`RunOptions::tracer`](crate::agent::RunOptions::tracer)).
    tracer: Option<crate::trace::Tracer>,
    /// Results standing in for tools ([`RunOptions::tool_mocks`]).
    tool_mocks: Option<crate::definition::ToolMocks>,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun")
            .field("run_id", &self.run_id)
            .field("agent", &self.agent.id())
            .field("status", &self.state.status)
            .finish()
    }
}

impl AgentRun {
    pub(crate) fn start(agent: Agent, input: Vec<Message>, options: RunOptions) -> Self {
        // The call's options over the agent's defaults: every choice below reads them alone.
        let options = options.or(&agent.inner.defaults);
        let settings = RunSettings {
            tool_choice: options.tool_choice.unwrap_or_default(),
            model_settings: options.model_settings.unwrap_or_default(),
            structured_output: options.structured_output,
            tool_concurrency: options
                .tool_concurrency
                .unwrap_or(DEFAULT_TOOL_CONCURRENCY)
                .max(1),
            thread_id: options.memory.as_ref().map(|m| m.thread.clone()),
            resource_id: options
                .memory
                .as_ref()
                .map(|m| m.resource.clone())
                .or_else(|| options.resource.clone()),
            tool_approval: SavedApproval::Never,
            versions: options
                .versions
                .unwrap_or_default()
                .over(&agent.runtime.versions),
            version_id: None,
        };
        let approval = options.require_tool_approval.unwrap_or_default();
        let chosen_id = options.run_id.is_some();
        let run_id = options.run_id.unwrap_or_else(crate::id::new_id);
        let max_steps_chosen = options.max_steps.is_some();
        let max_steps = options.max_steps.unwrap_or(agent.inner.max_steps).max(1);
        let context = options.context.unwrap_or_default();
        let context_len = context.len();
        let mut messages = context;
        messages.extend(input);
        let mut state = RunState::new(
            run_id,
            agent.inner.id.clone(),
            messages,
            max_steps,
            settings,
        );
        state.context_len = context_len;
        // The caller's trace, when it gave one; else the run starts its own.
        state.trace = options.trace;
        state.tracing = options.tracing;
        let tracer = options.tracer;
        state.settings.tool_approval = match &approval {
            ApprovalPolicy::Never => SavedApproval::Never,
            ApprovalPolicy::Always => SavedApproval::Always,
            ApprovalPolicy::When(_) => SavedApproval::Function,
        };
        let request_context = options.request_context.unwrap_or_default();
        let abort = options.abort_signal.unwrap_or_default();
        let mut run = Self::with_state(agent, state, abort, request_context);
        if run.tracer.is_none() {
            run.tracer = tracer;
        }
        run.approval = approval;
        run.tool_mocks = options.tool_mocks;
        run.busy = options.on_busy_thread.unwrap_or_default();
        run.until_idle = options.until_idle.unwrap_or(false);
        run.chosen_id = chosen_id;
        run.max_steps_chosen = max_steps_chosen;
        run.with_hooks(
            options.delegation,
            options.on_iteration_complete,
            options.is_task_complete,
        )
    }

    /// The run's hooks (the call's options over the agent's defaults).
    fn with_hooks(
        mut self,
        delegation: Option<DelegationOptions>,
        iteration_hook: Option<OnIterationComplete>,
        task_completion: Option<TaskCompletion>,
    ) -> Self {
        self.delegation = delegation.map(|o| Arc::new(DelegationRuntime::new(o)));
        self.iteration_hook = iteration_hook;
        self.task_completion = task_completion;
        self
    }

    pub(crate) fn resume(
        agent: Agent,
        state: RunState,
        options: RunOptions,
    ) -> Result<Self, AgentError> {
        let invalid = |message: String| AgentError::InvalidRunState {
            run_id: state.run_id.clone(),
            message,
        };
        if !(MIN_RUN_STATE_VERSION..=RUN_STATE_VERSION).contains(&state.version) {
            return Err(invalid(format!(
                "state version {} is not supported (this build reads versions \
                 {MIN_RUN_STATE_VERSION} to {RUN_STATE_VERSION})",
                state.version
            )));
        }
        if state.agent_id != agent.id() {
            return Err(invalid(format!(
                "the state belongs to agent {:?}, not {:?}",
                state.agent_id,
                agent.id()
            )));
        }
        if state.is_finished() {
            return Err(invalid("the run is already finished".into()));
        }
        let mut options = options;
        // A resumed run keeps its own request context, and its approval policy as it was
        // saved: those two are not the defaults' to fill.
        let request_context = options
            .request_context
            .take()
            .unwrap_or_else(|| RequestContext::from(state.request_context.clone()));
        let d = &agent.inner.defaults;
        let approval = approval_policy(
            options.require_tool_approval.take(),
            d.require_tool_approval.as_ref(),
            Some(state.settings.tool_approval),
        );
        let options = options.or(d);
        let abort = options.abort_signal.unwrap_or_default();
        let mut run = Self::with_state(agent, state, abort, request_context);
        run.approval = approval;
        run.tool_mocks = options.tool_mocks;
        run.until_idle = options.until_idle.unwrap_or(false);
        Ok(run.with_hooks(
            options.delegation,
            options.on_iteration_complete,
            options.is_task_complete,
        ))
    }

    /// Hands the run the lease its claim took (a decision, a resume), so that it drives the
    /// run under the token its claim was saved with.
    pub(crate) fn with_hold(mut self, hold: Option<Hold>) -> Self {
        self.state.lease_token = hold.as_ref().map(Hold::token);
        self.hold = hold;
        self
    }

    /// Marks the run as continued from a snapshot saved at `version`.
    pub(crate) fn with_snapshot_version(mut self, version: i64) -> Self {
        self.snapshot_version = Some(version);
        self
    }

    fn with_state(
        agent: Agent,
        state: RunState,
        abort: AbortSignal,
        request_context: RequestContext,
    ) -> Self {
        Self {
            run_id: state.run_id.as_str().into(),
            store: Arc::clone(agent.run_store()),
            pause: AbortSignal::new(),
            durable_steps: false,
            background: None,
            until_idle: false,
            chosen_id: false,
            max_steps_chosen: false,
            version_resolved: false,
            span: None,
            tool_mocks: None,
            tracer: agent.runtime.tracer.clone(),
            agent,
            state,
            abort,
            request_context,
            sink: EventSink::discard(),
            model: None,
            system: None,
            skill_system: Vec::new(),
            approval: ApprovalPolicy::Never,
            snapshot_version: None,
            busy: BusyThread::Wait,
            lease: None,
            hold: None,
            delegation: None,
            iteration_hook: None,
            task_completion: None,
            last_turn: false,
            error_handled: false,
            paused: false,
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Makes this run a delegation of `link`'s parent: its snapshots go to the parent's store
    /// after every step, and it pauses with the parent.
    pub(crate) fn delegated(mut self, link: &SubRunContext) -> Self {
        self.store = Arc::clone(&link.store);
        self.pause = link.pause.child();
        // A delegation names its sub-agent's run itself (and continues it after a restart).
        self.chosen_id = false;
        // Only a store that outlives the process makes step snapshots worth their cost.
        self.durable_steps = link.store.is_durable();
        self.state.delegated_by = Some(link.delegated_by.clone());
        self
    }

    /// Makes this run a background task of `origin`'s run (saved with its snapshots).
    pub(crate) fn set_background_for(&mut self, origin: crate::run::BackgroundOrigin) {
        self.state.background_for = Some(origin);
    }

    /// The run's abort signal.
    pub fn abort_signal(&self) -> &AbortSignal {
        &self.abort
    }

    /// The current state, with the request context's current entries.
    pub fn state(&mut self) -> &RunState {
        self.state.request_context = self.request_context.to_map();
        &self.state
    }

    /// The current state, consuming the driver.
    pub fn into_state(mut self) -> RunState {
        self.state.request_context = self.request_context.to_map();
        self.state
    }

    /// Buffers events so [`AgentRun::take_events`] can return them.
    pub fn collect_events(mut self) -> Self {
        self.sink = EventSink::queue(Default::default());
        self
    }

    /// The events buffered since the last call (see [`AgentRun::collect_events`]).
    pub fn take_events(&mut self) -> Vec<Event> {
        match self.sink.queued() {
            Some(queue) => queue.drain(),
            None => Vec::new(),
        }
    }

    /// Runs one step: a model call and, if it called tools, their execution. Returns whether
    /// another step follows.
    ///
    /// Every error of a step ends the run here, if nothing on its way did: the `error` event,
    /// the failed status and the snapshot closed. A pause ([`RunHandle::pause`]) stops the
    /// run at the step boundary, saved: `Ok(false)`, and [`AgentRun::is_paused`] says so.
    ///
    /// [`RunHandle::pause`]: crate::agent::RunHandle::pause
    pub async fn step(&mut self) -> Result<bool, AgentError> {
        self.error_handled = false;
        // The step's result is consumed in the statement that awaited it, and only the boxed
        // `fail` is awaited after: the result (112 bytes) takes no room of its own in every
        // run's future.
        let failing = match self.step_inner().await {
            Err(error) if !self.error_handled => self.fail(error),
            other => return other,
        };
        Err(failing.await)
    }

    async fn step_inner(&mut self) -> Result<bool, AgentError> {
        if self.state.is_finished() {
            return Ok(false);
        }
        if self.pause.is_aborted() && !self.abort.is_aborted() {
            self.pause_here().await?;
            return Ok(false);
        }
        // The framework's own diagnostics name the run and its trace, so a log line leads to
        // the trace at /api/observability/traces/{trace_id}.
        let span = tracing::debug_span!(
            "kestrel.step",
            run_id = %self.run_id,
            trace_id = %self.span.as_ref().map(crate::trace::ActiveSpan::trace_id).unwrap_or_default(),
            agent = %self.agent.id(),
            step = self.state.steps.len(),
        );
        // One step: a model call and, when it called tools, the tools.
        if self.state.next_action() == Action::CallModel {
            let model_span = tracing::debug_span!(parent: &span, "kestrel.model_call");
            self.model_phase().instrument(model_span).await?;
            if self.state.next_action() == Action::CallModel {
                // A processor sent the answer back (or asked to call again after a provider
                // error): the model is asked again, in a step that counts as this one.
                if self.durable_steps {
                    or_fail!(self, self.save_snapshot(RunPhase::Running));
                }
                return Ok(true);
            }
        }
        if self.state.next_action() == Action::RunTools {
            let tools_span = tracing::debug_span!(parent: &span, "kestrel.tool_calls");
            self.tools_phase().instrument(tools_span).await?;
        }
        if self.paused || self.state.next_action() == Action::AwaitDecisions {
            return Ok(false);
        }
        // The hooks and background tasks most runs never use are boxed, so that what they
        // await takes no room in every run's future.
        if (self.iteration_hook.is_some() || self.task_completion.is_some())
            && let Some(go_on) = Box::pin(self.steer()).await?
        {
            return Ok(go_on);
        }
        if self.state.next_action() == Action::Finish {
            if self.background.is_some() && Box::pin(self.await_background()).await? {
                return Ok(true);
            }
            if self.continue_for_delivered().await? {
                return Ok(true);
            }
            self.finish().await?;
            return Ok(false);
        }
        if self.durable_steps {
            or_fail!(self, self.save_snapshot(RunPhase::Running));
        }
        Ok(true)
    }

    /// Stops at a step boundary and saves the run as paused (or as waiting for its sub-agents,
    /// when a delegation of the pending step has not finished).
    async fn pause_here(&mut self) -> Result<(), AgentError> {
        let phase = self.state.pause_phase();
        or_fail!(self, self.save_snapshot(phase));
        tracing::debug!(run_id = %self.run_id, ?phase, "run paused");
        self.paused = true;
        Ok(())
    }

    /// Whether the run stopped because it was paused (it is saved, and
    /// [`RunHandle::proceed`] continues it).
    ///
    /// [`RunHandle::proceed`]: crate::agent::RunHandle::proceed
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Continues the run as an event stream.
    ///
    /// The stream drives the run as it is polled; dropped before the end, it hands the rest of
    /// the run to a background task, so the run still completes.
    pub fn into_stream(mut self) -> AgentStream {
        let queue = Arc::new(EventQueue::default());
        self.sink = EventSink::queue(queue.clone());
        let run_id = self.run_id.clone();
        let abort = self.abort.clone();
        // Registered now, not at the first poll, so an abort reaches it at once.
        let driver = self.run().boxed();
        AgentStream::new(run_id, queue, abort, driver)
    }

    /// [`AgentRun::into_stream`], but a run that cannot start because its id is taken (by
    /// a run in progress, or a stored one) is refused with [`AgentError::RunIdTaken`] before
    /// any event, so a server can answer with an error status instead of a stream.
    pub async fn try_into_stream(mut self) -> Result<AgentStream, AgentError> {
        let registered = self.register()?;
        self.check_chosen_id().await?;
        let queue = Arc::new(EventQueue::default());
        self.sink = EventSink::queue(queue.clone());
        let run_id = self.run_id.clone();
        let abort = self.abort.clone();
        let driver = async move { self.run_registered(registered).await }.boxed();
        Ok(AgentStream::new(run_id, queue, abort, driver))
    }

    /// Ends the run failed (or aborted): the event, the status, the snapshot closed.
    ///
    /// Boxed: it is awaited on every error path of a step, and inline its future would take
    /// room in every run's future, on the paths that never fail too.
    fn fail(
        &mut self,
        error: AgentError,
    ) -> std::pin::Pin<Box<dyn Future<Output = AgentError> + Send + '_>> {
        Box::pin(self.fail_now(error))
    }

    async fn fail_now(&mut self, error: AgentError) -> AgentError {
        self.error_handled = true;
        if let AgentError::Aborted { .. } = error {
            emit!(
                self.sink,
                self.run_id,
                EventKind::Abort(AbortPayload::default())
            );
            self.state.end(FinishReason::Abort);
        } else {
            self.emit_error(&error).await;
            self.state.end(FinishReason::Error);
            if store_failed(&error) {
                // The store failed to keep a boundary: what it holds is the run's last durable
                // one. Recording the end there (the store may be back already) would end a run
                // that can go on from it: left, a resume continues it, and in a cluster the
                // sweep does once the lease has run out.
                tracing::warn!(run_id = %self.run_id, %error, "the run stops; its last stored boundary stays, from which it can be resumed");
                return error;
            }
        }
        self.close_snapshot().await;
        error
    }

    fn aborted(&self) -> AgentError {
        AgentError::Aborted {
            run_id: self.state.run_id.clone(),
        }
    }
}

/// Whether `error` is a store's failure to keep a boundary of the run (its snapshot, or its
/// messages while the store was unavailable): the run stops without recording its end.
fn store_failed(error: &AgentError) -> bool {
    match error {
        AgentError::RunStore { .. } => true,
        AgentError::Memory { source, .. } => source.is_unavailable(),
        _ => false,
    }
}

/// The JSON schema of an approval decision, as the `resumeSchema` string of
/// `tool-call-approval` (Mastra's wire form).
pub const APPROVAL_RESUME_SCHEMA: &str = r#"{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}"#;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod future_sizes {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::model::ScriptedModel;

    /// Every run in progress holds its run's future: a copy of the run too many there is a
    /// kilobyte per run (10,000 concurrent runs are W5 of BENCHMARKS.md).
    #[tokio::test]
    async fn a_runs_future_holds_the_run_once() {
        let agent = Agent::builder("a")
            .model(Arc::new(ScriptedModel::new()))
            .build()
            .unwrap();
        let mut run = agent.start_run(vec![Message::user("x")], RunOptions::new());
        let run_size = std::mem::size_of::<AgentRun>();
        let drive = std::mem::size_of_val(&run.drive());
        let future = std::mem::size_of_val(&run.run());

        // The run once, what it drives, and little else: the phases before and after the
        // steps, and their errors, share their room with the steps'.
        assert!(
            future < run_size + drive + 512,
            "the run's future takes {future} bytes: more than the run ({run_size}) and what it \
             drives ({drive}) by half a kilobyte"
        );
    }
}
