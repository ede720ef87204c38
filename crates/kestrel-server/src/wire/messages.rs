//! `messages` as Mastra's clients send them: a string, or strings and `{role, content}` /
//! `{role, parts}` messages.

use kestrel_core::message::{Message, Part, Role};
use serde_json::Value;

use crate::ApiError;

/// The schema of `messages`: what [`input_messages`] takes.
pub(super) fn messages_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let text = serde_json::json!({"type": "string", "pattern": "\\S"});
    let part = serde_json::json!({
        "type": "object",
        "properties": {"type": {"const": "text"}, "text": text},
        "required": ["type", "text"],
    });
    let message = serde_json::json!({
        "type": "object",
        "properties": {
            "role": {"enum": ["user", "assistant"]},
            "content": {"anyOf": [text, {"type": "array", "items": part, "minItems": 1}]},
        },
        "required": ["role", "content"],
    });
    schemars::json_schema!({
        "description": "A string, or an array of strings and {role, content} messages (also \
            role `system` where the server takes it)",
        "anyOf": [text, {"type": "array", "items": {"anyOf": [text, message]}, "minItems": 1}],
    })
}

/// `messages` as Mastra accepts them: a string, or an array of strings and
/// `{role, content}` / `{role, parts}` messages.
pub(crate) fn input_messages(
    value: &Value,
    system_messages: bool,
) -> Result<Vec<Message>, ApiError> {
    let messages = match value {
        Value::String(text) => vec![Message::user(text.clone())],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| input_message(i, item, system_messages))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::invalid(
                "messages must be a string or an array of messages",
            ));
        }
    };
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must not be empty"));
    }
    Ok(messages)
}

fn input_message(index: usize, item: &Value, system_messages: bool) -> Result<Message, ApiError> {
    let bad = |what: &str| ApiError::invalid(format!("messages[{index}]: {what}"));
    let object = match item {
        Value::String(text) => return Ok(Message::user(text.clone())),
        Value::Object(object) => object,
        _ => return Err(bad("must be a string or a {role, content} object")),
    };
    let role = match object.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") if system_messages => Role::System,
        Some("system") => {
            return Err(bad(
                "role \"system\" is refused: the agent's instructions come from the server \
                 (a server may take them with Server::allow_system_messages)",
            ));
        }
        Some(other) => {
            return Err(bad(&format!(
                "role {other:?} is not one of user, assistant, system"
            )));
        }
        None => return Err(bad("needs a role")),
    };
    let mut texts = Vec::new();
    match object.get("content") {
        Some(Value::String(text)) => texts.push(text.clone()),
        Some(Value::Array(parts)) => collect_text_parts(parts, &mut texts),
        Some(Value::Null) | None => {}
        Some(_) => return Err(bad("content must be a string or an array of parts")),
    }
    if let Some(Value::Array(parts)) = object.get("parts") {
        collect_text_parts(parts, &mut texts);
    }
    if texts.is_empty() {
        return Err(bad("has no text (content, or parts of type \"text\")"));
    }
    let parts = texts.into_iter().map(|text| Part::Text { text }).collect();
    Ok(Message::new(role, parts))
}

fn collect_text_parts(parts: &[Value], texts: &mut Vec<String>) {
    for part in parts {
        if part.get("type").and_then(Value::as_str) == Some("text")
            && let Some(text) = part.get("text").and_then(Value::as_str)
        {
            texts.push(text.to_owned());
        }
    }
}
