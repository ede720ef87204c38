//! The tools of a step: the calls the machine says run now run (up to the concurrency limit,
//! in the model's order), their results are recorded, and the run stops on the calls that wait.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::future::Either;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use super::{ABORT_GRACE, APPROVAL_RESUME_SCHEMA, AgentRun};
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::definition::tools::DELEGATION_TOOL_PREFIX;
use crate::definition::{AgentDefinition, AgentError};
use crate::event::{
    Event, EventKind, StepFinishPayload, StepOutput, StepResultInfo, ToolCallApprovalPayload,
    ToolCallSuspendedPayload, ToolErrorPayload, ToolResultPayload,
};
use crate::message::Transcript;
use crate::model::FinishReason;
use crate::run::{
    CallPlan, CallProgress, DelegatedBy, Resumption, RunStatus, SubRun, ToolCallRecord,
    ToolResultRecord, Waiting, calls_outcome, plan_calls, prepare_calls,
};
use crate::runtime::Agent;
use crate::runtime::background::BackgroundCall;
use crate::runtime::subrun::{DelegationRuntime, SubRunContext};
use crate::schema::schema_errors;
use crate::sink::EventSink;
use crate::store::{RunPhase, SharedRunStore};
use crate::tool::{ApprovalContext, Extensions, Stop, ToolCallError, ToolContext, ToolWriter};
use crate::trace::SpanType;

/// The result of a decided call whose instance stopped while its tool ran: the tool may or
/// may not have done its work, and is not run a second time.
pub const INTERRUPTED_CALL: &str = "the tool call was interrupted: the instance running it \
     stopped before its result was saved, and a decided call is not run a second time (it may \
     or may not have taken effect)";

impl AgentRun {
    /// The sub-agent a call delegates to, if it is a delegation call.
    pub(super) fn delegation_target(&self, tool_name: &str) -> Option<&AgentDefinition> {
        let id = tool_name.strip_prefix(DELEGATION_TOOL_PREFIX)?;
        self.agent.inner.sub_agents.get(id).map(|a| &**a)
    }

    /// Whether a call needs approval: the tool's policy or the run's. An unknown tool needs
    /// none (its call fails at validation).
    pub(super) fn needs_approval(&self, call: &ToolCallRecord) -> bool {
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

    /// In a cluster: a decided call (approved, or resumed with data) runs at most once. One
    /// that an instance started before it stopped is settled with an error instead of running
    /// again; the others are marked started in the run's snapshot before they run.
    async fn mark_decided_calls(
        &mut self,
        calls: &mut [CallProgress],
        to_run: &mut Vec<(usize, Option<Resumption>)>,
    ) -> Result<(), AgentError> {
        let decided = |index: usize, resume: &Option<Resumption>, calls: &[CallProgress]| {
            let progress = &calls[index];
            (progress.approved || resume.is_some())
                && progress.sub_run.is_none()
                && self.delegation_target(&progress.call.tool_name).is_none()
                && self
                    .agent
                    .inner
                    .background
                    .get(&progress.call.tool_name)
                    .is_none()
        };
        let mut interrupted = Vec::new();
        let mut marked = false;
        to_run.retain(|(index, resume)| {
            if !decided(*index, resume, calls) {
                return true;
            }
            let progress = &mut calls[*index];
            if progress.started {
                interrupted.push(*index);
                return false;
            }
            progress.started = true;
            marked = true;
            true
        });
        for index in interrupted {
            let progress = &mut calls[index];
            let record = ToolResultRecord {
                tool_call_id: progress.call.tool_call_id.clone(),
                tool_name: progress.call.tool_name.clone(),
                args: progress.call.args.clone(),
                result: Value::String(INTERRUPTED_CALL.to_owned()),
                is_error: true,
                denied: false,
            };
            tracing::warn!(run_id = %self.run_id, tool_call_id = %record.tool_call_id, "a decided tool call was interrupted when its instance stopped; it is not run again");
            emit_result(&self.sink, &self.run_id, &record).await;
            progress.result = Some(record);
        }
        if marked {
            if let RunStatus::ToolsPending { calls: saved, .. } = &mut self.state.status {
                *saved = calls.to_vec();
            }
            or_fail!(self, self.save_snapshot(RunPhase::Running));
        }
        Ok(())
    }

    /// A `client_tool_call` span under the run's (when traced) for a result the caller
    /// submitted: it starts when the run takes the result (the caller ran the tool; when, the
    /// run cannot know).
    fn client_tool_span(&self, result: &ToolResultRecord) {
        let Some(run_span) = &self.span else {
            return;
        };
        let name = format!("client tool: '{}'", result.tool_name);
        let Some(mut span) = run_span.child(SpanType::ClientToolCall, name) else {
            return;
        };
        span.attribute("toolCallId", result.tool_call_id.clone());
        span.entity("tool", &result.tool_name, None);
        let settings = &self.state.settings;
        span.scope(
            &self.state.run_id,
            settings.thread_id.as_deref(),
            settings.resource_id.as_deref(),
        );
        span.input_of(&result.args);
        span.attribute("success", !result.is_error);
        if result.is_error {
            let message = match &result.result {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            span.fail(message, Some("tool"));
        } else {
            span.output_of(&result.result);
            span.end();
        }
    }

    pub(super) fn is_client_tool(&self, name: &str) -> bool {
        self.agent
            .inner
            .tools
            .get(name)
            .is_some_and(|tool| tool.is_client_tool())
    }

    /// Runs the step's tool calls that can run, records their results, and either ends the
    /// step or stops the run on the calls that wait for a person or the caller.
    pub(super) async fn tools_phase(&mut self) -> Result<(), AgentError> {
        if self.abort.is_aborted() {
            let e = self.aborted();
            return Err(self.fail(e).await);
        }
        let RunStatus::ToolsPending { calls, .. } = &mut self.state.status else {
            return Ok(());
        };
        let mut calls = std::mem::take(calls);
        if calls.is_empty()
            && let RunStatus::ToolsPending { step, .. } = &self.state.status
        {
            calls = prepare_calls(step, self.state.steps.len(), |call| {
                self.needs_approval(call)
            });
        }
        let sink = self.sink.clone();
        let run_id = self.run_id.clone();
        // What runs now; decisions taken on the stopped run are acted on here.
        let CallPlan {
            run: mut to_run,
            settled,
        } = plan_calls(&mut calls, |name| self.is_client_tool(name));
        let result_hooks = self
            .agent
            .inner
            .processors
            .output
            .has(crate::processor::ProcessorPhase::ToolResult);
        for index in settled {
            if let Some(result) = &mut calls[index].result {
                let client = !result.denied && self.is_client_tool(&result.tool_name);
                if client {
                    self.client_tool_span(result);
                }
                // A client tool's result, given by the caller, is a tool result like any.
                if client && result_hooks {
                    match Box::pin(self.check_tool_result(result)).await {
                        Ok(None) => {}
                        Ok(Some(tripwire)) => {
                            self.trip(tripwire).await;
                            return Ok(());
                        }
                        Err(e) => return Err(self.fail(e).await),
                    }
                }
                emit_result(&sink, &run_id, result).await;
            }
        }
        if self.hold.is_some() && self.store.is_durable() {
            // Boxed: single-process runs never await it.
            Box::pin(self.mark_decided_calls(&mut calls, &mut to_run)).await?;
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
                    agent_id: agent.id.clone(),
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
            or_fail!(self, self.save_snapshot(RunPhase::WaitingForSubtask));
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
            .then(|| self.state.messages.clone());
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
            versions: self.state.settings.versions.clone(),
            mocks: self.tool_mocks.clone(),
            trace: self.span.as_ref().and_then(|span| {
                let tracer = self.tracer.clone()?;
                Some((tracer, span.context()))
            }),
        });
        let background_of = |index: usize| {
            let config = background.iter().find(|(i, _)| *i == index)?.1;
            Some(BackgroundCall {
                config,
                runtime: Arc::clone(runtime.as_ref()?),
            })
        };
        let agent = self.agent.clone();
        let mut paused = false;
        // What a tool result processor stopped the run with (or its failure).
        let mut stopped: Option<Result<crate::processor::Tripwire, AgentError>> = None;
        {
            // `buffered` runs up to the limit at once and yields outcomes in the model's order.
            let jobs: Vec<_> = to_run
                .into_iter()
                .map(|(index, resume)| {
                    let progress = &calls[index];
                    let how = CallExtras {
                        resume,
                        sub_run: progress.sub_run.clone(),
                        sub_run_is_new: fresh.contains(&index),
                        background: background_of(index),
                    };
                    (index, progress.call.clone(), how)
                })
                .collect();
            let single = jobs.len() == 1;
            let calls_of = futures::stream::iter(jobs.into_iter().map(|(index, call, how)| {
                let agent = agent.clone();
                let base = base.clone();
                async move { (index, execute_call(agent, call, base, how).await) }
            }));
            // One call (most steps) needs no `buffered`: its queue keeps a spare task as big as
            // the call's future, for as long as the call runs.
            let mut outcomes = if single {
                Either::Left(calls_of.then(Box::pin))
            } else {
                Either::Right(calls_of.buffered(self.state.settings.tool_concurrency))
            };
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
                    CallOutcome::Done(mut record) => {
                        if result_hooks {
                            match Box::pin(self.check_tool_result(&mut record)).await {
                                Ok(None) => {}
                                Ok(Some(tripwire)) => {
                                    stopped = Some(Ok(tripwire));
                                    break;
                                }
                                Err(e) => {
                                    stopped = Some(Err(e));
                                    break;
                                }
                            }
                        }
                        emit_result(&sink, &run_id, &record).await;
                        calls[index].result = Some(record);
                    }
                    CallOutcome::Stopped(Stop::Suspend(payload)) => {
                        // Its attempt ended: the next resume runs it again (a tool may ask
                        // in several rounds).
                        calls[index].started = false;
                        calls[index].waiting = Some(Waiting::Resume { payload });
                    }
                    CallOutcome::Stopped(Stop::SubAgent(waiting)) => {
                        calls[index].waiting = Some(waiting);
                    }
                    CallOutcome::Stopped(Stop::SubAgentPaused) => paused = true,
                    CallOutcome::Stopped(Stop::Tripwire(tripwire)) => {
                        stopped = Some(Ok(*tripwire));
                        break;
                    }
                }
            }
        }
        // The calls' shared context holds the conversation: gone, the results append to it
        // without a copy.
        drop(base);
        match stopped {
            // The calls still running were cancelled with the stream of their outcomes.
            Some(Ok(tripwire)) => {
                self.trip(tripwire).await;
                return Ok(());
            }
            Some(Err(e)) => return Err(self.fail(e).await),
            None => {}
        }
        if paused {
            // A sub-agent paused: so does this run, still waiting for it.
            if let RunStatus::ToolsPending { calls: saved, .. } = &mut self.state.status {
                *saved = calls;
            }
            return self.pause_here().await;
        }
        let results = match calls_outcome(calls) {
            Ok(results) => results,
            // Boxed: inline, stopping's work would take room in every run's future.
            Err(waiting) => return Box::pin(self.suspend(waiting)).await,
        };
        let mut continued = self.state.record_tool_results(results);
        if continued && self.delegation.as_ref().is_some_and(|d| d.bailed()) {
            // A delegation hook stopped the loop.
            self.state.end(FinishReason::Stop);
            continued = false;
        }
        or_fail!(self, self.persist());
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
    pub(super) async fn suspend(&mut self, calls: Vec<CallProgress>) -> Result<(), AgentError> {
        let status = std::mem::replace(&mut self.state.status, RunStatus::Ready);
        let (RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. }) = status
        else {
            self.state.status = status;
            return Ok(());
        };
        self.state.status = RunStatus::Suspended { step, calls };
        or_fail!(self, self.persist());
        or_fail!(self, self.save_snapshot(RunPhase::Suspended));
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
}

struct CallBase {
    /// The tracer, and the run's span the calls' spans hang under, when the run is traced.
    trace: Option<(crate::trace::Tracer, crate::trace::TraceContext)>,
    /// The conversation, for tools that read it.
    conversation: Option<Transcript>,
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
    /// The run's choice of versions, which its delegations carry.
    versions: crate::version::Versions,
    /// Results standing in for tools.
    mocks: Option<crate::definition::ToolMocks>,
}

/// The versions a delegating run chose, for its sub-agents' runs.
#[derive(Debug, Clone)]
pub(crate) struct RunVersions(pub(crate) crate::version::Versions);

/// What one call brings beyond the call itself.
struct CallExtras {
    /// For a suspended call that is resumed: its resume data and suspend payload.
    resume: Option<Resumption>,
    /// The sub-agent's run, for a delegation.
    sub_run: Option<SubRun>,
    /// Whether that run id was chosen in this tools phase (so it has no stored run to load).
    sub_run_is_new: bool,
    /// Background settings, for a background delegation.
    background: Option<BackgroundCall>,
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
        run_id = %base.run_id,
        trace_id = %base.trace.as_ref().map_or("", |(_, parent)| parent.trace_id.as_str()),
        tool = %call.tool_name,
        tool_call_id = %call.tool_call_id,
    );
    let mut tool_span = base.trace.as_ref().and_then(|(tracer, parent)| {
        let name = format!("tool: '{}'", call.tool_name);
        let span_type = agent
            .inner
            .tools
            .get(&call.tool_name)
            .map_or(SpanType::ToolCall, |tool| tool.span_type());
        let mut tool_span = tracer.start(Some(parent), span_type, name)?;
        tool_span.attribute("toolCallId", call.tool_call_id.clone());
        tool_span.entity("tool", &call.tool_name, None);
        tool_span.scope(
            &base.run_id,
            base.thread_id.as_deref(),
            base.resource_id.as_deref(),
        );
        tool_span.input_of(&call.args);
        Some(tool_span)
    });
    let trace = tool_span.as_ref().map(crate::trace::ActiveSpan::context);
    let mocked = base
        .mocks
        .as_ref()
        .and_then(|mocks| mocks.get(&call.tool_name))
        .cloned();
    if mocked.is_some()
        && let Some(tool_span) = &mut tool_span
    {
        tool_span.attribute("mocked", true);
    }
    let outcome = match mocked {
        // A mock stands in for the tool: it never runs.
        Some(value) => Ok(RunTool::Value(value)),
        None => {
            run_tool(&agent, &call, &base, how, trace)
                .instrument(span)
                .await
        }
    };
    let (result, is_error) = match outcome {
        Ok(RunTool::Value(value)) => (value, false),
        Ok(RunTool::Stopped(stop)) => {
            if let Some(mut tool_span) = tool_span.take() {
                tool_span.attribute("stopped", stop.describe());
                tool_span.end();
            }
            return CallOutcome::Stopped(stop);
        }
        Err(error) => {
            tracing::debug!(run_id = %base.run_id, tool = %call.tool_name, %error, "tool call failed");
            (Value::String(error.to_string()), true)
        }
    };
    if let Some(mut tool_span) = tool_span.take() {
        tool_span.attribute("success", !is_error);
        if is_error {
            tool_span.fail(result.as_str().unwrap_or_default(), Some("tool"));
        } else {
            tool_span.output_of(&result);
            tool_span.end();
        }
    }
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
    trace: Option<crate::trace::TraceContext>,
) -> Result<RunTool, ToolCallError> {
    let CallExtras {
        resume,
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
    // What delegation and background tasks need travels as extensions: the tool context
    // names none of them.
    let mut extensions = Extensions::new();
    // Only a delegation reads them (every delegation call has a sub-run or runs in the
    // background), so other tool calls allocate no map.
    // A traced call carries the tracer, so the work it starts (a workflow run) is traced.
    if trace.is_some()
        && let Some((tracer, _)) = &base.trace
    {
        extensions.insert(tracer.clone());
    }
    if sub_run.is_some() || background.is_some() {
        // The sub-agent runs in this run's runtime.
        extensions.insert(Arc::clone(&agent.runtime));
        // The sub-agent runs the versions this run chose (seed 000's `versions`).
        extensions.insert(RunVersions(base.versions.clone()));
        if let Some(delegation) = &base.delegation {
            extensions.insert(Arc::clone(delegation));
        }
    }
    if let Some(sub_run) = sub_run {
        extensions.insert(SubRunContext {
            sub_run,
            is_new: sub_run_is_new,
            store: Arc::clone(&base.store),
            pause: base.pause.clone(),
            delegated_by: DelegatedBy {
                agent_id: base.agent_id.clone(),
                run_id: base.run_id.to_string(),
                tool_call_id: call.tool_call_id.clone(),
            },
        });
    }
    if let Some(background) = background {
        extensions.insert(background);
    }
    let (resume_data, suspend_payload) = match resume {
        Some(resumed) => (Some(resumed.data), Some(resumed.suspend_payload)),
        None => (None, None),
    };
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
        suspend_payload,
        trace,
        conversation: base.conversation.clone(),
        step: base.step,
        extensions,
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
