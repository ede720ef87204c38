//! A thread's stored messages as Mastra sends them: `MastraDBMessage`, whose `content` is
//! `{format: 2, parts}` with the parts of an AI SDK v4 `UIMessage`.
//!
//! Mastra has no `tool` role: a tool's result is the `result` of the `tool-invocation` part of
//! the assistant message that made the call. So a stored tool message is merged into the
//! assistant message before it that holds the call (`state` goes from `call` to `result`); a
//! result whose call is not on the page (a page boundary between them) becomes an assistant
//! message of its own. Kestrel adds the stored message's `seq` and `status` (`complete` or
//! `aborted`), which Mastra's clients ignore.

use chrono::{DateTime, Utc};
use kestrel_core::message::{Part, Role};
use kestrel_memory::kestrel_storage::{MessageStatus, Metadata, StoredMessage};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// One message of a thread, as Mastra's `MastraDBMessage`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DbMessage {
    /// The message's id (the id streamed in events).
    id: String,
    /// `user`, `assistant` or `system`.
    #[schemars(extend("enum" = ["user", "assistant", "system"]))]
    role: &'static str,
    /// When it was stored.
    #[schemars(with = "String", extend("format" = "date-time"))]
    created_at: DateTime<Utc>,
    /// The thread.
    thread_id: String,
    /// The thread's resource.
    resource_id: String,
    /// Always `v2`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = "v2"))]
    kind: &'static str,
    /// What it says.
    content: DbContent,
    /// Its place in the thread (Kestrel's; of the first stored message it was made of).
    seq: i64,
    /// `complete`, or `aborted` for the partial answer of a stopped step (Kestrel's).
    #[schemars(with = "String", extend("enum" = ["complete", "aborted"]))]
    status: MessageStatus,
}

/// A message's content, format 2.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DbContent {
    /// Always 2 (AI SDK v4 `UIMessage` parts).
    #[schemars(extend("const" = 2))]
    format: u8,
    /// The parts, in order.
    parts: Vec<DbPart>,
    /// The message's text parts joined, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// The stored message's metadata, when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata>,
}

/// One part of a message.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum DbPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning.
    Reasoning {
        /// The reasoning text.
        reasoning: String,
        /// The same, as AI SDK v4 reasoning details.
        details: Vec<ReasoningDetail>,
    },
    /// A tool call, and its result once there is one.
    ToolInvocation {
        /// The call.
        #[serde(rename = "toolInvocation")]
        tool_invocation: ToolInvocation,
    },
}

/// A reasoning detail.
#[derive(Debug, Serialize, JsonSchema)]
struct ReasoningDetail {
    /// Always `text`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = "text"))]
    kind: &'static str,
    /// The text.
    text: String,
}

/// A tool call in a message.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ToolInvocation {
    /// `call` (no result yet) or `result`.
    #[schemars(extend("enum" = ["call", "result"]))]
    state: &'static str,
    /// The call's id.
    tool_call_id: String,
    /// The tool.
    tool_name: String,
    /// Its arguments (`{}` for a result whose call is not on the page).
    args: Value,
    /// What the tool returned, or the error text.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// Whether the call failed (Kestrel's; left out when it did not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    is_error: bool,
    /// Whether a person declined the call, so it never ran (Kestrel's; left out when not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    denied: bool,
}

/// `stored`, in order, as Mastra's messages.
pub(crate) fn db_messages(stored: &[StoredMessage]) -> Vec<DbMessage> {
    let mut messages: Vec<DbMessage> = Vec::with_capacity(stored.len());
    for message in stored {
        if message.role == Role::Tool {
            for part in &message.parts {
                if let Part::ToolResult { .. } = part {
                    merge_result(&mut messages, message, part);
                }
            }
            continue;
        }
        let parts = message.parts.iter().filter_map(db_part).collect();
        messages.push(db_message(message, role(message.role), parts));
    }
    messages
}

fn role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant | Role::Tool => "assistant",
    }
}

fn db_message(message: &StoredMessage, role: &'static str, parts: Vec<DbPart>) -> DbMessage {
    let text: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            DbPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    DbMessage {
        id: message.id.clone(),
        role,
        created_at: message.created_at,
        thread_id: message.thread_id.clone(),
        resource_id: message.resource_id.clone(),
        kind: "v2",
        content: DbContent {
            format: 2,
            content: (!text.is_empty()).then(|| text.concat()),
            parts,
            metadata: (!message.metadata.is_empty()).then(|| message.metadata.clone()),
        },
        seq: message.seq,
        status: message.status,
    }
}

/// A part as Mastra stores it; a tool result has no part of its own (see [`merge_result`]).
fn db_part(part: &Part) -> Option<DbPart> {
    Some(match part {
        Part::Text { text } => DbPart::Text { text: text.clone() },
        Part::Reasoning { text } => DbPart::Reasoning {
            reasoning: text.clone(),
            details: vec![ReasoningDetail {
                kind: "text",
                text: text.clone(),
            }],
        },
        Part::ToolCall {
            tool_call_id,
            tool_name,
            args,
        } => DbPart::ToolInvocation {
            tool_invocation: ToolInvocation {
                state: "call",
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
                result: None,
                is_error: false,
                denied: false,
            },
        },
        Part::ToolResult { .. } => return None,
    })
}

/// Puts a tool result into the invocation of its call in the latest message that holds it,
/// or, when none on the page does, into an assistant message of its own.
fn merge_result(messages: &mut Vec<DbMessage>, tool_message: &StoredMessage, part: &Part) {
    let Part::ToolResult {
        tool_call_id,
        tool_name,
        result,
        is_error,
        denied,
    } = part
    else {
        return;
    };
    let call = messages.iter_mut().rev().find_map(|m| {
        m.content.parts.iter_mut().find_map(|p| match p {
            DbPart::ToolInvocation { tool_invocation }
                if tool_invocation.tool_call_id == *tool_call_id =>
            {
                Some(tool_invocation)
            }
            _ => None,
        })
    });
    if let Some(invocation) = call {
        invocation.state = "result";
        invocation.result = Some(result.clone());
        invocation.is_error = *is_error;
        invocation.denied = *denied;
        return;
    }
    let alone = DbPart::ToolInvocation {
        tool_invocation: ToolInvocation {
            state: "result",
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            args: Value::Object(serde_json::Map::new()),
            result: Some(result.clone()),
            is_error: *is_error,
            denied: *denied,
        },
    };
    messages.push(db_message(tool_message, "assistant", vec![alone]));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kestrel_core::message::{Message, Part};
    use kestrel_memory::kestrel_storage::{MessageStatus, Metadata, StoredMessage};
    use serde_json::json;

    use super::db_messages;

    fn stored(seq: i64, message: Message) -> StoredMessage {
        StoredMessage {
            id: message.id,
            thread_id: "t1".into(),
            resource_id: "alice".into(),
            role: message.role,
            parts: message.parts,
            created_at: chrono::DateTime::from_timestamp(1_700_000_000 + seq, 0).unwrap(),
            seq,
            status: MessageStatus::Complete,
            metadata: Metadata::new(),
        }
    }

    fn result(call: &str, value: serde_json::Value) -> Message {
        let mut message = Message::user("");
        message.role = kestrel_core::message::Role::Tool;
        message.parts = vec![Part::ToolResult {
            tool_call_id: call.into(),
            tool_name: "weather".into(),
            result: value,
            is_error: false,
            denied: false,
        }];
        message
    }

    #[test]
    fn tool_results_join_their_calls_and_the_content_is_format_2() {
        let mut call = Message::assistant("Looking it up.");
        call.parts.push(Part::ToolCall {
            tool_call_id: "c1".into(),
            tool_name: "weather".into(),
            args: json!({"city": "Lisbon"}),
        });
        let messages = [
            stored(1, Message::user("Weather in Lisbon?")),
            stored(2, call),
            stored(3, result("c1", json!({"temp": 21}))),
            stored(4, Message::assistant("21 degrees.")),
        ];
        let json = serde_json::to_value(db_messages(&messages)).unwrap();
        let roles: Vec<&str> = json
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "assistant"]);
        assert_eq!(json[0]["type"], "v2");
        assert_eq!(json[0]["content"]["format"], 2);
        assert_eq!(
            json[0]["content"]["parts"],
            json!([{"type": "text", "text": "Weather in Lisbon?"}])
        );
        assert_eq!(json[0]["content"]["content"], "Weather in Lisbon?");
        assert_eq!(json[0]["threadId"], "t1");
        assert_eq!(json[0]["resourceId"], "alice");
        assert_eq!(
            json[1]["content"]["parts"][1],
            json!({"type": "tool-invocation", "toolInvocation": {
                "state": "result", "toolCallId": "c1", "toolName": "weather",
                "args": {"city": "Lisbon"}, "result": {"temp": 21}
            }})
        );
        assert_eq!(json[2]["seq"], 4);
        assert!(json[1].get("parts").is_none(), "no parts outside content");
    }

    #[test]
    fn a_result_without_its_call_on_the_page_stands_alone() {
        let json = serde_json::to_value(db_messages(&[stored(7, result("c9", json!("ok")))]));
        let json = json.unwrap();
        assert_eq!(json[0]["role"], "assistant");
        let invocation = &json[0]["content"]["parts"][0]["toolInvocation"];
        assert_eq!(invocation["state"], "result");
        assert_eq!(invocation["args"], json!({}));
        assert_eq!(invocation["result"], "ok");
    }
}
