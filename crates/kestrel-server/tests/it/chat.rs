//! The AI SDK chat route over a real socket: the UI message stream protocol (v5 and v6) checked
//! chunk by chunk on every stream of this file, the byte-exact fixtures of the AI SDK, approvals
//! (data parts, v6 approval requests and responses, denials), suspensions and resumes, stored
//! history equal to what the live stream showed, re-attaching, disconnects, bad bodies and auth.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ModelError, ModelEvent, ScriptStep, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::{ToolError, create_tool};
use kestrel_memory::Memory;
use kestrel_memory::kestrel_storage::{
    InMemoryStorage, MessageStatus, Selection, Storage, StorageRunStore,
};
use kestrel_server::Server;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The server under test

#[derive(Deserialize, JsonSchema)]
struct Email {
    to: String,
}

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

#[derive(Deserialize, JsonSchema)]
struct Question {
    topic: String,
}

#[derive(Deserialize, JsonSchema)]
struct Answer {
    answer: String,
}

struct Fixture {
    base: String,
    http: reqwest::Client,
    storage: Arc<InMemoryStorage>,
}

fn answered(req: &kestrel_core::model::ModelRequest) -> bool {
    req.messages.last().is_some_and(|m| m.role == Role::Tool)
}

/// Text streamed slowly: `n` deltas `"w<i> "`, `pause` apart.
fn slow_text(n: usize, pause: Duration) -> ScriptedResponse {
    let mut steps = Vec::new();
    for i in 0..n {
        steps.push(ScriptStep::Delay(pause));
        steps.push(ScriptStep::Event(ModelEvent::TextDelta {
            text: format!("w{i} "),
        }));
    }
    ScriptedResponse::steps(steps)
}

fn kestrel(memory: &Memory) -> Kestrel {
    let shared = memory.clone().shared();
    let echo = Agent::builder("echo")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text_deltas(["hello ", last.as_str()])
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    let weather = Agent::builder("weather")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Sunny.")
            } else {
                ScriptedResponse::default().and_text("Hello").and_tool_call(
                    "c1",
                    "weather",
                    json!({"city": "Paris"}).to_string(),
                )
            }
        })))
        .tool(
            create_tool("weather")
                .description("The weather of a city")
                .execute(|city: City, _ctx| async move {
                    Ok::<_, ToolError>(json!({"temp": 20, "city": city.city}))
                }),
        )
        .build()
        .unwrap();
    let send_email = create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(|email: Email, _ctx| async move {
            Ok::<_, ToolError>(format!("sent to {}", email.to))
        });
    let mailer = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Done.")
            } else {
                ScriptedResponse::default()
                    .and_text("Sending.")
                    .and_tool_call(
                        "call-1",
                        "send_email",
                        json!({"to": "bob@example.com"}).to_string(),
                    )
            }
        })))
        .tool(send_email.clone())
        .memory(shared.clone())
        .build()
        .unwrap();
    // Two calls that need approval in one step.
    let pair = Agent::builder("pair")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Both handled.")
            } else {
                ScriptedResponse::default()
                    .and_tool_call(
                        "c-a",
                        "send_email",
                        json!({"to": "a@example.com"}).to_string(),
                    )
                    .and_tool_call(
                        "c-b",
                        "send_email",
                        json!({"to": "b@example.com"}).to_string(),
                    )
            }
        })))
        .tool(send_email.clone())
        .memory(shared.clone())
        .build()
        .unwrap();
    // A supervisor whose sub-agent's tool needs approval.
    let helper = Agent::builder("helper")
        .description("Sends mail")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Mailed.")
            } else {
                ScriptedResponse::tool_call("h1", "send_email", json!({"to": "bob@example.com"}))
            }
        })))
        .tool(send_email.clone())
        .build()
        .unwrap();
    let supervisor = Agent::builder("supervisor")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("All done.")
            } else {
                ScriptedResponse::tool_call("d1", "agent-helper", json!({"prompt": "mail bob"}))
            }
        })))
        .agents([helper])
        .memory(shared.clone())
        .build()
        .unwrap();
    // Reasoning, then a call that needs approval, whose input does not stream (fixture B).
    let thinker = Agent::builder("thinker")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Deleted.")
            } else {
                ScriptedResponse::steps(vec![
                    ScriptStep::Event(ModelEvent::ReasoningDelta {
                        text: "think".into(),
                    }),
                    ScriptStep::Event(ModelEvent::ToolCall {
                        id: "c2".into(),
                        name: "del".into(),
                        input: json!({"id": "x"}).to_string(),
                    }),
                ])
            }
        })))
        .tool(
            create_tool("del")
                .description("Deletes")
                .require_approval(true)
                .execute(|_: HashMap<String, String>, _ctx| async move {
                    Ok::<_, ToolError>("deleted")
                }),
        )
        .build()
        .unwrap();
    let asker = Agent::builder("asker")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if answered(req) {
                ScriptedResponse::text("Thanks.")
            } else {
                ScriptedResponse::tool_call("ask-1", "ask", json!({"topic": "colour"}))
            }
        })))
        .tool(
            create_tool("ask")
                .description("Asks the person")
                .resume_type::<Answer>()
                .execute(|q: Question, ctx| async move {
                    match ctx.resume_data_as::<Answer>()? {
                        Some(a) => {
                            Ok::<_, ToolError>(json!({"topic": q.topic, "answer": a.answer}))
                        }
                        None => {
                            Err(ctx.suspend(json!({"question": format!("Which {}?", q.topic)})))
                        }
                    }
                }),
        )
        .memory(shared.clone())
        .build()
        .unwrap();
    let slow = Agent::builder("slow")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            slow_text(12, Duration::from_millis(60))
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    let broken = Agent::builder("broken")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::BadRequest {
                provider: "acme".into(),
                status: 400,
                message: "sk-secret-123 is not a valid key".into(),
            })
        })))
        .build()
        .unwrap();
    // Counts the answers in its context; its second call fails, the others answer.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flaky = Agent::builder("flaky")
        .model(Arc::new(ScriptedModel::from_fn(move |req| {
            let call = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if call == 1 {
                return ScriptedResponse::error(ModelError::BadRequest {
                    provider: "acme".into(),
                    status: 400,
                    message: "down".into(),
                });
            }
            let seen = req
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count();
            ScriptedResponse::text(format!("answer {call}, {seen} answers seen"))
        })))
        .memory(shared.clone())
        .build()
        .unwrap();
    Kestrel::builder()
        .run_store(Arc::new(StorageRunStore::new(memory.storage().clone())))
        .agent(flaky)
        .agent(echo)
        .agent(weather)
        .agent(mailer)
        .agent(pair)
        .agent(supervisor)
        .agent(thinker)
        .agent(asker)
        .agent(slow)
        .agent(broken)
        .build()
        .unwrap()
}

async fn start(configure: impl FnOnce(Server) -> Server) -> Fixture {
    let storage = Arc::new(InMemoryStorage::new());
    let memory = Memory::new(storage.clone());
    let kestrel = kestrel(&memory);
    let server = configure(Server::new(kestrel).memory(memory));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        storage,
    }
}

impl Fixture {
    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.post_as(None, path, body).await
    }

    async fn post_as(&self, token: Option<&str>, path: &str, body: Value) -> reqwest::Response {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }

    async fn get_as(&self, token: Option<&str>, path: &str) -> reqwest::Response {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }

    /// The stored UI history of a chat.
    async fn history(&self, agent: &str, chat: &str, version: &str) -> Vec<Value> {
        let response = self
            .get_as(
                None,
                &format!("/chat/{agent}/{chat}/messages?version={version}"),
            )
            .await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        body["uiMessages"].as_array().unwrap().clone()
    }
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

/// A `useChat` submit body.
fn submit(chat: &str, text: &str, version: &str) -> Value {
    json!({
        "id": chat,
        "messages": [user(&format!("{chat}-u1"), text)],
        "trigger": "submit-message",
        "version": version,
    })
}

async fn error_of(response: reqwest::Response, status: u16, code: &str) -> String {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

// ---------------------------------------------------------------------------------------------
// The protocol, as a client checks it

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V {
    V5,
    V6,
}

impl V {
    fn name(self) -> &'static str {
        match self {
            V::V5 => "v5",
            V::V6 => "v6",
        }
    }
}

/// The fields a chunk type has (required, optional) in a version; `None` for a type the
/// version does not know.
fn fields(kind: &str, v: V) -> Option<(&'static [&'static str], &'static [&'static str])> {
    const PM: &str = "providerMetadata";
    Some(match kind {
        "start" => (&[], &["messageId", "messageMetadata"]),
        "start-step" | "finish-step" => (&[], &[]),
        "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => (&["id"], &[PM]),
        "text-delta" | "reasoning-delta" => (&["id", "delta"], &[PM]),
        "tool-input-start" => (
            &["toolCallId", "toolName"],
            &[
                "providerExecuted",
                PM,
                "dynamic",
                "title",
                "inputEncoding",
                "toolMetadata",
            ],
        ),
        "tool-input-delta" => (&["toolCallId", "inputTextDelta"], &[]),
        "tool-input-available" => (
            &["toolCallId", "toolName", "input"],
            &["providerExecuted", PM, "dynamic", "title", "toolMetadata"],
        ),
        "tool-input-error" => (
            &["toolCallId", "toolName", "input", "errorText"],
            &["providerExecuted", PM, "dynamic", "title"],
        ),
        "tool-approval-request" if v == V::V6 => (
            &["approvalId", "toolCallId"],
            &["approvalDescriptor", "inputSchemaInput", "signature"],
        ),
        "tool-output-available" => (
            &["toolCallId", "output"],
            &[
                "providerExecuted",
                PM,
                "dynamic",
                "preliminary",
                "toolMetadata",
            ],
        ),
        "tool-output-error" => (
            &["toolCallId", "errorText"],
            &["providerExecuted", PM, "dynamic", "toolMetadata"],
        ),
        "tool-output-denied" if v == V::V6 => (&["toolCallId"], &[]),
        "finish" if v == V::V6 => (&[], &["finishReason", "messageMetadata"]),
        "finish" => (&[], &["messageMetadata"]),
        "error" => (&["errorText"], &[]),
        "abort" => (&[], &["reason"]),
        "message-metadata" => (&["messageMetadata"], &[]),
        "source-url" => (&["sourceId", "url"], &["title", PM]),
        "source-document" => (&["sourceId", "mediaType", "title"], &["filename", PM]),
        "file" => (&["url", "mediaType"], &[PM]),
        k if k.starts_with("data-") => (&["data"], &["id", "transient"]),
        _ => return None,
    })
}

/// Checks every rule of the protocol on one stream's chunks. `known` are the tool calls the
/// message already has (a continuation's), `continuation` whether the stream continues one.
#[allow(clippy::collapsible_match)] // one arm per chunk type reads as the protocol's rules
fn validate(chunks: &[Value], v: V, known: &HashSet<String>) {
    let fail = |i: usize, why: &str| -> ! {
        panic!("chunk {i} ({}): {why}\nstream: {chunks:#?}", chunks[i])
    };
    assert!(!chunks.is_empty(), "an empty stream");
    let mut calls: HashSet<String> = known.clone();
    let mut streaming: HashSet<String> = HashSet::new();
    let mut available: HashSet<String> = known.clone();
    let mut open_text: HashSet<String> = HashSet::new();
    let mut open_reasoning: HashSet<String> = HashSet::new();
    let mut step_open = false;
    for (i, chunk) in chunks.iter().enumerate() {
        let Some(object) = chunk.as_object() else {
            fail(i, "not an object")
        };
        let Some(kind) = object.get("type").and_then(Value::as_str) else {
            fail(i, "no type")
        };
        let Some((required, optional)) = fields(kind, v) else {
            fail(i, &format!("{kind:?} is not a {} chunk type", v.name()))
        };
        for field in required {
            if !object.contains_key(*field) {
                fail(i, &format!("missing {field}"));
            }
        }
        for key in object.keys() {
            if key != "type"
                && !required.contains(&key.as_str())
                && !optional.contains(&key.as_str())
            {
                fail(i, &format!("unexpected field {key}"));
            }
        }
        for key in [
            "id",
            "toolCallId",
            "toolName",
            "delta",
            "errorText",
            "approvalId",
            "messageId",
        ] {
            if let Some(value) = object.get(key)
                && !value.is_string()
            {
                fail(i, &format!("{key} must be a string"));
            }
        }
        if (i == 0) != (kind == "start") {
            fail(i, "start comes first, once");
        }
        let terminal = matches!(kind, "finish" | "error" | "abort");
        if terminal != (i == chunks.len() - 1) {
            fail(i, "one finish, error or abort ends the stream");
        }
        let id = object
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let call = object
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind {
            "start-step" => {
                if step_open {
                    fail(i, "start-step inside a step");
                }
                step_open = true;
            }
            "finish-step" => {
                if !step_open {
                    fail(i, "finish-step without start-step");
                }
                if !open_text.is_empty() || !open_reasoning.is_empty() {
                    fail(i, "a step ends with open text or reasoning");
                }
                step_open = false;
            }
            "text-start" | "text-delta" | "text-end" | "reasoning-start" | "reasoning-delta"
            | "reasoning-end" => {
                let (part, phase) = kind.split_once('-').unwrap();
                let open = if part == "text" {
                    &mut open_text
                } else {
                    &mut open_reasoning
                };
                match phase {
                    "start" if !step_open || !open.insert(id.clone()) => {
                        fail(i, "a part starts outside a step or twice")
                    }
                    "delta" | "end" if !open.contains(&id) => fail(i, "a part before its start"),
                    "end" => {
                        open.remove(&id);
                    }
                    _ => {}
                }
            }
            "tool-input-start" => {
                if !step_open || !calls.insert(call.clone()) {
                    fail(i, "tool-input-start outside a step or for a known call");
                }
                streaming.insert(call);
            }
            "tool-input-delta" => {
                if !streaming.contains(&call) {
                    fail(i, "tool-input-delta before tool-input-start");
                }
            }
            "tool-input-available" => {
                if !step_open && !calls.contains(&call) {
                    fail(i, "a new call outside a step");
                }
                if !available.insert(call.clone()) {
                    fail(i, "tool-input-available twice");
                }
                calls.insert(call.clone());
                streaming.remove(&call);
            }
            "tool-approval-request" => {
                if !available.contains(&call) {
                    fail(i, "tool-approval-request before tool-input-available");
                }
                let approval = object["approvalId"].as_str().unwrap_or_default();
                if !approval.ends_with(&format!("::{call}")) {
                    fail(i, "approvalId is not <runId>::<toolCallId>");
                }
            }
            "tool-output-available" | "tool-output-error" | "tool-output-denied" => {
                if !available.contains(&call) {
                    fail(i, "tool output for a call the message does not have");
                }
            }
            "finish" | "error" | "abort" => {
                if step_open || !open_text.is_empty() || !open_reasoning.is_empty() {
                    fail(i, "the message ends inside a step or a part");
                }
                if let Some(reason) = object.get("finishReason")
                    && ![
                        "stop",
                        "length",
                        "content-filter",
                        "tool-calls",
                        "error",
                        "other",
                    ]
                    .contains(&reason.as_str().unwrap_or_default())
                {
                    fail(i, "unknown finishReason");
                }
            }
            k if k.starts_with("data-") => {
                if let Some(transient) = object.get("transient")
                    && !transient.is_boolean()
                {
                    fail(i, "transient must be a boolean");
                }
            }
            _ => {}
        }
    }
}

#[test]
fn the_validator_refuses_what_a_client_would_reject() {
    let turn = || {
        vec![
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "hi"}),
            json!({"type": "text-end", "id": "t"}),
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}}),
            json!({"type": "tool-output-available", "toolCallId": "c", "output": 1}),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ]
    };
    let refused = |chunks: Vec<Value>, v: V| {
        std::panic::catch_unwind(|| validate(&chunks, v, &HashSet::new())).is_err()
    };
    assert!(!refused(turn(), V::V5));
    assert!(!refused(turn(), V::V6));
    type Breaks = Box<dyn Fn(&mut Vec<Value>)>;
    let broken: Vec<(&str, Breaks, V)> = vec![
        (
            "no start",
            Box::new(|c| {
                c.remove(0);
            }),
            V::V5,
        ),
        ("delta before start", Box::new(|c| c.swap(2, 3)), V::V5),
        (
            "output of an unknown call",
            Box::new(|c| {
                c.remove(5);
            }),
            V::V5,
        ),
        (
            "finish not last",
            Box::new(|c| c.push(json!({"type": "start-step"}))),
            V::V5,
        ),
        (
            "a step left open",
            Box::new(|c| {
                c.remove(7);
            }),
            V::V5,
        ),
        (
            "text left open",
            Box::new(|c| {
                c.remove(4);
            }),
            V::V5,
        ),
        (
            "v6 chunk in v5",
            Box::new(|c| {
                c.insert(6, json!({"type": "tool-approval-request", "approvalId": "r::c", "toolCallId": "c"}))
            }),
            V::V5,
        ),
        (
            "finishReason in v5",
            Box::new(|c| c[8] = json!({"type": "finish", "finishReason": "stop"})),
            V::V5,
        ),
        (
            "unknown type",
            Box::new(|c| c.insert(1, json!({"type": "custom", "data": 1}))),
            V::V6,
        ),
        (
            "unexpected field",
            Box::new(|c| c[3]["text"] = json!("hi")),
            V::V6,
        ),
        (
            "missing field",
            Box::new(|c| {
                c[6].as_object_mut().unwrap().remove("output");
            }),
            V::V6,
        ),
        (
            "a bad approval id",
            Box::new(|c| {
                c.insert(
                    6,
                    json!({"type": "tool-approval-request", "approvalId": "r", "toolCallId": "c"}),
                )
            }),
            V::V6,
        ),
    ];
    for (why, breaks, v) in broken {
        let mut chunks = turn();
        breaks(&mut chunks);
        assert!(refused(chunks, v), "accepted: {why}");
    }
}

/// A stream as read: the raw body, and its chunks.
struct UiStream {
    raw: String,
    chunks: Vec<Value>,
}

impl UiStream {
    fn types(&self) -> Vec<&str> {
        self.chunks
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect()
    }

    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.chunks.iter().filter(|c| c["type"] == kind).collect()
    }

    fn message_id(&self) -> String {
        self.chunks[0]["messageId"].as_str().unwrap().to_owned()
    }
}

/// Reads a UI message stream response, checking headers, framing and every chunk.
async fn read_stream(response: reqwest::Response, v: V, known: &[&str]) -> UiStream {
    read_rest(response, String::new(), v, known).await
}

/// [`read_stream`] of a response whose first bytes (`seen`) were read already.
async fn read_rest(response: reqwest::Response, seen: String, v: V, known: &[&str]) -> UiStream {
    assert_eq!(response.status(), 200, "{:?}", response.headers());
    let headers = response.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{headers:?}"
    );
    assert_eq!(headers["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-accel-buffering"], "no");
    let raw = seen + &response.text().await.unwrap();
    let chunks = parse_frames(&raw);
    let known: HashSet<String> = known.iter().map(|s| s.to_string()).collect();
    validate(&chunks, v, &known);
    UiStream { raw, chunks }
}

/// The chunks of an SSE body: `data: <json>\n\n` frames (comments ignored), `[DONE]` last.
fn parse_frames(raw: &str) -> Vec<Value> {
    assert!(
        raw.ends_with("data: [DONE]\n\n"),
        "the stream ends with [DONE]: {raw}"
    );
    let frames: Vec<&str> = raw
        .split("\n\n")
        .filter(|f| !f.is_empty() && !f.starts_with(':'))
        .collect();
    let (done, frames) = frames.split_last().unwrap();
    assert_eq!(*done, "data: [DONE]");
    frames
        .iter()
        .map(|frame| {
            assert!(!frame.contains('\n'), "one data line per frame: {frame:?}");
            let data = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
        })
        .collect()
}

/// The message parts a client builds from chunks (AI SDK's `processUIMessageStream`), starting
/// from `parts` (a continued message's).
fn reduce(mut parts: Vec<Value>, chunks: &[Value]) -> Vec<Value> {
    fn tool<'a>(parts: &'a mut [Value], call: &Value) -> &'a mut Value {
        parts
            .iter_mut()
            .find(|p| p["toolCallId"] == *call && p["type"].as_str().unwrap().starts_with("tool-"))
            .unwrap_or_else(|| panic!("No tool invocation found for {call}"))
    }
    let mut text: HashMap<String, usize> = HashMap::new();
    let mut reasoning: HashMap<String, usize> = HashMap::new();
    for chunk in chunks {
        let kind = chunk["type"].as_str().unwrap();
        match kind {
            "start-step" => parts.push(json!({"type": "step-start"})),
            "finish-step" => {
                text.clear();
                reasoning.clear();
            }
            "text-start" => {
                text.insert(chunk["id"].as_str().unwrap().into(), parts.len());
                parts.push(json!({"type": "text", "text": "", "state": "streaming"}));
            }
            "text-delta" => {
                let part = &mut parts[text[chunk["id"].as_str().unwrap()]];
                let joined = format!(
                    "{}{}",
                    part["text"].as_str().unwrap(),
                    chunk["delta"].as_str().unwrap()
                );
                part["text"] = json!(joined);
            }
            "text-end" => parts[text[chunk["id"].as_str().unwrap()]]["state"] = json!("done"),
            "reasoning-start" => {
                reasoning.insert(chunk["id"].as_str().unwrap().into(), parts.len());
                parts.push(json!({"type": "reasoning", "text": "", "state": "streaming"}));
            }
            "reasoning-delta" => {
                let part = &mut parts[reasoning[chunk["id"].as_str().unwrap()]];
                let joined = format!(
                    "{}{}",
                    part["text"].as_str().unwrap(),
                    chunk["delta"].as_str().unwrap()
                );
                part["text"] = json!(joined);
            }
            "reasoning-end" => {
                parts[reasoning[chunk["id"].as_str().unwrap()]]["state"] = json!("done")
            }
            "tool-input-start" => parts.push(json!({
                "type": format!("tool-{}", chunk["toolName"].as_str().unwrap()),
                "toolCallId": chunk["toolCallId"],
                "state": "input-streaming",
            })),
            "tool-input-delta" => {}
            "tool-input-available" => {
                let exists = parts.iter().any(|p| p["toolCallId"] == chunk["toolCallId"]);
                if !exists {
                    parts.push(json!({
                        "type": format!("tool-{}", chunk["toolName"].as_str().unwrap()),
                        "toolCallId": chunk["toolCallId"],
                    }));
                }
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("input-available");
                part["input"] = chunk["input"].clone();
            }
            "tool-approval-request" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("approval-requested");
                part["approval"] = json!({"id": chunk["approvalId"]});
            }
            "tool-output-available" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("output-available");
                part["output"] = chunk["output"].clone();
            }
            "tool-output-error" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("output-error");
                part["errorText"] = chunk["errorText"].clone();
            }
            "tool-output-denied" => {
                tool(&mut parts, &chunk["toolCallId"])["state"] = json!("output-denied");
            }
            k if k.starts_with("data-") => {
                if chunk["transient"] == true {
                    continue;
                }
                let mut part = json!({"type": k, "data": chunk["data"]});
                if let Some(id) = chunk.get("id") {
                    part["id"] = id.clone();
                    if let Some(same) = parts.iter_mut().find(|p| p["type"] == k && p["id"] == *id)
                    {
                        *same = part;
                        continue;
                    }
                }
                parts.push(part);
            }
            _ => {}
        }
    }
    parts
}

// ---------------------------------------------------------------------------------------------
// Streams and the fixtures

#[tokio::test]
async fn a_text_turn_streams_in_both_versions() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("text-{}", v.name());
        let stream = read_stream(
            f.post("/chat/echo", submit(&chat, "Ada", v.name())).await,
            v,
            &[],
        )
        .await;
        assert_eq!(
            stream.types(),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        let text: String = stream
            .of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "hello Ada");
        match v {
            V::V5 => assert_eq!(stream.chunks.last().unwrap(), &json!({"type": "finish"})),
            V::V6 => assert_eq!(
                stream.chunks.last().unwrap(),
                &json!({"type": "finish", "finishReason": "stop"})
            ),
        }
        // The stored history is the conversation, with the streamed message id.
        let history = f.history("echo", &chat, v.name()).await;
        assert_eq!(history.len(), 2);
        assert_eq!(history[0], user(&format!("{chat}-u1"), "Ada"));
        assert_eq!(history[1]["id"], stream.message_id());
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &stream.chunks))
        );
    }
}

#[tokio::test]
async fn a_regeneration_replaces_the_stored_answer() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/echo", submit("regen", "Ada", "v6")).await,
        V::V6,
        &[],
    )
    .await;
    // useChat's regenerate(): the messages up to the user's, and the answer it replaces.
    let body = json!({
        "id": "regen",
        "messages": [user("regen-u1", "Ada")],
        "trigger": "regenerate-message",
        "messageId": first.message_id(),
        "version": "v6",
    });
    let again = read_stream(f.post("/chat/echo", body).await, V::V6, &[]).await;
    assert_ne!(again.message_id(), first.message_id());
    let history = f.history("echo", "regen", "v6").await;
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[0], user("regen-u1", "Ada"));
    assert_eq!(history[1]["id"], again.message_id());
    assert_eq!(
        history[1]["parts"],
        json!(reduce(Vec::new(), &again.chunks))
    );
}

#[tokio::test]
async fn a_failed_regeneration_keeps_the_history_and_a_good_one_replaces_the_answer() {
    let f = start(|s| {
        s.resource_token("tok-a", "alice")
            .resource_token("tok-b", "bob")
    })
    .await;
    let first = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", submit("flaky", "Hi", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let history_of = || async {
        let response = f
            .get_as(Some("tok-a"), "/chat/flaky/flaky/messages?version=v6")
            .await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        body["uiMessages"].as_array().unwrap().clone()
    };
    let before = history_of().await;
    assert_eq!(before.len(), 2);
    let regenerate = json!({
        "id": "flaky",
        "messages": [user("flaky-u1", "Hi")],
        "trigger": "regenerate-message",
        "messageId": first.message_id(),
        "version": "v6",
    });
    // The model fails this time: the answer it would have replaced is still there.
    let failed = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", regenerate.clone())
            .await,
        V::V6,
        &[],
    )
    .await;
    assert!(failed.types().contains(&"error"), "{}", failed.raw);
    assert_eq!(
        history_of().await,
        before,
        "a failed regenerate changed the history"
    );
    // Another resource's caller cannot regenerate (nor learn of) this thread.
    let foreign = f.post_as(Some("tok-b"), "/chat/flaky", {
        let mut body = regenerate.clone();
        body["memory"] = json!({"thread": "flaky", "resource": "bob"});
        body
    });
    let message = error_of(foreign.await, 404, "not_found").await;
    assert!(message.contains("not found"), "{message}");
    assert_eq!(history_of().await, before);
    // It works the next time: the new answer replaces the old one, which the model did not
    // see (no answer in its context).
    let again = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", regenerate).await,
        V::V6,
        &[],
    )
    .await;
    let text: String = again
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "answer 2, 0 answers seen");
    let after = history_of().await;
    assert_eq!(after.len(), 2, "{after:#?}");
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1]["id"], again.message_id());
}

/// Replaces the ids Kestrel chose with the fixture's, in the raw body: the bytes are otherwise
/// compared as they are.
fn with_ids(raw: &str, ids: &[(&str, &str)]) -> String {
    let mut raw = raw.to_owned();
    for (ours, theirs) in ids {
        raw = raw.replace(ours, theirs);
    }
    raw
}

#[tokio::test]
async fn a_tool_turn_matches_fixture_a_byte_for_byte() {
    let f = start(|s| s).await;
    for v in [V::V6, V::V5] {
        let mut body = submit("fixture-a", "weather?", v.name());
        // One step, as the fixture's mock model took.
        body["maxSteps"] = json!(1);
        let stream = read_stream(f.post("/chat/weather", body).await, v, &[]).await;
        let message_id = stream.message_id();
        let text_id = stream.of_type("text-start")[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        // The message id is also the text part's: name the start's alone first.
        let raw = stream.raw.replacen(
            &format!("\"messageId\":\"{message_id}\""),
            "\"messageId\":\"msg_1\"",
            1,
        );
        let raw = with_ids(&raw, &[(&text_id, "t1")]);
        // serde_json writes object keys sorted, so the tool's output reads {"city","temp"}
        // where the fixture's JavaScript object kept {"temp","city"}: the one difference.
        let finish = match v {
            V::V6 => r#"{"type":"finish","finishReason":"tool-calls"}"#,
            V::V5 => r#"{"type":"finish"}"#,
        };
        let fixture = format!(
            "data: {{\"type\":\"start\",\"messageId\":\"msg_1\"}}\n\n\
             data: {{\"type\":\"start-step\"}}\n\n\
             data: {{\"type\":\"text-start\",\"id\":\"t1\"}}\n\n\
             data: {{\"type\":\"text-delta\",\"id\":\"t1\",\"delta\":\"Hello\"}}\n\n\
             data: {{\"type\":\"text-end\",\"id\":\"t1\"}}\n\n\
             data: {{\"type\":\"tool-input-start\",\"toolCallId\":\"c1\",\"toolName\":\"weather\"}}\n\n\
             data: {{\"type\":\"tool-input-delta\",\"toolCallId\":\"c1\",\"inputTextDelta\":\"{{\\\"city\\\":\\\"Paris\\\"}}\"}}\n\n\
             data: {{\"type\":\"tool-input-available\",\"toolCallId\":\"c1\",\"toolName\":\"weather\",\"input\":{{\"city\":\"Paris\"}}}}\n\n\
             data: {{\"type\":\"tool-output-available\",\"toolCallId\":\"c1\",\"output\":{{\"city\":\"Paris\",\"temp\":20}}}}\n\n\
             data: {{\"type\":\"finish-step\"}}\n\n\
             data: {finish}\n\n\
             data: [DONE]\n\n"
        );
        assert_eq!(raw, fixture, "{}", v.name());
    }
}

#[tokio::test]
async fn an_approval_matches_fixture_b_in_v6() {
    let f = start(|s| s).await;
    let stream = read_stream(
        f.post("/chat/thinker", submit("fixture-b", "delete x", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let message_id = stream.message_id();
    let reasoning_id = stream.of_type("reasoning-start")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approval = stream.of_type("tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = approval.strip_suffix("::c2").unwrap().to_owned();
    // Kestrel adds the data part Mastra sends (the fixture, from the AI SDK alone, has none),
    // and always streams a call's input (its driver announces every call with
    // `tool-call-input-streaming-start` and a delta), which the fixture's mock did not.
    let data = stream.of_type("data-tool-call-approval")[0].clone();
    assert_eq!(data["id"], "c2");
    assert_eq!(data["data"]["runId"], json!(run_id));
    assert_eq!(data["data"]["state"], "data-tool-call-approval");
    assert_eq!(data["data"]["args"], json!({"id": "x"}));
    let raw: String = stream
        .raw
        .split_inclusive("\n\n")
        .filter(|frame| {
            !frame.contains("data-tool-call-approval")
                && !frame.contains("\"tool-input-start\"")
                && !frame.contains("\"tool-input-delta\"")
        })
        .collect();
    let raw = raw.replacen(
        &format!("\"messageId\":\"{message_id}\""),
        "\"messageId\":\"msg_2\"",
        1,
    );
    let raw = with_ids(
        &raw,
        &[
            (&reasoning_id, "r1"),
            (&approval, "aitxt-ubG65u51h75lMvQPTjqCi3b8"),
        ],
    );
    // The fixture's finish also carried the `messageMetadata` its test asked for.
    let fixture = [
        r#"{"type":"start","messageId":"msg_2"}"#,
        r#"{"type":"start-step"}"#,
        r#"{"type":"reasoning-start","id":"r1"}"#,
        r#"{"type":"reasoning-delta","id":"r1","delta":"think"}"#,
        r#"{"type":"reasoning-end","id":"r1"}"#,
        r#"{"type":"tool-input-available","toolCallId":"c2","toolName":"del","input":{"id":"x"}}"#,
        r#"{"type":"tool-approval-request","approvalId":"aitxt-ubG65u51h75lMvQPTjqCi3b8","toolCallId":"c2"}"#,
        r#"{"type":"finish-step"}"#,
        r#"{"type":"finish","finishReason":"tool-calls"}"#,
        "[DONE]",
    ]
    .map(|frame| format!("data: {frame}\n\n"))
    .concat();
    assert_eq!(raw, fixture);
}

#[tokio::test]
async fn a_failed_run_ends_with_an_error_chunk_without_the_provider_text() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let stream = read_stream(
            f.post("/chat/broken", submit("broken", "hi", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        // Fixture C's error frame, byte for byte (with Kestrel's own message).
        assert!(
            stream
                .raw
                .ends_with("data: {\"type\":\"error\",\"errorText\":\"The model provider failed.\"}\n\ndata: [DONE]\n\n"),
            "{}",
            stream.raw
        );
        assert!(!stream.raw.contains("sk-secret"), "{}", stream.raw);
    }
}

// ---------------------------------------------------------------------------------------------
// Approvals and suspensions

/// The data part of a stopped call, and its run id.
fn stopped_call(stream: &UiStream, kind: &str) -> (Value, String) {
    let data = stream.of_type(kind)[0].clone();
    let run_id = data["data"]["runId"].as_str().unwrap().to_owned();
    (data, run_id)
}

#[tokio::test]
async fn a_v5_approval_is_a_data_part_and_resume_data_approves_it() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/mailer", submit("v5-approve", "mail bob", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    assert!(first.of_type("tool-approval-request").is_empty(), "v6 only");
    let (data, run_id) = stopped_call(&first, "data-tool-call-approval");
    assert_eq!(data["id"], "call-1");
    assert_eq!(data["data"]["toolName"], "send_email");
    assert_eq!(data["data"]["args"], json!({"to": "bob@example.com"}));
    assert!(
        data["data"]["resumeSchema"]
            .as_str()
            .unwrap()
            .contains("approved")
    );
    assert_eq!(
        first.types()[first.chunks.len() - 2..],
        ["finish-step", "finish"]
    );

    // Seed 001's handleResume: sendMessage(undefined, {body: {runId, resumeData}}).
    let body = json!({
        "id": "v5-approve",
        "messages": [],
        "trigger": "submit-message",
        "runId": run_id,
        "resumeData": {"approved": true},
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V5, &["call-1"]).await;
    // The same assistant message goes on.
    assert_eq!(next.message_id(), first.message_id());
    let resolved = next.of_type("data-tool-call-approval")[0];
    assert_eq!(resolved["id"], "call-1");
    assert_eq!(resolved["data"]["resumed"], true);
    assert_eq!(resolved["data"]["approved"], true);
    assert_eq!(
        next.of_type("tool-output-available")[0]["output"],
        "sent to bob@example.com"
    );
    let text: String = next
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Done.");
    // A second answer finds nothing waiting.
    let again = json!({"id": "v5-approve", "messages": [], "runId": run_id, "resumeData": {"approved": true}});
    error_of(f.post("/chat/mailer", again).await, 409, "not_suspended").await;
}

/// The last assistant message after a stream, with a v6 approval answered in it.
fn answered_message(id: &str, parts: &[Value], approved: bool, reason: Option<&str>) -> Value {
    let mut parts = parts.to_vec();
    let part = parts
        .iter_mut()
        .find(|p| p["state"] == "approval-requested")
        .unwrap();
    part["state"] = json!("approval-responded");
    part["approval"]["approved"] = json!(approved);
    if let Some(reason) = reason {
        part["approval"]["reason"] = json!(reason);
    }
    json!({"id": id, "role": "assistant", "parts": parts})
}

#[tokio::test]
async fn a_v6_approval_round_trips_through_the_message_parts() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/mailer", submit("v6-approve", "mail bob", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let request = first.of_type("tool-approval-request")[0].clone();
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    assert_eq!(request["approvalId"], json!(format!("{run_id}::call-1")));
    // The approval request comes between the call and the data part.
    let order: Vec<&str> = first.types();
    let at = |t: &str| order.iter().position(|x| *x == t).unwrap();
    assert!(at("tool-input-available") < at("tool-approval-request"));
    assert!(at("tool-approval-request") < at("data-tool-call-approval"));

    let parts = reduce(Vec::new(), &first.chunks);
    let body = json!({
        "id": "v6-approve",
        "messages": [user("v6-approve-u1", "mail bob"), answered_message(&first.message_id(), &parts, true, None)],
        "trigger": "submit-message",
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V6, &["call-1"]).await;
    assert_eq!(next.message_id(), first.message_id());
    assert_eq!(
        next.of_type("tool-output-available")[0]["toolCallId"],
        "call-1"
    );
    let parts = reduce(parts, &next.chunks);
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap();
    assert_eq!(tool["state"], "output-available");
}

#[tokio::test]
async fn a_v6_decline_ends_in_tool_output_denied_and_v5_in_an_error() {
    let f = start(|s| s).await;
    // v6: declined in the message parts.
    let first = read_stream(
        f.post("/chat/mailer", submit("v6-decline", "mail bob", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let parts = reduce(Vec::new(), &first.chunks);
    let body = json!({
        "id": "v6-decline",
        "messages": [answered_message(&first.message_id(), &parts, false, Some("not now"))],
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/mailer", body).await, V::V6, &["call-1"]).await;
    assert_eq!(
        next.of_type("tool-output-denied")[0],
        &json!({"type": "tool-output-denied", "toolCallId": "call-1"})
    );
    assert!(next.of_type("tool-output-error").is_empty());
    let resolved = next.of_type("data-tool-call-approval")[0];
    assert_eq!(resolved["data"]["approved"], false);
    let parts = reduce(parts, &next.chunks);
    assert_eq!(
        parts
            .iter()
            .find(|p| p["type"] == "tool-send_email")
            .unwrap()["state"],
        "output-denied"
    );
    // The stored history shows the denial too, with the reason (v5 has no denied state: an
    // error with the reason).
    let stored = f.history("mailer", "v6-decline", "v6").await;
    let tool = stored.last().unwrap()["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap()
        .clone();
    assert_eq!(tool["state"], "output-denied", "{tool}");
    assert_eq!(tool["approval"]["approved"], false);
    assert_eq!(tool["approval"]["reason"], "not now");
    let stored_v5 = f.history("mailer", "v6-decline", "v5").await;
    let tool_v5 = stored_v5.last().unwrap()["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-send_email")
        .unwrap()
        .clone();
    assert_eq!(tool_v5["state"], "output-error", "{tool_v5}");
    assert_eq!(tool_v5["errorText"], "not now");

    // v5: declined with resumeData; the model reads the reason.
    let first = read_stream(
        f.post("/chat/mailer", submit("v5-decline", "mail bob", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let body = json!({"id": "v5-decline", "messages": [], "runId": run_id, "resumeData": {"approved": false, "reason": "not now"}});
    let next = read_stream(f.post("/chat/mailer", body).await, V::V5, &["call-1"]).await;
    assert_eq!(next.of_type("tool-output-error")[0]["errorText"], "not now");
}

#[tokio::test]
async fn several_v6_approvals_answered_at_once_are_all_decided() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/pair", submit("pair", "mail both", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    assert_eq!(first.of_type("tool-approval-request").len(), 2);
    assert_eq!(first.of_type("data-tool-call-approval").len(), 2);
    // The stored history shows both, as the stream did.
    let history = f.history("pair", "pair", "v6").await;
    let parts = reduce(Vec::new(), &first.chunks);
    assert_eq!(history[1]["parts"], json!(parts));

    // One approved, one declined, in one message.
    let mut answered = parts.clone();
    for part in answered
        .iter_mut()
        .filter(|p| p["state"] == "approval-requested")
    {
        let approve = part["toolCallId"] == "c-a";
        part["state"] = json!("approval-responded");
        part["approval"]["approved"] = json!(approve);
    }
    let body = json!({
        "id": "pair",
        "messages": [{"id": first.message_id(), "role": "assistant", "parts": answered}],
        "version": "v6",
    });
    let next = read_stream(f.post("/chat/pair", body).await, V::V6, &["c-a", "c-b"]).await;
    let parts = reduce(parts, &next.chunks);
    let state = |call: &str| {
        parts
            .iter()
            .find(|p| p["toolCallId"] == call && p["type"] == "tool-send_email")
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("c-a"), "output-available");
    assert_eq!(state("c-b"), "output-denied");
    let text: String = next
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Both handled.");
    assert_eq!(next.chunks.last().unwrap()["finishReason"], "stop");
}

#[tokio::test]
async fn a_sub_agents_approval_is_decided_through_the_supervisor() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("delegation-{}", v.name());
        let first = read_stream(
            f.post("/chat/supervisor", submit(&chat, "mail bob", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        // The sub-agent's call has no part of its own in the supervisor's message: no
        // approval request, only the data part, naming the delegation it sits under.
        assert!(first.of_type("tool-approval-request").is_empty());
        let (data, run_id) = stopped_call(&first, "data-tool-call-approval");
        assert_eq!(data["id"], "h1");
        assert_eq!(data["data"]["via"][0]["toolCallId"], "d1");
        assert_eq!(data["data"]["via"][0]["agentId"], "helper");
        // The sub-agent's live events pass by for onData, not stored in the message.
        assert!(
            first
                .of_type("data-tool-output")
                .iter()
                .all(|c| c["transient"] == true)
        );
        let history = f.history("supervisor", &chat, v.name()).await;
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &first.chunks))
        );

        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"approved": true}, "version": v.name()});
        let next = read_stream(f.post("/chat/supervisor", body).await, v, &["d1"]).await;
        assert_eq!(next.of_type("tool-output-available")[0]["toolCallId"], "d1");
        let text: String = next
            .of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "All done.");
    }
}

#[tokio::test]
async fn a_suspension_is_a_data_part_and_resume_data_continues_it() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("ask-{}", v.name());
        let first = read_stream(
            f.post("/chat/asker", submit(&chat, "ask me", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let (data, run_id) = stopped_call(&first, "data-tool-call-suspended");
        assert_eq!(data["id"], "ask-1");
        assert_eq!(data["data"]["state"], "data-tool-call-suspended");
        assert_eq!(
            data["data"]["suspendPayload"],
            json!({"question": "Which colour?"})
        );
        assert!(
            data["data"]["resumeSchema"]
                .as_str()
                .unwrap()
                .contains("answer")
        );
        // The suspension follows its call at once.
        let types = first.types();
        let at = types
            .iter()
            .position(|t| *t == "data-tool-call-suspended")
            .unwrap();
        assert_eq!(types[at - 1], "tool-input-available");

        // Resume data that does not match the tool's schema leaves the run suspended.
        let bad = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"nope": 1}, "version": v.name()});
        error_of(f.post("/chat/asker", bad).await, 422, "invalid_resume_data").await;
        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"answer": "blue"}, "version": v.name()});
        let next = read_stream(f.post("/chat/asker", body).await, v, &["ask-1"]).await;
        assert_eq!(
            next.of_type("tool-output-available")[0]["output"],
            json!({"topic": "colour", "answer": "blue"})
        );
        assert_eq!(
            next.of_type("data-tool-call-suspended")[0]["data"]["resumed"],
            true
        );
    }
}

// ---------------------------------------------------------------------------------------------
// History

#[tokio::test]
async fn history_shows_a_pending_approval_with_the_live_parts() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("history-approval-{}", v.name());
        let live = read_stream(
            f.post("/chat/mailer", submit(&chat, "mail bob", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let history = f.history("mailer", &chat, v.name()).await;
        assert_eq!(history.len(), 2, "{history:#?}");
        assert_eq!(history[0], user(&format!("{chat}-u1"), "mail bob"));
        assert_eq!(history[1]["id"], live.message_id());
        assert_eq!(history[1]["role"], "assistant");
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &live.chunks)),
            "{}",
            v.name()
        );
        if v == V::V6 {
            let tool = &history[1]["parts"][2];
            assert_eq!(tool["state"], "approval-requested");
        }

        // Decided, then asked again in a new turn (the model reuses the call id): the pending
        // parts go with the new turn's message, the old one shows its result.
        let (_, run_id) = stopped_call(&live, "data-tool-call-approval");
        let decide = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"approved": true}, "version": v.name()});
        read_stream(f.post("/chat/mailer", decide).await, v, &["call-1"]).await;
        let mut again = submit(&chat, "mail bob again", v.name());
        again["messages"][0]["id"] = json!(format!("{chat}-u2"));
        let second = read_stream(f.post("/chat/mailer", again).await, v, &[]).await;
        let history = f.history("mailer", &chat, v.name()).await;
        assert_eq!(history.len(), 4, "{history:#?}");
        assert_eq!(history[1]["parts"][2]["state"], "output-available");
        assert!(
            history[1]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["type"] != "data-tool-call-approval")
        );
        assert_eq!(history[3]["id"], second.message_id());
        assert_eq!(
            history[3]["parts"],
            json!(reduce(Vec::new(), &second.chunks))
        );
    }
}

#[tokio::test]
async fn history_shows_a_suspension_with_the_live_parts() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("history-ask-{}", v.name());
        let live = read_stream(
            f.post("/chat/asker", submit(&chat, "ask me", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        let history = f.history("asker", &chat, v.name()).await;
        assert_eq!(history.len(), 2, "{history:#?}");
        assert_eq!(history[1]["id"], live.message_id());
        assert_eq!(history[1]["parts"], json!(reduce(Vec::new(), &live.chunks)));
        assert_eq!(
            history[1]["parts"].as_array().unwrap().last().unwrap()["type"],
            "data-tool-call-suspended"
        );

        // Once resumed, the finished turn is one message: the tool's output, then the answer.
        let (_, run_id) = stopped_call(&live, "data-tool-call-suspended");
        let body = json!({"id": chat, "messages": [], "runId": run_id, "resumeData": {"answer": "red"}, "version": v.name()});
        read_stream(f.post("/chat/asker", body).await, v, &["ask-1"]).await;
        let history = f.history("asker", &chat, v.name()).await;
        assert_eq!(history.len(), 2);
        let parts = &history[1]["parts"];
        assert_eq!(parts[1]["state"], "output-available");
        assert_eq!(parts[2], json!({"type": "step-start"}));
        assert_eq!(
            parts[3],
            json!({"type": "text", "text": "Thanks.", "state": "done"})
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Re-attaching and disconnects

async fn first_bytes(response: &mut reqwest::Response) -> String {
    let chunk = response.chunk().await.unwrap().unwrap();
    String::from_utf8(chunk.to_vec()).unwrap()
}

#[tokio::test]
async fn reattaching_replays_the_running_turn_and_idle_chats_answer_204() {
    let f = start(|s| s).await;
    assert_eq!(
        f.get_as(None, "/chat/slow/nothing-runs/stream")
            .await
            .status(),
        204
    );
    error_of(
        f.get_as(None, "/chat/nobody/x/stream").await,
        404,
        "not_found",
    )
    .await;

    let mut original = f.post("/chat/slow", submit("reattach", "go", "v6")).await;
    assert_eq!(original.status(), 200);
    // Some of the turn went by.
    let mut seen = String::new();
    while !seen.contains("w2 ") {
        seen.push_str(&first_bytes(&mut original).await);
    }
    let replayed = read_stream(
        f.get_as(None, "/chat/slow/reattach/stream").await,
        V::V6,
        &[],
    )
    .await;
    let original = read_rest(original, seen, V::V6, &[]).await;
    let text = |s: &UiStream| -> String {
        s.of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text(&replayed), text(&original));
    assert!(text(&original).starts_with("w0 w1 w2 "));
    assert_eq!(replayed.message_id(), original.message_id());
    // The replay merged what had streamed: fewer chunks for the same text.
    assert!(replayed.chunks.len() < original.chunks.len());
    assert_eq!(
        reduce(Vec::new(), &replayed.chunks),
        reduce(Vec::new(), &original.chunks)
    );
    // Over: nothing to re-attach to.
    assert_eq!(
        f.get_as(None, "/chat/slow/reattach/stream").await.status(),
        204
    );
}

/// The stored messages of a thread once its run is done (a deadline, not a sleep).
async fn stored_when_done(
    f: &Fixture,
    thread: &str,
) -> Vec<kestrel_memory::kestrel_storage::StoredMessage> {
    for _ in 0..100 {
        let messages = f
            .storage
            .list_messages(thread, None, Selection::all())
            .await
            .map(|l| l.messages)
            .unwrap_or_default();
        if messages.iter().any(|m| m.role == Role::Assistant) {
            return messages;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run of {thread} stored no answer");
}

#[tokio::test]
async fn a_client_that_disconnects_leaves_its_run_to_finish_and_can_reattach() {
    let f = start(|s| s).await;
    let mut response = f.post("/chat/slow", submit("left", "go", "v5")).await;
    first_bytes(&mut response).await;
    drop(response);
    // The turn still runs, and can be re-attached to from the start.
    let again = read_stream(f.get_as(None, "/chat/slow/left/stream").await, V::V5, &[]).await;
    assert_eq!(again.chunks.last().unwrap(), &json!({"type": "finish"}));
    let messages = stored_when_done(&f, "left").await;
    let answer = messages.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(answer.status, MessageStatus::Complete);
    assert!(answer.to_message().text().ends_with("w11 "));
}

#[tokio::test]
async fn abort_on_disconnect_aborts_the_run_and_stores_it_as_aborted() {
    let f = start(|s| s.abort_on_disconnect(true)).await;
    let mut body = submit("aborted", "go", "v5");
    body["runId"] = json!("run-aborted");
    let mut response = f.post("/chat/slow", body).await;
    let mut seen = String::new();
    while !seen.contains("w1 ") {
        seen.push_str(&first_bytes(&mut response).await);
    }
    drop(response);
    let messages = stored_when_done(&f, "aborted").await;
    let answer = messages.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(answer.status, MessageStatus::Aborted);
    let text = answer.to_message().text();
    assert!(
        text.starts_with("w0 w1 ") && !text.contains("w11"),
        "{text}"
    );
    assert_eq!(
        f.get_as(None, "/chat/slow/aborted/stream").await.status(),
        204
    );
}

// ---------------------------------------------------------------------------------------------
// Bad requests and access

#[tokio::test]
async fn bad_bodies_are_json_errors() {
    let f = start(|s| s).await;
    let raw = f
        .http
        .post(format!("{}/chat/echo", f.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    error_of(raw, 400, "invalid_json").await;
    let refused = [
        ("/chat/echo", json!({"messages": "hi"}), 422, "invalid_body"),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "trigger": "guess"}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "version": "v9"}),
            422,
            "invalid_body",
        ),
        ("/chat/echo", json!({"messages": []}), 422, "invalid_body"),
        (
            "/chat/echo",
            json!({"messages": [{"role": "user"}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [{"role": "robot", "parts": []}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [{"role": "user", "parts": [{"type": "file"}]}]}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [], "resumeData": {"approved": true}}),
            422,
            "invalid_body",
        ),
        (
            "/chat/echo",
            json!({"messages": [user("u", "hi")], "maxSteps": 0}),
            422,
            "invalid_body",
        ),
        ("/chat/nobody", submit("x", "hi", "v5"), 404, "not_found"),
        (
            "/chat/mailer",
            json!({"messages": [], "runId": "no-such-run", "resumeData": {"approved": true}}),
            404,
            "not_found",
        ),
    ];
    for (path, body, status, code) in refused {
        let message = error_of(f.post(path, body.clone()).await, status, code).await;
        assert!(!message.is_empty(), "{body}");
    }
    error_of(
        f.get_as(None, "/chat/echo/x/messages?version=v7").await,
        400,
        "invalid_query",
    )
    .await;

    // An approval answered with anything but {approved}.
    let first = read_stream(
        f.post("/chat/mailer", submit("bad-approval", "mail", "v5"))
            .await,
        V::V5,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let body = json!({"messages": [], "runId": run_id, "resumeData": {"answer": "yes"}});
    error_of(
        f.post("/chat/mailer", body).await,
        422,
        "invalid_resume_data",
    )
    .await;
    let body = json!({"messages": [{"id": "m", "role": "assistant", "parts": [
        {"type": "tool-send_email", "toolCallId": "call-1", "state": "approval-responded", "approval": {"id": "no-separator", "approved": true}}
    ]}]});
    error_of(f.post("/chat/mailer", body).await, 422, "invalid_body").await;
}

#[tokio::test]
async fn tokens_guard_the_chat_and_pin_callers_to_their_resource() {
    let f = start(|s| {
        s.token("admin")
            .resource_token("ada-token", "ada")
            .resource_token("bo-token", "bo")
    })
    .await;
    error_of(
        f.post_as(None, "/chat/echo", submit("c", "hi", "v5")).await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.post_as(Some("wrong"), "/chat/echo", submit("c", "hi", "v5"))
            .await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.get_as(None, "/chat/echo/c/stream").await,
        401,
        "unauthorized",
    )
    .await;
    error_of(
        f.get_as(None, "/chat/echo/c/messages").await,
        401,
        "unauthorized",
    )
    .await;

    // A pinned caller cannot name another resource.
    let mut body = submit("ada-chat", "hi", "v5");
    body["memory"] = json!({"thread": "ada-chat", "resource": "bo"});
    error_of(
        f.post_as(Some("ada-token"), "/chat/echo", body).await,
        403,
        "forbidden",
    )
    .await;

    // Ada's pending approval: Bo can neither decide it nor read its history.
    let first = read_stream(
        f.post_as(
            Some("ada-token"),
            "/chat/mailer",
            submit("ada-mail", "mail", "v6"),
        )
        .await,
        V::V6,
        &[],
    )
    .await;
    let (_, run_id) = stopped_call(&first, "data-tool-call-approval");
    let decide = json!({"id": "ada-mail", "messages": [], "runId": run_id, "resumeData": {"approved": true}});
    error_of(
        f.post_as(Some("bo-token"), "/chat/mailer", decide.clone())
            .await,
        404,
        "not_found",
    )
    .await;
    let parts = reduce(Vec::new(), &first.chunks);
    let answer = json!({"id": "ada-mail", "messages": [answered_message(&first.message_id(), &parts, true, None)], "version": "v6"});
    error_of(
        f.post_as(Some("bo-token"), "/chat/mailer", answer).await,
        404,
        "not_found",
    )
    .await;
    error_of(
        f.get_as(Some("bo-token"), "/chat/mailer/ada-mail/messages")
            .await,
        404,
        "not_found",
    )
    .await;
    let history = f
        .get_as(
            Some("ada-token"),
            "/chat/mailer/ada-mail/messages?version=v6",
        )
        .await;
    assert_eq!(history.status(), 200);
    // Ada decides it.
    read_stream(
        f.post_as(Some("ada-token"), "/chat/mailer", decide).await,
        V::V5,
        &["call-1"],
    )
    .await;

    // Bo cannot re-attach to Ada's running turn; Ada and the admin can.
    let mut running = f
        .post_as(
            Some("ada-token"),
            "/chat/slow",
            submit("ada-slow", "go", "v5"),
        )
        .await;
    let seen = first_bytes(&mut running).await;
    error_of(
        f.get_as(Some("bo-token"), "/chat/slow/ada-slow/stream")
            .await,
        404,
        "not_found",
    )
    .await;
    read_stream(
        f.get_as(Some("admin"), "/chat/slow/ada-slow/stream").await,
        V::V5,
        &[],
    )
    .await;
    read_rest(running, seen, V::V5, &[]).await;
}
