//! The agent's processors in the run: each hook called where the run meets it, its
//! decisions turned into events, a tripwire turned into the run's end.
//!
//! Every hook's future is boxed where the driver awaits it: agents without processors (most)
//! pay nothing for them in their runs' futures.

use std::sync::Arc;

use serde_json::Value;

use super::AgentRun;
use crate::definition::AgentError;
use crate::event::{EventKind, StartPayload, StepFinishPayload, StepOutput, StepResultInfo};
use crate::message::Message;
use crate::model::{FinishReason, ModelError, ModelRequest, Usage};
use crate::processor::{
    Decision, ProcessorContext, ProcessorPhase, Stopped, Tripwire, retry_feedback,
};
use crate::run::ToolCallRecord;

/// What the output hooks made of an answer.
pub(super) enum Verdict {
    /// Accepted (perhaps changed).
    Accept,
    /// Rejected: the run stops.
    Stop(Tripwire),
    /// Rejected, with a retry asked for.
    Retry(Tripwire),
}

impl AgentRun {
    /// The processors' view of this run.
    pub(super) fn processor_context(&self) -> ProcessorContext<'_> {
        let settings = &self.state.settings;
        let mut cx = ProcessorContext::new(
            &self.run_id,
            self.agent.id(),
            &self.request_context,
            &self.abort,
        )
        .scoped(
            settings.thread_id.as_deref(),
            settings.resource_id.as_deref(),
        );
        cx.retries = self.state.processor_retries;
        cx
    }

    /// The run's `start` event (once): input processors run after it, so that even a run
    /// they stop streams a well-formed start.
    pub(super) async fn announce_start(&mut self, message_id: &str) {
        if self.state.started {
            return;
        }
        self.state.started = true;
        emit!(
            self.sink,
            self.run_id,
            EventKind::Start(StartPayload {
                id: self.agent.id().to_string(),
                message_id: message_id.to_owned(),
                metadata: self.run_metadata(),
            })
        );
        // Hands `start` to the reader before the first step's work: a server then sends its
        // first bytes at once, even when the model answers without ever waiting. With no
        // reader (`generate`), yielding would only send the run to the back of the queue, its
        // memory cold by the time it comes back.
        if self.sink.is_observed() {
            tokio::task::yield_now().await;
        }
    }

    /// The `processor-decision` events of `decisions`.
    pub(super) async fn emit_decisions(&self, decisions: Vec<Decision>) {
        for decision in decisions {
            emit!(
                self.sink,
                self.run_id,
                EventKind::ProcessorDecision(decision)
            );
        }
    }

    /// Ends the run on a processor's tripwire: the `tripwire` event now; the wrap-up
    /// (`finish` with the reason `tripwire`, the snapshot closed) follows as for any end.
    pub(super) async fn trip(&mut self, tripwire: Tripwire) {
        tracing::info!(
            run_id = %self.run_id,
            processor = tripwire.processor_id.as_deref().unwrap_or(""),
            reason = %tripwire.reason,
            "a processor stopped the run"
        );
        emit!(
            self.sink,
            self.run_id,
            EventKind::Tripwire(tripwire.clone())
        );
        self.state.tripwire = Some(tripwire);
        self.state.end(FinishReason::Tripwire);
    }

    /// A hook's outcome: its decisions emitted; `Ok(true)` when it stopped the run.
    async fn settle(
        &mut self,
        outcome: Result<Vec<Decision>, Stopped>,
    ) -> Result<bool, AgentError> {
        match outcome {
            Ok(decisions) => {
                self.emit_decisions(decisions).await;
                Ok(false)
            }
            Err(Stopped::Tripwire(tripwire)) => {
                self.trip(tripwire).await;
                Ok(true)
            }
            Err(Stopped::Failed(failure)) => Err(self.processor_failed(failure)),
        }
    }

    fn processor_failed(&self, failure: crate::processor::ProcessorFailure) -> AgentError {
        AgentError::Processor {
            run_id: self.state.run_id.clone(),
            source: Box::new(failure),
        }
    }

    /// The input processors' `process_input` over the run's input, before memory stores it:
    /// `Ok(true)` when one stopped the run.
    pub(super) async fn process_input(&mut self) -> Result<bool, AgentError> {
        let pipeline = self.agent.inner.processors.input.clone();
        let mut input = self.state.take_input();
        let mut system: Vec<String> = self.system.clone().flatten().into_iter().collect();
        system.extend(self.skill_system.iter().cloned());
        let outcome = {
            let cx = self.processor_context();
            pipeline
                .input(&cx, self.span.as_ref(), &mut input, &system)
                .await
        };
        self.state.set_input(input);
        self.settle(outcome).await
    }

    /// The input processors' `process_input_step` over what this model call sends: the
    /// request rebuilt from what they left. `Ok(true)` when one stopped the run.
    pub(super) async fn process_input_step(
        &mut self,
        request: &mut ModelRequest,
        system: Option<String>,
    ) -> Result<bool, AgentError> {
        let pipeline = self.agent.inner.processors.input.clone();
        let mut head: Vec<String> = system.into_iter().collect();
        head.extend(self.skill_system.iter().cloned());
        head.extend(self.state.memory_system.iter().cloned());
        let mut messages = self.state.messages.to_vec();
        let mut tools = request.tools.to_vec();
        let mut tool_choice = request.tool_choice.clone();
        let outcome = {
            let cx = self.processor_context();
            pipeline
                .input_step(
                    &cx,
                    self.span.as_ref(),
                    self.state.steps.len(),
                    &mut messages,
                    self.state.remembered.min(self.state.messages.len()),
                    &mut head,
                    &mut tools,
                    &mut tool_choice,
                )
                .await
        };
        let mut all: Vec<Message> = head.into_iter().map(Message::system).collect();
        all.extend(messages);
        request.messages = all.into();
        request.tools = Arc::from(tools);
        request.tool_choice = tool_choice;
        self.settle(outcome).await
    }

    /// The output processors' `process_output_step`, then (for an answer without tool
    /// calls, the run's last) `process_output_result`, over a model call's answer.
    pub(super) async fn check_answer(
        &mut self,
        text: &mut String,
        reasoning: &str,
        calls: &[ToolCallRecord],
        reason: FinishReason,
        usage: Usage,
    ) -> Result<Verdict, AgentError> {
        let pipeline = self.agent.inner.processors.output.clone();
        let step = self.state.steps.len();
        let mut system: Vec<String> = self.system.clone().flatten().into_iter().collect();
        system.extend(self.skill_system.iter().cloned());
        system.extend(self.state.memory_system.iter().cloned());
        let mut outcome = {
            let cx = self.processor_context();
            pipeline
                .output_step(
                    &cx,
                    self.span.as_ref(),
                    step,
                    text,
                    reasoning,
                    &system,
                    calls,
                    reason,
                    &self.state.messages,
                )
                .await
        };
        if calls.is_empty()
            && let Ok(decisions) = &mut outcome
        {
            let mut total = self.state.usage;
            total.add(&usage);
            let cx = self.processor_context();
            let result = pipeline
                .output_result(
                    &cx,
                    self.span.as_ref(),
                    text,
                    &self.state.steps,
                    &self.state.messages,
                    total,
                )
                .await;
            match result {
                Ok(more) => decisions.extend(more),
                Err(stopped) => outcome = Err(stopped),
            }
        }
        match outcome {
            Ok(decisions) => {
                self.emit_decisions(decisions).await;
                Ok(Verdict::Accept)
            }
            Err(Stopped::Tripwire(tripwire)) if tripwire.retry => Ok(Verdict::Retry(tripwire)),
            Err(Stopped::Tripwire(tripwire)) => Ok(Verdict::Stop(tripwire)),
            Err(Stopped::Failed(failure)) => Err(self.processor_failed(failure)),
        }
    }

    /// Whether the run may ask the model again (its processors' retries not spent); counts
    /// the retry when it may.
    fn take_retry(&mut self) -> bool {
        if self.state.processor_retries >= self.agent.inner.processors.max_retries {
            return false;
        }
        self.state.processor_retries += 1;
        true
    }

    /// A rejected answer with a retry asked for: the step closed with the reason `retry`,
    /// the feedback added to the conversation (and stored), and the run ready to call the
    /// model again. A tripwire instead when the retries are spent.
    pub(super) async fn retry_answer(
        &mut self,
        tripwire: Tripwire,
        message_id: String,
        usage: Usage,
    ) -> Result<(), AgentError> {
        // The rejected answer's tokens were spent all the same.
        self.state.usage.add(&usage);
        if !self.take_retry() {
            self.trip(tripwire).await;
            return Ok(());
        }
        tracing::debug!(run_id = %self.run_id, reason = %tripwire.reason, "a processor asked the model to answer again");
        self.close_retried_step(message_id, usage).await;
        self.state
            .add_feedback_text(retry_feedback(&tripwire.reason));
        self.state.next_message_id = crate::id::new_id();
        self.persist().await
    }

    /// `step-finish` with the reason `retry` for a step whose answer is discarded.
    async fn close_retried_step(&self, message_id: String, usage: Usage) {
        emit!(
            self.sink,
            self.run_id,
            EventKind::StepFinish(StepFinishPayload {
                message_id,
                step_result: StepResultInfo {
                    reason: FinishReason::Retry,
                    is_continued: true,
                },
                output: StepOutput {
                    text: String::new(),
                    usage,
                },
            })
        );
    }

    /// A failed model call, before any of its answer was streamed: the output processors'
    /// `process_api_error` may ask to call again (within `max_processor_retries`) or stop
    /// the run. Otherwise (or when part of the answer was streamed already) the run fails
    /// with the model's error.
    pub(super) async fn model_failed(
        &mut self,
        source: ModelError,
        streamed: bool,
        message_id: String,
    ) -> Result<(), AgentError> {
        let run_id = self.state.run_id.clone();
        if matches!(source, ModelError::Cancelled) {
            return Err(AgentError::Aborted { run_id });
        }
        let pipeline = self.agent.inner.processors.output.clone();
        if !pipeline.has(ProcessorPhase::ApiError) {
            return Err(AgentError::Model { run_id, source });
        }
        let outcome = {
            let cx = self.processor_context();
            pipeline
                .api_error(
                    &cx,
                    self.span.as_ref(),
                    self.state.steps.len(),
                    &source,
                    self.state.processor_retries,
                )
                .await
        };
        match outcome {
            Ok((retry, decisions)) => {
                self.emit_decisions(decisions).await;
                if retry && !streamed && self.take_retry() {
                    tracing::debug!(run_id = %self.run_id, error = %source, "a processor asked to call the model again");
                    self.close_retried_step(message_id, Usage::default()).await;
                    return Ok(());
                }
                Err(AgentError::Model { run_id, source })
            }
            Err(Stopped::Tripwire(tripwire)) => {
                self.trip(tripwire).await;
                Ok(())
            }
            Err(Stopped::Failed(failure)) => {
                tracing::warn!(run_id = %self.run_id, %failure, "a processor's API error hook failed; the run fails with the model's error");
                Err(AgentError::Model { run_id, source })
            }
        }
    }

    /// The output processors' `process_tool_result` over one call's result: `Ok(Some(..))`
    /// when one stopped the run.
    pub(super) async fn check_tool_result(
        &self,
        record: &mut crate::run::ToolResultRecord,
    ) -> Result<Option<Tripwire>, AgentError> {
        let pipeline = &self.agent.inner.processors.output;
        let outcome = {
            let cx = self.processor_context();
            let mut result = std::mem::replace(&mut record.result, Value::Null);
            let outcome = pipeline
                .tool_result(
                    &cx,
                    self.span.as_ref(),
                    &record.tool_call_id,
                    &record.tool_name,
                    &record.args,
                    &mut result,
                    record.is_error,
                )
                .await;
            record.result = result;
            outcome
        };
        match outcome {
            Ok(decisions) => {
                self.emit_decisions(decisions).await;
                Ok(None)
            }
            Err(Stopped::Tripwire(tripwire)) => Ok(Some(tripwire)),
            Err(Stopped::Failed(failure)) => Err(self.processor_failed(failure)),
        }
    }
}

/// Replaces the text parts of `held` with one part of `text` (the output hooks changed the
/// text: the held deltas are not what was accepted).
pub(super) fn replace_held_text(held: &mut Vec<EventKind>, id: &str, text: &str) {
    let first = held
        .iter()
        .position(|e| matches!(e, EventKind::TextStart(_) | EventKind::TextDelta(_)));
    held.retain(|e| {
        !matches!(
            e,
            EventKind::TextStart(_) | EventKind::TextDelta(_) | EventKind::TextEnd(_)
        )
    });
    if text.is_empty() {
        return;
    }
    let at = first.unwrap_or(0).min(held.len());
    let part = || crate::event::PartIdPayload { id: id.to_owned() };
    let replacement = [
        EventKind::TextStart(part()),
        EventKind::TextDelta(crate::event::TextDeltaPayload {
            id: id.to_owned(),
            text: text.to_owned(),
        }),
        EventKind::TextEnd(part()),
    ];
    held.splice(at..at, replacement);
}
