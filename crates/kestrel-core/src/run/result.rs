//! The final result of a run.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::state::{
    RunState, RunStatus, StepResult, ToolCallRecord, ToolResultRecord, Waiting, WaitingCall,
};
use crate::message::Message;
use crate::model::{FinishReason, Usage};

/// What a finished run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateResult {
    /// The run's id.
    pub run_id: String,
    /// The final step's text.
    pub text: String,
    /// The structured output, when asked for.
    pub object: Option<Value>,
    /// Every step, in order.
    pub steps: Vec<StepResult>,
    /// Every tool call of every step, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Every tool result of every step, in order.
    pub tool_results: Vec<ToolResultRecord>,
    /// Usage of all steps.
    pub usage: Usage,
    /// Why the run ended (or stopped: `suspended` when tool calls wait for a person,
    /// `tool-calls` when only client tools' results are awaited).
    pub finish_reason: FinishReason,
    /// The tool calls a stopped run waits for (empty when the run is over).
    pub waiting: Vec<WaitingCall>,
    /// The messages the run added to the conversation.
    pub response_messages: Vec<Message>,
    /// The trace of the run's spans (32 hex digits), when the run was traced.
    pub trace_id: Option<String>,
}

impl GenerateResult {
    /// The result of a run that is over, moving its steps and new messages out of `state`
    /// (which keeps its input, settings and status) instead of copying them.
    pub(crate) fn take_from_state(state: &mut RunState) -> Self {
        let (finish_reason, object) = Self::finish_of(state);
        let steps = std::mem::take(&mut state.steps);
        let text = steps.last().map(|s| s.text.clone()).unwrap_or_default();
        let input_len = state.input_len.min(state.messages.len());
        let response_messages = state.messages.split_off(input_len);
        state.persisted = state.persisted.min(state.messages.len());
        Self {
            run_id: state.run_id.clone(),
            text,
            object,
            tool_calls: steps
                .iter()
                .flat_map(|s| s.tool_calls.iter().cloned())
                .collect(),
            tool_results: steps
                .iter()
                .flat_map(|s| s.tool_results.iter().cloned())
                .collect(),
            steps,
            usage: state.usage,
            finish_reason,
            waiting: state.waiting_calls(),
            response_messages,
            trace_id: state.trace.as_ref().map(|t| t.trace_id.clone()),
        }
    }

    fn finish_of(state: &RunState) -> (FinishReason, Option<serde_json::Value>) {
        match &state.status {
            RunStatus::Finished { reason, object } => (*reason, object.clone()),
            RunStatus::ToolsPending { .. } => (FinishReason::ToolCalls, None),
            RunStatus::Suspended { .. } => {
                let only_client = state
                    .waiting_calls()
                    .iter()
                    .all(|c| c.waiting == Waiting::ClientResult);
                let reason = if only_client {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Suspended
                };
                (reason, None)
            }
            RunStatus::Ready => (FinishReason::Unknown, None),
        }
    }

    pub(crate) fn from_state(state: &RunState) -> Self {
        let (finish_reason, object) = Self::finish_of(state);
        Self {
            run_id: state.run_id.clone(),
            text: state.last_text(),
            object,
            tool_calls: state
                .steps
                .iter()
                .flat_map(|s| s.tool_calls.iter().cloned())
                .collect(),
            tool_results: state
                .steps
                .iter()
                .flat_map(|s| s.tool_results.iter().cloned())
                .collect(),
            steps: state.steps.clone(),
            usage: state.usage,
            finish_reason,
            waiting: state.waiting_calls(),
            response_messages: state.response_messages().to_vec(),
            trace_id: state.trace.as_ref().map(|t| t.trace_id.clone()),
        }
    }

    /// The structured output deserialised into `T`.
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<Option<T>, serde_json::Error> {
        self.object.clone().map(serde_json::from_value).transpose()
    }
}
