//! The checks of threads: create, get, patch, delete (and what it cascades to), clone, list,
//! paginate, order and filter.

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::message::Role;
use serde_json::{Value, json};

use super::helpers::{all, at, ids, meta, seqs, text, thread};
use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{
    CloneThread, Direction, MetadataUpdate, NewObservation, NewThread, PageRequest, Scope,
    Selection, ThreadOrder, ThreadOrderField, ThreadPatch, ThreadQuery, VectorFilter, VectorQuery,
    VectorRecord,
};

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
