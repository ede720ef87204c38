//! Runs continued in other ways: restarted after a crash, nested workflows resumed by path,
//! foreach items resumed by index, and time travel.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::json;

use super::{Fixture, error_of, serve};

use kestrel_core::kestrel::Kestrel;
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_server::Server;

use super::{N, workflows};

/// `hang`: `first`, then `second`, which never ends when `stuck` (the process dies in it).
fn hanging(stuck: bool) -> Workflow {
    let first = create_step("first").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) });
    let second = create_step("second").execute(move |n: N, _ctx| async move {
        if stuck {
            std::future::pending::<()>().await;
        }
        Ok(N { v: n.v * 10 })
    });
    Workflow::builder("hang")
        .then(first)
        .then(second)
        .commit()
        .unwrap()
}

#[tokio::test]
async fn a_run_left_behind_is_restarted_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let storage: std::sync::Arc<dyn kestrel_storage::Storage> = std::sync::Arc::new(
        kestrel_storage::SqliteStorage::open(dir.path().join("runs.db"))
            .await
            .unwrap(),
    );
    let on = |stuck: bool| {
        let memory = kestrel_memory::Memory::new(std::sync::Arc::clone(&storage));
        let kestrel = Kestrel::builder()
            .storage(std::sync::Arc::clone(&storage))
            .memory(memory.clone())
            .workflow(hanging(stuck))
            .workflow(workflows().remove(1))
            .build()
            .unwrap();
        (kestrel, memory)
    };
    // A process that dies in `second`.
    let (dying, _) = on(true);
    let run = dying.workflow("hang").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    let probe = dying.workflow("hang").unwrap().create_run_with_id(&run_id);
    while probe
        .snapshot()
        .await
        .unwrap()
        .is_none_or(|s| s.position == 0)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let _ = task.await;
    drop(dying);

    let (kestrel, memory) = on(false);
    let server = Server::new(kestrel).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let f = Fixture {
        base: format!("http://{addr}/api"),
        http: reqwest::Client::new(),
    };
    let left = f
        .ok(f.get(&format!("/workflows/hang/runs/{run_id}")).await)
        .await;
    assert_eq!(left["status"], "running");
    let done = f
        .ok(f
            .post(
                &format!("/workflows/hang/restart-async?runId={run_id}"),
                json!({}),
            )
            .await)
        .await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["result"], json!({"v": 20}));
    let again = f
        .post(
            &format!("/workflows/hang/restart?runId={run_id}"),
            json!({}),
        )
        .await;
    error_of(again, 409, "not_active").await;
    error_of(
        f.post("/workflows/hang/restart", json!({})).await,
        400,
        "invalid_query",
    )
    .await;
    let all = f
        .ok(f
            .post(
                "/workflows/hang/restart-all-active-workflow-runs",
                json!({}),
            )
            .await)
        .await;
    assert_eq!(all["runIds"], json!([]));
    // A suspended run is resumed, not restarted.
    let gate = f.suspended_gate(1).await;
    let suspended = f
        .post(
            &format!("/workflows/gate/restart-async?runId={gate}"),
            json!({}),
        )
        .await;
    error_of(suspended, 409, "not_active").await;
}

#[tokio::test]
async fn a_nested_step_streams_with_its_path_and_is_resumed_by_it() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("wrapped").await;
    let events = f
        .stream(
            &format!("/workflows/wrapped/stream?runId={run_id}"),
            json!({"inputData": {"v": 1}}),
        )
        .await;
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-suspended")
        .map(|e| e["payload"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["checks.check", "checks"]);
    let info = f.ok(f.get("/workflows/wrapped").await).await;
    assert_eq!(
        info["stepGraph"][1]["step"]["serializedStepFlow"][0]["step"]["id"], "check",
        "the nested workflow's graph is drawn inside its step"
    );
    assert!(
        info["allSteps"]["checks.check"]["resumeSchema"].is_string(),
        "allSteps has the nested steps: {}",
        info["allSteps"]
    );
    let run = f
        .ok(f.get(&format!("/workflows/wrapped/runs/{run_id}")).await)
        .await;
    assert_eq!(
        run["steps"]["checks"]["suspendPayload"]["__workflow_meta"]["path"],
        json!(["check"])
    );
    let resume = format!("/workflows/wrapped/resume-stream?runId={run_id}");
    let refused = f
        .post(
            &resume,
            json!({"step": ["checks", "check"], "resumeData": {"approved": 1}}),
        )
        .await;
    error_of(refused, 422, "invalid_resume_data").await;
    let rest = f
        .stream(
            &resume,
            json!({"step": ["checks", "check"], "resumeData": {"approved": true}}),
        )
        .await;
    let finish = rest.last().unwrap();
    assert_eq!(finish["payload"]["workflowStatus"], "success");
    assert_eq!(
        finish["payload"]["finalWorkflowResult"],
        json!({"v": 101, "sure": true})
    );
}

#[tokio::test]
async fn a_foreach_item_is_resumed_by_its_index() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("batch").await;
    let start = format!("/workflows/batch/start-async?runId={run_id}");
    let stopped = f
        .ok(f.post(&start, json!({"inputData": [1, 2, 3]})).await)
        .await;
    assert_eq!(stopped["status"], "suspended");
    let resume = format!("/workflows/batch/resume-async?runId={run_id}");
    let unnamed = f
        .post(&resume, json!({"resumeData": {"approved": true}}))
        .await;
    error_of(unnamed, 409, "not_suspended_item").await;
    let ended = f
        .post(
            &resume,
            json!({"forEachIndex": 1, "resumeData": {"approved": true}}),
        )
        .await;
    error_of(ended, 409, "not_suspended_item").await;
    let first = f
        .ok(f
            .post(
                &resume,
                json!({"forEachIndex": 2.0, "resumeData": {"approved": true}}),
            )
            .await)
        .await;
    assert_eq!(first["status"], "suspended");
    assert_eq!(first["steps"]["item"]["output"], json!([null, 2, 30]));
    let done = f
        .ok(f
            .post(
                &resume,
                json!({"step": "item", "forEachIndex": 0, "resumeData": {"approved": false}}),
            )
            .await)
        .await;
    assert_eq!(done["status"], "success");
    assert_eq!(done["result"], json!([0, 2, 30]));
}

#[tokio::test]
async fn a_run_travels_back_to_a_step_over_http() {
    let f = serve(|s| s).await;
    let run_id = f.create_run("numbers").await;
    let start = format!("/workflows/numbers/start-async?runId={run_id}");
    assert_eq!(
        f.ok(f.post(&start, json!({"inputData": {"v": 1}})).await)
            .await["result"],
        json!({"v": 10})
    );
    let travel = format!("/workflows/numbers/time-travel-async?runId={run_id}");
    let again = f
        .ok(f
            .post(
                &travel,
                json!({"step": "sum", "inputData": {"a": {"v": 1}, "b": {"v": 2}}}),
            )
            .await)
        .await;
    assert_eq!(again["status"], "success");
    assert_eq!(again["result"], json!({"v": 3}));
    assert_eq!(again["steps"]["s1"]["output"], json!({"v": 2}), "kept");
    let events = f
        .stream(
            &format!("/workflows/numbers/time-travel-stream?runId={run_id}"),
            json!({"step": ["a"]}),
        )
        .await;
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-start")
        .map(|e| e["payload"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        started,
        ["a", "b", "sum"],
        "the parallel entry runs again, then what follows"
    );
    let unknown = f.post(&travel, json!({"step": "nope"})).await;
    error_of(unknown, 404, "not_found").await;
    let unsupported = f.post(&travel, json!({"step": "sum", "context": {}})).await;
    error_of(unsupported, 422, "invalid_body").await;
    let bad_input = f
        .post(&travel, json!({"step": "sum", "inputData": {"a": 1}}))
        .await;
    error_of(bad_input, 422, "invalid_input").await;
    let pending = f.create_run("numbers").await;
    let refused = f
        .post(
            &format!("/workflows/numbers/time-travel-async?runId={pending}"),
            json!({"step": "s1", "inputData": {"v": 1}}),
        )
        .await;
    error_of(refused, 409, "travel_refused").await;
}
