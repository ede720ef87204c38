//! Conversation messages: what the model reads and what a thread stores.
//!
//! A [`Message`] is always complete: an assistant message holds the step's text and its tool
//! calls, a tool message holds their results. Stream fragments never become messages. A
//! [`Transcript`] is a list of them that a run shares with its model requests.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod transcript;
pub use transcript::Transcript;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person (or program) talking to the agent.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, answering an assistant message's tool calls.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// A call the model made to a tool.
    ToolCall {
        /// The provider's id of the call; tool results refer to it.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The arguments, parsed as JSON. When the model produced invalid JSON this holds the raw
        /// text as a JSON string, so the conversation can still be replayed to the provider.
        args: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The call this answers.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// What the tool returned, or the error text when `is_error` is set.
        result: Value,
        /// Whether the call failed.
        #[serde(rename = "isError", default)]
        is_error: bool,
        /// Whether a person declined the call, so it never ran (`is_error` is set too, and
        /// `result` is the reason the model reads). Front ends show it as denied, not failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        denied: bool,
    },
}

/// A complete message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// A unique id. For assistant messages this equals the `messageId` streamed in events.
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its content, in order.
    pub parts: Vec<Part>,
}

impl Message {
    /// A message with a fresh id.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            id: crate::id::new_id(),
            role,
            parts,
        }
    }

    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::Text { text: text.into() }])
    }

    /// A system message holding one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![Part::Text { text: text.into() }])
    }

    /// An assistant message holding one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![Part::Text { text: text.into() }])
    }

    /// The concatenated text parts of this message.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let Part::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }
}

/// What a caller may pass as the input of a run: a string, one message or several.
#[derive(Debug, Clone, PartialEq)]
pub struct Input(pub Vec<Message>);

impl From<&str> for Input {
    fn from(value: &str) -> Self {
        Input(vec![Message::user(value)])
    }
}

impl From<String> for Input {
    fn from(value: String) -> Self {
        Input(vec![Message::user(value)])
    }
}

impl From<&String> for Input {
    fn from(value: &String) -> Self {
        Input(vec![Message::user(value.as_str())])
    }
}

impl From<Message> for Input {
    fn from(value: Message) -> Self {
        Input(vec![value])
    }
}

impl From<Vec<Message>> for Input {
    fn from(value: Vec<Message>) -> Self {
        Input(value)
    }
}
