//! Re-attaching to a running turn, and what a disconnect does (or, with
//! `abort_on_disconnect`, aborts).

use std::time::Duration;

use kestrel_core::message::Role;
use kestrel_memory::kestrel_storage::prelude::*;
use kestrel_memory::kestrel_storage::{MessageStatus, Selection};
use serde_json::json;

use super::protocol::reduce;
use super::{Fixture, UiStream, V, error_of, first_bytes, read_rest, read_stream, start, submit};

#[tokio::test]
async fn reattaching_replays_the_running_turn_and_idle_chats_answer_204() {
    let f = start(|s| s).await;
    assert_eq!(
        f.get_as(None, "/chat/slow/nothing-runs/stream")
            .await
            .status(),
        204
    );
    error_of(
        f.get_as(None, "/chat/nobody/x/stream").await,
        404,
        "not_found",
    )
    .await;

    let mut original = f.post("/chat/slow", submit("reattach", "go", "v6")).await;
    assert_eq!(original.status(), 200);
    // Some of the turn went by.
    let mut seen = String::new();
    while !seen.contains("w2 ") {
        seen.push_str(&first_bytes(&mut original).await);
    }
    let replayed = read_stream(
        f.get_as(None, "/chat/slow/reattach/stream").await,
        V::V6,
        &[],
    )
    .await;
    let original = read_rest(original, seen, V::V6, &[]).await;
    let text = |s: &UiStream| -> String {
        s.of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text(&replayed), text(&original));
    assert!(text(&original).starts_with("w0 w1 w2 "));
    assert_eq!(replayed.message_id(), original.message_id());
    // The replay merged what had streamed: fewer chunks for the same text.
    assert!(replayed.chunks.len() < original.chunks.len());
    assert_eq!(
        reduce(Vec::new(), &replayed.chunks),
        reduce(Vec::new(), &original.chunks)
    );
    // Over: nothing to re-attach to.
    assert_eq!(
        f.get_as(None, "/chat/slow/reattach/stream").await.status(),
        204
    );
}

/// The stored messages of a thread once its run is done (a deadline, not a sleep).
async fn stored_when_done(
    f: &Fixture,
    thread: &str,
) -> Vec<kestrel_memory::kestrel_storage::StoredMessage> {
    for _ in 0..100 {
        let messages = f
            .storage
            .list_messages(thread, None, Selection::all())
            .await
            .map(|l| l.messages)
            .unwrap_or_default();
        if messages.iter().any(|m| m.role == Role::Assistant) {
            return messages;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run of {thread} stored no answer");
}

#[tokio::test]
async fn a_client_that_disconnects_leaves_its_run_to_finish_and_can_reattach() {
    let f = start(|s| s).await;
    let mut response = f.post("/chat/slow", submit("left", "go", "v5")).await;
    first_bytes(&mut response).await;
    drop(response);
    // The turn still runs, and can be re-attached to from the start.
    let again = read_stream(f.get_as(None, "/chat/slow/left/stream").await, V::V5, &[]).await;
    assert_eq!(again.chunks.last().unwrap(), &json!({"type": "finish"}));
    let messages = stored_when_done(&f, "left").await;
    let answer = messages.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(answer.status, MessageStatus::Complete);
    assert!(answer.to_message().text().ends_with("w11 "));
}

#[tokio::test]
async fn abort_on_disconnect_aborts_the_run_and_stores_it_as_aborted() {
    let f = start(|s| s.abort_on_disconnect(true)).await;
    let mut body = submit("aborted", "go", "v5");
    body["runId"] = json!("run-aborted");
    let mut response = f.post("/chat/slow", body).await;
    let mut seen = String::new();
    while !seen.contains("w1 ") {
        seen.push_str(&first_bytes(&mut response).await);
    }
    drop(response);
    let messages = stored_when_done(&f, "aborted").await;
    let answer = messages.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(answer.status, MessageStatus::Aborted);
    let text = answer.to_message().text();
    assert!(
        text.starts_with("w0 w1 ") && !text.contains("w11"),
        "{text}"
    );
    assert_eq!(
        f.get_as(None, "/chat/slow/aborted/stream").await.status(),
        204
    );
}
