//! What a run answers when it ends (or stops) without streaming: `generate` and the
//! `*-tool-call-generate` decisions give a [`RunResult`].
//!
//! The parts that are kestrel-core's types are serialized by those types themselves, and the
//! document shows their own schemas (`WaitingCall`, `Usage`) where a client reads them field
//! by field.

use kestrel_core::agent::{
    GenerateResult, StepResult, ToolCallRecord, ToolResultRecord, WaitingCall,
};
use kestrel_core::message::Message;
use kestrel_core::model::{FinishReason, Usage};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A finished (or stopped) run, as `generate` answers.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunResult {
    /// The run's id (what a decision on a stopped run names).
    run_id: String,
    /// The final step's text.
    text: String,
    /// The structured output, when the run asked for one (`null` otherwise).
    object: Option<Value>,
    /// Why the run ended: `stop`, `length`, `content-filter`, `tool-calls` (only client tools'
    /// results are awaited), `max-steps`, `suspended` (calls wait for a person or resume
    /// data), `paused`, `abort`, `error`, `tripwire` (a processor stopped it), `other` or
    /// `unknown`.
    #[schemars(with = "String")]
    finish_reason: FinishReason,
    /// The tokens all steps used.
    usage: Usage,
    /// Every step, in order: its message id, text, reasoning, tool calls and results, finish
    /// reason and usage.
    #[schemars(with = "Vec<Value>")]
    steps: Vec<StepResult>,
    /// Every tool call of every step, in order: `{toolCallId, toolName, args, parseError?}`.
    #[schemars(with = "Vec<Value>")]
    tool_calls: Vec<ToolCallRecord>,
    /// Every tool result of every step, in order: `{toolCallId, toolName, args, result,
    /// isError, denied?}`.
    #[schemars(with = "Vec<Value>")]
    tool_results: Vec<ToolResultRecord>,
    /// The tool calls a stopped run waits for (empty when the run is over).
    suspended: Vec<WaitingCall>,
    /// The messages the run added to the conversation, as Kestrel's messages.
    #[schemars(with = "Vec<Value>")]
    response_messages: Vec<Message>,
    /// The trace of the run's spans (`GET /api/observability/traces/{traceId}`), when the
    /// instance traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<String>,
    /// Why a processor stopped the run (`finishReason` is then `tripwire`, and `text` empty):
    /// `{reason, retry?, metadata?, processorId?}`, Mastra's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    tripwire: Option<kestrel_core::processor::Tripwire>,
}

impl RunResult {
    /// What a run a processor stopped answers: 200, with the tripwire (Mastra's clients read
    /// `finishReason: "tripwire"` and `tripwire`), not an error status.
    pub(crate) fn tripped(run_id: String, tripwire: kestrel_core::processor::Tripwire) -> Self {
        Self {
            run_id,
            text: String::new(),
            object: None,
            finish_reason: FinishReason::Tripwire,
            usage: Usage::default(),
            steps: Vec::new(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            suspended: Vec::new(),
            response_messages: Vec::new(),
            trace_id: None,
            tripwire: Some(tripwire),
        }
    }

    /// The answer of a run's outcome: its result, or a tripwire's; other errors are the
    /// caller's to turn into a status.
    pub(crate) fn of(
        outcome: Result<GenerateResult, kestrel_core::agent::AgentError>,
    ) -> Result<Self, kestrel_core::agent::AgentError> {
        match outcome {
            Ok(result) => Ok(result.into()),
            Err(kestrel_core::agent::AgentError::Tripwire { run_id, tripwire }) => {
                Ok(Self::tripped(run_id, *tripwire))
            }
            Err(error) => Err(error),
        }
    }
}

impl From<GenerateResult> for RunResult {
    fn from(result: GenerateResult) -> Self {
        Self {
            run_id: result.run_id,
            text: result.text,
            object: result.object,
            finish_reason: result.finish_reason,
            usage: result.usage,
            steps: result.steps,
            tool_calls: result.tool_calls,
            tool_results: result.tool_results,
            suspended: result.waiting,
            response_messages: result.response_messages,
            trace_id: result.trace_id,
            tripwire: None,
        }
    }
}
