//! Request bodies, in Mastra's camelCase JSON, and what a run answers ([`RunResult`]).
//!
//! Bodies accept the fields Mastra's clients send; fields this server does not use are
//! ignored (a client written for Mastra may send more), but a known field of the wrong type
//! is a 400 that names it.

use axum::http::StatusCode;
use kestrel_core::agent::RunOptions;
use kestrel_core::context::RequestContext;
use kestrel_core::message::{Message, Part, Role};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::ApiError;

mod extract;
mod result;

pub(crate) use extract::{Body, MaybeBody};
pub(crate) use result::RunResult;

/// The longest id (thread, resource, run, tool call, chat) a request may name, in characters.
/// Ids end up as map keys, topics and database keys: an unbounded one is a way to make the
/// server hold (or store) whatever a caller sends.
pub(crate) const MAX_ID_LEN: usize = 256;

/// The longest name a body may give (an agent's display name, a thread's title, a model), in
/// characters.
pub(crate) const MAX_NAME_LEN: usize = 256;

/// The longest reason a decision may give (a declined call's, which the model reads).
pub(crate) const MAX_REASON_LEN: usize = 4_096;

/// The longest description (an agent's, a tool's) or change message a body may give.
pub(crate) const MAX_TEXT_LEN: usize = 10_000;

/// The longest system prompt, or working memory, a body may set.
pub(crate) const MAX_PROMPT_LEN: usize = 100_000;

/// The ids' pattern in the OpenAPI document: not only whitespace, no control characters.
pub(crate) const ID_PATTERN: &str = r"^(?!\s*$)[^\u0000-\u001F\u007F-\u009F]*$";

/// Why `id` cannot be an id: empty or only whitespace, longer than [`MAX_ID_LEN`], or holding a
/// control character
/// (NUL among them, which PostgreSQL cannot store).
pub(crate) fn id_problem(id: &str) -> Option<String> {
    if id.trim().is_empty() {
        return Some("an id must not be empty (nor only whitespace)".to_owned());
    }
    let length = id.chars().count();
    if length > MAX_ID_LEN {
        return Some(format!(
            "an id may be at most {MAX_ID_LEN} characters long (this one has {length})"
        ));
    }
    if id.chars().any(char::is_control) {
        return Some("an id must not contain control characters".to_owned());
    }
    None
}

/// Deserializes an id string, refusing one [`id_problem`] names (a 422 that says why).
pub(crate) fn id<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let id = String::deserialize(deserializer)?;
    match id_problem(&id) {
        Some(problem) => Err(serde::de::Error::custom(problem)),
        None => Ok(id),
    }
}

/// [`id`], for an optional field.
pub(crate) fn opt_id<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let id = Option::<String>::deserialize(deserializer)?;
    match id.as_deref().and_then(id_problem) {
        Some(problem) => Err(serde::de::Error::custom(problem)),
        None => Ok(id),
    }
}

/// Refuses a request whose path has a segment longer than [`MAX_ID_LEN`] (once decoded, a
/// path segment is an id) with 400 `invalid_path`, before any route reads it.
pub(crate) async fn bounded_path(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    // A character is at most 4 bytes, each percent-encoded in 3: this bounds the encoded
    // form of an id of MAX_ID_LEN characters.
    let path = request.uri().path();
    let too_long = path
        .split('/')
        .any(|segment| segment.len() > 12 * MAX_ID_LEN);
    // A control character can only come percent-encoded (%00-%1F, %7F); no id holds one.
    let control = path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && ((matches!(w[1], b'0' | b'1') && w[2].is_ascii_hexdigit())
                || (w[1] == b'7' && matches!(w[2], b'f' | b'F')))
    });
    if control {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            "a path segment (an id) must not contain control characters",
        )
        .into_response();
    }
    if too_long {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("a path segment (an id) may be at most {MAX_ID_LEN} characters long"),
        )
        .into_response();
    }
    next.run(request).await
}

/// `memory` of a run body: the thread (an id, or `{id}`) and its resource.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryBody {
    pub thread: ThreadRef,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource: String,
}

/// A thread named by its id or as `{id}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ThreadRef {
    Id(
        #[serde(deserialize_with = "crate::wire::id")]
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
        String,
    ),
    Object {
        #[serde(deserialize_with = "crate::wire::id")]
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
        id: String,
    },
}

impl ThreadRef {
    fn id(&self) -> &str {
        match self {
            ThreadRef::Id(id) | ThreadRef::Object { id } => id,
        }
    }
}

/// The body of `generate` and `stream`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("dependentSchemas" = {"threadId": {
    "required": ["resourceId"],
    "properties": {"resourceId": {"type": "string"}},
}}))]
pub(crate) struct RunBody {
    /// The input: a string, a message `{role, content}`, or an array of them.
    #[schemars(schema_with = "messages_schema")]
    pub messages: Value,
    /// The thread and resource the run remembers in.
    #[serde(default)]
    pub memory: Option<MemoryBody>,
    /// Mastra's older top-level form of `memory`.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: Option<String>,
    /// Mastra's older top-level form of `memory`; alone, the resource of a run without a
    /// thread.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource_id: Option<String>,
    /// Values the tools and hooks of the run read.
    #[serde(default)]
    pub request_context: Option<Map<String, Value>>,
    /// The run's id (a fresh one when absent).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: Option<String>,
    /// The most model steps the run may take (at most the agent's own limit).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(min = 1))]
    pub max_steps: Option<u32>,
    /// Keep the stream open until background tasks have finished.
    #[serde(default)]
    pub until_idle: Option<bool>,
    /// Which stored version each agent of the run uses (Mastra's `versions`), carried
    /// through every delegation: `{"agents": {"<id>": {"status": "draft"} | {"versionId": "…"}}}`.
    #[serde(default)]
    pub versions: Option<kestrel_core::version::Versions>,
}

/// At most this many agents in a body's `versions`.
const MAX_VERSION_CHOICES: usize = 64;

/// Refuses a `versions` naming too many agents, or version ids that cannot be ids.
fn check_versions(versions: &kestrel_core::version::Versions) -> Result<(), ApiError> {
    use kestrel_core::version::VersionChoice;
    if versions.agents.len() > MAX_VERSION_CHOICES {
        return Err(ApiError::invalid(format!(
            "versions.agents may name at most {MAX_VERSION_CHOICES} agents"
        )));
    }
    // Agent ids are only compared with the agents' own; a version id is looked up.
    for choice in versions.agents.values() {
        if let VersionChoice::Id { version_id } = choice
            && let Some(problem) = id_problem(version_id)
        {
            return Err(ApiError::invalid(format!(
                "versions.agents: versionId: {problem}"
            )));
        }
    }
    Ok(())
}

/// What a request body may ask of a run, whatever token the caller holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyRules {
    /// The agent's own step limit: `maxSteps` may lower it, not raise it.
    pub max_steps: u32,
    /// Whether messages with role `system` are taken (off unless the server opts in).
    pub system_messages: bool,
}

impl BodyRules {
    /// The rules for runs of `agent` on this server.
    pub(crate) fn of(agent: &kestrel_core::agent::Agent, state: &crate::AppState) -> Self {
        Self {
            max_steps: agent.max_steps(),
            system_messages: state.system_messages,
        }
    }
}

/// A body's `requestContext` without the keys the framework reserves (`kestrel.*`: the
/// run's thread, resource and id, the delegation depth), which only the server sets.
pub(crate) fn client_context(entries: Option<Map<String, Value>>) -> RequestContext {
    let entries: std::collections::BTreeMap<String, Value> = entries
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| {
            let reserved = kestrel_core::context::is_reserved_key(key);
            if reserved {
                tracing::debug!(%key, "dropping a reserved request context key from a body");
            }
            !reserved
        })
        .collect();
    RequestContext::from(entries)
}

impl RunBody {
    /// The input messages and the run's options. A caller pinned to a resource runs as that
    /// resource: a thread of another is refused, and the request context carries it.
    pub(crate) fn into_run(
        self,
        caller: &crate::auth::Caller,
        rules: BodyRules,
    ) -> Result<(Vec<Message>, RunOptions), ApiError> {
        let messages = input_messages(&self.messages, rules.system_messages)?;
        let mut options = RunOptions::new();
        let memory = match (self.memory, self.thread_id, self.resource_id) {
            (Some(memory), _, _) => Some((memory.thread.id().to_owned(), memory.resource)),
            (None, Some(thread), Some(resource)) => Some((thread, resource)),
            (None, Some(_), None) => {
                return Err(ApiError::invalid(
                    "threadId needs a resourceId: every thread belongs to one resource",
                ));
            }
            (None, None, _) => None,
        };
        if let Some((thread, resource)) = &memory {
            if thread.trim().is_empty() || resource.trim().is_empty() {
                return Err(ApiError::invalid(
                    "memory.thread and memory.resource must not be empty",
                ));
            }
            caller.check_resource(resource)?;
            options = options.memory(thread, resource);
        }
        let context = client_context(self.request_context);
        if let Some(own) = &caller.resource {
            // Set by the server from the token: a body cannot claim another identity.
            context.set(kestrel_core::context::RESOURCE_ID_KEY, own.as_str());
            options = options.resource(own);
        }
        options = options.request_context(context);
        if let Some(run_id) = self.run_id {
            options = options.run_id(run_id);
        }
        if let Some(max_steps) = self.max_steps {
            if max_steps == 0 {
                return Err(ApiError::invalid("maxSteps must be at least 1"));
            }
            // The agent's limit is the operator's: a body may ask for fewer steps only.
            options = options.max_steps(max_steps.min(rules.max_steps));
        }
        if let Some(until_idle) = self.until_idle {
            options = options.until_idle(until_idle);
        }
        if let Some(versions) = self.versions {
            check_versions(&versions)?;
            caller.check_versions(&versions)?;
            options = options.versions(versions);
        }
        Ok((messages, options))
    }
}

/// A count (`maxSteps`): a JSON integer, also written with a zero fraction (`3.0`), as JSON
/// Schema's `integer` allows.
pub(crate) fn opt_count<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u32>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    match whole.and_then(|n| u32::try_from(n).ok()) {
        Some(n) => Ok(Some(n)),
        None => Err(serde::de::Error::custom(format!(
            "expected a whole number from 0 to {}, not {number}",
            u32::MAX
        ))),
    }
}

/// The schema of `messages`: what [`input_messages`] takes.
fn messages_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
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
fn input_messages(value: &Value, system_messages: bool) -> Result<Vec<Message>, ApiError> {
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

/// The body of approve / decline.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecisionBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub tool_call_id: String,
    /// The waiting call's fingerprint, as the run gave it: a decision on another call under
    /// the same id is refused.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    pub fingerprint: Option<String>,
    /// Why the call was declined (the model reads it).
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_REASON_LEN))]
    pub reason: Option<String>,
}

/// The body of `resume-stream`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub tool_call_id: Option<String>,
    /// The waiting call's fingerprint, as the run gave it.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    pub fingerprint: Option<String>,
    pub resume_data: Value,
}

/// The body of `threads/abort`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: String,
}

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

    /// Where the message goes.
    pub(crate) fn target(&self) -> Result<kestrel_core::agent::SendMessage, ApiError> {
        use kestrel_core::agent::{IfActive, IfIdle, SendMessage};
        if self.resource_id.trim().is_empty() || self.thread_id.trim().is_empty() {
            return Err(ApiError::invalid(
                "resourceId and threadId must not be empty",
            ));
        }
        let mut to = SendMessage::to(&self.resource_id, &self.thread_id);
        if let Some(if_active) = self.if_active {
            to = to.if_active(match if_active {
                IfActiveBody::Deliver => IfActive::Deliver,
                IfActiveBody::Persist => IfActive::Persist,
                IfActiveBody::Discard => IfActive::Discard,
            });
        }
        if let Some(if_idle) = self.if_idle {
            to = to.if_idle(match if_idle {
                IfIdleBody::Wake => IfIdle::Wake,
                IfIdleBody::Persist => IfIdle::Persist,
                IfIdleBody::Discard => IfIdle::Discard,
            });
        }
        match &self.fork {
            None | Some(ForkBody::Flag(false)) => {}
            Some(ForkBody::Flag(true)) => to = to.fork(),
            Some(ForkBody::Into(into)) => {
                to.fork = Some(kestrel_core::agent::Fork {
                    thread_id: into.thread_id.clone(),
                    title: into.title.clone(),
                });
            }
        }
        Ok(to)
    }
}
