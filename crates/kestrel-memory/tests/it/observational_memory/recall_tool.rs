//! The `recall` tool: paging, reading and searching this thread's messages, and in resource
//! scope the resource's other threads, never another resource's.

use std::sync::Arc;

use kestrel_core::message::Part;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::{Memory, ObservationScope, ObservationalMemory, RECALL_TOOL};
use kestrel_storage::testing::Store;
use serde_json::{Value, json};

use super::{agent, on, seed};

/// Runs one turn whose model calls `recall` with `args`, and returns the tool's result and
/// whether it is an error.
async fn call_recall(memory: &Memory, thread: &str, resource: &str, args: Value) -> (Value, bool) {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call("call-1", RECALL_TOOL, args))
            .respond(ScriptedResponse::text("done")),
    );
    agent(memory, model.clone())
        .generate("Look it up.")
        .options(on(thread, resource))
        .await
        .unwrap();
    let requests = model.requests();
    assert!(
        requests[0].tools.iter().any(|t| t.name == RECALL_TOOL),
        "the agent is offered the recall tool"
    );
    let last = requests[1].messages.last().unwrap().clone();
    match &last.parts[..] {
        [
            Part::ToolResult {
                result, is_error, ..
            },
        ] => (result.clone(), *is_error),
        other => panic!("expected one tool result, got {other:?}"),
    }
}

fn seqs(messages: &Value) -> Vec<i64> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_i64().unwrap())
        .collect()
}

/// The recall tool pages through this thread's exact messages, reads one, goes back from a seq
/// and searches by text; thread scope offers no other thread.
pub(super) async fn recall_pages_reads_and_searches_this_thread(store: Store) {
    let texts: Vec<String> = (1..=30)
        .map(|i| {
            if i % 10 == 3 {
                format!("message {i} about the boat Petrel")
            } else {
                format!("message {i}")
            }
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    seed(&store, "t1", "alice", &refs).await;
    seed(
        &store,
        "other",
        "alice",
        &["message in another thread about Petrel"],
    )
    .await;
    let observer = Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("NONE")));
    let memory = Memory::builder()
        .storage(store.clone())
        .observational_memory(ObservationalMemory::new(observer))
        .build()
        .unwrap();

    // Page 1 of 10: seqs 11..=20, oldest first. The run's input (seq 31) is stored already.
    let (out, error) = call_recall(
        &memory,
        "t1",
        "alice",
        json!({"mode": "messages", "page": 1, "limit": 10}),
    )
    .await;
    assert!(!error, "{out}");
    assert_eq!(seqs(&out["messages"]), (11..=20).collect::<Vec<_>>());
    assert_eq!(out["messages"][0]["text"], "message 11");
    assert_eq!(out["messages"][0]["role"], "user");
    assert_eq!(out["total"], 31);
    assert_eq!(out["hasNextPage"], true);

    let (out, _) = call_recall(
        &memory,
        "t1",
        "alice",
        json!({"mode": "messages", "seq": 13}),
    )
    .await;
    assert_eq!(out["text"], "message 13 about the boat Petrel");
    assert_eq!(out["role"], "user");

    let (out, _) = call_recall(
        &memory,
        "t1",
        "alice",
        json!({"mode": "messages", "before_seq": 5, "limit": 2}),
    )
    .await;
    assert_eq!(seqs(&out["messages"]), [3, 4]);
    assert_eq!(out["hasOlder"], true);

    let (out, _) = call_recall(
        &memory,
        "t1",
        "alice",
        json!({"mode": "search", "query": "petrel"}),
    )
    .await;
    let hits: Vec<(String, i64)> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["threadId"].as_str().unwrap().to_owned(),
                m["seq"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hits,
        [
            ("t1".to_owned(), 23),
            ("t1".to_owned(), 13),
            ("t1".to_owned(), 3)
        ],
        "newest first, this thread only"
    );

    // Thread scope: no `threads` mode and no `thread_id`.
    let (out, error) = call_recall(&memory, "t1", "alice", json!({"mode": "threads"})).await;
    assert!(error, "{out}");
    let (out, error) = call_recall(
        &memory,
        "t1",
        "alice",
        json!({"mode": "messages", "thread_id": "other"}),
    )
    .await;
    assert!(error, "{out}");
    assert!(!out.to_string().contains("another thread"));
}

/// Resource scope: the tool lists the resource's threads and reads and searches them, and
/// answers a thread of another resource exactly like a missing one, without reading it.
pub(super) async fn recall_in_resource_scope_reads_the_resources_threads_and_never_another_resources(
    store: Store,
) {
    seed(&store, "a1", "alice", &["Hello.", "Hi Alice."]).await;
    seed(
        &store,
        "a2",
        "alice",
        &["Lisbon itinerary: day one Alfama.", "Noted."],
    )
    .await;
    seed(&store, "b1", "bob", &["Lisbon secret of Bob.", "Noted."]).await;
    let observer = Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("NONE")));
    let memory = Memory::builder()
        .storage(store.clone())
        .observational_memory(ObservationalMemory::new(observer).scope(ObservationScope::Resource))
        .build()
        .unwrap();

    let (out, error) = call_recall(&memory, "a1", "alice", json!({"mode": "threads"})).await;
    assert!(!error, "{out}");
    let mut listed: Vec<(String, bool)> = out["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["threadId"].as_str().unwrap().to_owned(),
                t["current"].as_bool().unwrap(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(listed, [("a1".to_owned(), true), ("a2".to_owned(), false)]);
    assert_eq!(out["total"], 2);

    let (out, error) = call_recall(
        &memory,
        "a1",
        "alice",
        json!({"mode": "messages", "thread_id": "a2"}),
    )
    .await;
    assert!(!error, "{out}");
    assert_eq!(out["threadId"], "a2");
    assert_eq!(
        out["messages"][0]["text"],
        "Lisbon itinerary: day one Alfama."
    );

    let (out, error) = call_recall(
        &memory,
        "a1",
        "alice",
        json!({"mode": "search", "query": "LISBON"}),
    )
    .await;
    assert!(!error, "{out}");
    let threads: Vec<&str> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(threads, ["a2"], "all of alice's threads, none of bob's");

    // Bob's thread is "not found", like a thread that does not exist, for every mode.
    let (foreign, error) = call_recall(
        &memory,
        "a1",
        "alice",
        json!({"mode": "messages", "thread_id": "b1"}),
    )
    .await;
    assert!(error);
    let (missing, _) = call_recall(
        &memory,
        "a1",
        "alice",
        json!({"mode": "messages", "thread_id": "zz"}),
    )
    .await;
    assert_eq!(foreign.to_string().replace("b1", "zz"), missing.to_string());
    for args in [
        json!({"mode": "messages", "thread_id": "b1", "seq": 1}),
        json!({"mode": "search", "query": "lisbon", "thread_id": "b1"}),
    ] {
        let (out, error) = call_recall(&memory, "a1", "alice", args).await;
        assert!(error, "{out}");
        assert!(!out.to_string().contains("secret"), "{out}");
    }
}
