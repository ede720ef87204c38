//! `kill -9` of the instance driving a run in the middle of a tool call or a delegation;
//! another `kestrel dev` process takes the run over and finishes it, and the thread holds
//! every message once:
//!
//! - mid-delegation: the sub-agent's run is continued from its last snapshot, and the parent
//!   finishes with its result;
//! - mid-tool, an undecided call (`get_weather`): it runs again (at least once);
//! - mid-tool, an approved call (`send_email`): it is not run a second time; the run goes on
//!   with the "interrupted" error as its result (at most once).
//!
//! The demo's tools take 3 s here (`--tool-delay-ms`), so the kill lands inside them. Needs
//! `KESTREL_TEST_POSTGRES_URL` and `KESTREL_TEST_REDIS_URL`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{
    Events, FakeServer, Instance, RESOURCE, Services, assert_each_once, two_instances,
};

const THREAD: &str = "takeover-thread";

/// The thread of `agent` on `instance`.
async fn thread_of(instance: &Instance, agent: &str) -> Vec<Value> {
    let listed = instance
        .get(&format!(
            "/memory/threads/{THREAD}/messages?agentId={agent}&resourceId={RESOURCE}"
        ))
        .await;
    crate::as_stored(listed["messages"].as_array().map_or(&[][..], Vec::as_slice))
}

/// Polls `agent`'s thread on `instance` until it holds a whole turn with one tool call (the
/// question, the call, its result, the answer); checks that each message is there once.
async fn wait_for_turn(instance: &Instance, agent: &str) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let messages = loop {
        let messages = thread_of(instance, agent).await;
        if messages.len() >= 4 {
            break messages;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was not finished after the takeover: {messages:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_each_once(&messages);
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant"],
        "{messages:#?}"
    );
    assert!(messages[3].to_string().contains("Done."), "{messages:#?}");
    messages
}

/// Instances `a` and `b` whose demo tools take 3 s.
async fn slow_tool_instances(services: &Services) -> (FakeServer, Instance, Instance) {
    let model = FakeServer::start().await;
    let slow = ["--tool-delay-ms", "3000"];
    let a = Instance::start_with(services, &model, "a", &slow).await;
    let b = Instance::start_with(services, &model, "b", &slow).await;
    (model, a, b)
}

fn body(text: &str) -> Value {
    json!({"messages": text, "memory": {"thread": THREAD, "resource": RESOURCE}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_instance_mid_delegation_leaves_another_to_finish_both_runs() {
    let Some(services) = Services::from_env("killing_the_instance_mid_delegation") else {
        return;
    };
    let (model, a, b) = two_instances(&services).await;

    // The supervisor delegates to research, whose answer streams slowly; A dies mid-way.
    let body =
        json!({"messages": "delegate please", "memory": {"thread": THREAD, "resource": RESOURCE}});
    let on_a = Events::follow(a.post("/agents/supervisor/stream", body).await);
    let started = on_a.wait_for("tool-output").await;
    let run_id = started[0]["runId"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = model.requests();
    a.kill().await;

    // B's sweep takes the parent over; the parent continues the research run, then answers.
    let messages = wait_for_turn(&b, "supervisor").await;
    let result = messages[2].to_string();
    assert!(
        result.contains("finally done"),
        "the research run {run_id} was continued, its step run again: {result}"
    );
    assert!(model.requests() > asked, "B asked the model again");
    b.kill().await;
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_instance_mid_tool_runs_an_undecided_call_again() {
    let Some(services) = Services::from_env("killing_the_instance_mid_tool_undecided") else {
        return;
    };
    let (_model, a, b) = slow_tool_instances(&services).await;
    let on_a = Events::follow(
        a.post("/agents/assistant/stream", body("weather in Oslo?"))
            .await,
    );
    on_a.wait_for("tool-call").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill().await;

    let messages = wait_for_turn(&b, "assistant").await;
    let result = messages[2].to_string();
    assert!(
        result.contains("Oslo") && result.contains("temperatureC"),
        "the weather call ran again on B: {result}"
    );
    b.kill().await;
    services.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_instance_mid_tool_never_runs_an_approved_call_twice() {
    let Some(services) = Services::from_env("killing_the_instance_mid_tool_approved") else {
        return;
    };
    let (_model, a, b) = slow_tool_instances(&services).await;
    let stopped = Events::follow(a.post("/agents/assistant/stream", body("email bob")).await)
        .end()
        .await;
    let run_id = stopped[0]["runId"].as_str().unwrap().to_owned();
    // Approved on A, which starts sending and dies before the email is out.
    let approved = Events::follow(
        a.post(
            "/agents/assistant/approve-tool-call",
            json!({"runId": run_id, "toolCallId": "call-email"}),
        )
        .await,
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        !approved.all().iter().any(|e| e["type"] == "tool-result"),
        "the email was still being sent"
    );
    a.kill().await;

    let messages = wait_for_turn(&b, "assistant").await;
    let result = &messages[2]["parts"][0];
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["result"].to_string().contains("interrupted"),
        "settled as interrupted, not sent again: {result}"
    );
    b.kill().await;
    services.teardown().await;
}
