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

mod fake_model;
mod instances;

pub(super) use fake_model::FakeServer;
use instances::*;
pub(super) use instances::{Events, Instance, Services, assert_each_once, two_instances, types};

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
