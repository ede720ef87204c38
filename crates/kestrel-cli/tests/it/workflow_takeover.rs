//! `kill -9` of the `kestrel dev` process driving a workflow run, between two steps of the
//! demo's `weather-report` (each step takes 1.5 s here, `--tool-delay-ms`):
//!
//! - on SQLite, the next process over the same database restarts the run when it starts;
//! - in a cluster (PostgreSQL and Redis), the other instance takes the run over once the dead
//!   one's lease runs out.
//!
//! Either way the run goes on from its last step boundary: the steps that had ended are not
//! run again (their end times are the ones stored before the kill), and the run succeeds with
//! the report. The cluster test needs `KESTREL_TEST_POSTGRES_URL` and `KESTREL_TEST_REDIS_URL`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{FakeServer, Instance, Services};

const WORKFLOW: &str = "weather-report";
const SLOW: [&str; 2] = ["--tool-delay-ms", "1500"];

/// Starts a `weather-report` run for Oslo on `instance` in the background: its id.
async fn start_report(instance: &Instance) -> String {
    let created = instance
        .post(&format!("/workflows/{WORKFLOW}/create-run"), json!({}))
        .await;
    assert_eq!(created.status(), 200);
    let run_id = created.json::<Value>().await.unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = instance
        .post(
            &format!("/workflows/{WORKFLOW}/start?runId={run_id}"),
            json!({"inputData": {"city": "Oslo"}}),
        )
        .await;
    assert_eq!(started.status(), 200);
    run_id
}

/// Polls the run on `instance` until `done` holds of it (within 30 s).
async fn poll(instance: &Instance, run_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let run = instance
            .get(&format!("/workflows/{WORKFLOW}/runs/{run_id}"))
            .await;
        if done(&run) {
            return run;
        }
        assert!(tokio::time::Instant::now() < deadline, "gave up on {run:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The stored run once `forecast` has ended and the parallel readings run: between steps.
async fn between_steps(instance: &Instance, run_id: &str) -> Value {
    poll(instance, run_id, |run| {
        run["status"] == "running" && run["steps"]["forecast"]["status"] == "success"
    })
    .await
}

/// Checks the run finished after the kill, from its last boundary.
fn continued(before: &Value, after: &Value) {
    assert_eq!(after["status"], "success", "{after:#}");
    let report = after["result"]["report"].as_str().unwrap();
    assert!(report.starts_with("Oslo: "), "{report}");
    assert_eq!(
        after["steps"]["forecast"]["endedAt"], before["steps"]["forecast"]["endedAt"],
        "forecast had ended before the kill: it is not run again"
    );
    for step in ["temperature", "sky", "report"] {
        assert_eq!(
            after["steps"][step]["status"], "success",
            "{step}: {after:#}"
        );
    }
    let arms = ["warm", "cool"]
        .iter()
        .filter(|arm| after["steps"][**arm]["status"] == "success")
        .count();
    assert_eq!(arms, 1, "one branch arm holds: {after:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_the_next_process_restarts_a_run_killed_between_steps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("dev.db");
    let db = db.to_str().unwrap();
    let model = FakeServer::start().await;
    let args = ["--db", db, SLOW[0], SLOW[1]];
    let first = Instance::launch(&model, &args).await;
    let run_id = start_report(&first).await;
    let before = between_steps(&first, &run_id).await;
    first.kill().await;

    let next = Instance::launch(&model, &args).await;
    let after = poll(&next, &run_id, |run| run["status"] != "running").await;
    continued(&before, &after);
    next.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_another_instance_takes_over_a_run_killed_between_steps() {
    let Some(services) = Services::from_env("workflow takeover") else {
        return;
    };
    let model = FakeServer::start().await;
    let a = Instance::start_with(&services, &model, "a", &SLOW).await;
    let b = Instance::start_with(&services, &model, "b", &SLOW).await;
    let run_id = start_report(&a).await;
    // B sees the run A drives, and leaves it to A while A lives.
    let before = between_steps(&b, &run_id).await;
    a.kill().await;
    let after = poll(&b, &run_id, |run| run["status"] != "running").await;
    continued(&before, &after);
    b.kill().await;
    services.teardown().await;
}
