//! The checks of messages: appends and their seqs, history, selections, idempotent re-appends,
//! ownership, gets, deletes, search, and concurrent appends.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::message::{Message, Part, Role};
use serde_json::json;

use super::helpers::{all, at, ids, is_foreign, meta, seqs, text, thread};
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{
    MessageSearch, MessageStatus, NewMessage, NewThread, Scope, Selection, VectorFilter,
    VectorQuery, VectorRecord,
};

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

    // A batch of one stored message (a step retried after a crash) replaces it in place.
    let single = store
        .append_messages("t1", "alice", vec![text(Role::User, "e", "y")])
        .await
        .unwrap();
    assert_eq!(seqs(&single), [5]);
    let stored = all(&store, "t1").await;
    assert_eq!(ids(&stored), ["a", "b", "c", "d", "e"]);
    assert_eq!(stored[4].parts, vec![Part::Text { text: "y".into() }]);
    let fresh = store
        .append_messages("t1", "alice", vec![text(Role::User, "f", "z")])
        .await
        .unwrap();
    assert_eq!(seqs(&fresh), [6]);
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
