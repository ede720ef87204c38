//! Several `kestrel dev` processes on one PostgreSQL schema and one Redis key prefix, each
//! its own process, talking to a fake OpenAI-compatible model on 127.0.0.1:
//!
//! - a subscriber on B sees every event of a run driven by A, in order, with its run id;
//! - an abort sent to B stops the run on A;
//! - a run stopped for approval on A is approved on B; eight approvals racing over three
//!   instances have one winner, and the tool runs once;
//! - `kill -9` of the instance streaming a run: another instance finishes it, and the thread
//!   holds each message once;
//! - a chat turn streaming on A is re-attached to on B: the same chunks, from the start.
//!
//! Needs `KESTREL_TEST_POSTGRES_URL` and `KESTREL_TEST_REDIS_URL` (`.ci/run` sets both);
//! without them the tests say so and pass.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

const THREAD: &str = "cluster-thread";
pub(super) const RESOURCE: &str = "alice";
/// The lease the instances run with: a dead instance's runs move within about this long.
const LEASE_TTL_MS: &str = "2000";

// ---------------------------------------------------------------------------------------------
// The fake model

/// Answers by what it is asked: a tool result gets "Done.", a request to email gets a
/// `send_email` call, a weather question a `get_weather` call, one to delegate gets an `agent-research` call (asking for "slow
/// research"), "slow" gets its words one every 100 ms the first time (later at once),
/// anything else a short greeting; a request whose user says "patiently" waits 1.5 s first.
#[derive(Clone, Default)]
struct FakeModel {
    requests: Arc<Mutex<Vec<Value>>>,
}

pub(super) struct FakeServer {
    base_url: String,
    model: FakeModel,
}

impl FakeServer {
    pub(super) async fn start() -> Self {
        let model = FakeModel::default();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(model.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url: format!("http://{addr}/v1"),
            model,
        }
    }

    pub(super) fn requests(&self) -> usize {
        self.model.requests.lock().unwrap().len()
    }
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn finish(reason: &str) -> Vec<String> {
    vec![
        data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})),
        data(
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
}

fn text(words: &[&str]) -> Vec<String> {
    let mut chunks = vec![data(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    )];
    chunks.extend(
        words
            .iter()
            .map(|w| data(json!({"choices": [{"index": 0, "delta": {"content": w}}]}))),
    );
    chunks.extend(finish("stop"));
    chunks
}

/// A streamed answer that calls tool `name` with `arguments` (call id `id`).
fn tool_call(id: &str, name: &str, arguments: Value) -> Vec<String> {
    let mut chunks = vec![data(json!({"choices": [{"index": 0, "delta": {
        "role": "assistant",
        "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]
    }}]}))];
    chunks.extend(finish("tool_calls"));
    chunks
}

async fn chat_completions(State(model): State<FakeModel>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let seen_before = {
        let mut requests = model.requests.lock().unwrap();
        let seen = requests
            .iter()
            .any(|r| r["messages"].as_array().and_then(|m| m.last()) == Some(&last));
        requests.push(body);
        seen
    };
    if last_user.contains("patiently") {
        // The chaos run's turns take a while, so that instances die in the middle of them.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let sse = [(header::CONTENT_TYPE, "text/event-stream")];
    if last["role"] == "tool" {
        return (sse, text(&["Done."]).concat()).into_response();
    }
    if last_user.contains("email") {
        return (
            sse,
            tool_call(
                "call-email",
                "send_email",
                json!({"to": "bob@example.com", "subject": "Hello", "body": "Hi Bob"}),
            )
            .concat(),
        )
            .into_response();
    }
    if last_user.contains("weather") {
        return (
            sse,
            tool_call("call-weather", "get_weather", json!({"city": "Oslo"})).concat(),
        )
            .into_response();
    }
    if last_user.contains("delegate") {
        return (
            sse,
            tool_call(
                "call-research",
                "agent-research",
                json!({"prompt": "slow research on kestrels"}),
            )
            .concat(),
        )
            .into_response();
    }
    if last_user.contains("slow") && !seen_before {
        let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let chunks = text(&refs);
        let body = futures::stream::iter(chunks).then(|chunk| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, std::convert::Infallible>(chunk)
        });
        return (sse, Body::from_stream(body)).into_response();
    }
    if last_user.contains("slow") {
        return (sse, text(&["finally ", "done"]).concat()).into_response();
    }
    (sse, text(&["Hello", " there"]).concat()).into_response()
}

// ---------------------------------------------------------------------------------------------
// The instances

pub(super) struct Services {
    postgres: String,
    redis: String,
    schema: String,
}

impl Services {
    pub(super) fn from_env(test: &str) -> Option<Self> {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        match (
            var("KESTREL_TEST_POSTGRES_URL"),
            var("KESTREL_TEST_REDIS_URL"),
        ) {
            (Some(postgres), Some(redis)) => Some(Self {
                postgres,
                redis,
                schema: kestrel_storage::testing::test_schema(),
            }),
            _ => {
                eprintln!(
                    "skipping {test}: set KESTREL_TEST_POSTGRES_URL and KESTREL_TEST_REDIS_URL"
                );
                None
            }
        }
    }

    pub(super) async fn teardown(self) {
        kestrel_storage::testing::drop_schema(&self.postgres, &self.schema).await;
    }
}

/// One `kestrel dev` process.
pub(super) struct Instance {
    child: Child,
    pub(super) base: String,
    client: reqwest::Client,
}

impl Instance {
    pub(super) async fn start(services: &Services, model: &FakeServer, id: &str) -> Self {
        Self::start_with(services, model, id, &[]).await
    }

    /// [`Instance::start`] with more arguments of `kestrel dev`.
    pub(super) async fn start_with(
        services: &Services,
        model: &FakeServer,
        id: &str,
        more: &[&str],
    ) -> Self {
        let prefix = format!("{}:", services.schema);
        let mut args = vec![
            "--db",
            &services.postgres,
            "--schema",
            &services.schema,
            "--redis",
            &services.redis,
            "--redis-prefix",
            &prefix,
            "--instance-id",
            id,
            "--lease-ttl-ms",
            LEASE_TTL_MS,
        ];
        args.extend_from_slice(more);
        Self::launch(model, &args).await
    }

    /// `kestrel dev --port 0 --model openai/fake` with `args`, on `model`; returns once it
    /// serves.
    pub(super) async fn launch(model: &FakeServer, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kestrel"))
            .args(["dev", "--port", "0", "--model", "openai/fake"])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env!("CARGO_TARGET_TMPDIR"))
            .env("OPENAI_API_KEY", "test")
            .env("OPENAI_BASE_URL", &model.base_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let base = loop {
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout_at(deadline, stdout.read(&mut buf))
                .await
                .expect("the instance did not start")
                .unwrap();
            assert!(
                n > 0,
                "the instance exited: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(line) = text.lines().find(|l| l.starts_with("Kestrel Studio: "))
                && text.contains("Press Ctrl-C")
            {
                break line["Kestrel Studio: ".len()..]
                    .trim_end_matches('/')
                    .to_owned();
            }
        };
        // Keep draining stdout so the process never blocks on a full pipe.
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok(1..) = stdout.read(&mut buf).await {}
        });
        Self {
            child,
            base,
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api{path}", self.base)
    }

    pub(super) async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A chat turn (`POST /chat/assistant`, outside `/api`) with one user message.
    async fn chat(&self, chat_id: &str, text: &str, version: &str) -> reqwest::Response {
        let message = json!({"id": format!("{chat_id}-u"), "role": "user",
            "parts": [{"type": "text", "text": text}]});
        self.client
            .post(format!("{}/chat/assistant", self.base))
            .json(&json!({"id": chat_id, "messages": [message], "version": version}))
            .send()
            .await
            .unwrap()
    }

    /// `GET /chat/assistant/{chat_id}/stream`: re-attaching to the chat's running turn.
    async fn reattach(&self, chat_id: &str) -> reqwest::Response {
        self.client
            .get(format!("{}/chat/assistant/{chat_id}/stream", self.base))
            .send()
            .await
            .unwrap()
    }

    pub(super) async fn get(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `kill -9`.
    pub(super) async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// Starts a slow turn on `instance` and waits for its first words: its events so far, and its
/// run id.
async fn start_slow(instance: &Instance, text: &str) -> (Events, String) {
    let events = Events::follow(
        instance
            .post("/agents/assistant/stream", run_body(text))
            .await,
    );
    let started = events.wait_for("text-delta").await;
    let run_id = started[0]["runId"].as_str().unwrap().to_owned();
    (events, run_id)
}

/// The fake model and instances `a` and `b` on it.
pub(super) async fn two_instances(services: &Services) -> (FakeServer, Instance, Instance) {
    let model = FakeServer::start().await;
    let a = Instance::start(services, &model, "a").await;
    let b = Instance::start(services, &model, "b").await;
    (model, a, b)
}

/// Reads an SSE response's events as they come, into a shared list.
pub(super) struct Events {
    seen: Arc<Mutex<Vec<Value>>>,
    done: tokio::task::JoinHandle<()>,
}

impl Events {
    pub(super) fn follow(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let done = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut body = response.bytes_stream();
                let mut pending = String::new();
                while let Some(Ok(chunk)) = body.next().await {
                    pending.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(end) = pending.find("\n\n") {
                        let block = pending[..end].to_owned();
                        pending.drain(..end + 2);
                        if let Some(data) = block.strip_prefix("data: ")
                            && let Ok(event) = serde_json::from_str::<Value>(data)
                        {
                            seen.lock().unwrap().push(event);
                        }
                    }
                }
            }
        });
        Self { seen, done }
    }

    pub(super) fn all(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    pub(super) async fn wait_for(&self, kind: &str) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let all = self.all();
            if all.iter().any(|e| e["type"] == kind) {
                return all;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {kind} event: {all:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) async fn end(self) -> Vec<Value> {
        tokio::time::timeout(Duration::from_secs(20), self.done)
            .await
            .expect("the stream did not end")
            .unwrap();
        self.seen.lock().unwrap().clone()
    }
}

fn run_body(text: &str) -> Value {
    json!({"messages": text, "memory": {"thread": THREAD, "resource": RESOURCE}})
}

pub(super) fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The thread's messages on `instance`: (role, text).
async fn thread_messages(instance: &Instance) -> Vec<Value> {
    let listed = instance
        .get(&format!(
            "/memory/threads/{THREAD}/messages?agentId=assistant&resourceId={RESOURCE}"
        ))
        .await;
    listed["messages"].as_array().cloned().unwrap_or_default()
}

/// Polls the thread on `instance` until run `run_id`'s answer is stored (another instance
/// took the run over and finished it); returns the thread's messages then.
async fn wait_for_answer(instance: &Instance, run_id: &str) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let messages = thread_messages(instance).await;
        if messages.iter().any(|m| m["role"] == "assistant") {
            return messages;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run_id} was not taken over: {messages:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The thread holds one turn: the question and its answer, each once.
fn assert_one_turn(messages: &[Value]) {
    assert_each_once(messages);
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant"], "{messages:#?}");
}

/// Every message id of the thread appears once.
pub(super) fn assert_each_once(messages: &[Value]) {
    let mut ids: Vec<&str> = messages.iter().filter_map(|m| m["id"].as_str()).collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "a message is stored twice: {messages:#?}");
}

// ---------------------------------------------------------------------------------------------
// The scenarios

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_instance_sees_a_run_on_another_and_aborts_it_there() {
    let Some(services) = Services::from_env("a_subscriber_on_one_instance_sees_a_run_on_another")
    else {
        return;
    };
    let (_model, a, b) = two_instances(&services).await;

    // B follows the thread; A runs a turn on it.
    let watched = Events::follow(
        b.post(
            "/agents/assistant/threads/subscribe",
            json!({"resourceId": RESOURCE, "threadId": THREAD}),
        )
        .await,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let on_a = Events::follow(a.post("/agents/assistant/stream", run_body("hi")).await);
    let direct = on_a.end().await;
    let seen = watched.wait_for("finish").await;
    let run_id = direct[0]["runId"].as_str().unwrap().to_owned();
    let from_run: Vec<Value> = seen
        .iter()
        .filter(|e| e["runId"] == run_id.as_str())
        .cloned()
        .collect();
    assert_eq!(types(&from_run), types(&direct), "every event, in order");
    assert_eq!(from_run, direct);

    // A slow run on A, aborted through B.
    let (slow, run_id) = start_slow(&a, "slow please").await;
    let aborted = b
        .post(&format!("/agents/assistant/runs/{run_id}/abort"), json!({}))
        .await;
    assert_eq!(aborted.status(), 200);
    let answer: Value = aborted.json().await.unwrap();
    assert_eq!(answer["aborted"], true);
    assert_eq!(answer["storedRunsMarked"], 0, "A stopped it itself");
    let events = slow.end().await;
    assert_eq!(
        events.last().unwrap()["type"],
        "abort",
        "{:?}",
        types(&events)
    );
    let deltas = events.iter().filter(|e| e["type"] == "text-delta").count();
    assert!(deltas < 40, "stopped before the end: {deltas} deltas");
    a.kill().await;
    b.kill().await;
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_on_another_instance_and_racing_approvals_have_one_winner() {
    let Some(services) = Services::from_env("an_approval_on_another_instance") else {
        return;
    };
    let (model, a, b) = two_instances(&services).await;
    let c = Instance::start(&services, &model, "c").await;

    let stopped = Events::follow(
        a.post("/agents/assistant/stream", run_body("email bob"))
            .await,
    )
    .end()
    .await;
    let approval = stopped
        .iter()
        .find(|e| e["type"] == "tool-call-approval")
        .unwrap_or_else(|| panic!("no approval asked: {:?}", types(&stopped)));
    let run_id = approval["runId"].as_str().unwrap().to_owned();
    let decision = json!({"runId": run_id, "toolCallId": "call-email"});

    let instances = [&a, &b, &c];
    let racing = (0..8).map(|i| {
        let instance = instances[i % 3];
        let decision = decision.clone();
        async move {
            let response = instance
                .post("/agents/assistant/approve-tool-call-generate", decision)
                .await;
            response.status().as_u16()
        }
    });
    let statuses = futures::future::join_all(racing).await;
    let won = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(won, 1, "exactly one approval wins: {statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );

    let messages = thread_messages(&c).await;
    assert_each_once(&messages);
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(results, 1, "the tool ran once: {messages:#?}");
    for instance in [a, b, c] {
        instance.kill().await;
    }
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_instance_mid_stream_leaves_another_to_finish_the_run() {
    let Some(services) = Services::from_env("killing_the_instance_mid_stream") else {
        return;
    };
    let (model, a, b) = two_instances(&services).await;

    let (_stream, run_id) = start_slow(&a, "slow please").await;
    a.kill().await;
    let killed_at = std::time::Instant::now();

    // B's sweep finds the run once A's lease ran out, and finishes it.
    let messages = wait_for_answer(&b, &run_id).await;
    let takeover = killed_at.elapsed();
    eprintln!("takeover after kill -9: {takeover:?} (lease {LEASE_TTL_MS} ms)");
    assert!(model.requests() >= 2, "the model step ran again on B");
    assert_one_turn(&messages);
    let answer = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert!(answer.to_string().contains("finally done"), "{answer}");
    b.kill().await;
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tabs_on_two_instances_take_turns_on_one_thread() {
    let Some(services) = Services::from_env("two_tabs_on_two_instances_take_turns") else {
        return;
    };
    let (_model, a, b) = two_instances(&services).await;
    // The first turn is slow; the second, sent to the other instance meanwhile, waits for it.
    let (first, _) = start_slow(&a, "slow one").await;
    let second = Events::follow(
        b.post("/agents/assistant/stream", run_body("quick two"))
            .await,
    );
    let (first, second) = (first.end().await, second.end().await);
    assert_eq!(
        first.last().unwrap()["type"],
        "finish",
        "{:?}",
        types(&first)
    );
    assert_eq!(
        second.last().unwrap()["type"],
        "finish",
        "{:?}",
        types(&second)
    );
    let messages = thread_messages(&b).await;
    assert_each_once(&messages);
    let turns: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("?").to_owned(),
                m["parts"].to_string(),
            )
        })
        .collect();
    let roles: Vec<&str> = turns.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{turns:#?}"
    );
    assert!(
        turns[0].1.contains("slow one") && turns[2].1.contains("quick two"),
        "{turns:#?}"
    );
    assert!(
        turns[1].1.contains("w39"),
        "the first answer is whole: {turns:#?}"
    );
    a.kill().await;
    b.kill().await;
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_on_one_instance_is_re_attached_to_on_another() {
    let Some(services) = Services::from_env("a_chat_turn_is_re_attached_to_on_another") else {
        return;
    };
    let (_model, a, b) = two_instances(&services).await;

    // A streams a slow answer; B re-attaches mid-way and gets the turn from its start.
    let on_a = Events::follow(a.chat("chat-text", "slow please", "v5").await);
    on_a.wait_for("text-delta").await;
    let on_b = Events::follow(b.reattach("chat-text").await);
    let (direct, attached) = (on_a.end().await, on_b.end().await);
    assert_eq!(direct.last().unwrap()["type"], "finish", "{direct:?}");
    assert_eq!(attached, direct, "every chunk, in order");
    let ended = b.reattach("chat-text").await;
    assert_eq!(ended.status(), 204, "no turn runs any more");

    // A v6 turn that stops for an approval: B's stream ends where A's does, in v6.
    let on_a = Events::follow(a.chat("chat-approval", "patiently email bob", "v6").await);
    on_a.wait_for("start").await;
    let on_b = Events::follow(b.reattach("chat-approval").await);
    let (direct, attached) = (on_a.end().await, on_b.end().await);
    assert!(
        direct.iter().any(|c| c["type"] == "tool-approval-request"),
        "{direct:?}"
    );
    assert_eq!(attached, direct);
    a.kill().await;
    b.kill().await;
    services.teardown().await;
}

/// Stops (`SIGSTOP`) or continues (`SIGCONT`) a process.
fn signal(child: &Child, name: &str) {
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), pid])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_stopped_past_its_lease_cannot_write_when_it_wakes() {
    let Some(services) = Services::from_env("an_owner_stopped_past_its_lease") else {
        return;
    };
    let (_model, a, b) = two_instances(&services).await;
    let (slow, run_id) = start_slow(&a, "slow please").await;
    signal(&a.child, "STOP");
    // B takes the run over once A's lease ran out, and finishes it.
    let taken_over = wait_for_answer(&b, &run_id).await;
    // A wakes up: its model call ends, and what it writes is refused.
    signal(&a.child, "CONT");
    let events = slow.end().await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{:?}", types(&events));
    assert_eq!(last["payload"]["kind"], "run-taken-over", "{last}");
    let messages = thread_messages(&b).await;
    assert_eq!(messages, taken_over, "nothing of A's was added");
    assert_one_turn(&messages);
    a.kill().await;
    b.kill().await;
    services.teardown().await;
}

/// A `redis-server` of the test's own on a free port, without persistence: a restart loses
/// every key (streams, leases, the token counter), the worst case.
struct OwnRedis {
    child: std::process::Child,
    port: u16,
}

impl OwnRedis {
    fn start(port: u16) -> Self {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (it is installed where Redis is)");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = Self::start(self.port);
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instances_carry_on_after_redis_restarts_empty() {
    let Some(mut services) = Services::from_env("the_instances_carry_on_after_redis_restarts")
    else {
        return;
    };
    let mut redis = OwnRedis::start(OwnRedis::free_port());
    services.redis = format!("redis://127.0.0.1:{}", redis.port);
    let (_model, a, b) = two_instances(&services).await;
    let first = Events::follow(a.post("/agents/assistant/stream", run_body("hi")).await)
        .end()
        .await;
    assert_eq!(first.last().unwrap()["type"], "finish");

    redis.restart();
    // Give the instances' readers a moment to find Redis again.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // A turn on B, watched from A; then a slow one on A, aborted from B.
    let watched = Events::follow(
        a.post(
            "/agents/assistant/threads/subscribe",
            json!({"resourceId": RESOURCE, "threadId": THREAD}),
        )
        .await,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = Events::follow(
        b.post("/agents/assistant/stream", run_body("hello again"))
            .await,
    )
    .end()
    .await;
    assert_eq!(
        second.last().unwrap()["type"],
        "finish",
        "{:?}",
        types(&second)
    );
    let seen = watched.wait_for("finish").await;
    assert!(seen.iter().any(|e| e["runId"] == second[0]["runId"]));
    let (slow, run_id) = start_slow(&a, "slow please").await;
    let aborted: Value = b
        .post(&format!("/agents/assistant/runs/{run_id}/abort"), json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(aborted["storedRunsMarked"], 0, "A stopped it: {aborted}");
    assert_eq!(slow.end().await.last().unwrap()["type"], "abort");

    // Nothing stored was lost: both answered turns are in the thread, each once.
    let messages = thread_messages(&b).await;
    assert_each_once(&messages);
    let answers = messages.iter().filter(|m| m["role"] == "assistant").count();
    assert!(answers >= 2, "{messages:#?}");
    a.kill().await;
    b.kill().await;
    services.teardown().await;
}
