//! The same data on every backend gives the same answers: vector queries (scores and order,
//! ties included), text search and metadata filters. PostgreSQL joins when
//! `KESTREL_TEST_POSTGRES_URL` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::message::{Message, Role};
use kestrel_storage::testing::{self, Fixture, pseudo_vector, vector_dataset};
use kestrel_storage::{
    MessageSearch, NewMessage, NewThread, Scope, Storage, ThreadQuery, VectorFilter, VectorMatch,
    VectorQuery,
};
use serde_json::json;

async fn fixtures() -> Vec<Fixture> {
    let mut all = vec![
        testing::memory().await.unwrap(),
        testing::sqlite().await.unwrap(),
    ];
    all.extend(testing::postgres().await);
    all
}

#[derive(Debug, PartialEq)]
struct Answers {
    vectors: Vec<Vec<VectorMatch>>,
    search: Vec<Vec<(String, i64)>>,
    filtered: Vec<String>,
}

async fn seed(store: &Arc<dyn Storage>) {
    store.create_index("idx", 8).await.unwrap();
    store.upsert_vectors("idx", vector_dataset()).await.unwrap();
    for t in 0..3 {
        let id = format!("t{t}");
        let metadata = json!({"kind": if t == 1 { "delegation" } else { "chat" }, "n": {"t": t}});
        let thread = NewThread::new("alice")
            .id(&id)
            .metadata(metadata.as_object().unwrap().clone())
            .created_at(testing::at(t));
        store.create_thread(thread).await.unwrap();
        let batch: Vec<NewMessage> = (0..20)
            .map(|i| {
                let body = format!(
                    "Turn {i} about {}",
                    if i % 3 == 0 { "LISBON" } else { "porto" }
                );
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                NewMessage::from(Message::new(
                    role,
                    vec![kestrel_core::message::Part::Text { text: body }],
                ))
                .created_at(testing::at(100 + i * 3 + t))
            })
            .collect();
        store.append_messages(&id, "alice", batch).await.unwrap();
    }
}

async fn answers(store: &Arc<dyn Storage>) -> Answers {
    let mut vectors = Vec::new();
    for (seed, thread) in [(3u64, None), (7, None), (99, Some("t1")), (12, Some("t2"))] {
        let query = VectorQuery {
            vector: pseudo_vector(seed, 8),
            top_k: 7,
            filter: VectorFilter {
                thread_id: thread.map(str::to_owned),
                resource_id: None,
            },
        };
        vectors.push(store.query_vectors("idx", query).await.unwrap());
    }
    let mut search = Vec::new();
    for (scope, query) in [
        (Scope::thread("t1", "alice"), "lisbon"),
        (Scope::resource("alice"), "Lisbon"),
        (Scope::resource("alice"), "turn 1"),
    ] {
        let found = store
            .search_messages(MessageSearch {
                scope,
                query: query.into(),
                limit: 8,
            })
            .await
            .unwrap();
        search.push(found.into_iter().map(|m| (m.thread_id, m.seq)).collect());
    }
    let query = ThreadQuery {
        metadata: Some(json!({"kind": "chat"})),
        ..ThreadQuery::default()
    };
    let filtered = store
        .list_threads(query)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|t| t.id)
        .collect();
    Answers {
        vectors,
        search,
        filtered,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_gives_the_same_answers() {
    let mut results = Vec::new();
    for fixture in fixtures().await {
        let store = fixture.store();
        seed(&store).await;
        results.push((store.backend(), answers(&store).await));
        fixture.teardown().await;
    }
    let (reference_backend, reference) = &results[0];
    assert_eq!(reference.vectors[1][0].id, "dup-a");
    assert_eq!(reference.search[1].len(), 8);
    assert_eq!(reference.filtered, ["t2", "t0"]);
    for (backend, answer) in &results[1..] {
        assert_eq!(
            answer, reference,
            "{backend} differs from {reference_backend}"
        );
    }
}
