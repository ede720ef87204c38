//! The async driver: performs a run's I/O (model calls, tool execution) and emits its events.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use super::background::{BackgroundDone, BackgroundRuntime};
use super::delegation::{
    DELEGATION_TOOL_PREFIX, DelegationOptions, DelegationRuntime, SubRunContext,
};
use super::iteration::{IterationContext, TaskCompletion, TaskContext};
use super::options::BusyThread;
use super::options::OnIterationComplete;
use super::options::{ErrorStrategy, StructuredOutput};
use super::registry::{Lease, Registered, ThreadKey};
use super::state::{
    CallDecision, CallProgress, DelegatedBy, MIN_RUN_STATE_VERSION, RUN_STATE_VERSION, RunSettings,
    RunState, RunStatus, SavedApproval, SubRun, ToolCallRecord, ToolResultRecord, Waiting,
};
use super::stream::AgentStream;
use super::{
    Agent, AgentError, DEFAULT_TOOL_CONCURRENCY, GenerateResult, Instructions, ModelSource,
    RunOptions,
};
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::Tap;
use crate::event::*;
use crate::event::{EventQueue, EventSink};
use crate::memory::MemoryScope;
use crate::message::{Message, Part, Role};
use crate::model::{
    FinishReason, ModelError, ModelEvent, ModelRequest, ResponseFormat, SharedModel, ToolChoice,
    Usage,
};
use crate::pubsub::thread_topic;
use crate::run_store::{RunPhase, SharedRunStore};
use crate::tool::set::schema_errors;
use crate::tool::{ApprovalContext, ApprovalPolicy, Stop, ToolCallError, ToolContext, ToolWriter};

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
    /// The run-level approval policy (the tools' own are asked too).
    approval: ApprovalPolicy,
    /// The version of the run's saved snapshot, once it has one.
    snapshot_version: Option<i64>,
    /// What to do when the thread is busy with another run.
    busy: BusyThread,
    /// The run's hold on its thread, while `run` drives it.
    lease: Option<Lease>,
    /// Delegation hooks, and what they asked of the loop.
    delegation: Option<Arc<DelegationRuntime>>,
    /// `on_iteration_complete`.
    iteration_hook: Option<OnIterationComplete>,
    /// `is_task_complete`.
    task_completion: Option<TaskCompletion>,
    /// The next model call is the last: no tools, then the run ends.
    last_turn: bool,
    /// Whether the current step's error has been through `fail` (or is a pause, already
    /// saved), so [`AgentRun::step`] does not end the run a second time.
    error_handled: bool,
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

/// Emits an event only when someone observes the sink, so `generate` builds no events.
macro_rules! emit {
    ($sink:expr, $run_id:expr, $kind:expr) => {
        if $sink.is_observed() {
            $sink.emit(Event::agent($run_id.clone(), $kind)).await;
        }
    };
}

impl AgentRun {
    pub(crate) fn start(agent: Agent, input: Vec<Message>, options: RunOptions) -> Self {
        let inner = &agent.inner;
        let d = &inner.defaults;
        let settings = RunSettings {
            tool_choice: options
                .tool_choice
                .or_else(|| d.tool_choice.clone())
                .unwrap_or_default(),
            model_settings: options
                .model_settings
                .or_else(|| d.model_settings.clone())
                .unwrap_or_default(),
            structured_output: options
                .structured_output
                .or_else(|| d.structured_output.clone()),
            tool_concurrency: options
                .tool_concurrency
                .or(d.tool_concurrency)
                .unwrap_or(DEFAULT_TOOL_CONCURRENCY)
                .max(1),
            thread_id: options
                .memory
                .as_ref()
                .or(d.memory.as_ref())
                .map(|m| m.thread.clone()),
            resource_id: options
                .memory
                .as_ref()
                .or(d.memory.as_ref())
                .map(|m| m.resource.clone())
                .or_else(|| options.resource.clone()),
            tool_approval: SavedApproval::Never,
        };
        let approval = approval_policy(
            options.require_tool_approval,
            d.require_tool_approval.as_ref(),
            None,
        );
        let chosen_id = options.run_id.is_some() || d.run_id.is_some();
        let run_id = options
            .run_id
            .or_else(|| d.run_id.clone())
            .unwrap_or_else(crate::id::new_id);
        let max_steps = options
            .max_steps
            .or(d.max_steps)
            .unwrap_or(inner.max_steps)
            .max(1);
        let context = options.context.unwrap_or_default();
        let context_len = context.len();
        let mut messages = context;
        messages.extend(input);
        let mut state = RunState::new(run_id, inner.id.clone(), messages, max_steps, settings);
        state.context_len = context_len;
        state.settings.tool_approval = match &approval {
            ApprovalPolicy::Never => SavedApproval::Never,
            ApprovalPolicy::Always => SavedApproval::Always,
            ApprovalPolicy::When(_) => SavedApproval::Function,
        };
        let request_context = options
            .request_context
            .or_else(|| d.request_context.clone())
            .unwrap_or_default();
        let abort = options.abort_signal.unwrap_or_default();
        let busy = options
            .on_busy_thread
            .or(d.on_busy_thread)
            .unwrap_or_default();
        let until_idle = options.until_idle.or(d.until_idle).unwrap_or(false);
        let mut run = Self::with_state(agent, state, abort, request_context);
        run.approval = approval;
        run.busy = busy;
        run.until_idle = until_idle;
        run.chosen_id = chosen_id;
        run.with_hooks(
            options.delegation,
            options.on_iteration_complete,
            options.is_task_complete,
        )
    }

    /// The run's hooks: the call's, else the agent's defaults.
    fn with_hooks(
        mut self,
        delegation: Option<DelegationOptions>,
        iteration_hook: Option<OnIterationComplete>,
        task_completion: Option<TaskCompletion>,
    ) -> Self {
        let d = &self.agent.inner.defaults;
        self.delegation = delegation
            .or_else(|| d.delegation.clone())
            .map(|o| Arc::new(DelegationRuntime::new(o)));
        self.iteration_hook = iteration_hook.or_else(|| d.on_iteration_complete.clone());
        self.task_completion = task_completion.or_else(|| d.is_task_complete.clone());
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
        let request_context = options
            .request_context
            .unwrap_or_else(|| RequestContext::from(state.request_context.clone()));
        let abort = options.abort_signal.unwrap_or_default();
        let d = &agent.inner.defaults;
        let approval = approval_policy(
            options.require_tool_approval,
            d.require_tool_approval.as_ref(),
            Some(state.settings.tool_approval),
        );
        let until_idle = options.until_idle.or(d.until_idle).unwrap_or(false);
        let mut run = Self::with_state(agent, state, abort, request_context);
        run.approval = approval;
        run.until_idle = until_idle;
        Ok(run.with_hooks(
            options.delegation,
            options.on_iteration_complete,
            options.is_task_complete,
        ))
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
            store: Arc::clone(&agent.inner.run_store),
            pause: AbortSignal::new(),
            durable_steps: false,
            background: None,
            until_idle: false,
            chosen_id: false,
            agent,
            state,
            abort,
            request_context,
            sink: EventSink::discard(),
            model: None,
            system: None,
            approval: ApprovalPolicy::Never,
            snapshot_version: None,
            busy: BusyThread::Wait,
            lease: None,
            delegation: None,
            iteration_hook: None,
            task_completion: None,
            last_turn: false,
            error_handled: false,
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
    /// the failed status and the snapshot closed (or, for a pause, the paused snapshot).
    pub async fn step(&mut self) -> Result<bool, AgentError> {
        self.error_handled = false;
        match self.step_inner().await {
            Err(error) if !self.error_handled => Err(self.fail(error).await),
            other => other,
        }
    }

    async fn step_inner(&mut self) -> Result<bool, AgentError> {
        if self.state.is_finished() {
            return Ok(false);
        }
        if self.pause.is_aborted() && !self.abort.is_aborted() {
            return Err(self.pause_here().await);
        }
        let span = tracing::debug_span!(
            "kestrel.step",
            run_id = %self.run_id,
            agent = %self.agent.id(),
            step = self.state.steps.len(),
        );
        if matches!(self.state.status, RunStatus::Ready) {
            let model_span = tracing::debug_span!(parent: &span, "kestrel.model_call");
            self.model_phase().instrument(model_span).await?;
        }
        if matches!(self.state.status, RunStatus::ToolsPending { .. }) {
            let tools_span = tracing::debug_span!(parent: &span, "kestrel.tool_calls");
            self.tools_phase().instrument(tools_span).await?;
        }
        if self.state.is_suspended() {
            return Ok(false);
        }
        if let Some(go_on) = self.steer().await? {
            return Ok(go_on);
        }
        if self.state.is_finished() {
            if self.await_background().await? {
                return Ok(true);
            }
            if self.continue_for_delivered().await? {
                return Ok(true);
            }
            self.finish().await?;
            return Ok(false);
        }
        if self.durable_steps
            && let Err(e) = self.save_snapshot(RunPhase::Running).await
        {
            return Err(self.fail(e).await);
        }
        Ok(true)
    }

    /// Stops at a step boundary and saves the run as paused (or as waiting for its sub-agents,
    /// when a delegation of the pending step has not finished).
    async fn pause_here(&mut self) -> AgentError {
        let phase = if self.state.active_sub_runs().is_empty() {
            RunPhase::Paused
        } else {
            RunPhase::WaitingForSubtask
        };
        if let Err(e) = self.save_snapshot(phase).await {
            return self.fail(e).await;
        }
        tracing::debug!(run_id = %self.run_id, ?phase, "run paused");
        self.error_handled = true;
        AgentError::Paused {
            run_id: self.state.run_id.clone(),
        }
    }

    /// Runs to the end and returns the result.
    ///
    /// A run on a thread first takes the thread's lease: runs on one thread go one at a time,
    /// in the order they asked (or fail at once, with [`BusyThread::Fail`]). While it holds the
    /// lease, the run takes the messages delivered to the thread and publishes its events to
    /// the thread's subscribers.
    pub async fn run(mut self) -> Result<GenerateResult, AgentError> {
        match self.register() {
            Ok(registered) => self.run_registered(registered).await,
            Err(e) => Err(self.refuse(e).await),
        }
    }

    /// Records the run as in progress (so `abort_run` and `abort_thread` reach it) from now
    /// until the guard is dropped; refused when a run of the same id is in progress.
    fn register(&self) -> Result<Registered, AgentError> {
        self.agent
            .inner
            .runs
            .register(
                &self.run_id,
                self.abort.clone(),
                self.pause.clone(),
                self.thread_key(),
                self.state.settings.resource_id.clone(),
            )
            .map_err(|owner| AgentError::RunIdTaken {
                run_id: self.state.run_id.clone(),
                live: true,
                owner,
            })
    }

    /// A new run whose caller chose its id must not take a stored run's: it would overwrite
    /// that run's snapshot.
    async fn check_chosen_id(&mut self) -> Result<(), AgentError> {
        if !self.chosen_id {
            return Ok(());
        }
        let stored =
            self.store
                .load(&self.run_id)
                .await
                .map_err(|source| AgentError::RunStore {
                    run_id: self.state.run_id.clone(),
                    source,
                })?;
        if let Some(stored) = stored {
            return Err(AgentError::RunIdTaken {
                run_id: self.state.run_id.clone(),
                live: false,
                owner: stored.state.settings.resource_id,
            });
        }
        self.chosen_id = false;
        Ok(())
    }

    /// Ends a run that never started (its id is taken): an `error` event, and nothing
    /// stored, so the run that holds the id keeps its snapshot and its messages.
    async fn refuse(&mut self, error: AgentError) -> AgentError {
        self.emit_error(&error).await;
        error
    }

    /// The `error` event of `error`.
    async fn emit_error(&self, error: &AgentError) {
        emit!(
            self.sink,
            self.run_id,
            EventKind::Error(ErrorPayload {
                error: error.detail(),
                kind: error.kind().into(),
            })
        );
    }

    async fn run_registered(
        mut self,
        _registered: Registered,
    ) -> Result<GenerateResult, AgentError> {
        if let Err(e) = self.check_chosen_id().await {
            return Err(self.refuse(e).await);
        }
        let runs = Arc::clone(&self.agent.inner.runs);
        let thread = self.thread_key();
        if let Some(thread) = thread {
            self.sink = self.sink.clone().with_tap(Tap {
                pubsub: Arc::clone(&runs.pubsub),
                topic: thread_topic(&thread.resource_id, &thread.thread_id).into(),
            });
            if self.busy == BusyThread::Fail
                && let Some(active_run_id) = runs.active_run(&thread)
            {
                let e = AgentError::ThreadBusy {
                    run_id: self.state.run_id.clone(),
                    thread_id: thread.thread_id.clone(),
                    active_run_id,
                };
                return Err(self.fail(e).await);
            }
            let abort = self.abort.clone();
            let lease = tokio::select! {
                biased;
                _ = abort.aborted() => None,
                lease = runs.lease(thread, &self.run_id) => Some(lease),
            };
            let Some(lease) = lease else {
                let e = self.aborted();
                return Err(self.fail(e).await);
            };
            self.lease = Some(lease);
        }
        let outcome = self.drive().await;
        self.close_background().await;
        self.release_thread().await;
        outcome
    }

    /// With `until_idle`, at a normal end: waits for the next background task to end, adds
    /// its result to the conversation, and answers it in another step (while steps remain).
    async fn await_background(&mut self) -> Result<bool, AgentError> {
        let Some(runtime) = self.background.clone() else {
            return Ok(false);
        };
        let normal_end = matches!(
            self.state.status,
            RunStatus::Finished {
                reason: FinishReason::Stop,
                ..
            }
        );
        if !self.until_idle || !normal_end {
            return Ok(false);
        }
        while runtime.outstanding() > 0 {
            let abort = self.abort.clone();
            let done = tokio::select! {
                biased;
                _ = abort.aborted() => {
                    let e = self.aborted();
                    return Err(self.fail(e).await);
                }
                done = runtime.next() => done,
            };
            let Some(done) = done else { break };
            self.take_background_result(done).await?;
            if self.state.steps.len() < self.state.max_steps as usize {
                self.state.reopen();
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Background results that are in, before a model call.
    async fn take_background_ready(&mut self) -> Result<(), AgentError> {
        let Some(runtime) = self.background.clone() else {
            return Ok(());
        };
        for done in runtime.ready().await {
            self.take_background_result(done).await?;
        }
        Ok(())
    }

    /// Reports an ended background task on the stream and puts its result in the
    /// conversation (stored with the thread).
    async fn take_background_result(&mut self, done: BackgroundDone) -> Result<(), AgentError> {
        emit!(self.sink, self.run_id, {
            let payload = BackgroundTaskPayload {
                task_id: done.task_id.clone(),
                tool_name: done.tool_name.clone(),
                tool_call_id: done.tool_call_id.clone(),
                run_id: self.state.run_id.clone(),
                agent_id: self.agent.id().to_owned(),
                result: Value::String(done.text.clone()),
                is_error: done.is_error,
                completed_at: now_ms(),
            };
            if done.is_error {
                EventKind::BackgroundTaskFailed(payload)
            } else {
                EventKind::BackgroundTaskCompleted(payload)
            }
        });
        self.state.messages.push(Message::system(done.message()));
        match self.persist().await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e).await),
        }
    }

    /// The run stops reading its background tasks: results already in and later ones go to
    /// its thread.
    async fn close_background(&mut self) {
        let Some(runtime) = self.background.take() else {
            return;
        };
        for done in runtime.close().await {
            super::background::deliver_late(&runtime, done).await;
        }
    }

    /// The run's background runtime, created with its first background task.
    fn background_runtime(&mut self) -> Arc<BackgroundRuntime> {
        if let Some(runtime) = &self.background {
            return Arc::clone(runtime);
        }
        let fallback = self.memory_scope().map(|scope| (self.agent.clone(), scope));
        let runtime = Arc::new(BackgroundRuntime::new(
            Arc::clone(&self.agent.inner.runs.background),
            fallback,
        ));
        self.background = Some(Arc::clone(&runtime));
        runtime
    }

    async fn drive(&mut self) -> Result<GenerateResult, AgentError> {
        if self.durable_steps && self.snapshot_version.is_none() {
            // A delegated run exists in the store from its start, so the parent's snapshot
            // can always be followed to it.
            if let Err(e) = self.save_snapshot(RunPhase::Running).await {
                return Err(self.fail(e).await);
            }
        }
        while self.step().await? {}
        Ok(GenerateResult::from_state(&self.state))
    }

    fn thread_key(&self) -> Option<ThreadKey> {
        let settings = &self.state.settings;
        Some(ThreadKey {
            resource_id: settings.resource_id.clone()?,
            thread_id: settings.thread_id.clone()?,
        })
    }

    /// `is_task_complete` and `on_iteration_complete` after an iteration: `Some(true)` when
    /// they send the loop on, `None` when the loop goes its own way (a hook may also have ended
    /// it).
    async fn steer(&mut self) -> Result<Option<bool>, AgentError> {
        if self.iteration_hook.is_none() && self.task_completion.is_none() {
            return Ok(None);
        }
        let Some(step) = self.state.steps.last().cloned() else {
            return Ok(None);
        };
        if self.last_turn {
            return Ok(None);
        }
        let final_answer = matches!(
            self.state.status,
            RunStatus::Finished {
                reason: FinishReason::Stop,
                ..
            }
        );
        let iteration = (self.state.steps.len() - 1) as u32;
        let room = self.state.steps.len() < self.state.max_steps as usize;
        if final_answer && let Some(completion) = self.task_completion.clone() {
            let task = TaskContext {
                task: self
                    .state
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .map(Message::text)
                    .unwrap_or_default(),
                answer: step.text.clone(),
                iteration,
            };
            let (complete, scores) = completion.evaluate(&task).await;
            if !complete && room {
                let feedback: Vec<String> = scores
                    .iter()
                    .filter(|s| !s.passed)
                    .map(|s| {
                        let reason = s.reason.as_deref().unwrap_or("the answer did not pass");
                        format!("{}: {reason}", s.scorer)
                    })
                    .collect();
                self.add_feedback(feedback.join("\n")).await?;
                self.state.reopen();
                return Ok(Some(true));
            }
        }
        let Some(hook) = self.iteration_hook.clone() else {
            return Ok(None);
        };
        let context = IterationContext {
            iteration,
            max_iterations: self.state.max_steps,
            finish_reason: step.finish_reason,
            text: step.text.clone(),
            is_final: final_answer,
        };
        let decision = match (hook.0)(context).await {
            Ok(decision) => decision,
            Err(error) => {
                tracing::warn!(run_id = %self.run_id, %error, "on_iteration_complete failed; the loop goes on");
                return Ok(None);
            }
        };
        if final_answer {
            if decision.continue_
                && room
                && let Some(feedback) = decision.feedback
            {
                self.add_feedback(feedback).await?;
                self.state.reopen();
                return Ok(Some(true));
            }
            return Ok(None);
        }
        if self.state.is_finished() {
            return Ok(None);
        }
        match (decision.continue_, decision.feedback) {
            (true, Some(feedback)) => self.add_feedback(feedback).await?,
            (true, None) => {}
            (false, Some(feedback)) => {
                // One last turn to answer with the feedback in mind.
                self.add_feedback(feedback).await?;
                self.last_turn = true;
            }
            (false, None) => {
                self.state.status = RunStatus::Finished {
                    reason: FinishReason::Stop,
                    object: None,
                };
            }
        }
        Ok(None)
    }

    /// Adds feedback to the conversation, as a user message, and stores it.
    async fn add_feedback(&mut self, feedback: String) -> Result<(), AgentError> {
        self.state
            .messages
            .push(Message::user(format!("[feedback] {feedback}")));
        self.persist().await
    }

    /// Adds the messages delivered to the thread since the last step to the conversation, and
    /// stores them.
    async fn take_delivered(&mut self) -> Result<(), AgentError> {
        let Some(delivered) = self.lease.as_ref().map(Lease::take_delivered) else {
            return Ok(());
        };
        if delivered.is_empty() {
            return Ok(());
        }
        self.state.messages.extend(delivered);
        self.persist().await
    }

    /// At a normal end: messages delivered meanwhile get an answer in another step (within
    /// `max_steps`); otherwise the inbox closes, so later messages find the thread idle.
    async fn continue_for_delivered(&mut self) -> Result<bool, AgentError> {
        let Some(lease) = &self.lease else {
            return Ok(false);
        };
        if !matches!(
            self.state.status,
            RunStatus::Finished {
                reason: FinishReason::Stop,
                ..
            }
        ) || self.state.steps.len() >= self.state.max_steps as usize
        {
            return Ok(false);
        }
        match lease.close_if_empty() {
            Ok(()) => Ok(false),
            Err(delivered) => {
                self.state.messages.extend(delivered);
                self.state.reopen();
                self.persist().await?;
                Ok(true)
            }
        }
    }

    /// Lets the next run on the thread go. Messages delivered too late for this run are stored
    /// in the thread, never dropped.
    async fn release_thread(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let late = lease.close_inbox();
        if late.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            tracing::warn!(run_id = %self.run_id, count = late.len(), "messages delivered to a run without memory could not be stored");
            return;
        };
        if let Err(error) = memory.persist(&scope, &late).await {
            tracing::warn!(run_id = %self.run_id, %error, "storing messages delivered after the run ended failed");
        }
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
        let driver = match self.register() {
            Ok(registered) => self.run_registered(registered).boxed(),
            Err(e) => async move { Err(self.refuse(e).await) }.boxed(),
        };
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
        let driver = self.run_registered(registered).boxed();
        Ok(AgentStream::new(run_id, queue, abort, driver))
    }

    async fn resolve(&mut self) -> Result<(SharedModel, Option<String>), AgentError> {
        if let (Some(model), Some(system)) = (&self.model, &self.system) {
            return Ok((model.clone(), system.clone()));
        }
        let inner = &self.agent.inner;
        let run_id = self.state.run_id.clone();
        let model = match &inner.model {
            ModelSource::Fixed(m) => m.clone(),
            ModelSource::Dynamic(f) => {
                let spec = f(self.request_context.clone()).await.map_err(|source| {
                    AgentError::Dynamic {
                        run_id: run_id.clone(),
                        what: "model",
                        source,
                    }
                })?;
                spec.resolve(&inner.registry)
                    .map_err(|source| AgentError::ModelResolution {
                        run_id: run_id.clone(),
                        source,
                    })?
            }
        };
        let system = match &inner.instructions {
            Instructions::Static(s) => (!s.is_empty()).then(|| s.to_string()),
            Instructions::Dynamic(f) => {
                let s = f(self.request_context.clone()).await.map_err(|source| {
                    AgentError::Dynamic {
                        run_id,
                        what: "instructions",
                        source,
                    }
                })?;
                (!s.is_empty()).then_some(s)
            }
        };
        self.model = Some(model.clone());
        self.system = Some(system.clone());
        Ok((model, system))
    }

    async fn fail(&mut self, error: AgentError) -> AgentError {
        self.error_handled = true;
        if let AgentError::Aborted { .. } = error {
            emit!(
                self.sink,
                self.run_id,
                EventKind::Abort(AbortPayload::default())
            );
            self.state.status = RunStatus::Finished {
                reason: FinishReason::Abort,
                object: None,
            };
        } else {
            self.emit_error(&error).await;
            self.state.status = RunStatus::Finished {
                reason: FinishReason::Error,
                object: None,
            };
        }
        self.close_snapshot().await;
        error
    }

    fn aborted(&self) -> AgentError {
        AgentError::Aborted {
            run_id: self.state.run_id.clone(),
        }
    }

    async fn model_phase(&mut self) -> Result<(), AgentError> {
        if self.abort.is_aborted() {
            let e = self.aborted();
            return Err(self.fail(e).await);
        }
        let (model, system) = match self.resolve().await {
            Ok(v) => v,
            Err(e) => return Err(self.fail(e).await),
        };
        if let Err(e) = self.load_memory().await {
            return Err(self.fail(e).await);
        }
        if let Err(e) = self.take_delivered().await {
            return Err(self.fail(e).await);
        }
        self.take_background_ready().await?;
        match self.call_model(model, system).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e).await),
        }
    }

    async fn call_model(
        &mut self,
        model: SharedModel,
        system: Option<String>,
    ) -> Result<(), AgentError> {
        let message_id = self.state.next_message_id.clone();
        let sink = self.sink.clone();
        let run_id = self.run_id.clone();
        if !self.state.started {
            self.state.started = true;
            emit!(
                sink,
                run_id,
                EventKind::Start(StartPayload {
                    id: self.agent.id().to_string(),
                    message_id: message_id.clone(),
                })
            );
            // Hands `start` to the reader before the first step's work: a server then sends
            // its first bytes at once, even when the model answers without ever waiting.
            tokio::task::yield_now().await;
        }
        emit!(
            sink,
            run_id,
            EventKind::StepStart(StepStartPayload {
                message_id: message_id.clone(),
                started_at: now_ms(),
                warnings: Vec::new(),
            })
        );

        let request = self.model_request(system);
        let model_error = |source: ModelError| match source {
            ModelError::Cancelled => AgentError::Aborted {
                run_id: run_id.to_string(),
            },
            source => AgentError::Model {
                run_id: run_id.to_string(),
                source,
            },
        };
        let abort = self.abort.clone();
        let mut stream = tokio::select! {
            biased;
            _ = abort.aborted() => return Err(self.aborted()),
            s = model.stream(request) => s.map_err(model_error)?,
        };

        let mut text = String::new();
        let mut reasoning = String::new();
        let mut calls: Vec<ToolCallRecord> = Vec::new();
        let mut names: HashMap<String, String> = HashMap::new();
        let mut open = OpenPart::None;
        let mut finish: Option<(FinishReason, Usage)> = None;
        loop {
            let next = tokio::select! {
                biased;
                _ = abort.aborted() => {
                    self.keep_partial(&message_id, &text, &reasoning).await;
                    return Err(self.aborted());
                }
                next = stream.next() => next,
            };
            let Some(event) = next else { break };
            match event.map_err(model_error)? {
                ModelEvent::TextDelta { text: delta } => {
                    if delta.is_empty() {
                        continue;
                    }
                    open.switch_to(OpenPart::Text, &sink, &run_id, &message_id)
                        .await;
                    text.push_str(&delta);
                    emit!(
                        sink,
                        run_id,
                        EventKind::TextDelta(TextDeltaPayload {
                            id: message_id.clone(),
                            text: delta,
                        })
                    );
                }
                ModelEvent::ReasoningDelta { text: delta } => {
                    if delta.is_empty() {
                        continue;
                    }
                    open.switch_to(OpenPart::Reasoning, &sink, &run_id, &message_id)
                        .await;
                    reasoning.push_str(&delta);
                    emit!(
                        sink,
                        run_id,
                        EventKind::ReasoningDelta(TextDeltaPayload {
                            id: message_id.clone(),
                            text: delta,
                        })
                    );
                }
                ModelEvent::ToolInputStart { id, name } => {
                    open.switch_to(OpenPart::None, &sink, &run_id, &message_id)
                        .await;
                    names.insert(id.clone(), name.clone());
                    emit!(
                        sink,
                        run_id,
                        EventKind::ToolCallInputStreamingStart(ToolCallStreamingStartPayload {
                            tool_call_id: id,
                            tool_name: name,
                        })
                    );
                }
                ModelEvent::ToolInputDelta { id, delta } => {
                    let tool_name = names.get(&id).cloned().unwrap_or_default();
                    emit!(
                        sink,
                        run_id,
                        EventKind::ToolCallDelta(ToolCallDeltaPayload {
                            tool_call_id: id,
                            tool_name,
                            args_text_delta: delta,
                        })
                    );
                }
                ModelEvent::ToolInputEnd { id } => {
                    emit!(
                        sink,
                        run_id,
                        EventKind::ToolCallInputStreamingEnd(ToolCallIdPayload {
                            tool_call_id: id
                        })
                    );
                }
                ModelEvent::ToolCall { id, name, input } => {
                    open.switch_to(OpenPart::None, &sink, &run_id, &message_id)
                        .await;
                    if !names.contains_key(&id) {
                        // The provider gave the call whole; stream it so UIs see one shape.
                        names.insert(id.clone(), name.clone());
                        emit_whole_input(&sink, &run_id, &id, &name, &input).await;
                    }
                    let record = parse_call(id, name, input);
                    emit!(
                        sink,
                        run_id,
                        EventKind::ToolCall(ToolCallPayload {
                            tool_call_id: record.tool_call_id.clone(),
                            tool_name: record.tool_name.clone(),
                            args: record.args.clone(),
                        })
                    );
                    calls.push(record);
                }
                ModelEvent::Finish { reason, usage } => finish = Some((reason, usage)),
            }
        }
        open.switch_to(OpenPart::None, &sink, &run_id, &message_id)
            .await;
        let Some((reason, usage)) = finish else {
            return Err(model_error(ModelError::Protocol {
                provider: model.provider().to_string(),
                message: "the model's stream ended without a finish event".into(),
                line: None,
            }));
        };
        let has_tools = self
            .state
            .record_model_answer(text, reasoning, calls, reason, usage);
        if !has_tools {
            self.persist().await?;
            let step_text = self.state.last_text();
            emit!(
                sink,
                run_id,
                EventKind::StepFinish(StepFinishPayload {
                    message_id,
                    step_result: StepResultInfo {
                        reason,
                        is_continued: false,
                    },
                    output: StepOutput {
                        text: step_text,
                        usage,
                    },
                })
            );
        }
        Ok(())
    }

    /// Stores what an aborted step had produced (its text and reasoning so far, no unfinished
    /// tool calls), marked aborted: what the user saw is not lost.
    async fn keep_partial(&mut self, message_id: &str, text: &str, reasoning: &str) {
        if text.is_empty() && reasoning.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return;
        };
        if !self.state.memory_loaded {
            return;
        }
        let mut parts = Vec::with_capacity(2);
        if !reasoning.is_empty() {
            parts.push(Part::Reasoning {
                text: reasoning.to_owned(),
            });
        }
        if !text.is_empty() {
            parts.push(Part::Text {
                text: text.to_owned(),
            });
        }
        let partial = Message {
            id: message_id.to_owned(),
            role: Role::Assistant,
            parts,
        };
        if let Err(error) = memory.persist_aborted(&scope, &partial).await {
            tracing::warn!(run_id = %self.run_id, %error, "storing the aborted step's partial text failed");
        }
    }

    /// On an abort during the tools: the step's text (its tool calls never got results, so
    /// they are left out), stored marked aborted.
    async fn keep_partial_step(&mut self) {
        let (RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. }) =
            &self.state.status
        else {
            return;
        };
        let (id, text, reasoning) = (
            step.message_id.clone(),
            step.text.clone(),
            step.reasoning.clone(),
        );
        self.keep_partial(&id, &text, &reasoning).await;
    }

    fn memory_scope(&self) -> Option<MemoryScope> {
        let settings = &self.state.settings;
        Some(MemoryScope {
            thread_id: settings.thread_id.clone()?,
            resource_id: settings.resource_id.clone()?,
        })
    }

    /// Before the first step: loads the thread's context and stores the input.
    async fn load_memory(&mut self) -> Result<(), AgentError> {
        if self.state.memory_loaded {
            return Ok(());
        }
        let Some(scope) = self.memory_scope() else {
            return Ok(());
        };
        let Some(memory) = self.agent.inner.memory.clone() else {
            tracing::warn!(
                run_id = %self.run_id,
                agent = %self.agent.id(),
                "the run names a thread but the agent has no memory; nothing is stored"
            );
            self.state.memory_loaded = true;
            return Ok(());
        };
        let recalled = memory
            .recall(&scope, self.state.input_to_store(), &self.request_context)
            .await
            .map_err(|source| self.memory_error(source))?;
        self.state.apply_recalled(recalled);
        self.persist().await
    }

    /// Stores the complete messages memory has not stored yet.
    async fn persist(&mut self) -> Result<(), AgentError> {
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return Ok(());
        };
        if !self.state.memory_loaded || self.state.unpersisted().is_empty() {
            return Ok(());
        }
        memory
            .persist(&scope, self.state.unpersisted())
            .await
            .map_err(|source| self.memory_error(source))?;
        self.state.persisted = self.state.messages.len();
        Ok(())
    }

    fn memory_error(&self, source: crate::memory::MemoryError) -> AgentError {
        AgentError::Memory {
            run_id: self.state.run_id.clone(),
            source,
        }
    }

    fn notify_memory_finished(&self) {
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let result = GenerateResult::from_state(&self.state);
        // Background work (titles...) must not delay the response.
        handle.spawn(async move { memory.run_finished(&scope, &result).await });
    }

    fn model_request(&self, system: Option<String>) -> ModelRequest {
        let settings = &self.state.settings;
        let mut messages = Vec::with_capacity(self.state.messages.len() + 1);
        if let Some(system) = system {
            messages.push(Message::system(system));
        }
        for extra in &self.state.memory_system {
            messages.push(Message::system(extra.clone()));
        }
        messages.extend(self.state.messages.iter().cloned());
        let references = self
            .delegation
            .as_ref()
            .is_some_and(|d| d.options.references);
        // Without result references, delegation tools do not offer `contextFromRefs`; without
        // a thread and a resource, memory's tools are not offered.
        let tools = self.agent.inner.tool_definitions.offered(
            references,
            settings.thread_id.is_some() && settings.resource_id.is_some(),
        );
        ModelRequest {
            messages,
            tools,
            tool_choice: if self.last_turn {
                ToolChoice::None
            } else {
                settings.tool_choice.clone()
            },
            response_format: settings
                .structured_output
                .as_ref()
                .map(|s| ResponseFormat::Json {
                    schema: s.schema.clone(),
                    name: s.name.clone(),
                }),
            settings: settings.model_settings.clone(),
            abort: self.abort.clone(),
        }
    }

    /// The sub-agent a call delegates to, if it is a delegation call.
    fn delegation_target(&self, tool_name: &str) -> Option<&Agent> {
        let id = tool_name.strip_prefix(DELEGATION_TOOL_PREFIX)?;
        self.agent.inner.sub_agents.get(id)
    }

    /// Whether a call needs approval: the tool's policy or the run's. An unknown tool needs
    /// none (its call fails at validation).
    fn needs_approval(&self, call: &ToolCallRecord) -> bool {
        let ctx = ApprovalContext {
            tool_name: &call.tool_name,
            request_context: &self.request_context,
            thread_id: self.state.settings.thread_id.as_deref(),
            resource_id: self.state.settings.resource_id.as_deref(),
        };
        let by_tool = self
            .agent
            .inner
            .tools
            .get(&call.tool_name)
            .is_some_and(|tool| tool.requires_approval(&call.args, &ctx));
        by_tool || self.approval.requires(&call.args, &ctx)
    }

    fn is_client_tool(&self, name: &str) -> bool {
        self.agent
            .inner
            .tools
            .get(name)
            .is_some_and(|tool| tool.is_client_tool())
    }

    /// Runs the step's tool calls that can run, records their results, and either ends the
    /// step or stops the run on the calls that wait for a person or the caller.
    async fn tools_phase(&mut self) -> Result<(), AgentError> {
        if self.abort.is_aborted() {
            let e = self.aborted();
            return Err(self.fail(e).await);
        }
        let RunStatus::ToolsPending { step, calls } = &mut self.state.status else {
            return Ok(());
        };
        let mut calls = std::mem::take(calls);
        if calls.is_empty() {
            let index = self.state.steps.len();
            let tool_calls = step.tool_calls.clone();
            calls = tool_calls
                .into_iter()
                .map(|call| {
                    let approval = self.needs_approval(&call);
                    CallProgress::new(call, approval, index)
                })
                .collect();
        }
        let sink = self.sink.clone();
        let run_id = self.run_id.clone();
        // What runs now; decisions taken on the stopped run are acted on here.
        let mut to_run: Vec<(usize, Option<Value>)> = Vec::new();
        for (index, progress) in calls.iter_mut().enumerate() {
            if progress.result.is_some() {
                continue;
            }
            match progress.decision.take() {
                Some(CallDecision::Declined { reason }) => {
                    progress.waiting = None;
                    progress.result = Some(ToolResultRecord {
                        tool_call_id: progress.call.tool_call_id.clone(),
                        tool_name: progress.call.tool_name.clone(),
                        args: progress.call.args.clone(),
                        result: Value::String(reason),
                        is_error: true,
                        denied: true,
                    });
                }
                Some(CallDecision::ClientResult { result, is_error }) => {
                    progress.waiting = None;
                    progress.result = Some(ToolResultRecord {
                        tool_call_id: progress.call.tool_call_id.clone(),
                        tool_name: progress.call.tool_name.clone(),
                        args: progress.call.args.clone(),
                        result,
                        is_error,
                        denied: false,
                    });
                }
                Some(CallDecision::Approved) => {
                    progress.waiting = None;
                    progress.approved = true;
                    to_run.push((index, None));
                }
                Some(CallDecision::Resumed { data }) => {
                    progress.waiting = None;
                    to_run.push((index, Some(data)));
                }
                Some(CallDecision::SubAgent) => {
                    // The decision is in the sub-agent's run: the delegation continues it.
                    progress.waiting = None;
                    to_run.push((index, None));
                }
                None if progress.waiting.is_some() => {}
                None if progress.requires_approval && !progress.approved => {
                    progress.waiting = Some(Waiting::Approval);
                }
                None if self.is_client_tool(&progress.call.tool_name) => {
                    progress.waiting = Some(Waiting::ClientResult);
                }
                None => to_run.push((index, None)),
            }
            if let Some(result) = &progress.result {
                emit_result(&sink, &run_id, result).await;
            }
        }
        // Each delegation gets its sub-agent's run id before it starts, and the run is saved as
        // waiting for them: a restart finds the sub-agents' runs from here.
        let mut delegates = false;
        let mut background = Vec::new();
        // Sub-agent runs named just now: nothing can be stored under them yet.
        let mut fresh = Vec::new();
        for (index, _) in &to_run {
            let progress = &mut calls[*index];
            if let Some(config) = self.agent.inner.background.get(&progress.call.tool_name) {
                // A background delegation does not make the run wait.
                background.push((*index, config));
                continue;
            }
            if progress.sub_run.is_none()
                && let Some(agent) = self.delegation_target(&progress.call.tool_name)
            {
                progress.sub_run = Some(SubRun {
                    agent_id: agent.id().to_owned(),
                    run_id: crate::id::new_id(),
                });
                fresh.push(*index);
            }
            delegates |= progress.sub_run.is_some();
        }
        if delegates && self.store.is_durable() {
            if let RunStatus::ToolsPending { calls: saved, .. } = &mut self.state.status {
                saved.clone_from(&calls);
            }
            if let Err(e) = self.save_snapshot(RunPhase::WaitingForSubtask).await {
                return Err(self.fail(e).await);
            }
        }
        let tools = &self.agent.inner.tools;
        let conversation = calls
            .iter()
            .filter(|c| c.result.is_none())
            .any(|c| {
                tools
                    .get(&c.call.tool_name)
                    .is_some_and(|t| t.needs_conversation())
            })
            .then(|| Arc::from(self.state.messages.as_slice()));
        let runtime = (!background.is_empty()).then(|| self.background_runtime());
        let base = Arc::new(CallBase {
            conversation,
            delegation: self.delegation.clone(),
            step: self.state.steps.len() as u32,
            run_id: self.run_id.clone(),
            thread_id: self.state.settings.thread_id.clone(),
            resource_id: self.state.settings.resource_id.clone(),
            request_context: self.request_context.clone(),
            abort: self.abort.clone(),
            sink: self.sink.clone(),
            store: Arc::clone(&self.store),
            pause: self.pause.clone(),
            agent_id: self.agent.id().to_owned(),
        });
        let background_of = |index: usize| {
            let config = background.iter().find(|(i, _)| *i == index)?.1;
            Some((config, Arc::clone(runtime.as_ref()?)))
        };
        let agent = self.agent.clone();
        let mut paused = false;
        {
            // `buffered` runs up to the limit at once and yields outcomes in the model's order.
            let jobs: Vec<_> = to_run
                .into_iter()
                .map(|(index, resume)| {
                    let progress = &calls[index];
                    let how = CallExtras {
                        resume_data: resume,
                        sub_run: progress.sub_run.clone(),
                        sub_run_is_new: fresh.contains(&index),
                        background: background_of(index),
                    };
                    (index, progress.call.clone(), how)
                })
                .collect();
            let mut outcomes = futures::stream::iter(jobs.into_iter().map(|(index, call, how)| {
                let agent = agent.clone();
                let base = base.clone();
                async move { (index, execute_call(agent, call, base, how).await) }
            }))
            .buffered(self.state.settings.tool_concurrency);
            loop {
                let next = tokio::select! {
                    biased;
                    _ = self.abort.aborted() => None,
                    next = outcomes.next() => Some(next),
                };
                let Some(next) = next else {
                    // Tools that watch the signal get a moment to wind down; the rest are
                    // cancelled by dropping their futures.
                    let drain = async { while outcomes.next().await.is_some() {} };
                    let _ = tokio::time::timeout(ABORT_GRACE, drain).await;
                    drop(outcomes);
                    self.keep_partial_step().await;
                    let e = self.aborted();
                    return Err(self.fail(e).await);
                };
                let Some((index, outcome)) = next else { break };
                match outcome {
                    CallOutcome::Done(record) => {
                        emit_result(&sink, &run_id, &record).await;
                        calls[index].result = Some(record);
                    }
                    CallOutcome::Stopped(Stop::Suspend(payload)) => {
                        calls[index].waiting = Some(Waiting::Resume { payload });
                    }
                    CallOutcome::Stopped(Stop::SubAgent(waiting)) => {
                        calls[index].waiting = Some(waiting);
                    }
                    CallOutcome::Stopped(Stop::SubAgentPaused) => paused = true,
                }
            }
        }
        if paused {
            // A sub-agent paused: so does this run, still waiting for it.
            if let RunStatus::ToolsPending { calls: saved, .. } = &mut self.state.status {
                *saved = calls;
            }
            return Err(self.pause_here().await);
        }
        if calls.iter().any(|c| c.waiting.is_some()) {
            return self.suspend(calls).await;
        }
        let results = calls.into_iter().filter_map(|c| c.result).collect();
        let mut continued = self.state.record_tool_results(results);
        if continued && self.delegation.as_ref().is_some_and(|d| d.bailed()) {
            // A delegation hook stopped the loop.
            self.state.status = RunStatus::Finished {
                reason: FinishReason::Stop,
                object: None,
            };
            continued = false;
        }
        if let Err(e) = self.persist().await {
            return Err(self.fail(e).await);
        }
        if sink.is_observed()
            && let Some(step) = self.state.steps.last()
        {
            let payload = StepFinishPayload {
                message_id: step.message_id.clone(),
                step_result: StepResultInfo {
                    reason: FinishReason::ToolCalls,
                    is_continued: continued,
                },
                output: StepOutput {
                    text: step.text.clone(),
                    usage: step.usage,
                },
            };
            sink.emit(Event::agent(run_id, EventKind::StepFinish(payload)))
                .await;
        }
        Ok(())
    }

    /// Stops the run on the calls that wait: stores the step's assistant message, saves the
    /// snapshot, and tells the stream what each call waits for.
    async fn suspend(&mut self, calls: Vec<CallProgress>) -> Result<(), AgentError> {
        let status = std::mem::replace(&mut self.state.status, RunStatus::Ready);
        let (RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. }) = status
        else {
            self.state.status = status;
            return Ok(());
        };
        self.state.status = RunStatus::Suspended { step, calls };
        if let Err(e) = self.persist().await {
            return Err(self.fail(e).await);
        }
        if let Err(e) = self.save_snapshot(RunPhase::Suspended).await {
            return Err(self.fail(e).await);
        }
        if self.sink.is_observed() {
            for waiting in self.state.waiting_calls() {
                let kind = match waiting.waiting {
                    Waiting::Approval => EventKind::ToolCallApproval(ToolCallApprovalPayload {
                        tool_call_id: waiting.tool_call_id,
                        tool_name: waiting.tool_name,
                        args: waiting.args,
                        resume_schema: APPROVAL_RESUME_SCHEMA.to_owned(),
                        fingerprint: waiting.fingerprint,
                        via: waiting.via,
                    }),
                    Waiting::Resume { payload } => {
                        // The schema is the tool's, in whichever (sub-)agent makes the call.
                        let resume_schema = self
                            .agent
                            .agent_at(&waiting.via)
                            .and_then(|agent| agent.inner.tools.get(&waiting.tool_name).cloned())
                            .and_then(|tool| tool.resume_schema().map(Value::to_string))
                            .unwrap_or_default();
                        EventKind::ToolCallSuspended(ToolCallSuspendedPayload {
                            tool_call_id: waiting.tool_call_id,
                            tool_name: waiting.tool_name,
                            args: waiting.args,
                            suspend_payload: payload,
                            resume_schema,
                            fingerprint: waiting.fingerprint,
                            via: waiting.via,
                        })
                    }
                    // The `tool-call` event already told the caller what to run; a
                    // sub-agent's waiting calls are listed in place of its delegation.
                    Waiting::ClientResult | Waiting::SubAgent { .. } => continue,
                };
                self.sink
                    .emit(Event::agent(self.run_id.clone(), kind))
                    .await;
            }
        }
        Ok(())
    }

    /// Saves the run's snapshot: created on the first save, then a compare-and-set on the
    /// version this driver last saw.
    async fn save_snapshot(&mut self, phase: RunPhase) -> Result<(), AgentError> {
        self.state.request_context = self.request_context.to_map();
        let version = self
            .store
            .save(&self.state, phase, self.snapshot_version)
            .await
            .map_err(|source| AgentError::RunStore {
                run_id: self.state.run_id.clone(),
                source,
            })?;
        self.snapshot_version = Some(version);
        Ok(())
    }

    /// Feedback from delegation hooks goes to the thread, for the next turn.
    async fn save_delegation_feedback(&mut self) {
        let Some(feedback) = self.delegation.as_ref().map(|d| d.take_feedback()) else {
            return;
        };
        if feedback.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            tracing::warn!(run_id = %self.run_id, "delegation feedback needs a run with memory; it was not saved");
            return;
        };
        let messages: Vec<Message> = feedback.into_iter().map(Message::system).collect();
        if let Err(error) = memory.persist(&scope, &messages).await {
            tracing::warn!(run_id = %self.run_id, %error, "saving delegation feedback failed");
        }
    }

    /// A run continued from a snapshot records its end there, so it is no longer listed as
    /// suspended. A failure to do so is logged: the run's own outcome stands.
    async fn close_snapshot(&mut self) {
        if self.snapshot_version.is_none() {
            return;
        }
        if let Err(error) = self.save_snapshot(RunPhase::Finished).await {
            tracing::warn!(run_id = %self.run_id, %error, "could not mark the run's snapshot finished");
        }
    }

    async fn finish(&mut self) -> Result<(), AgentError> {
        let RunStatus::Finished { reason, .. } = self.state.status else {
            return Ok(());
        };
        let text = self.state.last_text();
        let mut object = None;
        if let (FinishReason::Stop, Some(spec)) = (reason, &self.state.settings.structured_output) {
            match parse_structured(spec, &text) {
                Ok(value) => object = Some(value),
                Err(message) => match &spec.error_strategy {
                    ErrorStrategy::Strict => {
                        let e = AgentError::StructuredOutput {
                            run_id: self.state.run_id.clone(),
                            message,
                            text,
                        };
                        return Err(self.fail(e).await);
                    }
                    ErrorStrategy::Warn => {
                        tracing::warn!(run_id = %self.run_id, %message, "structured output invalid; finishing without an object");
                    }
                    ErrorStrategy::Fallback(value) => object = Some(value.clone()),
                },
            }
        }
        self.state.status = RunStatus::Finished {
            reason,
            object: object.clone(),
        };
        self.close_snapshot().await;
        self.save_delegation_feedback().await;
        self.notify_memory_finished();
        emit!(
            self.sink,
            self.run_id,
            EventKind::Finish(FinishPayload {
                step_result: StepResultInfo {
                    reason,
                    is_continued: false,
                },
                output: FinishOutput {
                    text,
                    usage: self.state.usage,
                    object,
                },
            })
        );
        Ok(())
    }
}

/// Which streamed part is open, so `*-start`/`*-end` events pair up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenPart {
    None,
    Text,
    Reasoning,
}

impl OpenPart {
    async fn switch_to(&mut self, next: OpenPart, sink: &EventSink, run_id: &Arc<str>, id: &str) {
        if *self == next {
            return;
        }
        let payload = || PartIdPayload { id: id.to_string() };
        match *self {
            OpenPart::Text => emit!(sink, run_id, EventKind::TextEnd(payload())),
            OpenPart::Reasoning => emit!(sink, run_id, EventKind::ReasoningEnd(payload())),
            OpenPart::None => {}
        }
        match next {
            OpenPart::Text => emit!(sink, run_id, EventKind::TextStart(payload())),
            OpenPart::Reasoning => emit!(sink, run_id, EventKind::ReasoningStart(payload())),
            OpenPart::None => {}
        }
        *self = next;
    }
}

async fn emit_whole_input(sink: &EventSink, run_id: &Arc<str>, id: &str, name: &str, input: &str) {
    emit!(
        sink,
        run_id,
        EventKind::ToolCallInputStreamingStart(ToolCallStreamingStartPayload {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
        })
    );
    emit!(
        sink,
        run_id,
        EventKind::ToolCallDelta(ToolCallDeltaPayload {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
            args_text_delta: input.to_string(),
        })
    );
    emit!(
        sink,
        run_id,
        EventKind::ToolCallInputStreamingEnd(ToolCallIdPayload {
            tool_call_id: id.to_string(),
        })
    );
}

fn parse_call(id: String, name: String, input: String) -> ToolCallRecord {
    let trimmed = input.trim();
    // Providers send an empty argument string for tools without parameters.
    let parsed = if trimmed.is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str::<Value>(trimmed)
    };
    match parsed {
        Ok(args) => ToolCallRecord {
            tool_call_id: id,
            tool_name: name,
            args,
            parse_error: None,
        },
        Err(e) => ToolCallRecord {
            tool_call_id: id,
            tool_name: name,
            args: Value::String(input),
            parse_error: Some(e.to_string()),
        },
    }
}

struct CallBase {
    /// The conversation, for tools that read it.
    conversation: Option<Arc<[Message]>>,
    delegation: Option<Arc<DelegationRuntime>>,
    step: u32,
    run_id: Arc<str>,
    thread_id: Option<String>,
    resource_id: Option<String>,
    request_context: RequestContext,
    abort: AbortSignal,
    sink: EventSink,
    /// Where delegated sub-agents' runs are stored.
    store: SharedRunStore,
    pause: AbortSignal,
    agent_id: String,
}

/// What one call brings beyond the call itself.
struct CallExtras {
    /// Resume data, for a suspended call that is resumed.
    resume_data: Option<Value>,
    /// The sub-agent's run, for a delegation.
    sub_run: Option<SubRun>,
    /// Whether that run id was chosen in this tools phase (so it has no stored run to load).
    sub_run_is_new: bool,
    /// Background settings, for a background delegation.
    background: Option<(crate::agent::BackgroundTool, Arc<BackgroundRuntime>)>,
}

/// How a tool call ended: a result, or the call stops the run.
enum CallOutcome {
    Done(ToolResultRecord),
    Stopped(Stop),
}

async fn execute_call(
    agent: Agent,
    call: ToolCallRecord,
    base: Arc<CallBase>,
    how: CallExtras,
) -> CallOutcome {
    let span = tracing::debug_span!(
        "kestrel.tool_call",
        tool = %call.tool_name,
        tool_call_id = %call.tool_call_id,
    );
    let outcome = run_tool(&agent, &call, &base, how).instrument(span).await;
    let (result, is_error) = match outcome {
        Ok(RunTool::Value(value)) => (value, false),
        Ok(RunTool::Stopped(stop)) => return CallOutcome::Stopped(stop),
        Err(error) => {
            tracing::debug!(run_id = %base.run_id, tool = %call.tool_name, %error, "tool call failed");
            (Value::String(error.to_string()), true)
        }
    };
    CallOutcome::Done(ToolResultRecord {
        tool_call_id: call.tool_call_id,
        tool_name: call.tool_name,
        args: call.args,
        result,
        is_error,
        denied: false,
    })
}

/// What a tool's `execute` gave back.
enum RunTool {
    Value(Value),
    Stopped(Stop),
}

async fn run_tool(
    agent: &Agent,
    call: &ToolCallRecord,
    base: &CallBase,
    how: CallExtras,
) -> Result<RunTool, ToolCallError> {
    let CallExtras {
        resume_data,
        sub_run,
        sub_run_is_new,
        background,
    } = how;
    let tool_name = call.tool_name.clone();
    if let Some(error) = &call.parse_error {
        return Err(ToolCallError::InvalidJson {
            tool: tool_name,
            error: error.clone(),
            input: call.args.as_str().unwrap_or_default().to_string(),
        });
    }
    let registered = agent.inner.tools.validate(&tool_name, &call.args)?;
    let ctx = ToolContext {
        run_id: base.run_id.clone(),
        tool_call_id: call.tool_call_id.clone(),
        tool_name: tool_name.clone(),
        thread_id: base.thread_id.clone(),
        resource_id: base.resource_id.clone(),
        request_context: base.request_context.clone(),
        abort: base.abort.clone(),
        writer: ToolWriter {
            run_id: base.run_id.clone(),
            tool_call_id: call.tool_call_id.clone(),
            tool_name: tool_name.clone(),
            sink: base.sink.clone(),
        },
        resume_data,
        conversation: base.conversation.clone(),
        delegation: base.delegation.clone(),
        step: base.step,
        sub_run: sub_run.map(|sub_run| SubRunContext {
            sub_run,
            is_new: sub_run_is_new,
            store: Arc::clone(&base.store),
            pause: base.pause.clone(),
            delegated_by: DelegatedBy {
                agent_id: base.agent_id.clone(),
                run_id: base.run_id.to_string(),
                tool_call_id: call.tool_call_id.clone(),
            },
        }),
        background,
    };
    // A panicking tool fails its own call, not the run.
    match AssertUnwindSafe(registered.tool.execute(call.args.clone(), ctx))
        .catch_unwind()
        .await
    {
        Ok(Ok(value)) => Ok(RunTool::Value(value)),
        Ok(Err(error)) => match error.into_stop() {
            Ok(Stop::Suspend(payload)) => {
                if let Some(schema) = registered.tool.suspend_schema() {
                    let errors = schema_errors(schema, &payload);
                    if !errors.is_empty() {
                        return Err(ToolCallError::Execution {
                            tool: tool_name,
                            message: format!(
                                "the tool suspended with a payload that does not match its \
                                 suspend schema: {}",
                                errors.join("; ")
                            ),
                        });
                    }
                }
                Ok(RunTool::Stopped(Stop::Suspend(payload)))
            }
            Ok(stop) => Ok(RunTool::Stopped(stop)),
            Err(error) => Err(ToolCallError::Execution {
                tool: tool_name,
                message: error.message().to_string(),
            }),
        },
        Err(_) => Err(ToolCallError::Panicked { tool: tool_name }),
    }
}

/// Emits a call's `tool-result` or `tool-error`.
async fn emit_result(sink: &EventSink, run_id: &Arc<str>, record: &ToolResultRecord) {
    if record.is_error {
        emit!(
            sink,
            run_id,
            EventKind::ToolError(ToolErrorPayload {
                tool_call_id: record.tool_call_id.clone(),
                tool_name: record.tool_name.clone(),
                args: record.args.clone(),
                error: record.result.as_str().unwrap_or_default().to_string(),
            })
        );
    } else {
        emit!(
            sink,
            run_id,
            EventKind::ToolResult(ToolResultPayload {
                tool_call_id: record.tool_call_id.clone(),
                tool_name: record.tool_name.clone(),
                args: record.args.clone(),
                result: record.result.clone(),
                is_error: false,
            })
        );
    }
}

/// The JSON schema of an approval decision, as the `resumeSchema` string of
/// `tool-call-approval` (Mastra's wire form).
pub const APPROVAL_RESUME_SCHEMA: &str = r#"{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}"#;

/// Parses the final text as JSON (tolerating a Markdown code fence) and validates it.
fn parse_structured(spec: &StructuredOutput, text: &str) -> Result<Value, String> {
    let body = strip_code_fence(text.trim());
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let errors = schema_errors(&spec.schema, &value);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "the answer does not match the schema: {}",
            errors.join("; ")
        ))
    }
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map(|(_, body)| body).unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The approval policy of a run: the call's, else the agent's default. A continued run
/// (`saved`: what its state recorded at the start) without a policy of the call keeps the one
/// it started with: a function is not saved, so one recorded as a function is the agent's
/// default function when it has one (the function the run most likely started with), and
/// otherwise every call needs approval: nothing is let through by default.
fn approval_policy(
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
