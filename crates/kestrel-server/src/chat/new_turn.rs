//! A new turn: its input and options from the chat's messages and memory coordinates, and
//! the stored messages a regenerate or an edit replaces.

use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::message::{Message, Role};
use serde_json::Value;

use super::{ChatBody, Replaced};
use crate::auth::Caller;
use crate::wire::{MemoryBody, RunBody, ThreadRef};
use crate::{ApiError, AppState};

/// The stored messages a regenerate (or an edit) of `message_id` replaces: that message and
/// every later one, but the input itself (re-stored in place by id). `None` when there are
/// none (no memory, a new thread, an id the thread does not hold). Another resource's thread
/// is not found.
pub(super) async fn replaced_after(
    state: &AppState,
    thread_id: &str,
    resource_id: &str,
    message_id: &str,
    input: &[Message],
) -> Result<Option<Replaced>, ApiError> {
    use kestrel_memory::kestrel_storage::{Selection, StorageError};
    let Some(memory) = &state.memory else {
        return Ok(None);
    };
    let stored = match memory
        .storage()
        .list_messages(thread_id, Some(resource_id), Selection::all())
        .await
    {
        Ok(list) => list.messages,
        Err(StorageError::ThreadNotFound { .. }) => return Ok(None),
        Err(error) => return Err(crate::error::storage_error(error)),
    };
    let Some(at) = stored.iter().position(|m| m.id == message_id) else {
        return Ok(None);
    };
    let ids: Vec<String> = stored[at..]
        .iter()
        .map(|m| m.id.clone())
        .filter(|id| !input.iter().any(|m| m.id == *id))
        .collect();
    Ok((!ids.is_empty()).then(|| Replaced {
        thread_id: thread_id.to_owned(),
        resource_id: resource_id.to_owned(),
        ids,
    }))
}

/// The input and options of a new turn: the run body of `/api/agents/{id}/stream` (same
/// checks: the pinned resource, the request context, `maxSteps`), made of the chat's messages
/// and memory coordinates.
pub(super) fn new_turn(
    agent: &Agent,
    caller: &Caller,
    rules: crate::wire::BodyRules,
    body: ChatBody,
    chat_id: Option<&str>,
) -> Result<(Vec<Message>, RunOptions), ApiError> {
    let (thread, resource) = match body.memory {
        Some(MemoryBody { thread, resource }) => {
            let thread = match thread {
                ThreadRef::Id(id) | ThreadRef::Object { id } => id,
            };
            (Some(thread), Some(resource))
        }
        None => (
            chat_id.map(str::to_owned),
            body.resource_id
                .or_else(|| caller.resource.clone())
                .or_else(|| chat_id.map(str::to_owned)),
        ),
    };
    if let Some(resource) = &resource {
        caller.check_resource(resource)?;
    }
    // Only an agent with memory keeps a thread; the others run on the messages alone.
    let memory = match (thread, resource) {
        (Some(thread), Some(resource)) if agent.memory().is_some() => Some(MemoryBody {
            thread: ThreadRef::Id(thread),
            resource,
        }),
        _ => None,
    };
    let selected = new_messages(&body.messages, memory.is_some())?;
    let run = RunBody {
        messages: Value::Array(selected.iter().map(|m| (*m).clone()).collect()),
        memory,
        thread_id: None,
        resource_id: None,
        request_context: body.request_context,
        run_id: body.run_id.filter(|id| !id.trim().is_empty()),
        max_steps: body.max_steps,
        until_idle: None,
        versions: None,
        tracing_options: None,
    };
    let (mut input, options) = run.into_run(caller, rules)?;
    // One message per UIMessage: they keep the client's ids, so the stored ones are the same
    // (and a regenerated message replaces itself in the thread).
    for (message, ui) in input.iter_mut().zip(&selected) {
        if let Some(id) = ui
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
        {
            message.id = id.to_owned();
        }
    }
    if !input.iter().any(|m| m.role == Role::User) {
        return Err(ApiError::invalid(
            "messages must end with a user message (or answer a stopped run with runId and \
             resumeData, or with approval responses)",
        ));
    }
    Ok((input, options))
}

/// The `UIMessage`s a new run reads. With memory the thread already holds the conversation,
/// so only those after the last assistant message are new (a client may send them all or, as
/// Mastra recommends, only the last); without, all of them. Assistant messages without text
/// (tool calls only) carry nothing a new run could use.
fn new_messages(messages: &[Value], with_memory: bool) -> Result<Vec<&Value>, ApiError> {
    let is_assistant = |m: &Value| m.get("role").and_then(Value::as_str) == Some("assistant");
    let start = if with_memory {
        messages.iter().rposition(is_assistant).map_or(0, |i| i + 1)
    } else {
        0
    };
    let mut selected = Vec::new();
    for (index, message) in messages.iter().enumerate().skip(start) {
        let Some(parts) = message.get("parts").and_then(Value::as_array) else {
            return Err(ApiError::invalid(format!(
                "messages[{index}] must be a UIMessage {{id, role, parts}}"
            )));
        };
        let has_text = parts
            .iter()
            .any(|p| p.get("type").and_then(Value::as_str) == Some("text"));
        if is_assistant(message) && !has_text {
            continue;
        }
        selected.push(message);
    }
    Ok(selected)
}
