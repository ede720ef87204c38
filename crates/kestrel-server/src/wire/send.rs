//! The body of `send-message` and `signals`: a message into a thread, and what to do when a
//! run is (or is not) active.

use kestrel_core::agent::{Agent, IfActive, IfIdle, SendRequest, ThreadHandle};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::ApiError;

/// The body of `send-message` and `signals`: the text, and the thread (or a run on it).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendBody {
    #[serde(default)]
    pub message: Option<Value>,
    #[serde(default)]
    pub signal: Option<Value>,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: String,
    #[serde(default)]
    pub if_active: Option<IfActiveBody>,
    #[serde(default)]
    pub if_idle: Option<IfIdleBody>,
    #[serde(default)]
    pub fork: Option<ForkBody>,
}

/// `fork`: `true` copies the thread into a new one with a fresh id (and the message goes
/// there); an object chooses the new thread's id and title.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ForkBody {
    /// Fork (`true`) or not (`false`).
    Flag(bool),
    /// Fork into this thread.
    Into(ForkInto),
}

/// The new thread of a fork.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ForkInto {
    /// The new thread's id; a fresh one when left out.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: Option<String>,
    /// The new thread's title; the original's when left out.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    pub title: Option<String>,
}

/// The text of a sent message or signal, as documented: a string, or an object with a
/// `content` (or `text`) string; not blank.
pub(crate) fn sent_text_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let text = serde_json::json!({"type": "string", "pattern": "\\S"});
    schemars::json_schema!({
        "anyOf": [
            text,
            {"type": "object", "properties": {"content": text}, "required": ["content"]},
            {"type": "object", "properties": {"text": text}, "required": ["text"]},
        ],
    })
}

/// The body of `send-message` as the document shows it (read as a [`SendBody`]).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // a schema only
pub(crate) struct SendMessageDoc {
    /// The user's message.
    #[schemars(schema_with = "sent_text_schema")]
    message: Value,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: String,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: String,
    if_active: Option<IfActiveBody>,
    if_idle: Option<IfIdleBody>,
    /// Send the message to a copy of the thread (the answer's `threadId` names it).
    fork: Option<ForkBody>,
}

/// The body of `signals` as the document shows it (read as a [`SendBody`]).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // a schema only
pub(crate) struct SignalDoc {
    /// The signal (a system message).
    #[schemars(schema_with = "sent_text_schema")]
    signal: Value,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: String,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: String,
    if_active: Option<IfActiveBody>,
    if_idle: Option<IfIdleBody>,
    /// Send the signal to a copy of the thread (the answer's `threadId` names it).
    fork: Option<ForkBody>,
}

/// `ifActive`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfActiveBody {
    Deliver,
    Persist,
    Discard,
}

/// `ifIdle`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfIdleBody {
    Wake,
    Persist,
    Discard,
}

impl SendBody {
    /// The text of `field` (`message` or `signal`): a string, or an object's `content` /
    /// `text`.
    pub(crate) fn text(&self, field: &str) -> Result<String, ApiError> {
        let value = if field == "signal" {
            &self.signal
        } else {
            &self.message
        };
        let text = match value {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Object(object)) => object
                .get("content")
                .or_else(|| object.get("text"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        match text {
            Some(text) if !text.trim().is_empty() => Ok(text),
            _ => Err(ApiError::invalid(format!(
                "{field} must be a non-empty string (or an object with a content string)"
            ))),
        }
    }

    /// The thread the message goes to, as `agent` sees it.
    pub(crate) fn thread(&self, agent: &Agent) -> Result<ThreadHandle, ApiError> {
        if self.resource_id.trim().is_empty() || self.thread_id.trim().is_empty() {
            return Err(ApiError::invalid(
                "resourceId and threadId must not be empty",
            ));
        }
        Ok(agent.thread(&self.resource_id, &self.thread_id))
    }

    /// Whether the body asks to send to a fork of the thread.
    pub(crate) fn forks(&self) -> bool {
        !matches!(self.fork, None | Some(ForkBody::Flag(false)))
    }

    /// What happens to the message: `ifActive`, `ifIdle` and `fork`, as the body gives them.
    pub(crate) fn apply(&self, mut request: SendRequest) -> SendRequest {
        if let Some(if_active) = self.if_active {
            request = request.if_active(match if_active {
                IfActiveBody::Deliver => IfActive::Deliver,
                IfActiveBody::Persist => IfActive::Persist,
                IfActiveBody::Discard => IfActive::Discard,
            });
        }
        if let Some(if_idle) = self.if_idle {
            request = request.if_idle(match if_idle {
                IfIdleBody::Wake => IfIdle::Wake,
                IfIdleBody::Persist => IfIdle::Persist,
                IfIdleBody::Discard => IfIdle::Discard,
            });
        }
        match &self.fork {
            None | Some(ForkBody::Flag(false)) => request,
            Some(ForkBody::Flag(true)) => request.fork(None, None),
            Some(ForkBody::Into(into)) => request.fork(into.thread_id.clone(), into.title.clone()),
        }
    }
}
