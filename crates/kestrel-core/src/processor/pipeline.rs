//! An ordered list of processors, and how each hook runs through it: in order, each seeing
//! what the one before left, until one stops the run.

use std::sync::Arc;

use serde_json::Value;

use super::args::{
    ApiErrorArgs, Decision, InputArgs, InputStepArgs, OutputResultArgs, OutputStepArgs,
    OutputStreamArgs, ProcessorContext, StreamState, ToolResultArgs,
};
use super::{Phases, ProcessorPhase, SharedProcessor, Stopped};
use crate::message::Message;
use crate::model::{FinishReason, ModelError, ModelEvent, ToolChoice, ToolDefinition, Usage};
use crate::run::{StepResult, ToolCallRecord};
use crate::trace::{ActiveSpan, SpanType};

/// The feedback a retried answer's model reads (Mastra's words): `[Processor Feedback] Your
/// previous response was not accepted: <reason>. Please try again with the feedback in mind.`
pub fn retry_feedback(reason: &str) -> String {
    format!(
        "[Processor Feedback] Your previous response was not accepted: {reason}. Please try \
         again with the feedback in mind."
    )
}

/// Processors in order, with the hooks any of them implements.
#[derive(Clone, Default)]
pub struct Pipeline {
    processors: Arc<[SharedProcessor]>,
    phases: Phases,
}

impl Default for Phases {
    fn default() -> Self {
        Phases::NONE
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.processors.iter().map(|p| p.id()))
            .finish()
    }
}

/// Runs `$hook` of every processor of `$self` that implements `$phase`, in order, each under
/// a `processor_run` span of `$parent`; stops at the first that stops the run. Evaluates to
/// the decisions they reported.
macro_rules! each {
    ($self:expr, $phase:expr, $cx:expr, $parent:expr, |$processor:ident| $hook:expr) => {{
        let mut decisions: Vec<Decision> = Vec::new();
        for $processor in $self.processors.iter() {
            if !$processor.phases().contains($phase) {
                continue;
            }
            let span = open_span($parent, $processor.id(), $phase);
            let outcome = $hook.await;
            let made = $cx.take_decisions($processor.id(), $phase);
            match outcome {
                Ok(()) => close_span(span, &made),
                Err(error) => {
                    let stopped = Stopped::from_error(error, $processor.id(), $phase);
                    fail_span(span, &stopped);
                    return Err(stopped);
                }
            }
            decisions.extend(made);
        }
        Ok(decisions)
    }};
}

fn open_span(parent: Option<&ActiveSpan>, id: &str, phase: ProcessorPhase) -> Option<ActiveSpan> {
    let mut span = parent?.child(SpanType::ProcessorRun, format!("processor: '{id}'"))?;
    span.attribute("processorId", id);
    span.attribute("phase", phase.as_str());
    Some(span)
}

fn close_span(span: Option<ActiveSpan>, decisions: &[Decision]) {
    let Some(mut span) = span else { return };
    if !decisions.is_empty() {
        span.attribute(
            "decisions",
            serde_json::to_value(decisions).unwrap_or(Value::Null),
        );
    }
    span.end();
}

fn fail_span(span: Option<ActiveSpan>, stopped: &Stopped) {
    let Some(mut span) = span else { return };
    match stopped {
        Stopped::Tripwire(tripwire) => {
            span.attribute(
                "tripwire",
                serde_json::to_value(tripwire).unwrap_or(Value::Null),
            );
            span.fail(tripwire.reason.clone(), Some("tripwire"));
        }
        Stopped::Failed(failure) => span.fail(failure.message.clone(), Some("processor")),
    }
}

impl Pipeline {
    /// A pipeline of `processors`, in order.
    pub fn new(processors: Vec<SharedProcessor>) -> Self {
        let phases = processors
            .iter()
            .fold(Phases::NONE, |phases, p| phases | p.phases());
        Self {
            processors: processors.into(),
            phases,
        }
    }

    /// The processors, in order.
    pub fn processors(&self) -> &[SharedProcessor] {
        &self.processors
    }

    /// Whether it has no processor.
    pub fn is_empty(&self) -> bool {
        self.processors.is_empty()
    }

    /// Whether any processor implements `phase`.
    pub fn has(&self, phase: ProcessorPhase) -> bool {
        self.phases.contains(phase)
    }

    /// The hooks its processors implement.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// A pipeline of this one's processors, then `other`'s.
    pub fn then(&self, other: &Pipeline) -> Pipeline {
        let mut all = self.processors.to_vec();
        all.extend(other.processors.iter().cloned());
        Pipeline::new(all)
    }

    /// [`Processor::process_input`](super::Processor::process_input) of each processor.
    pub async fn input(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        messages: &mut Vec<Message>,
        system: &[String],
    ) -> Result<Vec<Decision>, Stopped> {
        each!(self, ProcessorPhase::Input, cx, parent, |p| p
            .process_input(&mut InputArgs {
                cx,
                messages: &mut *messages,
                system,
            }))
    }

    /// [`Processor::process_input_step`](super::Processor::process_input_step) of each
    /// processor.
    #[allow(clippy::too_many_arguments)]
    pub async fn input_step(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        step: usize,
        messages: &mut Vec<Message>,
        remembered: usize,
        system: &mut Vec<String>,
        tools: &mut Vec<ToolDefinition>,
        tool_choice: &mut ToolChoice,
    ) -> Result<Vec<Decision>, Stopped> {
        each!(self, ProcessorPhase::InputStep, cx, parent, |p| p
            .process_input_step(&mut InputStepArgs {
                cx,
                step,
                messages: &mut *messages,
                remembered,
                system: &mut *system,
                tools: &mut *tools,
                tool_choice: &mut *tool_choice,
            }))
    }

    /// [`Processor::process_output_stream`](super::Processor::process_output_stream) of
    /// each processor, until one drops the part. `states` holds one state per processor.
    pub async fn output_stream(
        &self,
        cx: &ProcessorContext<'_>,
        step: usize,
        part: &mut Option<ModelEvent>,
        text: &str,
        states: &mut Vec<StreamState>,
    ) -> Result<Vec<Decision>, Stopped> {
        if states.len() < self.processors.len() {
            states.resize_with(self.processors.len(), StreamState::default);
        }
        let mut decisions = Vec::new();
        let phase = ProcessorPhase::OutputStream;
        for (processor, state) in self.processors.iter().zip(states.iter_mut()) {
            if part.is_none() {
                break;
            }
            if !processor.phases().contains(phase) {
                continue;
            }
            // No span per part: a stream has thousands.
            let outcome = processor
                .process_output_stream(&mut OutputStreamArgs {
                    cx,
                    step,
                    part: &mut *part,
                    text,
                    state,
                })
                .await;
            decisions.extend(cx.take_decisions(processor.id(), phase));
            if let Err(error) = outcome {
                return Err(Stopped::from_error(error, processor.id(), phase));
            }
        }
        Ok(decisions)
    }

    /// [`Processor::process_output_step`](super::Processor::process_output_step) of each
    /// processor.
    #[allow(clippy::too_many_arguments)]
    pub async fn output_step(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        step: usize,
        text: &mut String,
        reasoning: &str,
        system: &[String],
        tool_calls: &[ToolCallRecord],
        finish_reason: FinishReason,
        messages: &[Message],
    ) -> Result<Vec<Decision>, Stopped> {
        each!(self, ProcessorPhase::OutputStep, cx, parent, |p| p
            .process_output_step(&mut OutputStepArgs {
                cx,
                step,
                text: &mut *text,
                reasoning,
                system,
                tool_calls,
                finish_reason,
                messages,
            }))
    }

    /// [`Processor::process_output_result`](super::Processor::process_output_result) of
    /// each processor.
    pub async fn output_result(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        text: &mut String,
        steps: &[StepResult],
        messages: &[Message],
        usage: Usage,
    ) -> Result<Vec<Decision>, Stopped> {
        each!(self, ProcessorPhase::OutputResult, cx, parent, |p| p
            .process_output_result(&mut OutputResultArgs {
                cx,
                text: &mut *text,
                steps,
                messages,
                usage,
            }))
    }

    /// [`Processor::process_tool_result`](super::Processor::process_tool_result) of each
    /// processor.
    #[allow(clippy::too_many_arguments)]
    pub async fn tool_result(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        tool_call_id: &str,
        tool_name: &str,
        args: &Value,
        result: &mut Value,
        is_error: bool,
    ) -> Result<Vec<Decision>, Stopped> {
        each!(self, ProcessorPhase::ToolResult, cx, parent, |p| p
            .process_tool_result(&mut ToolResultArgs {
                cx,
                tool_call_id,
                tool_name,
                args,
                result: &mut *result,
                is_error,
            }))
    }

    /// [`Processor::process_api_error`](super::Processor::process_api_error) of each
    /// processor: whether one asked to call the model again.
    pub async fn api_error(
        &self,
        cx: &ProcessorContext<'_>,
        parent: Option<&ActiveSpan>,
        step: usize,
        error: &ModelError,
        attempt: u32,
    ) -> Result<(bool, Vec<Decision>), Stopped> {
        let mut retry = false;
        let mut decisions = Vec::new();
        let phase = ProcessorPhase::ApiError;
        for processor in self.processors.iter() {
            if !processor.phases().contains(phase) {
                continue;
            }
            let span = open_span(parent, processor.id(), phase);
            let mut args = ApiErrorArgs {
                cx,
                step,
                error,
                attempt,
                retry: false,
            };
            let outcome = processor.process_api_error(&mut args).await;
            retry |= args.retry;
            let made = cx.take_decisions(processor.id(), phase);
            if let Err(error) = outcome {
                let stopped = Stopped::from_error(error, processor.id(), phase);
                fail_span(span, &stopped);
                return Err(stopped);
            }
            close_span(span, &made);
            decisions.extend(made);
        }
        Ok((retry, decisions))
    }
}
