//! Asking the client's user: a served call that needs a person (a tool's approval, a tool that
//! suspends, an `ask_<agent>` run that stops on either) asks through MCP's elicitation, when
//! the client declared it can be asked.
//!
//! - In the `initialize` era the server sends `elicitation/create` while the call is in
//!   flight, and goes on with the answer.
//! - In the stateless era the call is answered `input_required`, with the question and a
//!   `requestState` naming the waiting call, kept here ([`PendingCalls`], bounded, expiring);
//!   the client calls again with the answer and that state, and the call goes on.
//!
//! An approval is asked as a form with `approve` (boolean) and `reason`; a suspended tool's
//! question as its resume schema when that is a form MCP can carry (a flat object of
//! strings, numbers, booleans and enums), else as one `answer` field whose text is read as
//! JSON. Declining an approval refuses the call; declining a question ends it unanswered.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kestrel_core::tool::Tool;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{Value, json};

use super::primitives::AgentRunWaits;

/// How long a stateless call waits for its answer before it is forgotten.
pub const PENDING_TTL: Duration = Duration::from_secs(15 * 60);
/// The most stateless calls waiting for answers at once; past it the oldest is forgotten.
pub const MAX_PENDING: usize = 1024;
/// The most questions one call asks.
pub(crate) const MAX_ROUNDS: usize = 10;
/// The longest rendering of a call's arguments in a question.
const MAX_ARGS_SHOWN: usize = 2_000;

/// What a call waits for.
#[derive(Debug, Clone)]
pub(crate) enum Waits {
    /// An approval before the tool runs.
    Approval,
    /// An answer to what the tool suspended with.
    Suspended(Value),
}

/// How an answer's content becomes what the call goes on with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `{approve, reason}`.
    Approval,
    /// The content is the resume data.
    Content,
    /// `{answer}`, its text read as JSON (or kept as a string).
    Text,
}

/// A call waiting for its client's user.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    pub(crate) waits: Waits,
    form: Form,
    question: ElicitRequestParams,
    /// Questions asked so far, against [`MAX_ROUNDS`].
    pub(crate) rounds: usize,
}

/// How a call goes on once answered.
pub(crate) enum Answered {
    /// Approved: the tool runs.
    Approved,
    /// Resumed with `data`, after it suspended with `payload`.
    Resume { data: Value, payload: Value },
}

impl Pending {
    /// The question of `tool`'s call waiting on `waits`.
    pub(crate) fn new(tool: &dyn Tool, arguments: Value, waits: Waits, rounds: usize) -> Self {
        let (message, form, schema) = match &waits {
            Waits::Approval => (
                format!(
                    "Tool {:?} needs your approval to run with {}. Approve?",
                    tool.id(),
                    shown(&arguments)
                ),
                Form::Approval,
                approval_schema(),
            ),
            Waits::Suspended(payload) => {
                match serde_json::from_value::<AgentRunWaits>(payload.clone())
                    .ok()
                    .filter(|w| w.kind == AgentRunWaits::TYPE)
                {
                    Some(waits) if waits.approval => (
                        format!(
                            "Agent {:?} needs your approval to call tool {:?} with {}. Approve?",
                            waits.agent,
                            waits.tool_name,
                            shown(&waits.args)
                        ),
                        Form::Approval,
                        approval_schema(),
                    ),
                    Some(waits) => {
                        let message = message_of(
                            waits.suspend_payload.as_ref().unwrap_or(&Value::Null),
                            &waits.tool_name,
                        );
                        let (form, schema) = form_of(waits.resume_schema.as_ref());
                        (message, form, schema)
                    }
                    None => {
                        let (form, schema) = form_of(tool.resume_schema());
                        (message_of(payload, tool.id()), form, schema)
                    }
                }
            }
        };
        Self {
            tool: tool.id().to_owned(),
            arguments,
            waits,
            form,
            question: ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            },
            rounds,
        }
    }

    /// The question, as MCP carries it.
    pub(crate) fn question(&self) -> ElicitRequestParams {
        self.question.clone()
    }

    /// What `answer` means for the call; `Err` ends the call with that text.
    pub(crate) fn answered(&self, answer: ElicitResult) -> Result<Answered, String> {
        let content = match answer.action {
            ElicitationAction::Accept => answer.content.unwrap_or(Value::Null),
            _ if self.form == Form::Approval => json!({"approve": false}),
            _ => {
                return Err(format!(
                    "the user declined to answer tool {:?}'s question; it was not answered",
                    self.tool
                ));
            }
        };
        match (&self.waits, self.form) {
            (Waits::Approval, _) => {
                if content.get("approve").and_then(Value::as_bool) == Some(true) {
                    Ok(Answered::Approved)
                } else {
                    Err(match content.get("reason").and_then(Value::as_str) {
                        Some(reason) => format!(
                            "the user did not approve tool {:?}: {reason}; it was not run",
                            self.tool
                        ),
                        None => format!(
                            "the user did not approve tool {:?}; it was not run",
                            self.tool
                        ),
                    })
                }
            }
            // An agent's run decides its own call: a refusal is the run's to read.
            (Waits::Suspended(payload), Form::Approval) => Ok(Answered::Resume {
                data: json!({
                    "approved": content.get("approve").and_then(Value::as_bool) == Some(true),
                    "reason": content.get("reason").cloned().unwrap_or(Value::Null),
                }),
                payload: payload.clone(),
            }),
            (Waits::Suspended(payload), Form::Content) => Ok(Answered::Resume {
                data: content,
                payload: payload.clone(),
            }),
            (Waits::Suspended(payload), Form::Text) => {
                let text = content
                    .get("answer")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let data = serde_json::from_str(text).unwrap_or_else(|_| Value::from(text));
                Ok(Answered::Resume {
                    data,
                    payload: payload.clone(),
                })
            }
        }
    }
}

/// `value`'s JSON, cut to [`MAX_ARGS_SHOWN`] characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(MAX_ARGS_SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The question in a suspend payload: the payload when it is text, its `message`, `question`
/// or `prompt` when it has one, else the payload itself.
fn message_of(payload: &Value, tool: &str) -> String {
    if let Some(text) = payload.as_str() {
        return text.to_owned();
    }
    ["message", "question", "prompt"]
        .iter()
        .find_map(|key| payload.get(key).and_then(Value::as_str))
        .map_or_else(
            || format!("Tool {tool:?} needs your input: {}", shown(payload)),
            str::to_owned,
        )
}

fn approval_schema() -> ElicitationSchema {
    let schema = json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Approve", "description": "Run it?"},
            "reason": {"type": "string", "title": "Reason", "description": "Why (optional)"}
        },
        "required": ["approve"]
    });
    serde_json::from_value(schema).unwrap_or_else(|_| text_schema(None))
}

/// `{answer}`: one text field, read as JSON.
fn text_schema(expected: Option<&Value>) -> ElicitationSchema {
    let description = match expected {
        Some(schema) => format!("Your answer, as JSON of this shape: {}", shown(schema)),
        None => "Your answer (JSON, or text)".to_owned(),
    };
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Answer", "description": description}},
        "required": ["answer"]
    });
    serde_json::from_value(schema).unwrap_or_else(|_| ElicitationSchema::new(Default::default()))
}

/// The form a resume schema is asked with.
fn form_of(resume_schema: Option<&Value>) -> (Form, ElicitationSchema) {
    let Some(schema) = resume_schema else {
        return (Form::Text, text_schema(None));
    };
    // What a form carries: its properties and which are required.
    let mut form = json!({"type": "object", "properties": schema.get("properties").cloned().unwrap_or(json!({}))});
    if let Some(required) = schema.get("required") {
        form["required"] = required.clone();
    }
    match serde_json::from_value::<ElicitationSchema>(form) {
        Ok(form) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            (Form::Content, form)
        }
        _ => (Form::Text, text_schema(Some(schema))),
    }
}

/// Stateless calls waiting for their answers, by the `requestState` handed to the client (a
/// random id: a client cannot name another's call).
#[derive(Default)]
pub(crate) struct PendingCalls {
    calls: Mutex<HashMap<String, (Instant, Pending)>>,
}

impl PendingCalls {
    /// Keeps `pending`; the state to hand the client.
    pub(crate) fn put(&self, pending: Pending) -> String {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        calls.retain(|_, (at, _)| now.duration_since(*at) < PENDING_TTL);
        if calls.len() >= MAX_PENDING
            && let Some(oldest) = calls
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(state, _)| state.clone())
        {
            calls.remove(&oldest);
        }
        let state = kestrel_core::id::new_id();
        calls.insert(state.clone(), (now, pending));
        state
    }

    /// Takes the call `state` names, if it is still kept.
    pub(crate) fn take(&self, state: &str) -> Option<Pending> {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let (at, pending) = calls.remove(state)?;
        (at.elapsed() < PENDING_TTL).then_some(pending)
    }
}
