//! A server's question, asked through Kestrel's suspend and resume.
//!
//! An MCP server may ask the user something before a tool call can finish: in the stateless
//! era by answering `tools/call` with `input_required` (its questions, and a `requestState` to
//! echo), in the `initialize` era by sending `elicitation/create` while the call is in flight.
//! Either way the [`McpTool`](super::McpTool) suspends its call with an [`McpElicitation`]
//! (the `tool-call-suspended` event's payload): the run is saved and stops, and a person
//! answers in the Studio or through the API like any suspended tool, with MCP's own answer
//! shape, `{"action": "accept", "content": {...}}` (or `"decline"`, `"cancel"`).
//!
//! The resume makes the call again. A stateless server gets the answers and its state back
//! and goes on from where it asked. A server of the `initialize` era runs the tool again from
//! the start, and its questions are answered, in order, with the answers given so far: as
//! with any suspended tool, what the server did before it asked is done again.

use std::collections::BTreeMap;

use rmcp::model::{ElicitRequestParams, InputRequest, InputRequiredResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The most questions one call may ask; past them it fails (a server asking forever).
pub const MAX_QUESTIONS: usize = 10;

/// What an MCP tool's call suspends with when its server asks a question: the payload of its
/// `tool-call-suspended` event. Answer with [`ElicitResult`](rmcp::model::ElicitResult)'s
/// JSON: `{"action": "accept", "content": {...}}` (content matching
/// [`requested_schema`](Self::requested_schema)), `{"action": "decline"}` or
/// `{"action": "cancel"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct McpElicitation {
    /// Always [`McpElicitation::TYPE`], which tells this payload from other suspensions.
    #[serde(rename = "type")]
    pub kind: String,
    /// The server that asks.
    pub server: String,
    /// The tool it asks about (its name on the server).
    pub tool: String,
    /// The question, for a person.
    pub message: String,
    /// `form` (answer with content matching [`requested_schema`](Self::requested_schema)) or
    /// `url` (the person goes to [`url`](Self::url), then accepts or declines).
    pub mode: String,
    /// The shape of a form's answer (a flat object of primitives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    /// Where a `url` question sends the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Why the last answer was not taken, when it was not: the question is asked again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_answer: Vec<String>,
}

impl McpElicitation {
    /// The payload's `type`.
    pub const TYPE: &'static str = "mcp-elicitation";

    fn new(server: &str, tool: &str, question: ElicitRequestParams) -> Self {
        let (message, mode, requested_schema, url) = match question {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (
                message,
                "form",
                serde_json::to_value(requested_schema).ok(),
                None,
            ),
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                (message, "url", None, Some(url))
            }
            // A kind of question newer than this client: asked as MCP wrote it.
            other => {
                let raw = serde_json::to_value(&other).unwrap_or_default();
                let message = raw
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| raw.to_string(), str::to_owned);
                let mode = raw
                    .get("mode")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned();
                return Self {
                    kind: Self::TYPE.to_owned(),
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    message,
                    mode,
                    requested_schema: raw.get("requestedSchema").cloned(),
                    url: None,
                    invalid_answer: Vec::new(),
                };
            }
        };
        Self {
            kind: Self::TYPE.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            message,
            mode: mode.to_owned(),
            requested_schema,
            url,
            invalid_answer: Vec::new(),
        }
    }
}

/// Answers to give a server's questions before a person is asked, in order: put it in a
/// call's context (`ToolContext::with_extension(PresetAnswers(..))`) to answer questions known
/// in advance (a script, a test, `kestrel mcp call --answer`). Each is MCP's answer shape;
/// fields an `accept` leaves out take the form's defaults.
#[derive(Debug, Clone, Default)]
pub struct PresetAnswers(pub Vec<Value>);

/// The schema of an answer, the MCP tools' resume schema.
pub(crate) fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
            "content": {"type": "object"}
        },
        "required": ["action"]
    })
}

/// The whole suspend payload: the question, and where the call stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Suspended {
    #[serde(flatten)]
    pub(crate) question: McpElicitation,
    /// Kept for the resume; not for people.
    pub(crate) rounds: Rounds,
}

/// Where a call that asked stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Rounds {
    /// `initialize` era: the answers given so far, replayed in order to the server's
    /// questions when the call is made again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) answers: Vec<Value>,
    /// Stateless era: the server's questions of this round (as MCP wrote them), by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) requests: BTreeMap<String, Value>,
    /// Stateless era: the answers of this round so far, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) responses: BTreeMap<String, Value>,
    /// Stateless era: the server's state, echoed with the answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) request_state: Option<String>,
    /// Stateless era: the key of the question asked now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) asking: Option<String>,
    /// Questions asked in all, against [`MAX_QUESTIONS`].
    #[serde(default)]
    pub(crate) asked: usize,
}

impl Rounds {
    /// The rounds of a call resumed with `answer` after it suspended with `payload`, or why
    /// the answer is not taken (the question is asked again). `Ok(None)`: the payload is not
    /// an MCP question (the call starts afresh).
    pub(crate) fn resumed(payload: &Value, answer: &Value) -> Result<Option<Self>, Box<Suspended>> {
        let Ok(suspended) = serde_json::from_value::<Suspended>(payload.clone()) else {
            return Ok(None);
        };
        if suspended.question.kind != McpElicitation::TYPE {
            return Ok(None);
        }
        // What the person left out of a form takes the form's defaults (SEP-1034).
        let answer = &with_defaults(suspended.question.requested_schema.as_ref(), answer);
        let problems = answer_problems(&suspended.question, answer);
        if !problems.is_empty() {
            let mut again = Box::new(suspended);
            again.question.invalid_answer = problems;
            return Err(again);
        }
        let mut rounds = suspended.rounds;
        match rounds.asking.take() {
            Some(key) => {
                rounds.responses.insert(key, answer.clone());
            }
            None => rounds.answers.push(answer.clone()),
        }
        Ok(Some(rounds))
    }

    /// Takes a stateless server's `input_required` answer: its questions become this round's,
    /// those Kestrel answers itself are answered (roots: none). `Err` names a question
    /// Kestrel cannot answer.
    pub(crate) fn input_required(&mut self, result: InputRequiredResult) -> Result<(), String> {
        self.requests.clear();
        self.responses.clear();
        self.asking = None;
        self.request_state = result.request_state;
        for (key, request) in result.input_requests.unwrap_or_default() {
            match request {
                InputRequest::Elicitation(request) => {
                    let params = serde_json::to_value(request.params)
                        .map_err(|e| format!("question {key:?} does not serialize: {e}"))?;
                    self.requests.insert(key, params);
                }
                InputRequest::ListRoots(_) => {
                    // No roots: Kestrel exposes no file system to servers.
                    self.responses.insert(key, json!({"roots": []}));
                }
                InputRequest::CreateMessage(_) => {
                    return Err(format!(
                        "the server asked the client to sample a model (request {key:?}), which \
                         Kestrel does not offer"
                    ));
                }
                _ => {
                    return Err(format!(
                        "the server asked request {key:?}, of a kind Kestrel does not know"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Answers this round's unanswered stateless questions from `preset`, in order, while it
    /// has answers.
    pub(crate) fn answer_from(&mut self, preset: &mut std::collections::VecDeque<Value>) {
        let unanswered: Vec<(String, Value)> = self
            .requests
            .iter()
            .filter(|(key, _)| !self.responses.contains_key(*key))
            .map(|(key, params)| (key.clone(), params.clone()))
            .collect();
        for (key, params) in unanswered {
            let Some(answer) = preset.pop_front() else {
                return;
            };
            let schema = params.get("requestedSchema");
            self.responses.insert(key, with_defaults(schema, &answer));
        }
    }

    /// The next stateless question to ask a person, if one is unanswered.
    pub(crate) fn next_question(&mut self) -> Option<ElicitRequestParams> {
        let (key, params) = self
            .requests
            .iter()
            .find(|(key, _)| !self.responses.contains_key(*key))?;
        let question = serde_json::from_value(params.clone()).ok()?;
        self.asking = Some(key.clone());
        Some(question)
    }

    /// Whether a stateless round is in progress: its answers go back with the next call.
    pub(crate) fn stateless(&self) -> bool {
        self.request_state.is_some() || !self.requests.is_empty() || !self.responses.is_empty()
    }

    /// The suspend payload asking `question`, counting it.
    pub(crate) fn ask(
        mut self,
        server: &str,
        tool: &str,
        question: ElicitRequestParams,
    ) -> Result<Suspended, String> {
        self.asked += 1;
        if self.asked > MAX_QUESTIONS {
            return Err(format!(
                "MCP server {server:?} asked more than {MAX_QUESTIONS} questions in one call of \
                 {tool}"
            ));
        }
        Ok(Suspended {
            question: McpElicitation::new(server, tool, question),
            rounds: self,
        })
    }
}

/// The form a question asks for, as JSON.
pub(crate) fn requested_schema(question: &ElicitRequestParams) -> Option<Value> {
    match question {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => serde_json::to_value(requested_schema).ok(),
        _ => None,
    }
}

/// `answer` with the defaults of the fields of the form (`requested_schema`) that an `accept`
/// left out (SEP-1034).
pub(crate) fn with_defaults(requested_schema: Option<&Value>, answer: &Value) -> Value {
    let mut answer = answer.clone();
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return answer;
    }
    let Some(properties) = requested_schema
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
    else {
        return answer;
    };
    let Some(fields) = answer.as_object_mut() else {
        return answer;
    };
    let content = fields
        .entry("content")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(content) = content.as_object_mut() {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content
                    .entry(name.clone())
                    .or_insert_with(|| default.clone());
            }
        }
    }
    answer
}

/// What is wrong with `answer` to `question`: an `accept` of a form carries content of the
/// form's shape.
fn answer_problems(question: &McpElicitation, answer: &Value) -> Vec<String> {
    let action = answer.get("action").and_then(Value::as_str);
    if action != Some("accept") {
        return Vec::new();
    }
    match (&question.requested_schema, answer.get("content")) {
        (Some(schema), Some(content)) => kestrel_core::schema::schema_errors(schema, content),
        (Some(_), None) => vec!["an accepted form needs its content".to_owned()],
        (None, _) => Vec::new(),
    }
}
