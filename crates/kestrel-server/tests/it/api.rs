//! The HTTP API over a real socket: agents, generate, SSE streams, approvals, suspended runs,
//! aborts, bad bodies, the bearer token, CORS, and a client that disconnects mid-run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_server::{ServeError, Server};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Email {
    to: String,
}

struct Fixture {
    base: String,
    sent: Arc<AtomicUsize>,
    slow: Arc<ScriptedModel>,
    http: reqwest::Client,
}

fn kestrel(sent: Arc<AtomicUsize>, slow: Arc<ScriptedModel>) -> Kestrel {
    let echo = Agent::builder("echo")
        .description("Says hello")
        .instructions("You greet.")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text_deltas(["hello ", last.as_str()])
        })))
        .build()
        .unwrap();
    let send_email = create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(move |email: Email, _ctx| {
            let sent = sent.clone();
            async move {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok(format!("sent to {}", email.to))
            }
        });
    let mailer = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
                ScriptedResponse::text("Done.")
            } else {
                ScriptedResponse::tool_call(
                    "call-1",
                    "send_email",
                    json!({"to": "bob@example.com"}),
                )
            }
        })))
        .tool(send_email)
        .build()
        .unwrap();
    let slow_agent = Agent::builder("slow")
        .model(slow)
        .tool(
            create_tool("tick")
                .description("Ticks")
                .execute(|_: Email, _ctx| async { Ok("tock") }),
        )
        .build()
        .unwrap();
    Kestrel::builder()
        .agent(echo)
        .agent(mailer)
        .agent(slow_agent)
        .build()
        .unwrap()
}

fn slow_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedResponse::text("finished").with_delay(Duration::from_millis(50))
        } else {
            ScriptedResponse::tool_call("t1", "tick", json!({"to": "x"}))
                .with_delay(Duration::from_millis(150))
        }
    }))
}

async fn start(configure: impl FnOnce(Server) -> Server) -> Fixture {
    let sent = Arc::new(AtomicUsize::new(0));
    let slow = slow_model();
    let server = configure(Server::new(kestrel(sent.clone(), slow.clone())));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    Fixture {
        base: format!("http://{addr}/api"),
        sent,
        slow,
        http: reqwest::Client::new(),
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

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }
}

/// The events of an SSE body, checking the framing: `data: <json>` blocks, then `[DONE]`.
async fn sse_events(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let body = response.text().await.unwrap();
    let blocks: Vec<&str> = body
        .split("\n\n")
        .filter(|b| !b.trim().is_empty() && !b.starts_with(':'))
        .collect();
    let (last, events) = blocks.split_last().unwrap();
    assert_eq!(*last, "data: [DONE]", "the stream ends with [DONE]");
    events
        .iter()
        .map(|b| {
            let data = b
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data line: {b}"));
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

async fn error_of(response: reqwest::Response, status: u16, code: &str) -> String {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], code, "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn agents_are_listed_and_described() {
    let f = start(|s| s).await;
    let agents: Value = f.get("/agents").await.json().await.unwrap();
    assert_eq!(agents["echo"]["description"], "Says hello");
    assert_eq!(agents["echo"]["instructions"], "You greet.");
    assert_eq!(
        agents["mailer"]["tools"]["send_email"]["description"],
        "Sends an email"
    );
    // Mastra's shape: a tool's schemas are JSON text.
    let input: Value = serde_json::from_str(
        agents["mailer"]["tools"]["send_email"]["inputSchema"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(input["properties"]["to"].is_object());
    let one: Value = f.get("/agents/echo").await.json().await.unwrap();
    assert_eq!(one["id"], "echo");
    let message = error_of(f.get("/agents/nobody").await, 404, "not_found").await;
    assert!(message.contains("echo, mailer, slow"), "{message}");
    error_of(f.get("/nothing/here").await, 404, "not_found").await;
}

#[tokio::test]
async fn generate_and_stream_answer_in_mastra_shapes() {
    let f = start(|s| s).await;
    let result: Value = f
        .post("/agents/echo/generate", json!({"messages": "Ada"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(result["text"], "hello Ada");
    assert_eq!(result["finishReason"], "stop");
    assert!(result["runId"].as_str().is_some_and(|id| !id.is_empty()));

    let messages = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "Bo"}]}], "runId": "run-42"});
    let events = sse_events(f.post("/agents/echo/stream", messages).await).await;
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"start"));
    assert_eq!(kinds.last(), Some(&"finish"));
    assert!(
        events
            .iter()
            .all(|e| e["runId"] == "run-42" && e["from"] == "AGENT")
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello Bo");
}

#[tokio::test]
async fn an_approval_stops_the_stream_and_the_decision_continues_it() {
    let f = start(|s| s).await;
    let events = sse_events(
        f.post("/agents/mailer/stream", json!({"messages": "email bob"}))
            .await,
    )
    .await;
    let approval = events
        .iter()
        .find(|e| e["type"] == "tool-call-approval")
        .unwrap();
    let run_id = approval["runId"].as_str().unwrap().to_owned();
    assert_eq!(approval["payload"]["toolCallId"], "call-1");
    assert_eq!(f.sent.load(Ordering::SeqCst), 0);

    let listed: Value = f
        .get("/agents/mailer/suspended-runs")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["runs"][0]["runId"], run_id.as_str());
    assert_eq!(listed["runs"][0]["toolCalls"][0]["toolName"], "send_email");
    // Mastra's fields beside Kestrel's: the run's status, an ISO date, and whether each call
    // waits for an approval.
    assert_eq!(listed["runs"][0]["status"], "suspended");
    let at = listed["runs"][0]["suspendedAt"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");
    assert_eq!(listed["runs"][0]["toolCalls"][0]["requiresApproval"], true);
    assert_eq!(
        listed["runs"][0]["toolCalls"][0]["waiting"]["kind"],
        "approval"
    );
    assert!(
        listed["runs"][0]["toolCalls"][0]
            .get("suspendPayload")
            .is_none()
    );

    // A decision on another call, or of the wrong kind, is a 409 naming why.
    let wrong = f
        .post(
            "/agents/mailer/approve-tool-call",
            json!({"runId": run_id, "toolCallId": "nope"}),
        )
        .await;
    let message = error_of(wrong, 409, "call_not_waiting").await;
    assert!(message.contains("call-1"), "{message}");
    let resumed = f
        .post(
            "/agents/mailer/resume-stream",
            json!({"runId": run_id, "toolCallId": "call-1", "resumeData": {}}),
        )
        .await;
    error_of(resumed, 409, "wrong_decision").await;
    let missing = f
        .post(
            "/agents/mailer/approve-tool-call",
            json!({"runId": "ghost", "toolCallId": "call-1"}),
        )
        .await;
    error_of(missing, 404, "not_found").await;

    let continued = f
        .post(
            "/agents/mailer/approve-tool-call",
            json!({"runId": run_id, "toolCallId": "call-1", "fingerprint": approval["payload"]["fingerprint"]}),
        )
        .await;
    let events = sse_events(continued).await;
    assert!(events.iter().all(|e| e["runId"] == run_id.as_str()));
    assert!(types(&events).contains(&"tool-result"));
    assert_eq!(events.last().unwrap()["payload"]["output"]["text"], "Done.");
    assert_eq!(f.sent.load(Ordering::SeqCst), 1);
    let again = f
        .post(
            "/agents/mailer/approve-tool-call",
            json!({"runId": run_id, "toolCallId": "call-1"}),
        )
        .await;
    error_of(again, 409, "not_suspended").await;

    // The generate forms: stop, then decline.
    let stopped: Value = f
        .post("/agents/mailer/generate", json!({"messages": "email bob"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(stopped["finishReason"], "suspended");
    assert_eq!(stopped["suspended"][0]["toolCallId"], "call-1");
    let declined: Value = f
        .post(
            "/agents/mailer/decline-tool-call-generate",
            json!({"runId": stopped["runId"], "toolCallId": "call-1", "reason": "not today"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(declined["text"], "Done.");
    assert_eq!(declined["toolResults"][0]["result"], "not today");
    assert_eq!(f.sent.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_bodies_are_4xx_json_errors_that_name_the_problem() {
    let f = start(|s| s.body_limit(1024)).await;
    let raw = f
        .http
        .post(format!("{}/agents/echo/generate", f.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    error_of(raw, 400, "invalid_json").await;
    let no_type = f
        .http
        .post(format!("{}/agents/echo/generate", f.base))
        .body(r#"{"messages":"hi"}"#)
        .send()
        .await
        .unwrap();
    error_of(no_type, 415, "unsupported_media_type").await;
    let message = error_of(
        f.post("/agents/echo/generate", json!({})).await,
        422,
        "invalid_body",
    )
    .await;
    assert!(message.contains("messages"), "{message}");
    let message = error_of(
        f.post("/agents/echo/generate", json!({"messages": []}))
            .await,
        422,
        "invalid_body",
    )
    .await;
    assert_eq!(message, "messages must not be empty");
    let message = error_of(
        f.post(
            "/agents/echo/generate",
            json!({"messages": [{"role": "robot", "content": "x"}]}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    assert!(
        message.contains("messages[0]") && message.contains("robot"),
        "{message}"
    );
    let message = error_of(
        f.post(
            "/agents/echo/generate",
            json!({"messages": "x", "maxSteps": "many"}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    assert!(message.contains("maxSteps"), "{message}");
    error_of(
        f.post(
            "/agents/echo/generate",
            json!({"messages": "x", "maxSteps": 0}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    error_of(
        f.post(
            "/agents/echo/generate",
            json!({"messages": "x", "threadId": "t"}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    let big = "x".repeat(4096);
    error_of(
        f.post("/agents/echo/generate", json!({"messages": big}))
            .await,
        413,
        "body_too_large",
    )
    .await;
    error_of(
        f.get("/agents/echo/suspended-runs?page=first").await,
        400,
        "invalid_query",
    )
    .await;
}

#[tokio::test]
async fn a_token_guards_every_route_and_is_required_beyond_loopback() {
    let f = start(|s| s.token("s3cret")).await;
    let message = error_of(f.get("/agents").await, 401, "unauthorized").await;
    assert!(message.contains("Bearer"), "{message}");
    let wrong = f
        .http
        .get(format!("{}/agents", f.base))
        .bearer_auth("guess")
        .send()
        .await
        .unwrap();
    error_of(wrong, 401, "unauthorized").await;
    let right = f
        .http
        .get(format!("{}/agents", f.base))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);

    let exposed = Server::new(kestrel(Arc::new(AtomicUsize::new(0)), slow_model()));
    let addr: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = exposed.bind(addr).await.unwrap_err();
    assert!(matches!(err, ServeError::TokenRequired { .. }), "{err}");
    assert!(err.to_string().contains("KESTREL_API_TOKEN"), "{err}");
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let f = start(|s| s.cors_origins(["http://app.test"])).await;
    let preflight = |origin: &'static str| {
        f.http
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/agents/echo/stream", f.base),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let allowed = preflight("http://app.test").await.unwrap();
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "http://app.test"
    );
    let other = preflight("http://evil.test").await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_stop_its_run() {
    let f = start(|s| s).await;
    let mut response = f
        .post(
            "/agents/slow/stream",
            json!({"messages": "tick", "runId": "run-left"}),
        )
        .await;
    // Read the first chunk, then go away mid-run.
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("data: "));
    drop(response);
    let mut waited = Duration::ZERO;
    while f.slow.calls() < 2 && waited < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert_eq!(f.slow.calls(), 2, "the run went on to its second step");
    // The run can be aborted by id while it runs, or reports it is not stored when done.
    let aborted = f.post("/agents/slow/runs/run-left/abort", json!({})).await;
    assert!(
        aborted.status() == 200 || aborted.status() == 404,
        "{}",
        aborted.status()
    );
}

#[tokio::test]
async fn with_abort_on_disconnect_a_client_that_leaves_aborts_its_run() {
    let f = start(|s| s.abort_on_disconnect(true)).await;
    let mut response = f
        .post(
            "/agents/slow/stream",
            json!({"messages": "tick", "runId": "run-aborted"}),
        )
        .await;
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("data: "));
    drop(response);
    // The first model call takes 150 ms; unaborted, the second follows 50 ms after it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(f.slow.calls(), 1, "the run stopped in its first step");
}

#[tokio::test]
async fn threads_are_aborted_by_resource_and_id() {
    let f = start(|s| s).await;
    let response: Value = f
        .post(
            "/agents/echo/threads/abort",
            json!({"resourceId": "ada", "threadId": "t1"}),
        )
        .await
        .json()
        .await
        .unwrap();
    // Mastra's answer is `{aborted: boolean}`; Kestrel adds how many.
    assert_eq!(response["aborted"], false);
    assert_eq!(response["count"], 0);
    error_of(
        f.post("/agents/echo/threads/abort", json!({"resourceId": "ada"}))
            .await,
        422,
        "invalid_body",
    )
    .await;
}

#[tokio::test]
async fn a_subscription_sees_the_run_a_message_wakes() {
    let f = start(|s| s).await;
    let mut subscription = f
        .post(
            "/agents/echo/threads/subscribe",
            json!({"resourceId": "ada", "threadId": "t1"}),
        )
        .await;
    assert_eq!(subscription.status(), 200);
    let first = subscription.chunk().await.unwrap().unwrap();
    assert_eq!(String::from_utf8_lossy(&first), ": connected\n\n");

    let sent: Value = f
        .post(
            "/agents/echo/send-message",
            json!({"message": "Cy", "resourceId": "ada", "threadId": "t1"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(sent["accepted"], true);
    let run_id = sent["runId"].as_str().unwrap().to_owned();

    let mut seen = String::new();
    while !seen.contains(r#""type":"finish""#) {
        let chunk = tokio::time::timeout(Duration::from_secs(5), subscription.chunk())
            .await
            .expect("the woken run's events reach the subscriber")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events: Vec<Value> = seen
        .split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["runId"] == run_id.as_str()));
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello Cy");

    // Storing a signal needs memory, which this agent has not.
    let stored = f
        .post(
            "/agents/echo/signals",
            json!({"signal": "reminder", "resourceId": "ada", "threadId": "t1", "ifIdle": "persist"}),
        )
        .await;
    error_of(stored, 409, "no_memory").await;
    let bad = f
        .post(
            "/agents/echo/signals",
            json!({"signal": "x", "resourceId": "ada", "threadId": "t1", "ifIdle": "snooze"}),
        )
        .await;
    error_of(bad, 422, "invalid_body").await;
    let empty = f
        .post(
            "/agents/echo/send-message",
            json!({"message": " ", "resourceId": "ada", "threadId": "t1"}),
        )
        .await;
    error_of(empty, 422, "invalid_body").await;
}

#[tokio::test]
async fn tools_are_listed_and_run_directly_only_when_no_person_is_needed() {
    let f = start(|s| s).await;
    let tools: Value = f.get("/agents/mailer/tools").await.json().await.unwrap();
    assert_eq!(tools["send_email"]["description"], "Sends an email");
    let one: Value = f.get("/agents/slow/tools/tick").await.json().await.unwrap();
    assert_eq!(one["id"], "tick");
    let message = error_of(f.get("/agents/slow/tools/tock").await, 404, "not_found").await;
    assert!(message.contains("tick"), "{message}");

    let ran: Value = f
        .post(
            "/agents/slow/tools/tick/execute",
            json!({"data": {"to": "x"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(ran["result"], "tock");
    let message = error_of(
        f.post(
            "/agents/slow/tools/tick/execute",
            json!({"data": {"to": 5}}),
        )
        .await,
        422,
        "invalid_body",
    )
    .await;
    assert!(message.contains("to"), "{message}");
    let message = error_of(
        f.post(
            "/agents/mailer/tools/send_email/execute",
            json!({"data": {"to": "bob@example.com"}}),
        )
        .await,
        403,
        "not_executable",
    )
    .await;
    assert!(message.contains("approval"), "{message}");
    assert_eq!(
        f.sent.load(Ordering::SeqCst),
        0,
        "nothing was sent without approval"
    );
    error_of(
        f.post("/agents/slow/tools/ghost/execute", json!({"data": {}}))
            .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_caller_pinned_to_a_resource_cannot_reach_another_resources_runs() {
    let f = start(|s| {
        s.token("admin")
            .resource_token("ada-token", "ada")
            .resource_token("bob-token", "bob")
    })
    .await;
    let as_ = |token: &'static str, path: &str, body: Value| {
        f.http
            .post(format!("{}{path}", f.base))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let events = sse_events(
        as_(
            "ada-token",
            "/agents/mailer/stream",
            json!({"messages": "email bob"}),
        )
        .await
        .unwrap(),
    )
    .await;
    let approval = events
        .iter()
        .find(|e| e["type"] == "tool-call-approval")
        .unwrap();
    let run_id = approval["runId"].as_str().unwrap().to_owned();
    let decision = json!({"runId": run_id, "toolCallId": "call-1"});

    // Bob sees nothing of Ada's, and cannot act on it.
    let refused = as_(
        "bob-token",
        "/agents/mailer/approve-tool-call",
        decision.clone(),
    )
    .await
    .unwrap();
    error_of(refused, 404, "not_found").await;
    let aborted = as_(
        "bob-token",
        &format!("/agents/mailer/runs/{run_id}/abort"),
        json!({}),
    )
    .await
    .unwrap();
    error_of(aborted, 404, "not_found").await;
    let listed: Value = f
        .http
        .get(format!("{}/agents/mailer/suspended-runs", f.base))
        .bearer_auth("bob-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["total"], 0);
    let peek = f
        .http
        .get(format!(
            "{}/agents/mailer/suspended-runs?resourceId=ada",
            f.base
        ))
        .bearer_auth("bob-token")
        .send()
        .await
        .unwrap();
    error_of(peek, 403, "forbidden").await;
    let borrowed = as_(
        "bob-token",
        "/agents/echo/stream",
        json!({"messages": "hi", "memory": {"thread": "t1", "resource": "ada"}}),
    )
    .await
    .unwrap();
    error_of(borrowed, 403, "forbidden").await;
    let thread = as_(
        "bob-token",
        "/agents/echo/threads/abort",
        json!({"resourceId": "ada", "threadId": "t1"}),
    )
    .await
    .unwrap();
    error_of(thread, 403, "forbidden").await;
    assert_eq!(f.sent.load(Ordering::SeqCst), 0);

    // Ada (and the unpinned token) can.
    let listed: Value = f
        .http
        .get(format!("{}/agents/mailer/suspended-runs", f.base))
        .bearer_auth("admin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["runs"][0]["resourceId"], "ada");
    let events = sse_events(
        as_("ada-token", "/agents/mailer/approve-tool-call", decision)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(events.last().unwrap()["type"], "finish");
    assert_eq!(f.sent.load(Ordering::SeqCst), 1);
}
