//! The payloads of an agent network's events (`from: "NETWORK"`), with Mastra's field names:
//! each iteration routes (`routing-agent-*`), runs the chosen primitive (`agent-execution-*`,
//! `workflow-execution-*`, `tool-execution-*`) and checks completion (`network-validation-*`);
//! `network-execution-event-finish` ends the run.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::WorkflowUsage;
use crate::message::Message;
use crate::model::Usage;

/// What a routing decision hands the task to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimitiveType {
    /// A sub-agent.
    Agent,
    /// A workflow of the network agent.
    Workflow,
    /// A tool of the network agent.
    Tool,
    /// Nothing: the task is complete.
    None,
}

impl PrimitiveType {
    /// Its name (also its JSON form): `"agent"`…
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Workflow => "workflow",
            Self::Tool => "tool",
            Self::None => "none",
        }
    }
}

/// What an iteration's routing starts from (`inputData` of `routing-agent-start`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingInput {
    /// The task.
    pub task: String,
    /// The primitive of the previous iteration (`""` before the first).
    pub primitive_id: String,
    /// Its type (`none` before the first).
    pub primitive_type: PrimitiveType,
    /// What the previous iteration's primitive gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// This iteration (0 for the first).
    pub iteration: u32,
    /// The network's thread.
    pub thread_id: String,
    /// The thread's resource.
    pub thread_resource_id: String,
    /// Whether the network runs a single primitive (always `false`, as in Mastra).
    pub is_one_off: bool,
    /// Whether the routing agent explains why it did not pick the others.
    pub verbose_introspection: bool,
}

/// Payload of `routing-agent-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingAgentStartPayload {
    /// The network agent's id.
    pub network_id: String,
    /// `"routing-agent"`.
    pub agent_id: String,
    /// The routing call's run id.
    pub run_id: String,
    /// What routing starts from.
    pub input_data: RoutingInput,
}

/// A routing decision with its context: the payload of `routing-agent-end` (with its run id
/// and usage) and the `args` of the execution events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingDecision {
    /// The task.
    pub task: String,
    /// `""`, or (when complete) the reason.
    pub result: String,
    /// The chosen primitive (`"none"`: the task is complete).
    pub primitive_id: String,
    /// Its type.
    pub primitive_type: PrimitiveType,
    /// What the primitive is given: text for an agent, JSON text for a workflow or a tool.
    pub prompt: String,
    /// Whether the router found the task complete.
    pub is_complete: bool,
    /// Why it chose this primitive.
    pub selection_reason: String,
    /// The iteration.
    pub iteration: u32,
    /// The conversation a sub-agent is given (the thread's user and assistant messages,
    /// without the network's own records).
    pub conversation_context: Vec<Message>,
}

/// Payload of `routing-agent-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingAgentEndPayload {
    /// The decision.
    #[serde(flatten)]
    pub decision: RoutingDecision,
    /// The routing call's run id.
    pub run_id: String,
    /// The routing call's usage.
    pub usage: Usage,
}

/// Payload of `routing-agent-text-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingAgentTextStartPayload {
    /// The completion check's run id.
    pub run_id: String,
}

/// Payload of `routing-agent-text-delta`: the final result, as the completion check writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingAgentTextDeltaPayload {
    /// The text.
    pub text: String,
}

/// Payload of `agent-execution-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExecutionStartPayload {
    /// The sub-agent.
    pub agent_id: String,
    /// The decision that chose it.
    pub args: RoutingDecision,
    /// The sub-agent's run.
    pub run_id: String,
}

/// Payload of `agent-execution-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExecutionEndPayload {
    /// The task.
    pub task: String,
    /// The sub-agent.
    pub agent_id: String,
    /// Its answer.
    pub result: String,
    /// Always `false` (validation decides).
    pub is_complete: bool,
    /// The iteration.
    pub iteration: u32,
    /// The sub-agent's run.
    pub run_id: String,
    /// Its usage.
    pub usage: Usage,
}

/// Payload of `agent-execution-approval` and `agent-execution-suspended`: a delegated
/// agent's tool call waits for a person; decide with the network's run id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExecutionWaitPayload {
    /// `{prompt}`: what the sub-agent was asked.
    pub args: Value,
    /// The sub-agent.
    pub agent_id: String,
    /// The sub-agent's run.
    pub run_id: String,
    /// The sub-agent's id (Mastra names the primitive here, not the inner tool).
    pub tool_name: String,
    /// The sub-agent's id, likewise.
    pub tool_call_id: String,
    /// The sub-agent's usage so far.
    pub usage: Usage,
    /// Why the router chose it.
    pub selection_reason: String,
    /// The JSON schema of the decision or resume data, as a string.
    pub resume_schema: String,
    /// What the inner tool suspended with (`agent-execution-suspended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_payload: Option<Value>,
}

/// Payload of `workflow-execution-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecutionStartPayload {
    /// The workflow.
    pub workflow_id: String,
    /// The decision that chose it.
    pub args: RoutingDecision,
    /// The workflow's run.
    pub run_id: String,
}

/// Payload of `workflow-execution-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecutionEndPayload {
    /// The task.
    pub task: String,
    /// The workflow.
    pub primitive_id: String,
    /// `workflow`.
    pub primitive_type: PrimitiveType,
    /// The run's result (a [`crate::workflow::WorkflowResult`]).
    pub result: Value,
    /// Always `false` (validation decides).
    pub is_complete: bool,
    /// The iteration.
    pub iteration: u32,
    /// The workflow's name.
    pub name: String,
    /// The workflow's run.
    pub run_id: String,
    /// The run's model usage.
    pub usage: WorkflowUsage,
}

/// Payload of `workflow-execution-suspended`: a delegated workflow waits for resume data;
/// resume with the network's run id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowExecutionSuspendedPayload {
    /// The workflow's input.
    pub args: Value,
    /// The workflow.
    pub workflow_id: String,
    /// What the suspended step suspended with.
    pub suspend_payload: Value,
    /// The JSON schema of the resume data, as a string (`""` when the step declares none).
    pub resume_schema: String,
    /// The workflow's name.
    pub name: String,
    /// The workflow's run.
    pub run_id: String,
    /// The run's model usage.
    pub usage: WorkflowUsage,
    /// Why the router chose it.
    pub selection_reason: String,
    /// The workflow's id.
    pub tool_name: String,
    /// The workflow's id.
    pub tool_call_id: String,
}

/// `args` of `tool-execution-start`: the decision, and the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionArgs {
    /// The decision that chose the tool.
    #[serde(flatten)]
    pub decision: RoutingDecision,
    /// The tool's input (the prompt, parsed).
    pub args: Value,
    /// The tool.
    pub tool_name: String,
    /// The call.
    pub tool_call_id: String,
}

/// Payload of `tool-execution-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionStartPayload {
    /// The call.
    pub args: ToolExecutionArgs,
    /// The network's run.
    pub run_id: String,
}

/// Payload of `tool-execution-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionEndPayload {
    /// The task.
    pub task: String,
    /// The tool.
    pub primitive_id: String,
    /// `tool`.
    pub primitive_type: PrimitiveType,
    /// What the tool returned (or why it did not run).
    pub result: Value,
    /// Always `false` (validation decides).
    pub is_complete: bool,
    /// The iteration.
    pub iteration: u32,
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
}

/// Payload of `tool-execution-approval` and `tool-execution-suspended`: the network's tool
/// waits for a person; decide with the network's run id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionWaitPayload {
    /// The tool.
    pub tool_name: String,
    /// The call.
    pub tool_call_id: String,
    /// Its input.
    pub args: Value,
    /// Why the router chose it.
    pub selection_reason: String,
    /// The network's run.
    pub run_id: String,
    /// The JSON schema of the decision or resume data, as a string.
    pub resume_schema: String,
    /// What the tool suspended with (`tool-execution-suspended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_payload: Option<Value>,
}

/// Payload of the `*-abort` events: where the network was when it was aborted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrimitiveAbortPayload {
    /// `routing`, `agent`, `workflow` or `tool`.
    pub primitive_type: String,
    /// The primitive (`routing-agent` while routing).
    pub primitive_id: String,
}

/// Payload of `network-execution-event-step-finish` (an iteration whose router chose `none`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStepFinishPayload {
    /// The task.
    pub task: String,
    /// The router's reason.
    pub result: String,
    /// Whether the router found the task complete.
    pub is_complete: bool,
    /// The iteration.
    pub iteration: u32,
    /// The network's run.
    pub run_id: String,
}

/// Payload of `network-validation-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkValidationStartPayload {
    /// The network's run.
    pub run_id: String,
    /// The iteration.
    pub iteration: u32,
    /// How many checks run (the scorers, or 1 for the default check).
    pub checks_count: usize,
}

/// One completion check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorerResult {
    /// 0 to 1.
    pub score: f64,
    /// Whether it passed.
    pub passed: bool,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The final answer the default check wrote, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_result: Option<String>,
    /// The scorer's id (`default-completion` for the default check).
    pub scorer_id: String,
    /// Its name (`Default LLM Completion`).
    pub scorer_name: String,
    /// How long it took, in milliseconds.
    pub duration: u64,
}

/// Payload of `network-validation-end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkValidationEndPayload {
    /// The network's run.
    pub run_id: String,
    /// The iteration.
    pub iteration: u32,
    /// Whether the task is complete.
    pub passed: bool,
    /// Each check's verdict.
    pub results: Vec<ScorerResult>,
    /// How long the checks took, in milliseconds.
    pub duration: u64,
    /// Whether they ran out of time.
    pub timed_out: bool,
    /// The deciding check's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether this was the last iteration allowed.
    pub max_iteration_reached: bool,
    /// Whether the feedback was kept out of the thread.
    pub suppress_feedback: bool,
}

/// Payload of `network-execution-event-finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkFinishPayload {
    /// The task.
    pub task: String,
    /// Whether it was completed.
    pub is_complete: bool,
    /// Why the network stopped.
    pub completion_reason: String,
    /// The final answer.
    pub result: String,
    /// The last primitive.
    pub primitive_id: String,
    /// Its type.
    pub primitive_type: PrimitiveType,
    /// The last iteration.
    pub iteration: u32,
    /// Always `false`.
    pub is_one_off: bool,
    /// The network's thread.
    pub thread_id: String,
    /// Its resource.
    pub thread_resource_id: String,
    /// Whether the last completion check passed.
    pub validation_passed: bool,
    /// The last check's feedback, when the network stopped without passing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_feedback: Option<String>,
    /// The model usage of the whole network run.
    pub usage: WorkflowUsage,
}
