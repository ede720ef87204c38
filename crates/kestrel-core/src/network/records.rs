//! What a network keeps in its thread: the task, a record of each iteration (an assistant
//! message whose text is JSON with `"isNetwork": true`, as Mastra saves it), the final
//! answer and the completion checks' feedback; and the conversation a sub-agent is given.

use serde_json::{Value, json};

use crate::event::PrimitiveType;
use crate::memory::{AgentMemory, MemoryScope};
use crate::message::{Message, Role};

/// The first line of a completion check's feedback message.
pub(crate) const FEEDBACK_HEADING: &str = "#### Completion Check Results";

/// The task of a network: the text of the last message.
pub(crate) fn task_of(messages: &[Message]) -> String {
    messages.last().map(Message::text).unwrap_or_default()
}

/// Saves `messages` to the network's thread; a memory that fails is logged (the network
/// goes on: what it streams still reaches the caller).
pub(crate) async fn save(memory: &dyn AgentMemory, scope: &MemoryScope, messages: &[Message]) {
    if let Err(error) = memory
        .persist(scope, messages, crate::memory::Persist::complete())
        .await
    {
        tracing::warn!(thread = %scope.thread_id, %error, "a network could not save to its thread");
    }
}

/// The record of an iteration's primitive: `{isNetwork, primitiveType, primitiveId,
/// selectionReason, input, finalResult}`.
pub(crate) fn iteration_record(
    primitive_type: PrimitiveType,
    primitive_id: &str,
    selection_reason: &str,
    input: Value,
    final_result: Value,
) -> Message {
    let record = json!({
        "isNetwork": true,
        "primitiveType": primitive_type,
        "primitiveId": primitive_id,
        "selectionReason": selection_reason,
        "input": input,
        "finalResult": final_result,
    });
    Message::assistant(record.to_string())
}

/// Whether `message` is one of the network's own records (an iteration's, or feedback).
fn is_network_record(message: &Message) -> bool {
    let text = message.text();
    let trimmed = text.trim_start();
    if trimmed.starts_with(FEEDBACK_HEADING) {
        return true;
    }
    trimmed.starts_with('{')
        && serde_json::from_str::<Value>(trimmed)
            .ok()
            .and_then(|v| v.get("isNetwork").and_then(Value::as_bool))
            .unwrap_or(false)
}

/// The conversation a sub-agent is given: the thread's user messages and assistant answers,
/// without the network's records, tool traffic or system text.
pub(crate) fn conversation_context(history: &[Message]) -> Vec<Message> {
    history
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .filter(|m| !is_network_record(m))
        .filter(|m| !m.text().trim().is_empty())
        .map(|m| Message::new(m.role, vec![crate::message::Part::Text { text: m.text() }]))
        .collect()
}

/// The text a result shows the router and the completion checks.
pub(crate) fn result_text(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
