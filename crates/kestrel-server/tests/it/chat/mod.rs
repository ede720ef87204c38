//! The AI SDK chat route over a real socket: the UI message stream protocol (v5 and v6) checked
//! chunk by chunk on every stream of this file, the byte-exact fixtures of the AI SDK, approvals
//! (data parts, v6 approval requests and responses, denials), suspensions and resumes, stored
//! history equal to what the live stream showed, re-attaching, disconnects, bad bodies and auth.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The tests, by topic; the server under test and the stream reader they share are here.
mod access;
mod agents;
mod approvals;
mod history;
mod protocol;
mod reattach;
mod streams;

use std::collections::HashSet;
use std::sync::Arc;

use kestrel_memory::Memory;
use kestrel_memory::kestrel_storage::InMemoryStorage;
use kestrel_server::Server;
use serde_json::{Value, json};

use agents::kestrel;
use protocol::{parse_frames, validate};

struct Fixture {
    base: String,
    http: reqwest::Client,
    storage: Arc<InMemoryStorage>,
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

/// The data part of a stopped call, and its run id.
fn stopped_call(stream: &UiStream, kind: &str) -> (Value, String) {
    let data = stream.of_type(kind)[0].clone();
    let run_id = data["data"]["runId"].as_str().unwrap().to_owned();
    (data, run_id)
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

async fn first_bytes(response: &mut reqwest::Response) -> String {
    let chunk = response.chunk().await.unwrap().unwrap();
    String::from_utf8(chunk.to_vec()).unwrap()
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
