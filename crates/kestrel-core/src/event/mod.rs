//! The event stream: one enum whose JSON is the wire format.
//!
//! Every [`Event`] serialises as `{"type", "runId", "from", "payload"}` with Mastra's chunk
//! names and camelCase payload fields, so the server, the Studio, the CLI and tests all read
//! the same thing. For one tool round trip an agent emits, in order: `start`, `step-start`,
//! `tool-call-input-streaming-start`, `tool-call-delta`…, `tool-call-input-streaming-end`,
//! `tool-call`, `tool-result`, `step-finish`, `step-start`, `text-start`, `text-delta`…,
//! `text-end`, `step-finish`, `finish`.

use std::sync::Arc;

use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{FinishReason, Usage};

mod network;
mod workflow;
pub use network::{
    AgentExecutionEndPayload, AgentExecutionStartPayload, AgentExecutionWaitPayload,
    NetworkFinishPayload, NetworkStepFinishPayload, NetworkValidationEndPayload,
    NetworkValidationStartPayload, PrimitiveAbortPayload, PrimitiveType, RoutingAgentEndPayload,
    RoutingAgentStartPayload, RoutingAgentTextDeltaPayload, RoutingAgentTextStartPayload,
    RoutingDecision, RoutingInput, ScorerResult, ToolExecutionArgs, ToolExecutionEndPayload,
    ToolExecutionStartPayload, ToolExecutionWaitPayload, WorkflowExecutionEndPayload,
    WorkflowExecutionStartPayload, WorkflowExecutionSuspendedPayload,
};
pub use workflow::{
    EmptyPayload, StepErrorInfo, StepStatus, WorkflowFinishOutput, WorkflowFinishPayload,
    WorkflowStartPayload, WorkflowStatus, WorkflowStepOutputPayload, WorkflowStepPayload,
    WorkflowStepProgressPayload, WorkflowUsage,
};

/// Which kind of primitive produced an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventSource {
    /// An agent run.
    Agent,
    /// A workflow run.
    Workflow,
    /// An agent network.
    Network,
    /// A person.
    User,
    /// The framework itself.
    System,
}

/// One event of a run's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The run that emitted it.
    pub run_id: Arc<str>,
    /// What kind of primitive emitted it.
    pub from: EventSource,
    /// The event itself.
    pub kind: EventKind,
}

impl Event {
    /// An agent event of `run_id`.
    pub fn agent(run_id: Arc<str>, kind: EventKind) -> Self {
        Self {
            run_id,
            from: EventSource::Agent,
            kind,
        }
    }

    /// The wire name of the event (`"text-delta"`…).
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// The JSON wire form as a string.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("type", self.kind.type_name())?;
        map.serialize_entry("runId", &*self.run_id)?;
        map.serialize_entry("from", &self.from)?;
        self.kind.serialize_payload(&mut map)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(rename = "runId")]
            run_id: String,
            from: EventSource,
            #[serde(flatten)]
            kind: EventKind,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(Event {
            run_id: wire.run_id.into(),
            from: wire.from,
            kind: wire.kind,
        })
    }
}

/// The type prefix of the events of an agent a network delegated to.
pub const AGENT_EXECUTION_EVENT_PREFIX: &str = "agent-execution-event-";
/// The type prefix of the events of a workflow a network delegated to.
pub const WORKFLOW_EXECUTION_EVENT_PREFIX: &str = "workflow-execution-event-";

macro_rules! event_kinds {
    ($( $(#[$doc:meta])* $variant:ident($payload:ty) = $name:literal, )*) => {
        /// What happened. The serde tag of each variant is its wire name.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum EventKind {
            $( $(#[$doc])* $variant($payload), )*
            /// An event of a sub-agent a network delegated to, whole: its type is
            /// `agent-execution-event-<the event's type>` and its payload the event.
            AgentExecutionEvent(Box<Event>),
            /// An event of a workflow a network delegated to, whole
            /// (`workflow-execution-event-<type>`).
            WorkflowExecutionEvent(Box<Event>),
        }

        /// The kinds with a fixed name, as serde reads them.
        #[derive(Deserialize)]
        #[serde(tag = "type", content = "payload")]
        enum FixedKind {
            $( #[serde(rename = $name)] $variant($payload), )*
        }

        impl From<FixedKind> for EventKind {
            fn from(kind: FixedKind) -> Self {
                match kind { $( FixedKind::$variant(p) => EventKind::$variant(p), )* }
            }
        }

        impl EventKind {
            /// The wire name (`"text-delta"`…).
            pub fn type_name(&self) -> &'static str {
                match self {
                    $( EventKind::$variant(_) => $name, )*
                    EventKind::AgentExecutionEvent(inner) => inner.kind.nested_name(false),
                    EventKind::WorkflowExecutionEvent(inner) => inner.kind.nested_name(true),
                }
            }

            /// The name of this event inside a network's stream, under an agent's or a
            /// workflow's execution. Only fixed kinds are ever nested; another nested
            /// event gets the bare prefix.
            fn nested_name(&self, workflow: bool) -> &'static str {
                match (self, workflow) {
                    $(
                        (EventKind::$variant(_), false) => concat!("agent-execution-event-", $name),
                        (EventKind::$variant(_), true) => concat!("workflow-execution-event-", $name),
                    )*
                    (_, false) => "agent-execution-event",
                    (_, true) => "workflow-execution-event",
                }
            }

            fn serialize_payload<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                match self {
                    $( EventKind::$variant(p) => map.serialize_entry("payload", p), )*
                    EventKind::AgentExecutionEvent(inner)
                    | EventKind::WorkflowExecutionEvent(inner) => {
                        map.serialize_entry("payload", &**inner)
                    }
                }
            }
        }
    };
}

impl<'de> Deserialize<'de> for EventKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        // Read whole first: the nested kinds are told apart by their type's prefix.
        let value = Value::deserialize(deserializer)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let nested = if kind.starts_with(AGENT_EXECUTION_EVENT_PREFIX) {
            Some(EventKind::AgentExecutionEvent as fn(Box<Event>) -> EventKind)
        } else if kind.starts_with(WORKFLOW_EXECUTION_EVENT_PREFIX) {
            Some(EventKind::WorkflowExecutionEvent as fn(Box<Event>) -> EventKind)
        } else {
            None
        };
        match nested {
            Some(wrap) => {
                let payload = value
                    .get("payload")
                    .ok_or_else(|| D::Error::missing_field("payload"))?;
                let inner = Event::deserialize(payload).map_err(D::Error::custom)?;
                Ok(wrap(Box::new(inner)))
            }
            None => FixedKind::deserialize(value)
                .map(EventKind::from)
                .map_err(D::Error::custom),
        }
    }
}

event_kinds! {
    /// The run started.
    Start(StartPayload) = "start",
    /// A step (one model call and its tool calls) started.
    StepStart(StepStartPayload) = "step-start",
    /// The model started a text part.
    TextStart(PartIdPayload) = "text-start",
    /// A piece of text.
    TextDelta(TextDeltaPayload) = "text-delta",
    /// The text part ended.
    TextEnd(PartIdPayload) = "text-end",
    /// The model started a reasoning part.
    ReasoningStart(PartIdPayload) = "reasoning-start",
    /// A piece of reasoning.
    ReasoningDelta(TextDeltaPayload) = "reasoning-delta",
    /// The reasoning part ended.
    ReasoningEnd(PartIdPayload) = "reasoning-end",
    /// The model started streaming a tool call's input.
    ToolCallInputStreamingStart(ToolCallStreamingStartPayload) = "tool-call-input-streaming-start",
    /// A piece of a tool call's argument text.
    ToolCallDelta(ToolCallDeltaPayload) = "tool-call-delta",
    /// The tool call's input is complete.
    ToolCallInputStreamingEnd(ToolCallIdPayload) = "tool-call-input-streaming-end",
    /// A complete tool call.
    ToolCall(ToolCallPayload) = "tool-call",
    /// A tool call's result.
    ToolResult(ToolResultPayload) = "tool-result",
    /// A tool call failed (invalid input, unknown tool, or the tool's own error).
    ToolError(ToolErrorPayload) = "tool-error",
    /// Custom output a tool wrote through its context's writer.
    ToolOutput(ToolOutputPayload) = "tool-output",
    /// A tool call waits for a person's approval; the stream ends here and the run's handle's
    /// `approve` / `decline` (`agent.run(run_id)`) continue the run.
    ToolCallApproval(ToolCallApprovalPayload) = "tool-call-approval",
    /// A tool suspended itself; the stream ends here and the run's handle's `resume`
    /// (`agent.run(run_id)`) continues the run.
    ToolCallSuspended(ToolCallSuspendedPayload) = "tool-call-suspended",
    /// A step finished.
    StepFinish(StepFinishPayload) = "step-finish",
    /// The run finished.
    Finish(FinishPayload) = "finish",
    /// The run failed.
    Error(ErrorPayload) = "error",
    /// The run was aborted.
    Abort(AbortPayload) = "abort",
    /// A processor stopped the run (Mastra's `tripwire` chunk); `finish` with the reason
    /// `tripwire` follows.
    Tripwire(crate::processor::Tripwire) = "tripwire",
    /// A processor reported what it did (redacted, warned, truncated...).
    ProcessorDecision(crate::processor::Decision) = "processor-decision",
    /// A tool call (a background delegation) went on in the background; the run did not wait.
    BackgroundTaskStarted(BackgroundTaskStartedPayload) = "background-task-started",
    /// A background task finished; its result reaches the model in the next step.
    BackgroundTaskCompleted(BackgroundTaskPayload) = "background-task-completed",
    /// A background task failed or timed out; the model is told in the next step.
    BackgroundTaskFailed(BackgroundTaskPayload) = "background-task-failed",
    /// A workflow run started (also each resume).
    WorkflowStart(WorkflowStartPayload) = "workflow-start",
    /// A workflow step started.
    WorkflowStepStart(WorkflowStepPayload) = "workflow-step-start",
    /// A workflow step wrote output (`from: "USER"`), or its agent emitted an event.
    WorkflowStepOutput(WorkflowStepOutputPayload) = "workflow-step-output",
    /// A workflow step ended (success, failure, or a bail).
    WorkflowStepResult(WorkflowStepPayload) = "workflow-step-result",
    /// A workflow step suspended: the run waits for resume data.
    WorkflowStepSuspended(WorkflowStepPayload) = "workflow-step-suspended",
    /// A workflow sleeps.
    WorkflowStepWaiting(WorkflowStepPayload) = "workflow-step-waiting",
    /// One iteration of a foreach ended.
    WorkflowStepProgress(WorkflowStepProgressPayload) = "workflow-step-progress",
    /// The workflow run was canceled.
    WorkflowCanceled(EmptyPayload) = "workflow-canceled",
    /// The workflow run ended or stopped.
    WorkflowFinish(WorkflowFinishPayload) = "workflow-finish",
    /// A network's routing agent starts choosing the primitive of an iteration.
    RoutingAgentStart(RoutingAgentStartPayload) = "routing-agent-start",
    /// The completion check starts writing the final answer.
    RoutingAgentTextStart(RoutingAgentTextStartPayload) = "routing-agent-text-start",
    /// A piece of the final answer.
    RoutingAgentTextDelta(RoutingAgentTextDeltaPayload) = "routing-agent-text-delta",
    /// The routing agent chose a primitive, with its reason.
    RoutingAgentEnd(RoutingAgentEndPayload) = "routing-agent-end",
    /// The network was aborted while routing.
    RoutingAgentAbort(PrimitiveAbortPayload) = "routing-agent-abort",
    /// A delegated sub-agent starts.
    AgentExecutionStart(AgentExecutionStartPayload) = "agent-execution-start",
    /// A delegated sub-agent answered.
    AgentExecutionEnd(AgentExecutionEndPayload) = "agent-execution-end",
    /// A delegated sub-agent's tool call waits for approval: the network stops.
    AgentExecutionApproval(AgentExecutionWaitPayload) = "agent-execution-approval",
    /// A delegated sub-agent's tool suspended: the network stops.
    AgentExecutionSuspended(AgentExecutionWaitPayload) = "agent-execution-suspended",
    /// The network was aborted while a sub-agent ran.
    AgentExecutionAbort(PrimitiveAbortPayload) = "agent-execution-abort",
    /// A delegated workflow starts.
    WorkflowExecutionStart(WorkflowExecutionStartPayload) = "workflow-execution-start",
    /// A delegated workflow ended.
    WorkflowExecutionEnd(WorkflowExecutionEndPayload) = "workflow-execution-end",
    /// A delegated workflow suspended: the network stops.
    WorkflowExecutionSuspended(WorkflowExecutionSuspendedPayload) = "workflow-execution-suspended",
    /// The network was aborted while a workflow ran.
    WorkflowExecutionAbort(PrimitiveAbortPayload) = "workflow-execution-abort",
    /// A network's tool starts.
    ToolExecutionStart(ToolExecutionStartPayload) = "tool-execution-start",
    /// A network's tool ended.
    ToolExecutionEnd(ToolExecutionEndPayload) = "tool-execution-end",
    /// A network's tool waits for approval: the network stops.
    ToolExecutionApproval(ToolExecutionWaitPayload) = "tool-execution-approval",
    /// A network's tool suspended: the network stops.
    ToolExecutionSuspended(ToolExecutionWaitPayload) = "tool-execution-suspended",
    /// The network was aborted while a tool ran.
    ToolExecutionAbort(PrimitiveAbortPayload) = "tool-execution-abort",
    /// An iteration whose router chose `none` ended.
    NetworkStepFinish(NetworkStepFinishPayload) = "network-execution-event-step-finish",
    /// The completion checks of an iteration start.
    NetworkValidationStart(NetworkValidationStartPayload) = "network-validation-start",
    /// The completion checks of an iteration ended.
    NetworkValidationEnd(NetworkValidationEndPayload) = "network-validation-end",
    /// The network run ended.
    NetworkFinish(NetworkFinishPayload) = "network-execution-event-finish",
    /// A message was queued for a thread's next run (the event's run id is that run's).
    MessageQueued(MessageQueuedPayload) = "message-queued",
    /// A queued message's run took it: the run's own events follow.
    QueuedMessageStarted(QueuedMessagePayload) = "queued-message-started",
    /// A queued message was cancelled before a run took it.
    QueuedMessageCancelled(QueuedMessagePayload) = "queued-message-cancelled",
}

/// Payload of `message-queued`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueuedPayload {
    /// The queued message's id (also the message's id in the thread, once a run takes it).
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// Its owner.
    pub resource_id: String,
    /// The message's text.
    pub text: String,
    /// Its place in the queue (0: next).
    pub position: usize,
}

/// Payload of `queued-message-started` and `queued-message-cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedMessagePayload {
    /// The queued message's id.
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// Its owner.
    pub resource_id: String,
}

/// Payload of `background-task-started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTaskStartedPayload {
    /// The task (also the sub-agent's run id, for a delegation).
    pub task_id: String,
    /// The tool.
    pub tool_name: String,
    /// The call it runs for.
    pub tool_call_id: String,
}

/// Payload of `background-task-completed` and `background-task-failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTaskPayload {
    /// The task.
    pub task_id: String,
    /// The tool.
    pub tool_name: String,
    /// The call it ran for.
    pub tool_call_id: String,
    /// The run that started it.
    pub run_id: String,
    /// The agent of that run.
    pub agent_id: String,
    /// What the model is shown: the result text, or (when failed) a generic message.
    pub result: Value,
    /// Whether it failed.
    pub is_error: bool,
    /// When it ended (milliseconds since the Unix epoch).
    pub completed_at: u64,
}

/// Payload of `start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartPayload {
    /// The agent's id.
    pub id: String,
    /// The id of the first step's assistant message.
    pub message_id: String,
    /// The run's trace, when it is traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RunMetadata>,
}

/// What `start` and `finish` say about the run beside their payload (as Mastra's chunks do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMetadata {
    /// The run's trace ([`crate::trace`]): its spans at `/api/observability/traces/{traceId}`.
    pub trace_id: String,
}

/// Payload of `step-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStartPayload {
    /// The id of this step's assistant message.
    pub message_id: String,
    /// Unix time in milliseconds.
    pub started_at: u64,
    /// Provider warnings.
    #[serde(default)]
    pub warnings: Vec<Value>,
}

/// Payload of `text-start`, `text-end`, `reasoning-start`, `reasoning-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartIdPayload {
    /// The part's id.
    pub id: String,
}

/// Payload of `text-delta` and `reasoning-delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextDeltaPayload {
    /// The part's id.
    pub id: String,
    /// The new text.
    pub text: String,
}

/// Payload of `tool-call-input-streaming-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallStreamingStartPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
}

/// Payload of `tool-call-delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallDeltaPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The next piece of argument text.
    pub args_text_delta: String,
}

/// Payload of `tool-call-input-streaming-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallIdPayload {
    /// The call id.
    pub tool_call_id: String,
}

/// Payload of `tool-call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments (the raw text as a string when the model sent invalid JSON).
    pub args: Value,
}

/// Payload of `tool-result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments the tool ran with.
    pub args: Value,
    /// What the tool returned.
    pub result: Value,
    /// Always `false` here; failures are `tool-error` events.
    pub is_error: bool,
}

/// Payload of `tool-error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolErrorPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments the model sent.
    pub args: Value,
    /// What went wrong, as the model will read it.
    pub error: String,
}

/// Payload of `tool-call-approval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallApprovalPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments the tool would run with.
    pub args: Value,
    /// The JSON schema of a decision (`{approved, reason?}`), as a string.
    pub resume_schema: String,
    /// Names this call with these arguments in this step; pass it with the decision to make
    /// sure the decision is about what the person saw.
    pub fingerprint: String,
    /// For a call of a delegated sub-agent: the delegations it sits under, from this run down
    /// (decide on it with this run's id and the call's id). Empty for the run's own calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::run::DelegationHop>,
}

/// Payload of `tool-call-suspended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallSuspendedPayload {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments the tool ran with.
    pub args: Value,
    /// What the tool passed to `suspend`.
    pub suspend_payload: Value,
    /// The JSON schema of the resume data, as a string (`""` when the tool declares none).
    pub resume_schema: String,
    /// Names this suspension; pass it with the resume data to make sure it answers this one.
    pub fingerprint: String,
    /// For a call of a delegated sub-agent: the delegations it sits under, from this run down
    /// (decide on it with this run's id and the call's id). Empty for the run's own calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<crate::run::DelegationHop>,
}

/// Payload of `tool-output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutputPayload {
    /// The call that wrote it.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// What the tool wrote.
    pub output: Value,
}

/// The `stepResult` of `step-finish` and `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResultInfo {
    /// Why the step (or run) ended.
    pub reason: FinishReason,
    /// Whether another step follows.
    #[serde(default)]
    pub is_continued: bool,
}

/// The `output` of `step-finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepOutput {
    /// The step's text.
    pub text: String,
    /// Tokens used by this step.
    pub usage: Usage,
}

/// Payload of `step-finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFinishPayload {
    /// The step's assistant message id.
    pub message_id: String,
    /// Why the step ended.
    pub step_result: StepResultInfo,
    /// What it produced.
    pub output: StepOutput,
}

/// The `output` of `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishOutput {
    /// The final text.
    pub text: String,
    /// Tokens used by the whole run.
    pub usage: Usage,
    /// The structured output, when one was asked for and produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
}

/// Payload of `finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishPayload {
    /// Why the run ended.
    pub step_result: StepResultInfo,
    /// What it produced.
    pub output: FinishOutput,
    /// The run's trace, when it is traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RunMetadata>,
}

/// Payload of `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorPayload {
    /// A human-readable description.
    pub error: String,
    /// A stable machine-readable kind, e.g. `model`, `structured-output`.
    pub kind: String,
}

/// Payload of `abort`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortPayload {
    /// Why, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
