//! `kill -9` of the instance driving a run in the middle of a delegation: another
//! `kestrel dev` process takes the parent over, continues the sub-agent's run from its last
//! snapshot, and finishes the parent with its result; the thread holds every message once.
//! Needs `KESTREL_TEST_POSTGRES_URL` and `KESTREL_TEST_REDIS_URL`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{Events, Instance, RESOURCE, Services, assert_each_once, two_instances};

const THREAD: &str = "takeover-thread";

/// The supervisor's thread on `instance`.
async fn supervisor_thread(instance: &Instance) -> Vec<Value> {
    let listed = instance
        .get(&format!(
            "/memory/threads/{THREAD}/messages?agentId=supervisor&resourceId={RESOURCE}"
        ))
        .await;
    listed["messages"].as_array().cloned().unwrap_or_default()
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let messages = loop {
        let messages = supervisor_thread(&b).await;
        if messages.len() >= 4 {
            break messages;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run_id} was not finished after the takeover: {messages:#?}"
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
    let result = messages[2].to_string();
    assert!(
        result.contains("finally done"),
        "the research run was continued, its step run again: {result}"
    );
    assert!(messages[3].to_string().contains("Done."), "{messages:#?}");
    assert!(model.requests() > asked, "B asked the model again");
    b.kill().await;
    services.teardown().await;
}
