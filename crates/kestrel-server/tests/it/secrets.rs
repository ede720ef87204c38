//! A planted secret reaches no client (issue 37, point 1): a provider's answer carrying an API
//! key and a store's error carrying a password are planted in every place a failure passes
//! through — a network's sub-agent, workflow, tool and completion check, an agent's workflow
//! tool, a nested workflow, an agent step — and every byte a client can read is searched for
//! them: the agent, network and workflow streams, a thread subscription, the chat route, the
//! thread's stored messages (with `uiMessages`), workflow results and run snapshots, and what
//! the routing model is sent. Each failure is still reported, in generic words.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::agent::AgentStep;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{
    ModelError, ModelRequest, ResponseFormat, ScriptedModel, ScriptedResponse,
};
use kestrel_core::workflow::{
    InMemoryWorkflowStore, Workflow, WorkflowRunList, WorkflowRunsQuery, WorkflowSnapshot,
    WorkflowStatus, WorkflowStore, WorkflowStoreError, WorkflowTool, create_step,
};
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a provider's and a store's failures carry: no client may ever read it.
const SECRET: &str = "sk-PLANTED-SECRET";

#[derive(Deserialize, Serialize, JsonSchema)]
struct N {
    v: i64,
}

/// A provider that refuses the key, naming it.
fn provider_error() -> ScriptedResponse {
    ScriptedResponse::error(ModelError::Auth {
        provider: "acme".into(),
        status: 401,
        message: format!("Incorrect API key provided: {SECRET}"),
    })
}

/// A model that always fails with [`provider_error`].
fn failing_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|_| provider_error()))
}

/// A workflow store that fails every call about one workflow, with a password in its error.
#[derive(Debug)]
struct LeakyStore {
    inner: InMemoryWorkflowStore,
    failing: &'static str,
}

type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, WorkflowStoreError>> + Send + 'a>>;

impl LeakyStore {
    fn new(failing: &'static str) -> Arc<Self> {
        Arc::new(Self {
            inner: InMemoryWorkflowStore::new(),
            failing,
        })
    }

    fn check(&self, workflow_id: &str) -> Result<(), WorkflowStoreError> {
        if workflow_id == self.failing {
            return Err(WorkflowStoreError(Box::new(std::io::Error::other(
                format!(
                    "FATAL: password authentication failed for user \"admin\" (password {SECRET})"
                ),
            ))));
        }
        Ok(())
    }
}

// `WorkflowStore` is an `async_trait`; written out here, as the server's tests do not depend
// on the macro.
impl WorkflowStore for LeakyStore {
    fn save<'a, 'b, 'c>(&'a self, snapshot: &'b WorkflowSnapshot) -> Answer<'c, ()>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(&snapshot.workflow_id)?;
            self.inner.save(snapshot).await
        })
    }

    fn fence<'a, 'b, 'd, 'c>(
        &'a self,
        workflow_id: &'b str,
        run_id: &'d str,
        token: u64,
    ) -> Answer<'c, ()>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(workflow_id)?;
            self.inner.fence(workflow_id, run_id, token).await
        })
    }

    fn load<'a, 'b, 'd, 'c>(
        &'a self,
        workflow_id: &'b str,
        run_id: &'d str,
    ) -> Answer<'c, Option<WorkflowSnapshot>>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(workflow_id)?;
            self.inner.load(workflow_id, run_id).await
        })
    }

    fn claim<'a, 'b, 'd, 'c>(
        &'a self,
        workflow_id: &'b str,
        run_id: &'d str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Answer<'c, bool>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(workflow_id)?;
            self.inner.claim(workflow_id, run_id, from, to).await
        })
    }

    fn list<'a, 'b, 'c>(&'a self, query: &'b WorkflowRunsQuery) -> Answer<'c, WorkflowRunList>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(query.workflow_id.as_deref().unwrap_or_default())?;
            self.inner.list(query).await
        })
    }

    fn delete<'a, 'b, 'd, 'c>(&'a self, workflow_id: &'b str, run_id: &'d str) -> Answer<'c, bool>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            self.check(workflow_id)?;
            self.inner.delete(workflow_id, run_id).await
        })
    }

    fn is_durable(&self) -> bool {
        false
    }
}

/// A one-step workflow on `{v}` kept in a store that always fails for it.
fn unreachable_workflow(id: &'static str) -> Workflow {
    Workflow::builder(id)
        .description("Counts, in a store that is down")
        .store(LeakyStore::new(id))
        .then(create_step("count").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) }))
        .commit()
        .unwrap()
}

/// What a scripted router is asked: to route (`routing`) or to judge (`completion`).
fn asked(request: &ModelRequest) -> Option<&str> {
    match &request.response_format {
        Some(ResponseFormat::Json { name, .. }) => name.as_deref(),
        _ => None,
    }
}

/// The network's router: by the iterations recorded in the thread, routes to the failing
/// sub-agent, the workflow whose agent step fails, the workflow whose store is down, the tool
/// of a workflow whose store is down, then `none`. Its first completion check fails with the
/// secret; the others find the task not complete.
fn router() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|request| {
        let done = request
            .messages
            .iter()
            .filter(|m| m.text().contains("\"isNetwork\":true"))
            .count();
        let answer = match asked(request) {
            Some("completion") if done == 1 => return provider_error(),
            Some("completion") => {
                json!({"isComplete": false, "completionReason": "not yet", "finalResult": ""})
            }
            _ => {
                let (id, kind, prompt) = match done {
                    0 => ("leaker", "agent", "go"),
                    1 => ("drafting", "workflow", r#"{"prompt": "draft it"}"#),
                    2 => ("vault", "workflow", r#"{"v": 1}"#),
                    3 => ("workflow-ledger", "tool", r#"{"v": 1}"#),
                    _ => ("none", "none", ""),
                };
                json!({"primitiveId": id, "primitiveType": kind, "prompt": prompt,
                       "selectionReason": format!("{id} does this")})
            }
        };
        ScriptedResponse::text(answer.to_string())
    }))
}

struct Fixture {
    base: String,
    http: reqwest::Client,
    router: Arc<ScriptedModel>,
}

async fn serve() -> Fixture {
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    let leaker = Agent::builder("leaker")
        .description("Fails, naming the key")
        .model(failing_model())
        .build()
        .unwrap();
    let drafter = Agent::builder("drafter")
        .model(failing_model())
        .build()
        .unwrap();
    let drafting = Workflow::builder("drafting")
        .description("Drafts with an agent that fails")
        .then(AgentStep::new(drafter))
        .commit()
        .unwrap();
    let ledger = unreachable_workflow("ledger");
    let router = router();
    let hub = Agent::builder("hub")
        .instructions("Route the task.")
        .model(router.clone())
        .memory(memory.clone())
        .agents([leaker])
        .workflows([drafting.clone(), unreachable_workflow("vault")])
        .tool(WorkflowTool::new(ledger.clone()))
        .build()
        .unwrap();
    // Calls its workflow tool once, then answers.
    let clerk = Agent::builder("clerk")
        .model(Arc::new(ScriptedModel::from_fn(|request| {
            if request.messages.iter().any(|m| m.role == Role::Tool) {
                ScriptedResponse::text("the ledger could not be read")
            } else {
                ScriptedResponse::tool_call("c1", "workflow-ledger", json!({"v": 1}))
            }
        })))
        .memory(memory.clone())
        .workflow(ledger)
        .build()
        .unwrap();
    // Its nested workflow's runs are kept in the outer run's store, which is down for them.
    let inner = Workflow::builder("inner")
        .then(create_step("count").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) }))
        .commit()
        .unwrap();
    let nesting = Workflow::builder("nesting")
        .store(LeakyStore::new("inner"))
        .then(create_step("prepare").execute(|n: N, _ctx| async move { Ok(N { v: n.v * 2 }) }))
        .then(inner)
        .commit()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(hub)
        .agent(clerk)
        .workflow(drafting)
        .workflow(nesting)
        .build()
        .unwrap();
    let server = Server::new(kestrel).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        router,
    }
}

impl Fixture {
    async fn post(&self, path: &str, body: Value) -> String {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {text}");
        text
    }

    async fn get(&self, path: &str) -> String {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {text}");
        text
    }

    /// A subscription to `agent`'s thread, read while `during` runs.
    async fn subscribed<F: Future<Output = ()>>(
        &self,
        agent: &str,
        thread: &str,
        during: F,
    ) -> String {
        let mut subscription = self
            .http
            .post(format!(
                "{}/api/agents/{agent}/threads/subscribe",
                self.base
            ))
            .json(&json!({"resourceId": "u", "threadId": thread}))
            .send()
            .await
            .unwrap();
        during.await;
        let mut seen = String::new();
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_millis(300), subscription.chunk()).await
        {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        seen
    }

    /// A thread's stored messages and their `uiMessages`, in both AI SDK versions.
    async fn thread(&self, thread: &str) -> Vec<(String, String)> {
        let mut outputs = Vec::new();
        for version in ["v5", "v6"] {
            let path =
                format!("/api/memory/threads/{thread}/messages?resourceId=u&version={version}");
            outputs.push((format!("GET {path}"), self.get(&path).await));
        }
        outputs
    }
}

/// The routes whose output holds the secret (none may).
fn leaks(outputs: &[(String, String)]) -> Vec<&str> {
    outputs
        .iter()
        .filter(|(_, output)| output.contains(SECRET))
        .map(|(route, _)| route.as_str())
        .collect()
}

/// The `data:` events of an SSE body.
fn sse_events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network_output_shows_a_planted_secret() {
    let f = serve().await;
    let body = json!({"messages": "Do the task", "memory": {"thread": "t-net", "resource": "u"}, "maxSteps": 5});
    let mut stream = String::new();
    let seen = f
        .subscribed("hub", "t-net", async {
            stream = f.post("/api/agents/hub/network", body).await;
        })
        .await;
    let mut outputs = vec![
        ("POST /api/agents/hub/network".to_owned(), stream.clone()),
        ("hub's thread subscription".to_owned(), seen),
    ];
    outputs.extend(f.thread("t-net").await);
    let sent: Vec<String> = f
        .router
        .requests()
        .iter()
        .map(|request| format!("{request:?}"))
        .collect();
    outputs.push((
        "what the routing model was sent".to_owned(),
        sent.join("\n"),
    ));
    assert_eq!(leaks(&outputs), Vec::<&str>::new(), "{outputs:#?}");

    // Every failure is still reported, in generic words.
    let events = sse_events(&stream);
    let of = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| &e["payload"])
            .collect()
    };
    let sub_error = of("agent-execution-event-error");
    assert_eq!(sub_error.len(), 1, "{stream}");
    assert_eq!(sub_error[0]["payload"]["kind"], "model", "{stream}");
    let text = sub_error[0]["payload"]["error"].as_str().unwrap();
    assert!(text.contains("the model provider failed"), "{text}");
    // The agent step's error event, nested in the workflow's step output.
    assert!(
        stream.contains("workflow-execution-event-workflow-step-output")
            && stream.matches("the model provider failed").count() >= 2,
        "{stream}"
    );
    // What each iteration gave, as the next routing read it: what failed, and its run.
    let results: Vec<&str> = of("routing-agent-start")
        .iter()
        .filter_map(|p| p["inputData"]["result"].as_str())
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    let expected = [
        r#"Error: agent "leaker" failed (its run "#,
        r#"Error: workflow "drafting" failed (its run "#,
        r#"Error: workflow "vault" could not run (its run "#,
        r#"Error: tool "workflow-ledger" failed: workflow "ledger" could not run (its run "#,
    ];
    for (result, expected) in results.iter().zip(expected) {
        assert!(result.starts_with(expected), "{result:?}, not {expected:?}");
    }
    assert!(
        results[2..]
            .iter()
            .all(|r| r.ends_with("the workflow store failed")),
        "{results:?}"
    );
    let validations = of("network-validation-end");
    assert_eq!(validations[0]["passed"], false);
    assert_eq!(
        validations[0]["results"][0]["reason"],
        "LLM completion check failed: the model provider failed"
    );
    let finish = of("network-execution-event-finish");
    assert_eq!(finish.len(), 1, "{stream}");
    assert_eq!(
        finish[0]["result"].as_str(),
        Some(results[3]),
        "{}",
        finish[0]
    );
    // The thread keeps a record of each failed iteration, in the same words.
    let thread: Value = serde_json::from_str(&outputs[2].1).unwrap();
    let recorded: Vec<String> = thread["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            m["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|part| serde_json::from_str::<Value>(part["text"].as_str()?).ok())
        .filter(|record| record["isNetwork"] == true)
        .filter_map(|record| record["finalResult"]["error"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    assert!(
        recorded[0].starts_with(r#"agent "leaker" failed (its run "#),
        "{recorded:?}"
    );
    assert!(
        recorded[2].starts_with(r#"workflow "vault" could not run (its run "#),
        "{recorded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_workflow_tool_output_shows_a_planted_secret() {
    let f = serve().await;
    let mut outputs = Vec::new();
    let seen = f
        .subscribed("clerk", "t-clerk", async {
            for route in ["stream", "generate"] {
                let body =
                    json!({"messages": "read the ledger", "memory": {"thread": "t-clerk", "resource": "u"}});
                let output = f.post(&format!("/api/agents/clerk/{route}"), body).await;
                outputs.push((format!("POST /api/agents/clerk/{route}"), output));
            }
        })
        .await;
    outputs.push(("clerk's thread subscription".to_owned(), seen));
    let chat = json!({"id": "t-chat", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "read the ledger"}]}]});
    outputs.push((
        "POST /chat/clerk".to_owned(),
        f.post("/chat/clerk", chat).await,
    ));
    outputs.extend(f.thread("t-clerk").await);
    assert_eq!(leaks(&outputs), Vec::<&str>::new(), "{outputs:#?}");

    // The model read that the workflow could not run; the client sees the same words.
    let stream = &outputs[0].1;
    let failed = sse_events(stream)
        .into_iter()
        .find(|e| e["type"] == "tool-error")
        .unwrap_or_else(|| panic!("no tool-error: {stream}"));
    let error = failed["payload"]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(r#"workflow "ledger" could not run (its run "#)
            && error.ends_with("the workflow store failed"),
        "{error}"
    );
    for (route, output) in &outputs {
        assert!(
            route.ends_with("generate") || output.contains("could not run (its run"),
            "{route}: {output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_workflow_output_shows_a_planted_secret() {
    let f = serve().await;
    let mut outputs = Vec::new();
    let input = json!({"inputData": {"v": 1}});
    let stream = f.post("/api/workflows/nesting/stream", input.clone()).await;
    outputs.push((
        "POST /api/workflows/nesting/stream".to_owned(),
        stream.clone(),
    ));
    let started = f
        .post("/api/workflows/nesting/start-async", input.clone())
        .await;
    outputs.push((
        "POST /api/workflows/nesting/start-async".to_owned(),
        started.clone(),
    ));
    let run_id = serde_json::from_str::<Value>(&started).unwrap()["runId"]
        .as_str()
        .map(str::to_owned);
    let listed = f.get("/api/workflows/nesting/runs").await;
    let run_id = run_id.unwrap_or_else(|| {
        serde_json::from_str::<Value>(&listed).unwrap()["runs"][0]["runId"]
            .as_str()
            .unwrap()
            .to_owned()
    });
    outputs.push(("GET /api/workflows/nesting/runs".to_owned(), listed));
    for path in [
        format!("/api/workflows/nesting/runs/{run_id}"),
        format!("/api/workflows/nesting/runs/{run_id}?fields=result,error,steps"),
    ] {
        outputs.push((format!("GET {path}"), f.get(&path).await));
    }
    let drafted = f
        .post(
            "/api/workflows/drafting/stream",
            json!({"inputData": {"prompt": "draft it"}}),
        )
        .await;
    outputs.push((
        "POST /api/workflows/drafting/stream".to_owned(),
        drafted.clone(),
    ));
    assert_eq!(leaks(&outputs), Vec::<&str>::new(), "{outputs:#?}");

    // The nesting step failed, and says that the store did.
    for (route, output) in &outputs[..5] {
        assert!(
            output.contains(r#"nested workflow \"inner\": the workflow store failed""#),
            "{route}: {output}"
        );
    }
    assert!(
        drafted.contains("the model provider failed")
            && drafted.contains(r#"agent \"drafter\" failed"#),
        "{drafted}"
    );
}

/// Redis is a trust boundary: events another instance (or anyone with access) left in a
/// thread's stream reach a subscriber redacted as every stream's events are, here an error
/// event carrying a provider's text.
#[tokio::test]
async fn events_read_from_redis_are_redacted_again() {
    use kestrel_core::event::{ErrorPayload, Event, EventKind};
    use kestrel_core::pubsub::{PubSub, thread_topic};
    use kestrel_redis::{RedisPubSub, RedisPubSubOptions};

    let url = match std::env::var("KESTREL_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            eprintln!(
                "skipping events_read_from_redis_are_redacted_again: KESTREL_TEST_REDIS_URL is not set"
            );
            return;
        }
    };
    let prefix = format!("kestrel-test:{}:", uuid::Uuid::new_v4());
    let options = || RedisPubSubOptions::default().key_prefix(&prefix);
    let on_server = RedisPubSub::connect(&url, options()).await.unwrap();
    let elsewhere = RedisPubSub::connect(&url, options()).await.unwrap();
    let agent = Agent::builder("listener")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("hi")
        })))
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .agent(agent)
        .pubsub(Arc::new(on_server))
        .build()
        .unwrap();
    let server = Server::new(kestrel);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let mut subscription = reqwest::Client::new()
        .post(format!(
            "http://{addr}/api/agents/listener/threads/subscribe"
        ))
        .json(&json!({"resourceId": "alice", "threadId": "t1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(subscription.status(), 200);
    // Wait for the subscription to be in place (its first bytes), then publish elsewhere.
    let first = tokio::time::timeout(Duration::from_secs(10), subscription.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let mut seen = String::from_utf8_lossy(&first).into_owned();
    let leaked = Event::agent(
        "run-elsewhere".into(),
        EventKind::Error(ErrorPayload {
            error: format!("the model provider answered 401: Incorrect API key {SECRET}"),
            kind: "model".into(),
        }),
    );
    elsewhere
        .publish(&thread_topic("alice", "t1"), leaked)
        .await
        .unwrap();
    while !seen.contains("\"type\":\"error\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), subscription.chunk())
            .await
            .expect("the event arrives")
            .unwrap()
            .expect("the subscription stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!seen.contains(SECRET), "{seen}");
    assert!(seen.contains("the model provider failed"), "{seen}");
}
