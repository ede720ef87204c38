//! What each hook of a [`Processor`](super::Processor) sees, and may change.

use std::any::Any;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ProcessorPhase;
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::message::Message;
use crate::model::{FinishReason, ModelError, ModelEvent, ToolChoice, ToolDefinition, Usage};
use crate::run::{StepResult, ToolCallRecord};

/// The run a hook runs for, and where it reports its decisions.
pub struct ProcessorContext<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The agent (or workflow) running it.
    pub agent_id: &'a str,
    /// The run's thread, when it has one.
    pub thread_id: Option<&'a str>,
    /// The run's resource, when it has one.
    pub resource_id: Option<&'a str>,
    /// The run's request context.
    pub request_context: &'a RequestContext,
    /// The run's abort signal (a slow check, like a judge model, should watch it).
    pub abort: &'a AbortSignal,
    /// How many times the run's output hooks asked for a retry so far.
    pub retries: u32,
    pub(crate) decisions: Mutex<Vec<Decision>>,
}

impl<'a> ProcessorContext<'a> {
    /// The context of run `run_id` of `agent_id`.
    pub fn new(
        run_id: &'a str,
        agent_id: &'a str,
        request_context: &'a RequestContext,
        abort: &'a AbortSignal,
    ) -> Self {
        Self {
            run_id,
            agent_id,
            thread_id: None,
            resource_id: None,
            request_context,
            abort,
            retries: 0,
            decisions: Mutex::new(Vec::new()),
        }
    }

    /// The same context for a run on a thread of a resource.
    pub fn scoped(mut self, thread_id: Option<&'a str>, resource_id: Option<&'a str>) -> Self {
        self.thread_id = thread_id;
        self.resource_id = resource_id;
        self
    }

    /// Reports what the processor did (`redact`, `warn`, `truncate`...), with details: it
    /// becomes a `processor-decision` event of the run and an attribute of the hook's span.
    pub fn decide(&self, action: impl Into<String>, detail: Option<Value>) {
        let decision = Decision {
            processor_id: String::new(),
            phase: ProcessorPhase::Input,
            action: action.into(),
            detail,
        };
        if let Ok(mut decisions) = self.decisions.lock() {
            decisions.push(decision);
        }
    }

    /// The decisions reported since the last call, as processor `processor_id` made them in
    /// `phase`.
    pub(crate) fn take_decisions(
        &self,
        processor_id: &str,
        phase: ProcessorPhase,
    ) -> Vec<Decision> {
        let Ok(mut decisions) = self.decisions.lock() else {
            return Vec::new();
        };
        let mut taken = std::mem::take(&mut *decisions);
        for decision in &mut taken {
            decision.processor_id = processor_id.to_owned();
            decision.phase = phase;
        }
        taken
    }
}

/// What a processor reported doing: the payload of a `processor-decision` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The processor.
    pub processor_id: String,
    /// The hook it was in.
    pub phase: ProcessorPhase,
    /// What it did (`redact`, `warn`, `truncate`, `normalize`...).
    pub action: String,
    /// Details (what matched, how much was cut...). Never the matched secret itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// [`Processor::process_input`](super::Processor::process_input)'s view.
pub struct InputArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The run's input messages (not the remembered history): change them in place.
    pub messages: &'a mut Vec<Message>,
    /// The system text the run will send (instructions, skills), read-only here.
    pub system: &'a [String],
}

/// [`Processor::process_input_step`](super::Processor::process_input_step)'s view: what one
/// model call sends. Changes apply to this call alone.
pub struct InputStepArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The step (0 for the first model call).
    pub step: usize,
    /// The conversation sent, without the system text.
    pub messages: &'a mut Vec<Message>,
    /// How many messages at the front of `messages` were recalled from memory (the thread's
    /// history, before this run's input).
    pub remembered: usize,
    /// The system text sent first, in order.
    pub system: &'a mut Vec<String>,
    /// The tools offered.
    pub tools: &'a mut Vec<ToolDefinition>,
    /// Whether and which tool the model must call.
    pub tool_choice: &'a mut ToolChoice,
}

/// A processor's own state for one model call's stream (it starts empty at every step).
#[derive(Default)]
pub struct StreamState(Option<Box<dyn Any + Send>>);

impl StreamState {
    /// The state as a `T`, made with `T::default()` on first use (or when a different type
    /// was stored).
    pub fn get_or_default<T: Default + Send + 'static>(&mut self) -> &mut T {
        if !self.0.as_ref().is_some_and(|state| state.is::<T>()) {
            self.0 = Some(Box::new(T::default()));
        }
        match self.0.as_mut().and_then(|state| state.downcast_mut::<T>()) {
            Some(state) => state,
            // Unreachable: the slot was just filled with a `T`.
            None => unreachable_state(),
        }
    }
}

#[cold]
fn unreachable_state<T>() -> T {
    unreachable!("the stream state was just set to this type")
}

/// [`Processor::process_output_stream`](super::Processor::process_output_stream)'s view.
pub struct OutputStreamArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The step.
    pub step: usize,
    /// The part: change it, or set `None` to drop it.
    pub part: &'a mut Option<ModelEvent>,
    /// The step's text accepted so far (before this part).
    pub text: &'a str,
    /// This processor's state for the step's stream.
    pub state: &'a mut StreamState,
}

/// [`Processor::process_output_step`](super::Processor::process_output_step)'s view of a
/// model call's answer.
pub struct OutputStepArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The step.
    pub step: usize,
    /// The answer's text: change it in place.
    pub text: &'a mut String,
    /// The answer's reasoning.
    pub reasoning: &'a str,
    /// The system text the model was sent (instructions, skills, memory), to tell a leak of
    /// it in the answer.
    pub system: &'a [String],
    /// The tools it called.
    pub tool_calls: &'a [ToolCallRecord],
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The conversation the model answered.
    pub messages: &'a [Message],
}

/// [`Processor::process_output_result`](super::Processor::process_output_result)'s view of
/// the answer that ends the run.
pub struct OutputResultArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The final answer: change it in place.
    pub text: &'a mut String,
    /// The run's earlier steps.
    pub steps: &'a [StepResult],
    /// The conversation the model answered.
    pub messages: &'a [Message],
    /// The run's usage so far, this answer's included.
    pub usage: Usage,
}

/// [`Processor::process_tool_result`](super::Processor::process_tool_result)'s view of one
/// tool call's result.
pub struct ToolResultArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The call's id.
    pub tool_call_id: &'a str,
    /// The tool.
    pub tool_name: &'a str,
    /// Its arguments.
    pub args: &'a Value,
    /// Its result (the error's message when it failed): change it in place.
    pub result: &'a mut Value,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// [`Processor::process_api_error`](super::Processor::process_api_error)'s view of a failed
/// model call.
pub struct ApiErrorArgs<'a> {
    /// The run.
    pub cx: &'a ProcessorContext<'a>,
    /// The step.
    pub step: usize,
    /// The provider's error.
    pub error: &'a ModelError,
    /// How many times this step's call was retried already.
    pub attempt: u32,
    /// Set to call the model again.
    pub retry: bool,
}
