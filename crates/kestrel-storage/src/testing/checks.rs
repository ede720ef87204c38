//! The checks of the conformance suite, one public `async fn` each.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use kestrel_core::message::{Message, Part, Role};
use serde_json::{Value, json};

use crate::codec;
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{
    CloneThread, Direction, MessageSearch, MessageStatus, Metadata, MetadataUpdate, NewMessage,
    NewObservation, NewThread, PageRequest, RunFilter, RunRecord, RunStatus, Scope, Selection,
    StoredMessage, ThreadOrder, ThreadOrderField, ThreadPatch, ThreadQuery, VectorFilter,
    VectorMatch, VectorQuery, VectorRecord,
};

// ---------------------------------------------------------------------------------------------
// Helpers

/// A JSON object literal as [`Metadata`].
pub fn meta(value: Value) -> Metadata {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A fixed time, `seconds` after 2025-01-01T00:00:00Z.
pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_735_689_600 + seconds, 0).unwrap()
}

async fn thread(store: &Arc<dyn Storage>, id: &str, resource: &str) {
    store
        .create_thread(NewThread::new(resource).id(id))
        .await
        .unwrap();
}

fn text(role: Role, id: &str, body: &str) -> NewMessage {
    NewMessage::from(Message {
        id: id.to_owned(),
        role,
        parts: vec![Part::Text { text: body.into() }],
    })
}

fn seqs(messages: &[StoredMessage]) -> Vec<i64> {
    messages.iter().map(|m| m.seq).collect()
}

fn ids(messages: &[StoredMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

async fn all(store: &Arc<dyn Storage>, thread_id: &str) -> Vec<StoredMessage> {
    store
        .list_messages(thread_id, None, Selection::all())
        .await
        .unwrap()
        .messages
}

fn is_foreign(result: Result<impl std::fmt::Debug, StorageError>, thread: &str) -> bool {
    matches!(
        result,
        Err(StorageError::ThreadOwnedByOtherResource { ref thread_id, ref owner, ref requested })
            if thread_id == thread && owner == "alice" && requested == "mallory"
    )
}

/// A deterministic pseudo-random vector (a linear congruential generator seeded by `seed`).
pub fn pseudo_vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..dimension)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Threads

/// Create, get, duplicate ids, generated ids, bad arguments.
pub async fn threads_create_get_and_duplicate(store: Arc<dyn Storage>) {
    let created = store
        .create_thread(
            NewThread::new("alice")
                .id("t1")
                .title("First")
                .metadata(meta(json!({"kind": "chat", "n": 1.0})))
                .created_at(at(10)),
        )
        .await
        .unwrap();
    assert_eq!(created.id, "t1");
    assert_eq!(created.created_at, at(10));
    assert_eq!(created.updated_at, at(10));
    assert_eq!(created.metadata, meta(json!({"kind": "chat", "n": 1})));
    assert_eq!(store.get_thread("t1").await.unwrap(), Some(created));

    let again = store.create_thread(NewThread::new("bob").id("t1")).await;
    assert!(matches!(again, Err(StorageError::ThreadExists { thread_id }) if thread_id == "t1"));
    assert_eq!(
        store.get_thread("t1").await.unwrap().unwrap().resource_id,
        "alice"
    );

    let generated = store.create_thread(NewThread::new("alice")).await.unwrap();
    assert!(!generated.id.is_empty() && generated.id != "t1");
    assert!(generated.title.is_none() && generated.metadata.is_empty());
    assert_eq!(store.get_thread("nope").await.unwrap(), None);

    let empty = store.create_thread(NewThread::new("")).await;
    assert!(matches!(
        empty,
        Err(StorageError::InvalidArgument {
            argument: "resource_id",
            ..
        })
    ));
}

/// Title and metadata patches (merge and replace) and `updated_at`.
pub async fn threads_update_patch(store: Arc<dyn Storage>) {
    let created = store
        .create_thread(
            NewThread::new("alice")
                .id("t1")
                .metadata(meta(json!({"a": 1, "b": {"c": 2}})))
                .created_at(at(0)),
        )
        .await
        .unwrap();
    let titled = store
        .update_thread(
            "t1",
            ThreadPatch {
                title: Some("Trip".into()),
                metadata: Some(MetadataUpdate::Merge(meta(
                    json!({"b": {"d": 3}, "e": null}),
                ))),
            },
        )
        .await
        .unwrap();
    assert_eq!(titled.title.as_deref(), Some("Trip"));
    assert_eq!(
        titled.metadata,
        meta(json!({"a": 1, "b": {"d": 3}, "e": null}))
    );
    assert!(titled.updated_at > created.updated_at);
    assert_eq!(titled.created_at, created.created_at);
    assert_eq!(store.get_thread("t1").await.unwrap(), Some(titled.clone()));

    let replaced = store
        .update_thread(
            "t1",
            ThreadPatch {
                title: None,
                metadata: Some(MetadataUpdate::Replace(meta(json!({"z": true})))),
            },
        )
        .await
        .unwrap();
    assert_eq!(replaced.title.as_deref(), Some("Trip"));
    assert_eq!(replaced.metadata, meta(json!({"z": true})));
    assert_eq!(store.get_thread("t1").await.unwrap(), Some(replaced));

    let missing = store.update_thread("nope", ThreadPatch::default()).await;
    assert!(
        matches!(missing, Err(StorageError::ThreadNotFound { thread_id }) if thread_id == "nope")
    );
}

/// Deleting a thread removes its messages, thread-scoped observations, working memory, observed
/// marker and vectors, and nothing of other threads or of the resource.
pub async fn threads_delete_cascades(store: Arc<dyn Storage>) {
    for id in ["t1", "t2"] {
        thread(&store, id, "alice").await;
        store
            .append_messages(
                id,
                "alice",
                vec![text(Role::User, &format!("{id}-m1"), "hi")],
            )
            .await
            .unwrap();
        store
            .set_working_memory(&Scope::thread(id, "alice"), "# notes")
            .await
            .unwrap();
        store
            .add_observations(&Scope::thread(id, "alice"), vec![NewObservation::new("o")])
            .await
            .unwrap();
        store.set_observed_seq(id, "alice", 1).await.unwrap();
    }
    store
        .set_working_memory(&Scope::resource("alice"), "profile")
        .await
        .unwrap();
    store
        .add_observations(&Scope::resource("alice"), vec![NewObservation::new("r")])
        .await
        .unwrap();
    store.create_index("idx", 2).await.unwrap();
    let vectors = ["t1", "t2"]
        .iter()
        .map(|t| VectorRecord {
            id: format!("{t}-v"),
            vector: vec![1.0, 0.0],
            metadata: meta(json!({"thread_id": t, "resource_id": "alice"})),
        })
        .collect();
    store.upsert_vectors("idx", vectors).await.unwrap();

    assert!(store.delete_thread("t1").await.unwrap());
    assert!(!store.delete_thread("t1").await.unwrap());
    assert_eq!(store.get_thread("t1").await.unwrap(), None);
    let listed = store.list_messages("t1", None, Selection::all()).await;
    assert!(matches!(listed, Err(StorageError::ThreadNotFound { .. })));
    let gone = store.get_messages(&["t1-m1".into()], None).await.unwrap();
    assert!(gone.is_empty());
    let query = VectorQuery {
        vector: vec![1.0, 0.0],
        top_k: 10,
        filter: VectorFilter::default(),
    };
    let hits = store.query_vectors("idx", query).await.unwrap();
    assert_eq!(
        hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
        ["t2-v"]
    );

    // The other thread and the resource keep everything.
    assert_eq!(ids(&all(&store, "t2").await), ["t2-m1"]);
    let t2 = Scope::thread("t2", "alice");
    assert_eq!(
        store.get_working_memory(&t2).await.unwrap().as_deref(),
        Some("# notes")
    );
    assert_eq!(store.list_observations(&t2).await.unwrap().len(), 1);
    assert_eq!(
        store.get_observed_seq("t2", "alice").await.unwrap(),
        Some(1)
    );
    let resource = Scope::resource("alice");
    assert_eq!(
        store
            .get_working_memory(&resource)
            .await
            .unwrap()
            .as_deref(),
        Some("profile")
    );
    assert_eq!(store.list_observations(&resource).await.unwrap().len(), 1);

    // The id can be reused, and starts from nothing.
    thread(&store, "t1", "alice").await;
    let scope = Scope::thread("t1", "alice");
    assert_eq!(store.get_working_memory(&scope).await.unwrap(), None);
    assert!(store.list_observations(&scope).await.unwrap().is_empty());
    assert_eq!(store.get_observed_seq("t1", "alice").await.unwrap(), None);
    let again = store
        .append_messages("t1", "alice", vec![text(Role::User, "t1-m1", "again")])
        .await
        .unwrap();
    assert_eq!(seqs(&again), [1]);
}

/// Cloning copies messages in order with new ids and records the source.
pub async fn threads_clone(store: Arc<dyn Storage>) {
    store
        .create_thread(
            NewThread::new("alice")
                .id("src")
                .title("Source")
                .metadata(meta(json!({"kind": "chat"}))),
        )
        .await
        .unwrap();
    let batch = vec![
        text(Role::User, "m1", "one"),
        text(Role::Assistant, "m2", "two").aborted(),
        text(Role::User, "m3", "three").metadata(meta(json!({"k": "v"}))),
    ];
    store.append_messages("src", "alice", batch).await.unwrap();
    let source_messages = all(&store, "src").await;

    let options = CloneThread {
        resource_id: "alice".into(),
        new_thread_id: Some("copy".into()),
        title: Some("Copy".into()),
    };
    let copy = store.clone_thread("src", options.clone()).await.unwrap();
    assert_eq!(
        (copy.id.as_str(), copy.resource_id.as_str()),
        ("copy", "alice")
    );
    assert_eq!(copy.title.as_deref(), Some("Copy"));
    assert_eq!(copy.metadata["kind"], json!("chat"));
    assert_eq!(copy.metadata["clone"]["sourceThreadId"], json!("src"));
    assert_eq!(store.get_thread("copy").await.unwrap(), Some(copy.clone()));

    let copied = all(&store, "copy").await;
    assert_eq!(seqs(&copied), [1, 2, 3]);
    for (c, s) in copied.iter().zip(&source_messages) {
        assert_ne!(c.id, s.id);
        assert_eq!(c.thread_id, "copy");
        assert_eq!((c.role, &c.parts, c.status), (s.role, &s.parts, s.status));
        assert_eq!((&c.metadata, c.created_at), (&s.metadata, s.created_at));
    }
    assert_eq!(all(&store, "src").await, source_messages);
    let more = store
        .append_messages("copy", "alice", vec![text(Role::User, "m4", "four")])
        .await
        .unwrap();
    assert_eq!(seqs(&more), [4]);

    let taken = store.clone_thread("src", options.clone()).await;
    assert!(matches!(taken, Err(StorageError::ThreadExists { thread_id }) if thread_id == "copy"));
    let foreign = CloneThread {
        resource_id: "mallory".into(),
        ..CloneThread::default()
    };
    let refused = store.clone_thread("src", foreign).await;
    assert!(matches!(
        refused,
        Err(StorageError::ThreadOwnedByOtherResource { .. })
    ));
    let missing = store.clone_thread("nope", options).await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
    let untitled = CloneThread {
        resource_id: "alice".into(),
        ..CloneThread::default()
    };
    let generated = store.clone_thread("src", untitled).await.unwrap();
    assert_eq!(generated.title.as_deref(), Some("Source"));
    assert_eq!(all(&store, &generated.id).await.len(), 3);
}

async fn list_ids(store: &Arc<dyn Storage>, query: ThreadQuery) -> Vec<String> {
    let page = store.list_threads(query).await.unwrap();
    page.items.into_iter().map(|t| t.id).collect()
}

/// Pages (sizes, totals, `has_more`, past the end) and orders (ties broken by id).
pub async fn threads_list_pagination_and_order(store: Arc<dyn Storage>) {
    // a and b share a creation time: the tie is broken by id.
    for (id, seconds) in [("c", 30), ("a", 20), ("b", 20), ("e", 50), ("d", 40)] {
        store
            .create_thread(NewThread::new("alice").id(id).created_at(at(seconds)))
            .await
            .unwrap();
    }
    for id in ["x", "y"] {
        thread(&store, id, "bob").await;
    }
    let alice = |page: u32, per_page: u32, direction: Direction| ThreadQuery {
        resource_id: Some("alice".into()),
        page: PageRequest::new(page, per_page),
        order: ThreadOrder {
            field: ThreadOrderField::CreatedAt,
            direction,
        },
        ..ThreadQuery::default()
    };
    let mut seen = Vec::new();
    for (page, len, more) in [(0, 2, true), (1, 2, true), (2, 1, false), (3, 0, false)] {
        let result = store
            .list_threads(alice(page, 2, Direction::Asc))
            .await
            .unwrap();
        assert_eq!(
            (result.items.len(), result.has_more, result.total),
            (len, more, 5)
        );
        assert_eq!((result.page, result.per_page), (page, 2));
        seen.extend(result.items.into_iter().map(|t| t.id));
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    let desc = list_ids(&store, alice(0, 10, Direction::Desc)).await;
    assert_eq!(desc, ["e", "d", "c", "b", "a"]);
    let exact = store
        .list_threads(alice(0, 5, Direction::Asc))
        .await
        .unwrap();
    assert!(!exact.has_more);

    // Appending bumps updated_at: "a" becomes the most recently updated.
    tokio::time::sleep(Duration::from_millis(2)).await;
    store
        .append_messages("a", "alice", vec![text(Role::User, "m", "hi")])
        .await
        .unwrap();
    let mut by_update = alice(0, 1, Direction::Desc);
    by_update.order.field = ThreadOrderField::UpdatedAt;
    assert_eq!(list_ids(&store, by_update).await, ["a"]);

    let everyone = ThreadQuery {
        page: PageRequest::new(0, 100),
        ..ThreadQuery::default()
    };
    assert_eq!(store.list_threads(everyone).await.unwrap().total, 7);
    let zero = store.list_threads(alice(0, 0, Direction::Asc)).await;
    assert!(matches!(
        zero,
        Err(StorageError::InvalidArgument {
            argument: "per_page",
            ..
        })
    ));
    // An offset past what SQL's signed OFFSET holds is refused before any cast, alike on
    // every backend; one just inside it is an empty page.
    let far = store
        .list_threads(alice(u32::MAX, u32::MAX, Direction::Asc))
        .await;
    assert!(
        matches!(
            far,
            Err(StorageError::InvalidArgument {
                argument: "page",
                ..
            })
        ),
        "{far:?}"
    );
    let last = store
        .list_threads(alice(u32::MAX, 1_000, Direction::Asc))
        .await
        .unwrap();
    assert!(last.items.is_empty() && !last.has_more);
    let messages = store
        .list_messages("a", None, Selection::page(u32::MAX, u32::MAX))
        .await;
    assert!(
        matches!(
            messages,
            Err(StorageError::InvalidArgument {
                argument: "page",
                ..
            })
        ),
        "{messages:?}"
    );
}

/// Metadata filters: every key equal, nested values compared as JSON (not containment).
pub async fn threads_metadata_filter(store: Arc<dyn Storage>) {
    let threads = [
        (
            "d1",
            "alice",
            json!({"kind": "delegation", "parent": {"run": "r1", "depth": 1}, "tags": ["a", "b"]}),
        ),
        (
            "d2",
            "alice",
            json!({"kind": "delegation", "parent": {"run": "r2", "depth": 1}}),
        ),
        (
            "d3",
            "bob",
            json!({"kind": "delegation", "parent": {"run": "r1", "depth": 1.0}}),
        ),
        (
            "c1",
            "alice",
            json!({"kind": "chat", "note": null, "a.b": 1, "q\"k": "v\u{e9}"}),
        ),
        ("c2", "alice", json!({})),
    ];
    for (id, resource, metadata) in threads {
        store
            .create_thread(NewThread::new(resource).id(id).metadata(meta(metadata)))
            .await
            .unwrap();
    }
    let find = |resource: Option<&str>, filter: Value| ThreadQuery {
        resource_id: resource.map(str::to_owned),
        metadata: Some(filter),
        order: ThreadOrder {
            field: ThreadOrderField::CreatedAt,
            direction: Direction::Asc,
        },
        ..ThreadQuery::default()
    };
    let cases: Vec<(Option<&str>, Value, Vec<&str>)> = vec![
        (None, json!({"kind": "delegation"}), vec!["d1", "d2", "d3"]),
        (
            Some("alice"),
            json!({"kind": "delegation"}),
            vec!["d1", "d2"],
        ),
        (
            None,
            json!({"parent": {"depth": 1, "run": "r1"}}),
            vec!["d1", "d3"],
        ),
        (None, json!({"parent": {"run": "r1"}}), vec![]),
        (
            None,
            json!({"kind": "delegation", "tags": ["a", "b"]}),
            vec!["d1"],
        ),
        (None, json!({"tags": ["b", "a"]}), vec![]),
        (None, json!({"note": null}), vec!["c1"]),
        (None, json!({"missing": null}), vec![]),
        (None, json!({"a.b": 1.0, "q\"k": "v\u{e9}"}), vec!["c1"]),
        (None, json!({"kind": "Chat"}), vec![]),
    ];
    for (resource, filter, expected) in cases {
        let mut found = list_ids(&store, find(resource, filter.clone())).await;
        found.sort();
        assert_eq!(found, expected, "filter {filter} on {resource:?}");
    }
    assert_eq!(
        list_ids(&store, find(Some("alice"), json!({}))).await.len(),
        4
    );
    let page = store
        .list_threads(find(None, json!({"kind": "delegation"})))
        .await
        .unwrap();
    assert_eq!(page.total, 3);
}

/// A filter that is not a JSON object is a typed error.
pub async fn threads_malformed_filter(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    for filter in [json!([1, 2]), json!("kind=chat"), json!(3), json!(null)] {
        let query = ThreadQuery {
            metadata: Some(filter.clone()),
            ..ThreadQuery::default()
        };
        let result = store.list_threads(query).await;
        assert!(
            matches!(result, Err(StorageError::InvalidFilter { .. })),
            "filter {filter}: {result:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

/// Appends assign seqs; stored messages read back equal; thread `updated_at` moves.
pub async fn messages_append_and_list(store: Arc<dyn Storage>) {
    let created = store
        .create_thread(NewThread::new("alice").id("t1").created_at(at(0)))
        .await
        .unwrap();
    let call = Message {
        id: "m2".into(),
        role: Role::Assistant,
        parts: vec![
            Part::Text {
                text: "Checking.".into(),
            },
            Part::ToolCall {
                tool_call_id: "c1".into(),
                tool_name: "weather".into(),
                args: json!({"city": "Lisbon", "days": 2, "ratio": 0.5}),
            },
        ],
    };
    let result = Message {
        id: "m3".into(),
        role: Role::Tool,
        parts: vec![Part::ToolResult {
            tool_call_id: "c1".into(),
            tool_name: "weather".into(),
            result: json!({"celsius": 21.5, "sky": "clear"}),
            is_error: false,
            denied: false,
        }],
    };
    let batch = vec![
        text(Role::User, "m1", "Weather in Lisbon?").created_at(at(5)),
        NewMessage::from(call.clone()).metadata(meta(json!({"step": 1}))),
        NewMessage::from(result.clone()),
    ];
    let stored = store.append_messages("t1", "alice", batch).await.unwrap();
    assert_eq!(seqs(&stored), [1, 2, 3]);
    assert_eq!(stored[0].created_at, at(5));
    assert_eq!(stored[1].to_message(), call);
    assert_eq!(stored[1].metadata, meta(json!({"step": 1})));
    assert_eq!(stored[2].to_message(), result);
    assert!(stored.iter().all(|m| m.status == MessageStatus::Complete));
    assert!(
        stored
            .iter()
            .all(|m| m.thread_id == "t1" && m.resource_id == "alice")
    );
    assert_eq!(all(&store, "t1").await, stored);
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert!(thread.updated_at > created.updated_at);

    let empty = store
        .append_messages("t1", "alice", Vec::new())
        .await
        .unwrap();
    assert!(empty.is_empty());
    let next = store
        .append_messages("t1", "alice", vec![text(Role::User, "m4", "And Porto?")])
        .await
        .unwrap();
    assert_eq!(seqs(&next), [4]);
    assert!(next[0].created_at >= stored[1].created_at);
}

/// A turn's append with the history before it: the new messages stored, the `last` messages
/// before the first of them returned; retries, a missing thread and a foreign one behave as in
/// `append_messages`.
pub async fn messages_append_with_history(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let (stored, history) = store
        .append_with_history("t1", "alice", vec![text(Role::User, "m1", "first")], 3)
        .await
        .unwrap();
    assert_eq!(seqs(&stored), [1]);
    assert!(history.messages.is_empty() && !history.has_more);
    let batch = (2..=5)
        .map(|i| text(Role::User, &format!("m{i}"), "more"))
        .collect();
    store.append_messages("t1", "alice", batch).await.unwrap();

    let turn = vec![
        text(Role::User, "m6", "question"),
        text(Role::Assistant, "m7", "answer"),
    ];
    let (stored, history) = store
        .append_with_history("t1", "alice", turn.clone(), 3)
        .await
        .unwrap();
    assert_eq!(seqs(&stored), [6, 7]);
    assert_eq!(ids(&stored), ["m6", "m7"]);
    assert_eq!(ids(&history.messages), ["m3", "m4", "m5"]);
    assert!(history.has_more);
    let (_, everything) = store
        .append_with_history("t1", "alice", vec![text(Role::User, "m8", "x")], 100)
        .await
        .unwrap();
    assert_eq!(everything.messages.len(), 7);
    assert!(!everything.has_more);

    // A retried turn keeps its seqs; the history is still what came before it.
    let (again, history) = store
        .append_with_history("t1", "alice", turn, 2)
        .await
        .unwrap();
    assert_eq!(seqs(&again), [6, 7]);
    assert_eq!(ids(&history.messages), ["m4", "m5"]);
    assert_eq!(all(&store, "t1").await.len(), 8);

    let missing = store
        .append_with_history("nope", "alice", vec![text(Role::User, "z1", "x")], 3)
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
    let foreign = store
        .append_with_history("t1", "mallory", vec![text(Role::User, "z2", "x")], 3)
        .await;
    assert!(is_foreign(foreign, "t1"));
    assert_eq!(all(&store, "t1").await.len(), 8);
}

/// Last N, ranges (both anchors), pages and their edges.
pub async fn messages_selection_edges(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let batch = (1..=5)
        .map(|i| text(Role::User, &format!("m{i}"), &format!("message {i}")))
        .collect();
    store.append_messages("t1", "alice", batch).await.unwrap();
    let list = |selection| {
        let store = Arc::clone(&store);
        async move {
            store
                .list_messages("t1", Some("alice"), selection)
                .await
                .unwrap()
        }
    };
    let cases = [
        (Selection::last(2), vec![4, 5], true),
        (Selection::last(5), vec![1, 2, 3, 4, 5], false),
        (Selection::last(10), vec![1, 2, 3, 4, 5], false),
        (Selection::last(0), vec![], true),
        (Selection::after(2, None), vec![3, 4, 5], false),
        (Selection::after(2, Some(2)), vec![3, 4], true),
        (Selection::after(5, Some(2)), vec![], false),
        (Selection::before(4, 2), vec![2, 3], true),
        (Selection::before(3, 5), vec![1, 2], false),
        (Selection::before(1, 5), vec![], false),
        (Selection::all(), vec![1, 2, 3, 4, 5], false),
    ];
    for (selection, expected, more) in cases {
        let result = list(selection).await;
        assert_eq!(seqs(&result.messages), expected, "{selection:?}");
        assert_eq!(result.has_more, more, "{selection:?}");
        assert_eq!(result.total, None);
    }
    let between = Selection::Range(crate::types::SeqRange {
        after: Some(1),
        before: Some(5),
        limit: Some(2),
        anchor: crate::types::Anchor::End,
    });
    assert_eq!(seqs(&list(between).await.messages), [3, 4]);
    for (page, expected, more) in [
        (0, vec![1, 2], true),
        (2, vec![5], false),
        (3, vec![], false),
    ] {
        let result = list(Selection::page(page, 2)).await;
        assert_eq!(seqs(&result.messages), expected);
        assert_eq!((result.has_more, result.total), (more, Some(5)));
    }
    let zero = store.list_messages("t1", None, Selection::page(0, 0)).await;
    assert!(matches!(zero, Err(StorageError::InvalidArgument { .. })));
    let missing = store.list_messages("nope", None, Selection::last(1)).await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}

/// Re-appending an id replaces it in place: retried saves and resumed runs never duplicate.
pub async fn messages_idempotent_reappend(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let first = store
        .append_messages(
            "t1",
            "alice",
            vec![
                text(Role::User, "a", "hello"),
                text(Role::Assistant, "b", "Hel"),
            ],
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    let retry = vec![
        text(Role::Assistant, "b", "Hello there").aborted(),
        text(Role::User, "c", "bye"),
    ];
    let second = store
        .append_messages("t1", "alice", retry.clone())
        .await
        .unwrap();
    assert_eq!(seqs(&second), [2, 3]);
    assert_eq!(second[0].status, MessageStatus::Aborted);
    assert_eq!(second[0].created_at, first[1].created_at);
    let again = store.append_messages("t1", "alice", retry).await.unwrap();
    assert_eq!(again, second);

    let stored = all(&store, "t1").await;
    assert_eq!(ids(&stored), ["a", "b", "c"]);
    assert_eq!(
        stored[1].parts,
        vec![Part::Text {
            text: "Hello there".into()
        }]
    );
    assert_eq!(stored[1].status, MessageStatus::Aborted);

    // A repeated id inside one batch: first position, last content.
    let folded = store
        .append_messages(
            "t1",
            "alice",
            vec![
                text(Role::User, "d", "draft"),
                text(Role::User, "e", "x"),
                text(Role::User, "d", "final"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(seqs(&folded), [4, 5]);
    let stored = all(&store, "t1").await;
    assert_eq!(ids(&stored), ["a", "b", "c", "d", "e"]);
    assert_eq!(
        stored[3].parts,
        vec![Part::Text {
            text: "final".into()
        }]
    );
}

/// A message id stored in another thread is refused, and nothing of the batch is written.
pub async fn messages_id_in_other_thread(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    store
        .append_messages("t1", "alice", vec![text(Role::User, "x", "in t1")])
        .await
        .unwrap();
    let batch = vec![
        text(Role::User, "fresh", "new"),
        text(Role::User, "x", "moved?"),
    ];
    let result = store.append_messages("t2", "alice", batch).await;
    assert!(matches!(
        result,
        Err(StorageError::MessageInOtherThread { ref message_id, ref stored_in, ref requested })
            if message_id == "x" && stored_in == "t1" && requested == "t2"
    ));
    assert!(all(&store, "t2").await.is_empty());
    assert_eq!(
        all(&store, "t1").await[0].parts,
        vec![Part::Text {
            text: "in t1".into()
        }]
    );
    let next = store
        .append_messages("t2", "alice", vec![text(Role::User, "y", "first")])
        .await
        .unwrap();
    assert_eq!(seqs(&next), [1]);
}

/// Every thread-content operation refuses another resource's thread, naming both.
pub async fn messages_cross_resource_refused(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    store
        .append_messages("t1", "alice", vec![text(Role::User, "m1", "secret")])
        .await
        .unwrap();
    let m = "mallory";
    let scope = Scope::thread("t1", m);
    let msg = vec![text(Role::User, "m2", "hi")];
    assert!(is_foreign(store.append_messages("t1", m, msg).await, "t1"));
    assert!(is_foreign(
        store
            .list_messages("t1", Some(m), Selection::last(10))
            .await,
        "t1"
    ));
    assert!(is_foreign(
        store.get_messages(&["m1".into()], Some(m)).await,
        "t1"
    ));
    assert!(is_foreign(
        store.delete_messages("t1", m, &["m1".into()]).await,
        "t1"
    ));
    let search = MessageSearch {
        scope: scope.clone(),
        query: "secret".into(),
        limit: 10,
    };
    assert!(is_foreign(store.search_messages(search).await, "t1"));
    assert!(is_foreign(store.get_working_memory(&scope).await, "t1"));
    assert!(is_foreign(
        store.set_working_memory(&scope, "x").await,
        "t1"
    ));
    assert!(is_foreign(store.list_observations(&scope).await, "t1"));
    assert!(is_foreign(
        store.add_observations(&scope, Vec::new()).await,
        "t1"
    ));
    assert!(is_foreign(
        store.replace_observations(&scope, Vec::new()).await,
        "t1"
    ));
    assert!(is_foreign(store.get_observed_seq("t1", m).await, "t1"));
    assert!(is_foreign(store.set_observed_seq("t1", m, 1).await, "t1"));
    let resource_search = MessageSearch {
        scope: Scope::resource(m),
        query: "secret".into(),
        limit: 10,
    };
    assert!(
        store
            .search_messages(resource_search)
            .await
            .unwrap()
            .is_empty()
    );

    // Nothing was written.
    assert_eq!(ids(&all(&store, "t1").await), ["m1"]);
    assert_eq!(
        store
            .get_working_memory(&Scope::thread("t1", "alice"))
            .await
            .unwrap(),
        None
    );
    let unknown = store.append_messages("nope", "alice", Vec::new()).await;
    assert!(
        matches!(unknown, Err(StorageError::ThreadNotFound { thread_id }) if thread_id == "nope")
    );
}

/// Get by ids (unknown ids skipped) and delete by ids (seqs not reused; vectors follow).
pub async fn messages_get_and_delete(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    let batch = ["a", "b", "c"].map(|id| text(Role::User, id, id)).to_vec();
    store.append_messages("t1", "alice", batch).await.unwrap();
    store
        .append_messages("t2", "alice", vec![text(Role::User, "z", "z")])
        .await
        .unwrap();
    store.create_index("idx", 2).await.unwrap();
    let vectors = ["b", "c"]
        .map(|id| VectorRecord {
            id: format!("v-{id}"),
            vector: vec![1.0, 1.0],
            metadata: meta(json!({"message_id": id, "thread_id": "t1"})),
        })
        .to_vec();
    store.upsert_vectors("idx", vectors).await.unwrap();

    let wanted = ["c", "z", "unknown", "a"].map(String::from);
    let got = store.get_messages(&wanted, Some("alice")).await.unwrap();
    assert_eq!(ids(&got), ["a", "c", "z"]);

    let doomed = ["b", "z", "unknown"].map(String::from);
    assert_eq!(
        store.delete_messages("t1", "alice", &doomed).await.unwrap(),
        1
    );
    assert_eq!(ids(&all(&store, "t1").await), ["a", "c"]);
    assert_eq!(ids(&all(&store, "t2").await), ["z"]);
    let next = store
        .append_messages("t1", "alice", vec![text(Role::User, "d", "d")])
        .await
        .unwrap();
    assert_eq!(seqs(&next), [4]);
    let query = VectorQuery {
        vector: vec![1.0, 1.0],
        top_k: 10,
        filter: VectorFilter::default(),
    };
    let left = store.query_vectors("idx", query).await.unwrap();
    assert_eq!(
        left.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        ["v-c"]
    );
    // A deleted id can be appended again (to its thread or another).
    let back = store
        .append_messages("t2", "alice", vec![text(Role::User, "b", "back")])
        .await
        .unwrap();
    assert_eq!(seqs(&back), [2]);
}

/// Plain-text search: case-insensitive substring of text parts, newest first, scoped, limited.
pub async fn messages_search(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    thread(&store, "t3", "bob").await;
    let tool_call = NewMessage::from(Message {
        id: "call".into(),
        role: Role::Assistant,
        parts: vec![Part::ToolCall {
            tool_call_id: "c".into(),
            tool_name: "lisbon_weather".into(),
            args: json!({"city": "Lisbon"}),
        }],
    });
    let t1 = vec![
        text(Role::User, "a1", "Trip to LISBON in June").created_at(at(10)),
        tool_call.created_at(at(11)),
        text(Role::Assistant, "a2", "Lisbon is sunny; l'été est chaud").created_at(at(12)),
        text(Role::User, "a3", "What about Porto?").created_at(at(13)),
    ];
    store.append_messages("t1", "alice", t1).await.unwrap();
    store
        .append_messages(
            "t2",
            "alice",
            vec![text(Role::User, "b1", "lisbon again").created_at(at(11))],
        )
        .await
        .unwrap();
    store
        .append_messages(
            "t3",
            "bob",
            vec![text(Role::User, "c1", "Lisbon for bob").created_at(at(20))],
        )
        .await
        .unwrap();
    let search = |scope: Scope, query: &str, limit: u32| {
        let store = Arc::clone(&store);
        let search = MessageSearch {
            scope,
            query: query.into(),
            limit,
        };
        async move { store.search_messages(search).await.unwrap() }
    };
    let in_t1 = Scope::thread("t1", "alice");
    assert_eq!(
        ids(&search(in_t1.clone(), "lisbon", 10).await),
        ["a2", "a1"]
    );
    assert_eq!(ids(&search(in_t1.clone(), "lisbon", 1).await), ["a2"]);
    assert_eq!(ids(&search(in_t1.clone(), "ÉTÉ EST", 10).await), ["a2"]);
    assert_eq!(
        ids(&search(in_t1.clone(), "city", 10).await),
        Vec::<&str>::new()
    );
    assert!(search(in_t1.clone(), "lisbon", 0).await.is_empty());
    assert_eq!(ids(&search(in_t1, "", 2).await), ["a3", "a2"]);
    let alice = Scope::resource("alice");
    assert_eq!(
        ids(&search(alice.clone(), "Lisbon", 10).await),
        ["a2", "b1", "a1"]
    );
    assert_eq!(ids(&search(alice, "100%", 10).await), Vec::<&str>::new());
    let missing = store
        .search_messages(MessageSearch {
            scope: Scope::thread("nope", "alice"),
            query: "x".into(),
            limit: 1,
        })
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}

/// Search in a thread of 12,000 messages (more than any backend scans before it turns to its
/// text index): a term in every message, rare terms, GLOB and LIKE wildcards taken literally, and
/// the index kept right through deletes and replacements.
pub async fn messages_search_at_scale(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    thread(&store, "t3", "bob").await;
    let body = |i: usize| match i {
        17 => "The RARE falcon appears".to_owned(),
        100 => "price [usd]* 5? or 50%_off".to_owned(),
        4321 => "a rare falcon again".to_owned(),
        i => format!("common words about the kestrel, message {i}"),
    };
    for start in (0..12_000).step_by(1000) {
        let batch = (start..start + 1000)
            .map(|i| text(Role::User, &format!("m{i}"), &body(i)))
            .collect();
        store.append_messages("t1", "alice", batch).await.unwrap();
    }
    store
        .append_messages(
            "t2",
            "alice",
            vec![text(Role::User, "n1", "rare falcon in t2")],
        )
        .await
        .unwrap();
    store
        .append_messages("t3", "bob", vec![text(Role::User, "b1", "a kestrel only")])
        .await
        .unwrap();
    let search = |scope: Scope, query: &str, limit: u32| {
        let store = Arc::clone(&store);
        let search = MessageSearch {
            scope,
            query: query.into(),
            limit,
        };
        async move {
            let found = store.search_messages(search).await.unwrap();
            found.iter().map(|m| m.id.clone()).collect::<Vec<_>>()
        }
    };
    let t1 = Scope::thread("t1", "alice");
    assert_eq!(
        search(t1.clone(), "kestrel", 3).await,
        ["m11999", "m11998", "m11997"]
    );
    assert_eq!(
        search(t1.clone(), "rare falcon", 10).await,
        ["m4321", "m17"]
    );
    assert_eq!(search(t1.clone(), "[usd]*", 10).await, ["m100"]);
    assert_eq!(search(t1.clone(), "5?", 10).await, ["m100"]);
    assert_eq!(search(t1.clone(), "50%_off", 10).await, ["m100"]);
    assert!(search(t1.clone(), "0%", 10).await.len() == 1);
    assert!(search(t1.clone(), "no such words", 10).await.is_empty());
    assert_eq!(
        search(Scope::resource("alice"), "rare falcon", 10).await,
        ["n1", "m4321", "m17"]
    );
    assert!(
        search(Scope::resource("bob"), "falcon", 10)
            .await
            .is_empty()
    );

    store
        .delete_messages("t1", "alice", &["m4321".to_owned()])
        .await
        .unwrap();
    assert_eq!(search(t1.clone(), "rare falcon", 10).await, ["m17"]);
    store
        .append_messages("t1", "alice", vec![text(Role::User, "m17", "no bird here")])
        .await
        .unwrap();
    assert!(search(t1.clone(), "rare falcon", 10).await.is_empty());
    assert_eq!(search(t1, "no bird", 10).await, ["m17"]);
}

/// 2 × 50 concurrent appenders (batches of 2) on one thread: all 200 messages stored, seqs
/// 1..=200 without gaps or duplicates, each batch contiguous and in order.
pub async fn messages_concurrent_appends(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let mut tasks = Vec::new();
    for tab in 0..2 {
        for turn in 0..50 {
            let store = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                let batch = vec![
                    text(Role::User, &format!("{tab}-{turn}-q"), "question"),
                    text(Role::Assistant, &format!("{tab}-{turn}-a"), "answer"),
                ];
                store.append_messages("t1", "alice", batch).await.unwrap()
            }));
        }
    }
    for task in tasks {
        let stored = task.await.unwrap();
        assert_eq!(stored[1].seq, stored[0].seq + 1, "batch split: {stored:?}");
        assert!(stored[0].id.ends_with("-q"));
    }
    let stored = all(&store, "t1").await;
    assert_eq!(seqs(&stored), (1..=200).collect::<Vec<_>>());
    let distinct: HashSet<&str> = stored.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(distinct.len(), 200);
    for pair in stored.chunks(2) {
        assert_eq!(pair[0].id.replace("-q", "-a"), pair[1].id);
    }
}

/// The same batch retried by 10 tasks at once is stored once.
pub async fn messages_concurrent_idempotent_retries(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let batch = vec![
                    text(Role::User, "q", "hi"),
                    text(Role::Assistant, "a", "hello"),
                ];
                store.append_messages("t1", "alice", batch).await.unwrap()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(seqs(&task.await.unwrap()), [1, 2]);
    }
    assert_eq!(ids(&all(&store, "t1").await), ["q", "a"]);
}

// ---------------------------------------------------------------------------------------------
// Working memory

/// Thread and resource working memory are separate and overwritten on set.
pub async fn working_memory_scopes(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    thread(&store, "t2", "alice").await;
    let t1 = Scope::thread("t1", "alice");
    let resource = Scope::resource("alice");
    assert_eq!(store.get_working_memory(&t1).await.unwrap(), None);
    assert_eq!(store.get_working_memory(&resource).await.unwrap(), None);
    store
        .set_working_memory(&t1, "# Trip\n- city: Lisbon")
        .await
        .unwrap();
    store
        .set_working_memory(&resource, "{\"name\":\"Alice\"}")
        .await
        .unwrap();
    store
        .set_working_memory(&t1, "# Trip\n- city: Porto")
        .await
        .unwrap();
    assert_eq!(
        store.get_working_memory(&t1).await.unwrap().as_deref(),
        Some("# Trip\n- city: Porto")
    );
    assert_eq!(
        store
            .get_working_memory(&resource)
            .await
            .unwrap()
            .as_deref(),
        Some("{\"name\":\"Alice\"}")
    );
    let t2 = Scope::thread("t2", "alice");
    assert_eq!(store.get_working_memory(&t2).await.unwrap(), None);
    let other = Scope::resource("bob");
    assert_eq!(store.get_working_memory(&other).await.unwrap(), None);
    let missing = store
        .set_working_memory(&Scope::thread("nope", "alice"), "x")
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}

// ---------------------------------------------------------------------------------------------
// Runs

fn run_state_snapshot(run_id: &str) -> Value {
    use kestrel_core::agent::{RunSettings, RunState};
    let settings = RunSettings {
        thread_id: Some("t1".into()),
        resource_id: Some("alice".into()),
        ..RunSettings::default()
    };
    let state = RunState::new(
        run_id.into(),
        "weather".into(),
        vec![Message::user("Weather in Lisbon? 21.5 °C")],
        5,
        settings,
    );
    serde_json::to_value(&state).unwrap()
}

/// Create-only, compare-and-set updates, conflicts that change nothing, snapshots round-trip.
pub async fn runs_save_compare_and_set(store: Arc<dyn Storage>) {
    let snapshot = run_state_snapshot("r1");
    let mut record = RunRecord::new("r1", "weather", RunStatus::Running, snapshot.clone());
    record.thread_id = Some("t1".into());
    record.resource_id = Some("alice".into());
    let created = store.save_run(record.clone(), None).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(store.get_run("r1").await.unwrap(), Some(created.clone()));
    let state: kestrel_core::agent::RunState =
        serde_json::from_value(created.snapshot.clone()).unwrap();
    assert_eq!(serde_json::to_value(&state).unwrap(), snapshot);

    let duplicate = store.save_run(record.clone(), None).await;
    assert!(matches!(
        duplicate,
        Err(StorageError::Conflict { ref run_id, expected: None, actual: Some(1) }) if run_id == "r1"
    ));

    tokio::time::sleep(Duration::from_millis(2)).await;
    let suspended = RunRecord {
        status: RunStatus::Suspended,
        snapshot: json!({"pending": [{"toolCallId": "c1", "approved": null}], "ratio": 0.1}),
        ..record.clone()
    };
    let updated = store.save_run(suspended.clone(), Some(1)).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at > created.updated_at);
    assert_eq!(store.get_run("r1").await.unwrap(), Some(updated.clone()));

    let stale = RunRecord {
        status: RunStatus::Completed,
        ..record.clone()
    };
    let conflict = store.save_run(stale, Some(1)).await;
    assert!(matches!(
        conflict,
        Err(StorageError::Conflict {
            expected: Some(1),
            actual: Some(2),
            ..
        })
    ));
    assert_eq!(store.get_run("r1").await.unwrap(), Some(updated));

    let ghost = RunRecord::new("ghost", "weather", RunStatus::Running, json!({}));
    let missing = store.save_run(ghost, Some(3)).await;
    assert!(matches!(missing, Err(StorageError::RunNotFound { run_id }) if run_id == "ghost"));
    assert_eq!(store.get_run("ghost").await.unwrap(), None);
    assert!(store.delete_run("r1").await.unwrap());
    assert!(!store.delete_run("r1").await.unwrap());
    assert_eq!(store.get_run("r1").await.unwrap(), None);
}

/// `save_runs` writes every run or none: a conflict on the last leaves the first unchanged.
pub async fn runs_save_together(store: Arc<dyn Storage>) {
    let parent = RunRecord::new("parent", "boss", RunStatus::Suspended, json!({"at": 0}));
    let child = RunRecord::new("child", "helper", RunStatus::Suspended, json!({"at": 0}));
    let parent = store.save_run(parent, None).await.unwrap();
    let child = store.save_run(child, None).await.unwrap();
    let decided = |record: &RunRecord| RunRecord {
        status: RunStatus::Running,
        snapshot: json!({"at": 1}),
        ..record.clone()
    };
    // The child changed meanwhile (an abort marked it): the decision must not land anywhere.
    let conflict = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (decided(&child), Some(child.version + 1)),
        ])
        .await;
    assert!(
        matches!(conflict, Err(StorageError::Conflict { ref run_id, .. }) if run_id == "child"),
        "{conflict:?}"
    );
    assert_eq!(store.get_run("parent").await.unwrap(), Some(parent.clone()));
    assert_eq!(store.get_run("child").await.unwrap(), Some(child.clone()));
    let missing = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (
                RunRecord::new("ghost", "x", RunStatus::Running, json!({})),
                Some(1),
            ),
        ])
        .await;
    assert!(
        matches!(missing, Err(StorageError::RunNotFound { .. })),
        "{missing:?}"
    );
    assert_eq!(store.get_run("parent").await.unwrap(), Some(parent.clone()));
    // Without a conflict both are written, in order.
    let saved = store
        .save_runs(vec![
            (decided(&parent), Some(parent.version)),
            (decided(&child), Some(child.version)),
        ])
        .await
        .unwrap();
    assert_eq!(saved.len(), 2);
    assert_eq!((saved[0].run_id.as_str(), saved[0].version), ("parent", 2));
    assert_eq!((saved[1].run_id.as_str(), saved[1].version), ("child", 2));
    assert_eq!(
        store.get_run("child").await.unwrap().unwrap().snapshot,
        json!({"at": 1})
    );
}

/// Ten instances racing to advance one run from version 1: exactly one wins.
pub async fn runs_concurrent_compare_and_set(store: Arc<dyn Storage>) {
    let record = RunRecord::new("r1", "agent", RunStatus::Suspended, json!({"step": 0}));
    store.save_run(record.clone(), None).await.unwrap();
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let store = Arc::clone(&store);
            let record = RunRecord {
                status: RunStatus::Running,
                snapshot: json!({"step": 1, "by": i}),
                ..record.clone()
            };
            tokio::spawn(async move { store.save_run(record, Some(1)).await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(saved) => winners.push(saved),
            Err(StorageError::Conflict {
                actual: Some(2), ..
            }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let stored = store.get_run("r1").await.unwrap().unwrap();
    assert_eq!(
        (stored.version, &stored.snapshot),
        (2, &winners[0].snapshot)
    );
}

async fn list_run_ids(store: &Arc<dyn Storage>, filter: RunFilter) -> Vec<String> {
    let page = store.list_runs(filter).await.unwrap();
    page.items.into_iter().map(|r| r.run_id).collect()
}

/// Filters (agent, thread, resource, statuses, parent, creation range), newest first, pages.
pub async fn runs_list_filters(store: Arc<dyn Storage>) {
    let specs = [
        ("r1", "planner", Some("t1"), RunStatus::Completed, None),
        ("r2", "planner", Some("t1"), RunStatus::Suspended, None),
        (
            "r3",
            "helper",
            Some("t2"),
            RunStatus::WaitingForSubtask,
            None,
        ),
        ("r4", "helper", None, RunStatus::Suspended, Some("r3")),
        ("r5", "planner", Some("t2"), RunStatus::Failed, None),
    ];
    let mut created = Vec::new();
    for (id, agent, thread, status, parent) in specs {
        let mut record = RunRecord::new(id, agent, status, json!({"id": id}));
        record.thread_id = thread.map(str::to_owned);
        record.resource_id = thread.map(|_| "alice".to_owned());
        record.parent_run_id = parent.map(str::to_owned);
        created.push(store.save_run(record, None).await.unwrap());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let f = RunFilter::default;
    assert_eq!(
        list_run_ids(&store, f()).await,
        ["r5", "r4", "r3", "r2", "r1"]
    );
    let suspended = RunFilter {
        statuses: vec![RunStatus::Suspended, RunStatus::WaitingForSubtask],
        ..f()
    };
    assert_eq!(
        list_run_ids(&store, suspended.clone()).await,
        ["r4", "r3", "r2"]
    );
    let in_t1 = RunFilter {
        thread_id: Some("t1".into()),
        resource_id: Some("alice".into()),
        ..suspended.clone()
    };
    assert_eq!(list_run_ids(&store, in_t1).await, ["r2"]);
    let children = RunFilter {
        parent_run_id: Some("r3".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, children).await, ["r4"]);
    let planner = RunFilter {
        agent_id: Some("planner".into()),
        ..f()
    };
    assert_eq!(list_run_ids(&store, planner).await, ["r5", "r2", "r1"]);
    let window = RunFilter {
        created_from: Some(created[1].created_at),
        created_to: Some(created[3].created_at),
        ..f()
    };
    assert_eq!(list_run_ids(&store, window).await, ["r3", "r2"]);
    let paged = RunFilter {
        page: PageRequest::new(1, 2),
        ..f()
    };
    let page = store.list_runs(paged).await.unwrap();
    assert_eq!((page.total, page.has_more, page.items.len()), (5, true, 2));
    assert_eq!(page.items[0].run_id, "r3");
    assert_eq!(page.items[0], created[2]);
    let none = RunFilter {
        agent_id: Some("nobody".into()),
        ..f()
    };
    let empty = store.list_runs(none).await.unwrap();
    assert_eq!(
        (empty.total, empty.has_more, empty.items.len()),
        (0, false, 0)
    );
}

// ---------------------------------------------------------------------------------------------
// Observations

/// Add (in order), list by scope, replace a scope at once, and the observed-seq marker.
pub async fn observations_scopes_and_replace(store: Arc<dyn Storage>) {
    thread(&store, "t1", "alice").await;
    let t1 = Scope::thread("t1", "alice");
    let resource = Scope::resource("alice");
    let first = NewObservation {
        id: Some("o1".into()),
        text: "2025-01-01: Alice plans a trip to Lisbon".into(),
        created_at: Some(at(100)),
        observed_up_to_seq: Some(4),
        source_thread_id: Some("t1".into()),
    };
    let added = store
        .add_observations(&t1, vec![first, NewObservation::new("prefers trains")])
        .await
        .unwrap();
    assert_eq!(added[0].id, "o1");
    assert_eq!(
        (added[0].created_at, added[0].observed_up_to_seq),
        (at(100), Some(4))
    );
    assert_eq!(added[0].scope, t1);
    store
        .add_observations(&t1, vec![NewObservation::new("third")])
        .await
        .unwrap();
    store
        .add_observations(&resource, vec![NewObservation::new("lives in Porto")])
        .await
        .unwrap();
    let listed = store.list_observations(&t1).await.unwrap();
    let texts: Vec<&str> = listed.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "2025-01-01: Alice plans a trip to Lisbon",
            "prefers trains",
            "third"
        ]
    );
    assert_eq!(listed[..2], added[..]);
    let on_resource = store.list_observations(&resource).await.unwrap();
    assert_eq!(on_resource.len(), 1);
    assert_eq!(on_resource[0].scope, resource);

    let condensed = store
        .replace_observations(&t1, vec![NewObservation::new("condensed")])
        .await
        .unwrap();
    assert_eq!(store.list_observations(&t1).await.unwrap(), condensed);
    assert_eq!(
        store.list_observations(&resource).await.unwrap(),
        on_resource
    );
    store
        .replace_observations(&resource, Vec::new())
        .await
        .unwrap();
    assert!(store.list_observations(&resource).await.unwrap().is_empty());
    assert_eq!(store.list_observations(&t1).await.unwrap().len(), 1);

    assert_eq!(store.get_observed_seq("t1", "alice").await.unwrap(), None);
    store.set_observed_seq("t1", "alice", 7).await.unwrap();
    store.set_observed_seq("t1", "alice", 9).await.unwrap();
    assert_eq!(
        store.get_observed_seq("t1", "alice").await.unwrap(),
        Some(9)
    );
    let missing = store.get_observed_seq("nope", "alice").await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
    let missing = store
        .add_observations(&Scope::thread("nope", "alice"), Vec::new())
        .await;
    assert!(matches!(missing, Err(StorageError::ThreadNotFound { .. })));
}

// ---------------------------------------------------------------------------------------------
// Vectors

/// Index creation is idempotent for one dimension and refuses another.
pub async fn vectors_index_lifecycle(store: Arc<dyn Storage>) {
    assert_eq!(store.index_dimension("messages").await.unwrap(), None);
    store.create_index("messages", 384).await.unwrap();
    store.create_index("messages", 384).await.unwrap();
    assert_eq!(store.index_dimension("messages").await.unwrap(), Some(384));
    let other = store.create_index("messages", 768).await;
    assert!(matches!(
        other,
        Err(StorageError::IndexExists { ref index, existing: 384, requested: 768 }) if index == "messages"
    ));
    let zero = store.create_index("empty", 0).await;
    assert!(matches!(
        zero,
        Err(StorageError::InvalidArgument {
            argument: "dimension",
            ..
        })
    ));
    let record = VectorRecord {
        id: "v".into(),
        vector: vec![1.0],
        metadata: Metadata::new(),
    };
    let missing = store.upsert_vectors("nope", vec![record]).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { index }) if index == "nope"));
    let query = VectorQuery {
        vector: vec![1.0],
        top_k: 1,
        filter: VectorFilter::default(),
    };
    let missing = store.query_vectors("nope", query).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { .. })));
}

/// Vectors of the wrong length are refused with expected and got, and nothing is written.
pub async fn vectors_dimension_mismatch(store: Arc<dyn Storage>) {
    store.create_index("idx", 3).await.unwrap();
    let good = VectorRecord {
        id: "good".into(),
        vector: vec![1.0, 0.0, 0.0],
        metadata: Metadata::new(),
    };
    let bad = VectorRecord {
        id: "bad".into(),
        vector: vec![1.0, 0.0],
        metadata: Metadata::new(),
    };
    let result = store.upsert_vectors("idx", vec![good.clone(), bad]).await;
    assert!(matches!(
        result,
        Err(StorageError::DimensionMismatch { ref index, expected: 3, got: 2 }) if index == "idx"
    ));
    let nan = VectorRecord {
        id: "nan".into(),
        vector: vec![f32::NAN, 0.0, 0.0],
        metadata: Metadata::new(),
    };
    let result = store.upsert_vectors("idx", vec![nan]).await;
    assert!(matches!(result, Err(StorageError::InvalidArgument { .. })));
    let query = |vector: Vec<f32>| VectorQuery {
        vector,
        top_k: 5,
        filter: VectorFilter::default(),
    };
    assert!(
        store
            .query_vectors("idx", query(vec![1.0, 0.0, 0.0]))
            .await
            .unwrap()
            .is_empty()
    );
    let wrong = store.query_vectors("idx", query(vec![1.0; 4])).await;
    assert!(matches!(
        wrong,
        Err(StorageError::DimensionMismatch {
            expected: 3,
            got: 4,
            ..
        })
    ));
    store.upsert_vectors("idx", vec![good]).await.unwrap();
    assert_eq!(
        store
            .query_vectors("idx", query(vec![1.0, 0.0, 0.0]))
            .await
            .unwrap()
            .len(),
        1
    );
}

/// The fixed vector data set of [`vectors_query_exact`]: 40 pseudo-random vectors, plus exact
/// duplicates (ties) and a zero vector.
pub fn vector_dataset() -> Vec<VectorRecord> {
    let mut records: Vec<VectorRecord> = (0..40u64)
        .map(|i| VectorRecord {
            id: format!("v{i:02}"),
            vector: pseudo_vector(i, 8),
            metadata: meta(json!({
                "thread_id": format!("t{}", i % 3),
                "resource_id": if i % 2 == 0 { "alice" } else { "bob" },
                "message_id": format!("m{i}"),
            })),
        })
        .collect();
    for (id, twin) in [("dup-b", 7usize), ("dup-a", 7), ("dup-c", 12)] {
        let mut copy = records[twin].clone();
        copy.id = id.into();
        records.push(copy);
    }
    records.push(VectorRecord {
        id: "zero".into(),
        vector: vec![0.0; 8],
        metadata: meta(json!({"thread_id": "t0"})),
    });
    records
}

/// What an exact cosine scan must return for `vector` over `records`.
pub fn expected_matches(records: &[VectorRecord], vector: &[f32], top_k: u32) -> Vec<VectorMatch> {
    let mut top = codec::TopK::new(top_k);
    for r in records {
        top.push(VectorMatch {
            id: r.id.clone(),
            score: codec::cosine(vector, &r.vector),
            metadata: r.metadata.clone(),
        });
    }
    top.into_vec()
}

/// Exact cosine top-k over a fixed data set, ties ordered by id; equal on every backend.
pub async fn vectors_query_exact(store: Arc<dyn Storage>) {
    store.create_index("idx", 8).await.unwrap();
    let records = vector_dataset();
    store.upsert_vectors("idx", records.clone()).await.unwrap();
    for seed in [7u64, 12, 100, 101] {
        let vector = pseudo_vector(seed, 8);
        let query = VectorQuery {
            vector: vector.clone(),
            top_k: 6,
            filter: VectorFilter::default(),
        };
        let got = store.query_vectors("idx", query).await.unwrap();
        assert_eq!(got, expected_matches(&records, &vector, 6), "seed {seed}");
    }
    // Seed 7 is v07 itself: its twins tie at the top, ordered by id.
    let query = VectorQuery {
        vector: pseudo_vector(7, 8),
        top_k: 3,
        filter: VectorFilter::default(),
    };
    let got = store.query_vectors("idx", query).await.unwrap();
    let got_ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(got_ids, ["dup-a", "dup-b", "v07"]);
    assert!(got.iter().all(|m| (m.score - 1.0).abs() < 1e-6));
    let none = VectorQuery {
        vector: pseudo_vector(1, 8),
        top_k: 0,
        filter: VectorFilter::default(),
    };
    assert!(store.query_vectors("idx", none).await.unwrap().is_empty());
}

/// Thread and resource filters, upsert replacing by id, deletes.
pub async fn vectors_filters_and_delete(store: Arc<dyn Storage>) {
    store.create_index("idx", 8).await.unwrap();
    let records = vector_dataset();
    store.upsert_vectors("idx", records.clone()).await.unwrap();
    let vector = pseudo_vector(55, 8);
    let filters = [
        (Some("t1"), None),
        (None, Some("alice")),
        (Some("t0"), Some("bob")),
        (Some("t9"), None),
    ];
    for (thread_id, resource_id) in filters {
        let subset: Vec<VectorRecord> = records
            .iter()
            .filter(|r| {
                thread_id
                    .is_none_or(|t| codec::meta_str(&r.metadata, "thread_id").as_deref() == Some(t))
            })
            .filter(|r| {
                resource_id.is_none_or(|x| {
                    codec::meta_str(&r.metadata, "resource_id").as_deref() == Some(x)
                })
            })
            .cloned()
            .collect();
        let query = VectorQuery {
            vector: vector.clone(),
            top_k: 5,
            filter: VectorFilter {
                thread_id: thread_id.map(str::to_owned),
                resource_id: resource_id.map(str::to_owned),
            },
        };
        let got = store.query_vectors("idx", query).await.unwrap();
        assert_eq!(
            got,
            expected_matches(&subset, &vector, 5),
            "{thread_id:?} {resource_id:?}"
        );
    }
    // Upsert replaces: v03 now points exactly at the query.
    let replaced = VectorRecord {
        id: "v03".into(),
        vector: vector.clone(),
        metadata: meta(json!({"thread_id": "t5"})),
    };
    store.upsert_vectors("idx", vec![replaced]).await.unwrap();
    let query = VectorQuery {
        vector: vector.clone(),
        top_k: 1,
        filter: VectorFilter::default(),
    };
    let top = store.query_vectors("idx", query.clone()).await.unwrap();
    assert_eq!(
        (top[0].id.as_str(), &top[0].metadata),
        ("v03", &meta(json!({"thread_id": "t5"})))
    );
    let doomed = ["v03", "dup-a", "missing"].map(String::from);
    assert_eq!(store.delete_vectors("idx", &doomed).await.unwrap(), 2);
    let top = store.query_vectors("idx", query).await.unwrap();
    assert_ne!(top[0].id, "v03");
    let missing = store.delete_vectors("nope", &doomed).await;
    assert!(matches!(missing, Err(StorageError::IndexNotFound { .. })));
}
