//! Bounds: dropped subscriptions are forgotten, runs, streams and pages are bounded.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use super::{Fixture, code_of, start};

#[tokio::test]
async fn dropped_subscriptions_are_forgotten_and_ids_are_bounded() {
    let f = start(|s| s).await;
    for n in 0..50 {
        let body = json!({"resourceId": "r", "threadId": format!("t-{n}-{}", "x".repeat(200))});
        let response = f
            .post("/api/agents/looper/threads/subscribe", body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        // Dropped at once, before anything was read.
        drop(response);
    }
    // The server notices each closed connection when it next writes (the connected comment
    // went out already, so at the latest with the heartbeat); closing is prompt on loopback.
    let mut left = usize::MAX;
    for _ in 0..100 {
        left = f.pubsub.topic_count();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "subscriptions of closed connections stay behind");

    // A 200 KB thread id is refused before it becomes a topic.
    let long = json!({"resourceId": "r", "threadId": "x".repeat(200_000)});
    let (status, body) =
        Fixture::status_and_body(f.post("/api/agents/looper/threads/subscribe", long)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("at most 256"), "{body}");
    let nul = json!({"resourceId": "r", "threadId": "a\u{0}b"});
    let (status, _) =
        Fixture::status_and_body(f.post("/api/agents/looper/threads/subscribe", nul)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let path = format!("/api/agents/looper/runs/{}/abort", "r".repeat(4_000));
    let (status, body) = Fixture::status_and_body(f.post(&path, json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(f.pubsub.topic_count(), 0);
}

#[tokio::test]
async fn runs_and_streams_are_bounded() {
    let f = start(|s| s.max_runs(1).max_streams_per_token(2)).await;
    let slow = f
        .post("/api/agents/slow/stream", json!({"messages": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), 200);
    let refused = f
        .post("/api/agents/looper/generate", json!({"messages": "talk"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(code_of(&refused.text().await.unwrap()), "too_many_runs");
    // A second stream of the same caller is still allowed (2), a third is not.
    let watch = json!({"resourceId": "r", "threadId": "t"});
    let second = f
        .post("/api/agents/looper/threads/subscribe", watch.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let third = f
        .post("/api/agents/looper/threads/subscribe", watch.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 429);
    assert_eq!(code_of(&third.text().await.unwrap()), "too_many_streams");
    // Closing one gives its place back.
    drop(second);
    let mut again = None;
    for _ in 0..100 {
        let response = f
            .post("/api/agents/looper/threads/subscribe", watch.clone())
            .send()
            .await
            .unwrap();
        if response.status() == 200 {
            again = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "a closed stream's place is given back");
    drop(slow);
}

#[tokio::test]
async fn pages_are_bounded() {
    let f = start(|s| s).await;
    let get = |query: &str| {
        f.http.get(format!(
            "{}/api/agents/careful/suspended-runs?{query}",
            f.base
        ))
    };
    let (status, body) = Fixture::status_and_body(get("perPage=5000")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("at most 1000"), "{body}");
    for ok in ["perPage=0", "perPage=1000", "page=4294967295&perPage=1000"] {
        let (status, body) = Fixture::status_and_body(get(ok)).await;
        assert_eq!(status, StatusCode::OK, "{ok}: {body}");
    }
}
