//! Running the primitive a routing decision chose: a sub-agent (its events forwarded whole),
//! a workflow (likewise) or a tool, and continuing one that stopped for a person.
//!
//! A primitive's result is read by the routing model, kept in the thread and may end up as
//! the network's answer: a sub-agent or a workflow that fails gives the library's words for
//! it (`agent "x" failed (its run …)`), never its error's text, which may quote a provider
//! or a store and goes to the log. What the library writes about the router's own choice (no
//! such primitive, a prompt that does not fit) is kept, so the router can correct itself; a
//! tool's error is its own message for the model, as in an agent's run.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::call::{Network, NetworkInit};
use super::records;
use crate::event::{
    EventKind, EventSource, PrimitiveAbortPayload, PrimitiveType, RoutingDecision, WorkflowUsage,
};
use crate::memory::{AgentMemory, MemoryScope};
use crate::message::Message;
use crate::workflow::StepContext;

mod agent;
mod tool;
mod workflow;

/// What declining a network tool's call gives (Mastra's text).
pub(crate) const NOT_APPROVED: &str = "Tool call was not approved by the user";

/// What a primitive stopped on, kept until a decision continues it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Wait {
    /// A sub-agent's run waits on its call `tool_call_id`.
    #[serde(rename_all = "camelCase")]
    Agent {
        run_id: String,
        tool_call_id: String,
        approval: bool,
    },
    /// A workflow run is suspended.
    #[serde(rename_all = "camelCase")]
    Workflow { run_id: String, input: Value },
    /// The network's tool waits for approval, or suspended itself.
    #[serde(rename_all = "camelCase")]
    Tool {
        tool_call_id: String,
        input: Value,
        approval: bool,
        /// What the tool suspended with (none for an approval), handed back on its resume.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        suspend_payload: Option<Value>,
    },
}

/// How a primitive's execution ended.
pub(crate) enum Outcome {
    /// With this result (also a failure, reported to the router as text).
    Done(Value),
    /// It waits for a person.
    Wait(Wait),
    /// The network was aborted.
    Aborted,
    /// A processor stopped the primitive's run: the network stops.
    Tripwire(Box<crate::run::Tripwire>),
}

/// What running a primitive needs of the network's run.
pub(crate) struct Exec<'a> {
    pub ctx: &'a StepContext,
    pub network: &'a Network,
    pub init: &'a NetworkInit,
    pub scope: MemoryScope,
    pub memory: Arc<dyn AgentMemory>,
    /// The running iteration's span, when the run is traced: its routing decision and its
    /// primitive's run hang under it.
    pub iteration: std::sync::Mutex<Option<crate::trace::SpanParent>>,
}

impl Exec<'_> {
    /// What the work of the running iteration hangs under, when the run is traced.
    pub(crate) fn trace_parent(&self) -> Option<crate::trace::SpanParent> {
        self.iteration
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends a network event to the run's stream.
    pub(crate) async fn emit(&self, kind: EventKind) {
        self.ctx.run.emit(EventSource::Network, kind).await;
    }

    /// The thread's messages (read only).
    pub(crate) async fn history(&self) -> Vec<Message> {
        match self
            .memory
            .recall(&self.scope, &[], self.ctx.request_context())
            .await
        {
            Ok(recalled) => recalled.history,
            Err(error) => {
                tracing::warn!(thread = %self.scope.thread_id, %error, "a network could not read its thread");
                Vec::new()
            }
        }
    }

    /// Saves an iteration's record to the thread.
    async fn record(&self, decision: &RoutingDecision, input: Value, final_result: Value) {
        let message = records::iteration_record(
            decision.primitive_type,
            &decision.primitive_id,
            &decision.selection_reason,
            input,
            final_result,
        );
        records::save(self.memory.as_ref(), &self.scope, &[message]).await;
    }

    /// A failed execution in the library's words (`error` holds nothing of a provider or a
    /// store): recorded, and its text is the result the router reads.
    async fn failed(&self, decision: &RoutingDecision, input: Value, error: String) -> Outcome {
        tracing::debug!(primitive = %decision.primitive_id, %error, "a network primitive failed");
        self.record(decision, input, json!({"error": error})).await;
        Outcome::Done(Value::String(format!("Error: {error}")))
    }

    /// A primitive that failed of itself: `detail` (which may quote a provider or a store)
    /// goes to the log, and `public`, what failed in the library's words, is the failure.
    async fn broke(
        &self,
        decision: &RoutingDecision,
        input: Value,
        public: String,
        detail: String,
    ) -> Outcome {
        tracing::warn!(primitive = %decision.primitive_id, error = %detail, "{public}");
        self.failed(decision, input, public).await
    }

    fn aborted(&self) -> bool {
        self.ctx.abort_signal().is_aborted()
    }

    async fn abort(&self, kind: PrimitiveType, id: &str) -> Outcome {
        let payload = PrimitiveAbortPayload {
            primitive_type: kind.as_str().to_owned(),
            primitive_id: id.to_owned(),
        };
        self.emit(match kind {
            PrimitiveType::Agent => EventKind::AgentExecutionAbort(payload),
            PrimitiveType::Workflow => EventKind::WorkflowExecutionAbort(payload),
            _ => EventKind::ToolExecutionAbort(payload),
        })
        .await;
        Outcome::Aborted
    }
}

/// Runs the chosen primitive.
pub(crate) async fn run(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
) -> Outcome {
    match decision.primitive_type {
        PrimitiveType::Agent => agent::run(exec, decision, usage, None).await,
        PrimitiveType::Workflow => workflow::run(exec, decision, usage, None).await,
        PrimitiveType::Tool => tool::run(exec, decision, None).await,
        PrimitiveType::None => Outcome::Done(Value::String(decision.selection_reason.clone())),
    }
}

/// Continues the primitive a stopped iteration waits on, with the decision or data `data`.
pub(crate) async fn resume(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    wait: Wait,
    data: Value,
    usage: &mut WorkflowUsage,
) -> Outcome {
    match &wait {
        Wait::Agent { .. } => agent::run(exec, decision, usage, Some((wait, data))).await,
        Wait::Workflow { .. } => workflow::run(exec, decision, usage, Some((wait, data))).await,
        Wait::Tool { .. } => tool::run(exec, decision, Some((wait, data))).await,
    }
}

/// The decision in a person's answer: approved or not, and why.
fn approved(data: &Value) -> (bool, Option<String>) {
    let approved = data
        .get("approved")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let reason = data
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (approved, reason)
}

/// The prompt of a workflow or a tool, as JSON (a fenced block is accepted).
fn parse_prompt(prompt: &str) -> Result<Value, String> {
    serde_json::from_str(crate::schema::unfenced(prompt))
        .map_err(|e| format!("the prompt is not valid JSON ({e}): {prompt:?}"))
}

/// The prompt of a workflow or a tool, parsed, and what is wrong with it under the
/// primitive's input schema (`violations`, from its validator compiled once).
fn checked_input(
    prompt: &str,
    what: &str,
    violations: impl FnOnce(&Value) -> Vec<String>,
) -> Result<Value, String> {
    let input = parse_prompt(prompt).map_err(|e| format!("{what}: {e}"))?;
    let errors = violations(&input);
    if errors.is_empty() {
        Ok(input)
    } else {
        Err(format!(
            "{what}: the input does not match its input schema: {}",
            errors.join("; ")
        ))
    }
}
