//! What bad input and failing providers answer: no provider's error text reaches a client, a
//! NUL character is refused alike on SQLite and PostgreSQL, and what the fuzzer found answers
//! 4xx.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::pubsub::InProcessPubSub;
use kestrel_core::tool::create_tool;
use kestrel_server::Server;
use serde_json::{Value, json};

use super::{Fixture, Nothing, SECRET, start};

#[tokio::test]
async fn no_route_shows_a_providers_error_text() {
    let f = start(|s| s).await;
    let mut outputs = Vec::new();
    for agent in ["leaky", "supervisor"] {
        // A subscriber of the thread sees the run's events too.
        let subscription = f
            .post(
                &format!("/api/agents/{agent}/threads/subscribe"),
                json!({"resourceId": "u", "threadId": format!("t-{agent}")}),
            )
            .send()
            .await
            .unwrap();
        let memory = json!({"thread": format!("t-{agent}"), "resource": "u"});
        for route in ["stream", "generate"] {
            let body = json!({"messages": "hi", "memory": memory});
            let (_, text) =
                Fixture::status_and_body(f.post(&format!("/api/agents/{agent}/{route}"), body))
                    .await;
            outputs.push((format!("{agent} {route}"), text));
        }
        let chat = json!({"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
        let (_, text) = Fixture::status_and_body(f.post(&format!("/chat/{agent}"), chat)).await;
        outputs.push((format!("{agent} chat"), text));
        // What the subscriber got while those ran: read for a moment, then drop.
        let mut subscription = subscription;
        let mut seen = String::new();
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_millis(300), subscription.chunk()).await
        {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert!(
            seen.contains("\"type\":\"error\"") || agent == "supervisor",
            "{seen}"
        );
        outputs.push((format!("{agent} subscription"), seen));
    }
    for (route, output) in &outputs {
        assert!(
            !output.contains(SECRET),
            "{route} shows the secret: {output}"
        );
        assert!(!output.contains("internal-billing"), "{route}: {output}");
    }
    let stream = &outputs[0].1;
    assert!(
        stream.contains(r#""kind":"model""#) && stream.contains("the model provider failed"),
        "{stream}"
    );
    // The sub-agent's own error event travelled nested in the supervisor's stream, redacted.
    let nested = &outputs[4].1;
    assert!(
        nested.contains("tool-output") && nested.contains(r#""kind":"model""#),
        "{nested}"
    );
}

#[tokio::test]
async fn a_nul_character_is_refused_alike_on_sqlite_and_postgres() {
    use kestrel_memory::Memory;
    use kestrel_storage::testing as fixtures;
    let mut backends = vec![("sqlite", fixtures::sqlite().await)];
    match fixtures::postgres().await {
        Some(pg) => backends.push(("postgres", Some(pg))),
        None => eprintln!(
            "skipped on PostgreSQL: set {} to run it there too",
            fixtures::POSTGRES_URL_VAR
        ),
    }
    for (backend, fixture) in backends {
        let fixture = fixture.unwrap();
        let memory = Memory::new(fixture.store());
        let echo = Agent::builder("echo")
            .model(Arc::new(ScriptedModel::from_fn(|req| {
                ScriptedResponse::text(format!("got {}", req.messages.len()))
            })))
            .memory(memory.clone())
            .build()
            .unwrap();
        let kestrel = Kestrel::builder()
            .agent(echo)
            .storage(Arc::clone(memory.storage().unwrap()))
            .memory(memory.clone())
            .build()
            .unwrap();
        let server = Server::new(kestrel).memory(memory);
        let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        tokio::spawn(server.serve_on(listener, addr));
        let base = format!("http://{addr}");
        let http = reqwest::Client::new();
        let memory_of = json!({"thread": "t1", "resource": "r1"});
        let cases = [
            (
                "/api/agents/echo/generate",
                json!({"messages": "a\u{0}b", "memory": memory_of}),
            ),
            (
                "/api/agents/echo/stream",
                json!({"messages": [{"role": "user", "content": "x\u{0}"}], "memory": memory_of}),
            ),
            (
                "/chat/echo",
                json!({"id": "t1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "\u{0}"}]}]}),
            ),
            (
                "/api/memory/threads",
                json!({"resourceId": "r1", "title": "bad\u{0}title"}),
            ),
            (
                "/api/memory/threads",
                json!({"resourceId": "r1", "metadata": {"k\u{0}": 1}}),
            ),
        ];
        for (path, body) in cases {
            let response = http
                .post(format!("{base}{path}"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            assert_eq!(status, 422, "{backend} {path}: {text}");
            assert!(text.contains("NUL"), "{backend} {path}: {text}");
        }
        // An escaped backslash before `u0000` is plain text, stored as such.
        let plain = http
            .post(format!("{base}/api/agents/echo/generate"))
            .json(&json!({"messages": "C:\\u0000", "memory": memory_of}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            plain.status(),
            200,
            "{backend}: {}",
            plain.text().await.unwrap()
        );
        for path in [
            "/api/memory/threads/%00",
            "/api/memory/threads/a%1fb/messages",
        ] {
            let response = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(response.status(), 400, "{backend} {path}");
        }
        fixture.teardown().await;
    }
}

#[tokio::test]
async fn what_the_fuzzer_found_answers_4xx() {
    use kestrel_memory::Memory;
    let storage = Arc::new(kestrel_storage::InMemoryStorage::new());
    let memory = Memory::new(storage.clone());
    let mailer = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.iter().any(|m| m.role == Role::Tool) {
                ScriptedResponse::text("sent")
            } else {
                ScriptedResponse::tool_call("c1", "send", json!({}))
            }
        })))
        .tool(
            create_tool("send")
                .description("Sends")
                .require_approval(true)
                .execute(|_: Nothing, _ctx| async { Ok("ok") }),
        )
        .memory(memory.clone())
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(mailer)
        .build()
        .unwrap();
    let server = Server::new(kestrel).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let f = Fixture {
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        pubsub: Arc::new(InProcessPubSub::new()),
    };
    let created = f
        .post(
            "/api/memory/threads",
            json!({"resourceId": "alice", "threadId": "t-alice"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // A run (or a persisted signal) on another resource's thread: not found, not a 500.
    let foreign = json!({"messages": "hi", "memory": {"thread": "t-alice", "resource": "bob"}});
    let (status, body) =
        Fixture::status_and_body(f.post("/api/agents/mailer/generate", foreign)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let signal =
        json!({"signal": "hi", "resourceId": "bob", "threadId": "t-alice", "ifIdle": "persist"});
    let (status, body) =
        Fixture::status_and_body(f.post("/api/agents/mailer/signals", signal)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // A decision on a run whose thread was deleted meanwhile.
    let (status, body) = Fixture::status_and_body(f.post(
        "/api/agents/mailer/generate",
        json!({"messages": "send it", "memory": {"thread": "t1", "resource": "alice"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run_id = serde_json::from_str::<Value>(&body).unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deleted = f
        .http
        .delete(format!("{}/api/memory/threads/t1?resourceId=alice", f.base))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (status, body) = Fixture::status_and_body(f.post(
        "/api/agents/mailer/approve-tool-call-generate",
        json!({"runId": run_id, "toolCallId": "c1"}),
    ))
    .await;
    assert!(status.is_client_error(), "{status}: {body}");
    // An empty run id is no id.
    let (status, body) = Fixture::status_and_body(f.post(
        "/api/agents/mailer/generate",
        json!({"messages": "send it", "runId": ""}),
    ))
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}
