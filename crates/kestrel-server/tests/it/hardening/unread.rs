//! Streamed runs whose client never reads (issue 37, point 4): the server drives each run in
//! a task of its own, so the run goes on to its end and is stored, a cancel or an abort acts
//! at once, and the run's places (`max_runs`, the caller's stream slot) are given back when it
//! ends. The clients here send their request over a raw socket with a tiny receive buffer and
//! never read a byte of the answer; the runs emit megabytes of events, far more than the
//! socket, the server's buffers and a stream's backlog hold.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{
    ModelRequest, ResponseFormat, ScriptStep, ScriptedModel, ScriptedResponse,
};
use kestrel_core::store::IntoStores;
use kestrel_core::tool::create_tool;
use kestrel_core::workflow::{Workflow, WorkflowStatus, create_step};
use kestrel_memory::Memory;
use kestrel_server::Server;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::Nothing;

/// How many events a chatty run emits, and how big each is: 16 MB in all.
const EVENTS: usize = 512;
const EVENT_BYTES: usize = 32 * 1024;

/// How long a test waits for what should take well under a second.
const PATIENCE: Duration = Duration::from_secs(30);

fn big() -> String {
    "x".repeat(EVENT_BYTES)
}

/// What the runs did, counted.
#[derive(Default)]
struct Counts {
    /// `chatty`'s events written, and its last step's runs.
    written: AtomicUsize,
    tallied: AtomicUsize,
    /// `lingering`'s steps that saw the cancel.
    canceled: AtomicUsize,
    /// `babbler`'s tool calls.
    counted: AtomicUsize,
    /// Completion checks of `talker`'s networks (after its sub-agent's answer).
    checked: AtomicUsize,
    /// `rambling`'s waits (after its deltas), and those the abort cut short.
    waiting: AtomicUsize,
    stopped: AtomicUsize,
}

/// `chatty`: `talk` writes [`EVENTS`] big events, then `tally` counts. `lingering`: `talk`
/// likewise, then `linger` waits for the cancel (or a minute).
fn workflows(counts: &Arc<Counts>) -> Vec<Workflow> {
    let talk = || {
        let counts = Arc::clone(counts);
        create_step("talk").execute(move |input: Value, ctx| {
            let counts = Arc::clone(&counts);
            async move {
                let chunk = big();
                for n in 0..EVENTS {
                    if ctx.abort_signal().is_aborted() {
                        break;
                    }
                    ctx.write(json!({"n": n, "chunk": chunk})).await;
                    counts.written.fetch_add(1, Ordering::SeqCst);
                }
                Ok(input)
            }
        })
    };
    let tally = {
        let counts = Arc::clone(counts);
        create_step("tally").execute(move |input: Value, _ctx| {
            let counts = Arc::clone(&counts);
            async move {
                counts.tallied.fetch_add(1, Ordering::SeqCst);
                Ok(input)
            }
        })
    };
    let linger = {
        let counts = Arc::clone(counts);
        create_step("linger").execute(move |input: Value, ctx| {
            let counts = Arc::clone(&counts);
            async move {
                tokio::select! {
                    () = ctx.abort_signal().aborted() => {
                        counts.canceled.fetch_add(1, Ordering::SeqCst);
                    }
                    () = tokio::time::sleep(Duration::from_secs(60)) => {}
                }
                Ok(input)
            }
        })
    };
    vec![
        Workflow::builder("chatty")
            .then(talk())
            .then(tally)
            .commit()
            .unwrap(),
        Workflow::builder("lingering")
            .then(talk())
            .then(linger)
            .commit()
            .unwrap(),
    ]
}

/// What a scripted router is asked: to route (`routing`) or to judge (`completion`).
fn asked(request: &ModelRequest) -> Option<&str> {
    match &request.response_format {
        Some(ResponseFormat::Json { name, .. }) => name.as_deref(),
        _ => None,
    }
}

/// A router that hands the task to the sub-agent `primitive` once, then says `none`; each
/// completion check passes and is counted.
fn router(primitive: &'static str, counts: &Arc<Counts>) -> Arc<ScriptedModel> {
    let counts = Arc::clone(counts);
    Arc::new(ScriptedModel::from_fn(move |request| {
        let routed_before = request
            .messages
            .iter()
            .any(|m| m.text().contains("\"isNetwork\":true"));
        let answer = match asked(request) {
            Some("completion") => {
                counts.checked.fetch_add(1, Ordering::SeqCst);
                json!({"isComplete": true, "completionReason": "done", "finalResult": ""})
            }
            _ if routed_before => json!({
                "primitiveId": "none", "primitiveType": "none", "prompt": "",
                "selectionReason": "the task is done"
            }),
            _ => json!({
                "primitiveId": primitive, "primitiveType": "agent", "prompt": "talk",
                "selectionReason": "it talks"
            }),
        };
        ScriptedResponse::text(answer.to_string())
    }))
}

/// `babbler` streams [`EVENTS`] big deltas, pauses, then calls `count` (counted), then
/// answers.
/// `talker` is a network routing to `chatterbox` (big deltas); `rambler` one routing to
/// `rambling` (big deltas, then its tool `wait` waits a minute, or until the abort).
fn agents(memory: &Memory, counts: &Arc<Counts>) -> Vec<Agent> {
    let deltas = || ScriptedResponse::text_deltas((0..EVENTS).map(|_| big()));
    let babbler =
        {
            let counts = Arc::clone(counts);
            Agent::builder("babbler")
                .model(Arc::new(ScriptedModel::from_fn(move |request| {
                    if request.messages.iter().any(|m| m.role == Role::Tool) {
                        ScriptedResponse::text("counted")
                    } else {
                        // A pause after the deltas: the run waits, and only its driver
                        // (the reader, before) takes it on.
                        deltas()
                            .and_step(ScriptStep::Delay(Duration::from_millis(1)))
                            .and_tool_call("c1", "count", "{}")
                    }
                })))
                .tool(create_tool("count").description("Counts").execute(
                    move |_: Nothing, _ctx| {
                        let counts = Arc::clone(&counts);
                        async move {
                            counts.counted.fetch_add(1, Ordering::SeqCst);
                            Ok("one more")
                        }
                    },
                ))
                .build()
                .unwrap()
        };
    let chatterbox = Agent::builder("chatterbox")
        .description("Talks a lot")
        .model(Arc::new(ScriptedModel::from_fn(move |_| deltas())))
        .build()
        .unwrap();
    let talker = Agent::builder("talker")
        .instructions("Let the chatterbox talk.")
        .model(router("chatterbox", counts))
        .memory(memory.clone())
        .agents([chatterbox])
        .build()
        .unwrap();
    let rambling = {
        let counts = Arc::clone(counts);
        Agent::builder("rambling")
            .description("Talks a lot, then takes its time")
            .model(Arc::new(ScriptedModel::from_fn(move |request| {
                if request.messages.iter().any(|m| m.role == Role::Tool) {
                    ScriptedResponse::text("rambled")
                } else {
                    deltas().and_tool_call("w1", "wait", "{}")
                }
            })))
            .tool(create_tool("wait").description("Waits a minute").execute(
                move |_: Nothing, ctx| {
                    let counts = Arc::clone(&counts);
                    async move {
                        counts.waiting.fetch_add(1, Ordering::SeqCst);
                        tokio::select! {
                            () = ctx.abort_signal().aborted() => {
                                counts.stopped.fetch_add(1, Ordering::SeqCst);
                            }
                            () = tokio::time::sleep(Duration::from_secs(60)) => {}
                        }
                        Ok("waited")
                    }
                },
            ))
            .build()
            .unwrap()
    };
    let rambler = Agent::builder("rambler")
        .instructions("Let the rambler talk.")
        .model(router("rambling", counts))
        .memory(memory.clone())
        .agents([rambling])
        .build()
        .unwrap();
    vec![babbler, talker, rambler]
}

struct Fixture {
    addr: SocketAddr,
    http: reqwest::Client,
    memory: Memory,
    counts: Arc<Counts>,
}

async fn serve(configure: impl FnOnce(Server) -> Server) -> Fixture {
    let memory = Memory::new(Arc::new(kestrel_storage::InMemoryStorage::new()));
    let counts = Arc::new(Counts::default());
    let mut builder = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone());
    for workflow in workflows(&counts) {
        builder = builder.workflow(workflow);
    }
    for agent in agents(&memory, &counts) {
        builder = builder.agent(agent);
    }
    let server = configure(Server::new(builder.build().unwrap()).memory(memory.clone()));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        addr,
        http: reqwest::Client::new(),
        memory,
        counts,
    }
}

impl Fixture {
    /// Sends `body` to `path` over a socket with a tiny receive buffer, and never reads the
    /// answer: the socket is returned to be held (dropping it would close the connection).
    async fn never_reads(&self, path: &str, body: Value) -> TcpStream {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(self.addr).await.unwrap();
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A stored workflow run's status, polled until `done` says so (or [`PATIENCE`] ends).
    async fn run_until(&self, workflow: &str, run_id: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut status = String::new();
        while tokio::time::Instant::now() < deadline {
            let response = self
                .http
                .get(self.url(&format!("/api/workflows/{workflow}/runs/{run_id}")))
                .send()
                .await
                .unwrap();
            if response.status() == 200 {
                let run: Value = response.json().await.unwrap();
                status = run["status"].as_str().unwrap_or_default().to_owned();
                if done(&status) {
                    return status;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        status
    }

    /// A network run's stored status, polled until `done` says so (or [`PATIENCE`] ends).
    async fn network_until(
        &self,
        agent: &str,
        run_id: &str,
        done: impl Fn(WorkflowStatus) -> bool,
    ) -> Option<(WorkflowStatus, Value)> {
        let store = Arc::clone(self.memory.storage().unwrap())
            .into_stores()
            .workflows;
        let workflow = format!("agent-network-{agent}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut last = None;
        while tokio::time::Instant::now() < deadline {
            if let Some(snapshot) = store.load(&workflow, run_id).await.unwrap() {
                let status = snapshot.status;
                last = Some((status, serde_json::to_value(&snapshot).unwrap()));
                if done(status) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        last
    }

    /// Polls `what` until it is at least `n` (or [`PATIENCE`] ends), and returns it.
    async fn count_until(&self, what: impl Fn(&Counts) -> usize, n: usize) -> usize {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while what(&self.counts) < n && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        what(&self.counts)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_streamed_to_a_client_that_never_reads_runs_to_its_end() {
    let f = serve(|s| s).await;
    let _client = f
        .never_reads(
            "/api/workflows/chatty/stream?runId=unread",
            json!({"inputData": {}}),
        )
        .await;
    let status = f.run_until("chatty", "unread", |s| s == "success").await;
    assert_eq!(
        status,
        "success",
        "the run stopped with {} of {EVENTS} events written",
        f.counts.written.load(Ordering::SeqCst)
    );
    assert_eq!(f.counts.written.load(Ordering::SeqCst), EVENTS);
    assert_eq!(f.counts.tallied.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_or_travelled_workflow_streamed_to_a_client_that_never_reads_runs_to_its_end() {
    let f = serve(|s| s).await;
    // A first run to its end (its stream read), then a time travel from `talk`, streamed to a
    // client that never reads.
    let first = f
        .http
        .post(f.url("/api/workflows/chatty/start-async?runId=again"))
        .json(&json!({"inputData": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(f.counts.tallied.load(Ordering::SeqCst), 1);
    let _client = f
        .never_reads(
            "/api/workflows/chatty/time-travel-stream?runId=again",
            json!({"step": "talk"}),
        )
        .await;
    assert_eq!(
        f.count_until(|c| c.tallied.load(Ordering::SeqCst), 2).await,
        2
    );
    assert_eq!(f.counts.written.load(Ordering::SeqCst), 2 * EVENTS);
    let status = f.run_until("chatty", "again", |s| s == "success").await;
    assert_eq!(status, "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_streamed_to_a_client_that_never_reads_is_canceled_at_once() {
    let f = serve(|s| s).await;
    let _client = f
        .never_reads(
            "/api/workflows/lingering/stream?runId=stuck",
            json!({"inputData": {}}),
        )
        .await;
    // Its events are all written (far more than any buffer holds) and it lingers.
    assert_eq!(
        f.count_until(|c| c.written.load(Ordering::SeqCst), EVENTS)
            .await,
        EVENTS,
        "the run stopped before its events were written"
    );
    assert_eq!(
        f.run_until("lingering", "stuck", |s| s == "running").await,
        "running"
    );
    let canceled = f
        .http
        .post(f.url("/api/workflows/lingering/runs/stuck/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(canceled.status(), 200);
    let status = f.run_until("lingering", "stuck", |s| s != "running").await;
    assert_eq!(status, "canceled");
    assert_eq!(f.counts.canceled.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_streamed_to_a_client_that_never_reads_runs_to_its_end() {
    let f = serve(|s| s).await;
    let _client = f
        .never_reads(
            "/api/agents/talker/network",
            json!({
                "messages": "Talk",
                "memory": {"thread": "t", "resource": "u"},
                "runId": "talked"
            }),
        )
        .await;
    let stored = f
        .network_until("talker", "talked", |s| s != WorkflowStatus::Running)
        .await;
    let (status, snapshot) = stored.expect("the network run is stored");
    assert_eq!(status, WorkflowStatus::Success, "{}", snapshot["status"]);
    assert_eq!(f.counts.checked.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_streamed_to_a_client_that_never_reads_is_aborted_at_once() {
    let f = serve(|s| s).await;
    let _client = f
        .never_reads(
            "/api/agents/rambler/network",
            json!({
                "messages": "Ramble",
                "memory": {"thread": "t", "resource": "u"},
                "runId": "rambled"
            }),
        )
        .await;
    // The sub-agent talks (far more than any buffer holds), then waits.
    assert_eq!(
        f.count_until(|c| c.waiting.load(Ordering::SeqCst), 1).await,
        1,
        "the run stopped before its sub-agent's tool"
    );
    let aborted = f
        .http
        .post(f.url("/api/agents/rambler/runs/rambled/abort"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(aborted.status(), 200);
    let stored = f
        .network_until("rambler", "rambled", |s| s != WorkflowStatus::Running)
        .await;
    let (status, snapshot) = stored.expect("the network run is stored");
    assert_ne!(
        status,
        WorkflowStatus::Running,
        "the abort did not reach the run"
    );
    assert!(
        snapshot.to_string().contains("Aborted"),
        "the network did not end aborted: {}",
        snapshot["status"]
    );
    assert_eq!(f.counts.stopped.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_streamed_to_a_client_that_never_reads_runs_to_its_end() {
    let f = serve(|s| s).await;
    let _client = f
        .never_reads("/api/agents/babbler/stream", json!({"messages": "Talk"}))
        .await;
    assert_eq!(
        f.count_until(|c| c.counted.load(Ordering::SeqCst), 1).await,
        1,
        "the run stopped before its tool call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streamed_to_a_client_that_never_reads_gives_its_places_back_when_it_ends() {
    let f = serve(|s| s.max_runs(1).max_streams_per_token(1)).await;
    let _client = f
        .never_reads(
            "/api/workflows/chatty/stream?runId=first",
            json!({"inputData": {}}),
        )
        .await;
    assert_eq!(
        f.run_until("chatty", "first", |s| s == "success").await,
        "success"
    );
    // The first client still holds its connection and has read nothing; its run ended, so
    // another run (and another stream of the same caller) is taken.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut answered = None;
    while tokio::time::Instant::now() < deadline {
        let response = f
            .http
            .post(f.url("/api/workflows/chatty/stream?runId=second"))
            .json(&json!({"inputData": {}}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        if status != 429 {
            answered = Some((status, body));
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (status, body) = answered.expect("the ended run's places were not given back");
    assert_eq!(status, 200);
    assert!(
        body.contains("workflow-finish"),
        "the second stream ended early"
    );
    assert_eq!(
        f.run_until("chatty", "second", |s| s == "success").await,
        "success"
    );
}
