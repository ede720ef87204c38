//! The network routes over a real socket: a network run streamed over SSE in Mastra's
//! shapes, the typed 400s (no memory, no thread), a network tool's approval decided with the
//! network's run id (claimed once), and a decline. The agents here also serve the
//! `@mastra/client-js` network script (`js_clients.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ModelRequest, ResponseFormat, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use serde_json::{Value, json};

/// What a scripted router is asked: to route (`routing`) or to judge (`completion`).
fn asked(request: &ModelRequest) -> Option<&str> {
    match &request.response_format {
        Some(ResponseFormat::Json { name, .. }) => name.as_deref(),
        _ => None,
    }
}

/// A router that hands the task to `primitive` once (with `prompt`), then says `none`; every
/// completion check passes.
fn router(primitive: &'static str, kind: &'static str, prompt: &'static str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |request| {
        let routed_before = request
            .messages
            .iter()
            .any(|m| m.text().contains("\"isNetwork\":true"));
        let answer = match asked(request) {
            Some("completion") => {
                json!({"isComplete": true, "completionReason": "done", "finalResult": ""})
            }
            _ if routed_before => json!({
                "primitiveId": "none", "primitiveType": "none", "prompt": "",
                "selectionReason": "the task is done"
            }),
            _ => json!({
                "primitiveId": primitive, "primitiveType": kind, "prompt": prompt,
                "selectionReason": format!("{primitive} does this")
            }),
        };
        ScriptedResponse::text(answer.to_string())
    }))
}

/// `coordinator` (routes to its sub-agent `greeter`), `gatekeeper` (routes to its tool
/// `unlock`, which needs approval; `unlocks` counts its runs) and `dawdler` (routes to
/// `slowpoke`, which takes 30 s to answer).
pub(crate) fn network_agents(memory: &Memory, unlocks: Arc<AtomicUsize>) -> Vec<Agent> {
    let greeter = Agent::builder("greeter")
        .description("Greets people")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text_deltas(["hi ", "there"])
        })))
        .build()
        .unwrap();
    let coordinator = Agent::builder("coordinator")
        .instructions("Greet the user.")
        .model(router("greeter", "agent", "say hi"))
        .memory(memory.clone())
        .agents([greeter])
        .build()
        .unwrap();
    let unlock = create_tool("unlock")
        .description("Unlocks the door")
        .require_approval(true)
        .input_schema(json!({"type": "object"}))
        .execute(move |_input: Value, _ctx| {
            let unlocks = Arc::clone(&unlocks);
            async move {
                unlocks.fetch_add(1, Ordering::SeqCst);
                Ok("unlocked")
            }
        });
    let gatekeeper = Agent::builder("gatekeeper")
        .instructions("Unlock the door when asked.")
        .model(router("unlock", "tool", "{}"))
        .memory(memory.clone())
        .tool(unlock)
        .build()
        .unwrap();
    let slowpoke = Agent::builder("slowpoke")
        .description("Takes its time")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("eventually").with_delay(std::time::Duration::from_secs(30))
        })))
        .build()
        .unwrap();
    let dawdler = Agent::builder("dawdler")
        .instructions("Ask the slowpoke.")
        .model(router("slowpoke", "agent", "take your time"))
        .memory(memory.clone())
        .agents([slowpoke])
        .build()
        .unwrap();
    vec![coordinator, gatekeeper, dawdler]
}

struct Fixture {
    base: String,
    http: reqwest::Client,
    unlocks: Arc<AtomicUsize>,
}

async fn serve() -> Fixture {
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    let unlocks = Arc::new(AtomicUsize::new(0));
    let echo = Agent::builder("echo")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("hi")
        })))
        .agents([Agent::builder("x")
            .model(Arc::new(ScriptedModel::new()))
            .build()
            .unwrap()])
        .build()
        .unwrap();
    let mut builder = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(echo);
    for agent in network_agents(&memory, Arc::clone(&unlocks)) {
        builder = builder.agent(agent);
    }
    let server = Server::new(builder.build().unwrap()).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
        unlocks,
    }
}

impl Fixture {
    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The events of an SSE answer (`data: <json>` blocks, then `[DONE]`).
    async fn events(&self, path: &str, body: Value) -> Vec<Value> {
        let response = self.post(path, body).await;
        assert_eq!(response.status(), 200, "{path}");
        let text = response.text().await.unwrap();
        let blocks: Vec<&str> = text
            .split("\n\n")
            .filter(|b| !b.trim().is_empty() && !b.starts_with(':'))
            .collect();
        let (last, events) = blocks.split_last().unwrap();
        assert_eq!(*last, "data: [DONE]");
        events
            .iter()
            .map(|b| serde_json::from_str(b.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_streams_its_events_over_sse() {
    let fixture = serve().await;
    let events = fixture
        .events(
            "/agents/coordinator/network",
            json!({"messages": "Greet me", "memory": {"thread": "t1", "resource": "u1"}, "maxSteps": 3}),
        )
        .await;
    let kinds = types(&events);
    assert_eq!(kinds[0], "routing-agent-start", "{kinds:?}");
    for expected in [
        "routing-agent-end",
        "agent-execution-start",
        "agent-execution-event-text-delta",
        "agent-execution-end",
        "network-validation-end",
    ] {
        assert!(kinds.contains(&expected), "no {expected} in {kinds:?}");
    }
    assert_eq!(kinds.last(), Some(&"network-execution-event-finish"));
    let run_id = events[0]["runId"].as_str().unwrap();
    assert!(
        events
            .iter()
            .all(|e| e["from"] == "NETWORK" && e["runId"] == run_id)
    );
    let finish = &events.last().unwrap()["payload"];
    assert_eq!(finish["result"], "hi there");
    assert_eq!(finish["isComplete"], true);
    // The agent's description names its workflows too (none here).
    let agent: Value = fixture
        .http
        .get(format!("{}/agents/coordinator", fixture.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Mastra's shape: the sub-agents keyed by id.
    assert_eq!(agent["agents"]["greeter"]["id"], "greeter");
    assert_eq!(agent["agents"].as_object().map(|a| a.len()), Some(1));
    assert_eq!(agent["workflows"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_without_memory_or_thread_is_refused() {
    let fixture = serve().await;
    let response = fixture
        .post(
            "/agents/echo/network",
            json!({"messages": "Hi", "memory": {"thread": "t1", "resource": "u1"}}),
        )
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "network_memory_required", "{body}");
    // An agent that cannot run a network has no stopped one: a decision finds nothing.
    let response = fixture
        .post(
            "/agents/echo/approve-network-tool-call",
            json!({"runId": "no-such-run"}),
        )
        .await;
    assert_eq!(response.status(), 404);
    let response = fixture
        .post("/agents/coordinator/network", json!({"messages": "Hi"}))
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "network_thread_required", "{body}");
    let response = fixture
        .post(
            "/agents/coordinator/approve-network-tool-call",
            json!({"runId": "no-such-run"}),
        )
        .await;
    assert_eq!(response.status(), 404);
    let response = fixture
        .post("/agents/coordinator/approve-network-tool-call", json!({}))
        .await;
    assert_eq!(response.status(), 422, "the run id is required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_tool_approval_is_decided_with_the_network_run_id() {
    let fixture = serve().await;
    let memory = json!({"thread": "gate", "resource": "u1"});
    let events = fixture
        .events(
            "/agents/gatekeeper/network",
            json!({"messages": "Unlock the door", "memory": memory}),
        )
        .await;
    let kinds = types(&events);
    assert_eq!(kinds.last(), Some(&"tool-execution-approval"), "{kinds:?}");
    let run_id = events[0]["runId"].as_str().unwrap().to_owned();
    assert_eq!(events.last().unwrap()["payload"]["runId"], run_id.as_str());
    assert_eq!(fixture.unlocks.load(Ordering::SeqCst), 0);
    let events = fixture
        .events(
            "/agents/gatekeeper/approve-network-tool-call",
            json!({"runId": run_id, "format": "mastra"}),
        )
        .await;
    let kinds = types(&events);
    assert_eq!(kinds[0], "tool-execution-start", "{kinds:?}");
    assert!(kinds.contains(&"tool-execution-end"));
    assert_eq!(kinds.last(), Some(&"network-execution-event-finish"));
    assert_eq!(fixture.unlocks.load(Ordering::SeqCst), 1);
    // Claimed once: the same decision again finds nothing waiting.
    let again = fixture
        .post(
            "/agents/gatekeeper/approve-network-tool-call",
            json!({"runId": run_id}),
        )
        .await;
    assert_eq!(again.status(), 404);

    // A decline: the tool never runs.
    let events = fixture
        .events(
            "/agents/gatekeeper/network",
            json!({"messages": "Unlock it again", "memory": {"thread": "gate-2", "resource": "u1"}}),
        )
        .await;
    let run_id = events[0]["runId"].as_str().unwrap().to_owned();
    let events = fixture
        .events(
            "/agents/gatekeeper/decline-network-tool-call",
            json!({"runId": run_id, "reason": "not today"}),
        )
        .await;
    let end = events
        .iter()
        .find(|e| e["type"] == "tool-execution-end")
        .unwrap();
    assert_eq!(
        end["payload"]["result"],
        "Tool call was not approved by the user: not today"
    );
    assert_eq!(fixture.unlocks.load(Ordering::SeqCst), 1);

    // A stopped network run is aborted by its run id on the agent's abort route: nothing is
    // left waiting, and the tool never runs.
    let events = fixture
        .events(
            "/agents/gatekeeper/network",
            json!({"messages": "Unlock it once more", "memory": {"thread": "gate-3", "resource": "u1"}}),
        )
        .await;
    let run_id = events[0]["runId"].as_str().unwrap().to_owned();
    let aborted = fixture
        .post(
            &format!("/agents/gatekeeper/runs/{run_id}/abort"),
            json!({}),
        )
        .await;
    assert_eq!(aborted.status(), 200);
    let approve = fixture
        .post(
            "/agents/gatekeeper/approve-network-tool-call",
            json!({"runId": run_id}),
        )
        .await;
    assert_eq!(approve.status(), 404, "nothing waits any more");
    let unknown = fixture
        .post("/agents/gatekeeper/runs/no-such-run/abort", json!({}))
        .await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(fixture.unlocks.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_network_is_aborted_by_its_run_id() {
    let fixture = serve().await;
    let mut response = fixture
        .post(
            "/agents/dawdler/network",
            json!({
                "messages": "Ask slowly",
                "memory": {"thread": "slow", "resource": "u1"},
                "runId": "slow-network"
            }),
        )
        .await;
    assert_eq!(response.status(), 200);
    // Read until the sub-agent runs (it would take 30 s to answer).
    let mut body = String::new();
    while !body.contains("agent-execution-start") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), response.chunk())
            .await
            .expect("the network streams")
            .unwrap()
            .expect("the stream goes on");
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let aborted = fixture
        .post("/agents/dawdler/runs/slow-network/abort", json!({}))
        .await;
    assert_eq!(aborted.status(), 200);
    let rest = tokio::time::timeout(std::time::Duration::from_secs(10), response.text())
        .await
        .expect("the abort ends the stream")
        .unwrap();
    body.push_str(&rest);
    assert!(body.contains("agent-execution-event-abort"), "{body}");
    assert!(
        body.contains("\"type\":\"agent-execution-abort\""),
        "{body}"
    );
    assert!(body.contains("network-execution-event-finish"), "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
}
