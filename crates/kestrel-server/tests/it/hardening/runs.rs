//! Run ids name one run (a stored one is refused), and a timed-out request leaves its run to
//! finish.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{COUNTED, Fixture, code_of, start};

#[tokio::test]
async fn a_run_id_names_one_run() {
    let f = start(|s| {
        s.resource_token("tok-a", "alice")
            .resource_token("tok-b", "bob")
    })
    .await;
    let as_ = |who: &str, path: &str, body: Value| f.post(path, body).bearer_auth(who);
    // A live run holds its id…
    let first = as_(
        "tok-a",
        "/api/agents/slow/stream",
        json!({"messages": "hi", "runId": "run-1"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(first.status(), 200);
    let (status, body) = Fixture::status_and_body(as_(
        "tok-a",
        "/api/agents/slow/stream",
        json!({"messages": "again", "runId": "run-1"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code_of(&body), "run_id_taken");
    assert!(body.contains("in progress"), "{body}");
    let (status, body) = Fixture::status_and_body(as_(
        "tok-a",
        "/api/agents/slow/generate",
        json!({"messages": "again", "runId": "run-1"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // …and another resource's caller learns nothing about it.
    let (status, body) = Fixture::status_and_body(as_(
        "tok-b",
        "/api/agents/slow/stream",
        json!({"messages": "mine", "runId": "run-1"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        !body.contains("progress") && !body.contains("stored"),
        "{body}"
    );
    // The refused runs took nothing from the first: it can still be aborted (a live run with
    // no stored snapshot, by its own pinned caller), and bob cannot abort it.
    let (status, _) =
        Fixture::status_and_body(as_("tok-b", "/api/agents/slow/runs/run-1/abort", json!({})))
            .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) =
        Fixture::status_and_body(as_("tok-a", "/api/agents/slow/runs/run-1/abort", json!({})))
            .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let streamed = tokio::time::timeout(Duration::from_secs(10), first.text())
        .await
        .expect("the aborted run ends its stream")
        .unwrap();
    assert!(streamed.contains("\"type\":\"abort\""), "{streamed}");
}

#[tokio::test]
async fn a_stored_run_id_is_refused() {
    let f = start(|s| s).await;
    // `careful` stops for approval of every call: its run is stored, waiting.
    let (status, body) = Fixture::status_and_body(f.post(
        "/api/agents/careful/generate",
        json!({"messages": "work", "runId": "kept"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = Fixture::status_and_body(f.post(
        "/api/agents/careful/stream",
        json!({"messages": "overwrite it", "runId": "kept"}),
    ))
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("stored"), "{body}");
    // The stored run is untouched: still listed as waiting.
    let (_, listed) = Fixture::status_and_body(
        f.http
            .get(format!("{}/api/agents/careful/suspended-runs", f.base)),
    )
    .await;
    assert!(listed.contains("\"runId\":\"kept\""), "{listed}");
}

#[tokio::test]
async fn a_timed_out_request_leaves_its_run_to_finish() {
    let f = start(|s| s.request_timeout(Duration::from_millis(100))).await;
    let (status, body) = Fixture::status_and_body(
        f.post("/api/agents/tortoise/generate", json!({"messages": "go"})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(code_of(&body), "timeout");
    let mut counted = 0;
    for _ in 0..200 {
        counted = COUNTED.load(std::sync::atomic::Ordering::SeqCst);
        if counted > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counted, 1, "the run went on after its request timed out");
}
