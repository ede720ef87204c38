//! The vector store conformance suite: one set of checks every [`VectorStore`] backend must
//! pass (feature `testing`).
//!
//! Each check is an `async fn(&dyn VectorStore)` that panics (through `assert!`) when the
//! backend misbehaves. [`vector_store_tests!`](crate::vector_store_tests) turns them into one
//! `#[tokio::test]` per check for a fixture function returning `Option<Fixture>` (`None`
//! skips, saying why):
//!
//! ```ignore
//! kestrel_rag::vector_store_tests!(kestrel_rag::testing::memory);
//! ```
//!
//! The filter checks run [`FILTER_CASES`]: filters over a fixed set of documents with the ids
//! each must select, written by hand from the filter language's rules (the in-memory
//! evaluator is checked against the same table, so no backend is its own oracle).

// Test support: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::vector::{
    CreateIndex, Filter, IndexConfig, Metadata, Metric, Selector, SharedVectorStore, Upsert,
    VectorError, VectorQuery, VectorStore, VectorUpdate,
};

/// Generates one `#[tokio::test]` per conformance check, each on a fresh store from `$setup`
/// (an `async fn() -> Option<Fixture>`; `None` skips the test).
#[macro_export]
macro_rules! vector_store_tests {
    ($setup:path) => {
        $crate::vector_store_tests!(@each $setup;
            index_lifecycle,
            index_names_are_checked,
            upsert_ids_and_replacement,
            upsert_is_all_or_nothing,
            upsert_delete_filter_replaces,
            query_scores_per_metric,
            query_order_top_k_and_min_score,
            query_include_vector_round_trips,
            query_checks_its_input,
            query_by_filter_only,
            filters_select_what_the_rules_say,
            update_by_id_and_filter,
            delete_by_id_and_filter,
            exact_top_k_matches_brute_force,
            concurrent_upserts_all_land,
        );
    };
    (@each $setup:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(fixture) = $setup().await {
                    $crate::testing::$name(fixture.store.as_ref()).await;
                    fixture.teardown().await;
                }
            }
        )*
    };
}

/// A store under test and what to clean up after it.
pub struct Fixture {
    /// The store.
    pub store: SharedVectorStore,
    cleanup: Option<Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>>,
}

impl Fixture {
    /// A store that needs no cleanup.
    pub fn new(store: SharedVectorStore) -> Fixture {
        Fixture {
            store,
            cleanup: None,
        }
    }

    /// A store with a cleanup run after the check.
    pub fn with_cleanup(
        store: SharedVectorStore,
        cleanup: impl FnOnce() -> futures::future::BoxFuture<'static, ()> + Send + 'static,
    ) -> Fixture {
        Fixture {
            store,
            cleanup: Some(Box::new(cleanup)),
        }
    }

    /// Runs the cleanup.
    pub async fn teardown(self) {
        if let Some(cleanup) = self.cleanup {
            cleanup().await;
        }
    }
}

/// An in-memory store.
pub async fn memory() -> Option<Fixture> {
    Some(Fixture::new(Arc::new(
        crate::vector::memory::InMemoryVectorStore::new(),
    )))
}

/// A SQLite store in a fresh temporary file.
#[cfg(feature = "sqlite")]
pub async fn sqlite() -> Option<Fixture> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = crate::vector::sqlite::SqliteVectorStore::open(dir.path().join("vectors.db"))
        .await
        .expect("open the SQLite vector store");
    Some(Fixture::with_cleanup(Arc::new(store), move || {
        Box::pin(async move { drop(dir) })
    }))
}

/// The URL of a PostgreSQL with pgvector for tests: `KESTREL_TEST_PGVECTOR_URL`.
pub fn pgvector_url() -> Option<String> {
    std::env::var("KESTREL_TEST_PGVECTOR_URL")
        .ok()
        .filter(|url| !url.is_empty())
}

/// A pgvector store in a fresh schema (dropped afterwards), or `None` (with a message) when
/// `KESTREL_TEST_PGVECTOR_URL` is unset.
#[cfg(feature = "pgvector")]
pub async fn pgvector() -> Option<Fixture> {
    let Some(url) = pgvector_url() else {
        eprintln!("skipped: set KESTREL_TEST_PGVECTOR_URL to a PostgreSQL with pgvector");
        return None;
    };
    let schema = format!("kestrel_vec_{}", uuid::Uuid::new_v4().simple());
    let options = crate::vector::pgvector::PgVectorOptions::default()
        .schema(schema.clone())
        .max_connections(4);
    let store = crate::vector::pgvector::PgVectorStore::connect(&url, options)
        .await
        .expect("connect to PostgreSQL with pgvector");
    Some(Fixture::with_cleanup(Arc::new(store), move || {
        Box::pin(async move { drop_schema(&url, &schema).await })
    }))
}

/// Drops a test schema (best effort).
#[cfg(feature = "pgvector")]
pub async fn drop_schema(url: &str, schema: &str) {
    use sqlx::{Connection, Executor};
    if let Ok(mut conn) = sqlx::PgConnection::connect(url).await {
        let _ = conn
            .execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str())
            .await;
        let _ = conn.close().await;
    }
}

fn metadata(value: Value) -> Metadata {
    match value {
        Value::Object(map) => map,
        other => panic!("metadata must be an object, got {other}"),
    }
}

async fn ids_of(store: &dyn VectorStore, query: VectorQuery) -> Vec<String> {
    store
        .query(query)
        .await
        .expect("query")
        .into_iter()
        .map(|r| r.id)
        .collect()
}

pub async fn index_lifecycle(store: &dyn VectorStore) {
    assert!(store.list_indexes().await.unwrap().is_empty());
    store
        .create_index(CreateIndex::new("beta", 3))
        .await
        .unwrap();
    store
        .create_index(CreateIndex::new("alpha", 4).metric(Metric::Euclidean))
        .await
        .unwrap();
    // The same again is a no-op that keeps the vectors.
    store
        .upsert(Upsert::new("beta").vector("x", vec![1.0, 0.0, 0.0], Metadata::new()))
        .await
        .unwrap();
    store
        .create_index(CreateIndex::new("beta", 3))
        .await
        .unwrap();
    assert_eq!(store.describe_index("beta").await.unwrap().count, 1);
    // Another dimension or metric is refused.
    let err = store
        .create_index(CreateIndex::new("beta", 5))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            VectorError::IndexExists {
                existing_dimension: 3,
                dimension: 5,
                ..
            }
        ),
        "{err}"
    );
    let err = store
        .create_index(CreateIndex::new("beta", 3).metric(Metric::DotProduct))
        .await
        .unwrap_err();
    assert!(matches!(err, VectorError::IndexExists { .. }), "{err}");
    assert_eq!(store.list_indexes().await.unwrap(), ["alpha", "beta"]);
    let stats = store.describe_index("alpha").await.unwrap();
    assert_eq!(
        (stats.dimension, stats.count, stats.metric),
        (4, 0, Metric::Euclidean)
    );
    store.delete_index("beta").await.unwrap();
    assert_eq!(store.list_indexes().await.unwrap(), ["alpha"]);
    for result in [
        store.describe_index("beta").await.map(|_| ()),
        store.delete_index("beta").await,
        store
            .upsert(Upsert::new("beta").vector("x", vec![1.0, 0.0, 0.0], Metadata::new()))
            .await
            .map(|_| ()),
        store
            .query(VectorQuery::new("beta", vec![1.0, 0.0, 0.0]))
            .await
            .map(|_| ()),
        store.delete("beta", Selector::id("x")).await.map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, VectorError::IndexNotFound { index } if index == "beta"),
            "{err}"
        );
    }
    // Re-created with another dimension, it starts empty.
    store
        .create_index(CreateIndex::new("beta", 2))
        .await
        .unwrap();
    assert_eq!(store.describe_index("beta").await.unwrap().count, 0);
}

pub async fn index_names_are_checked(store: &dyn VectorStore) {
    for name in [
        "",
        "1abc",
        "bad-name",
        "a;drop table x",
        "quote\"d",
        "space name",
        "ünïcode",
        &"x".repeat(53),
    ] {
        let err = store
            .create_index(CreateIndex::new(name, 3))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                VectorError::InvalidRequest {
                    field: "indexName",
                    ..
                }
            ),
            "{name:?}: {err}"
        );
    }
    for dimension in [0, crate::vector::MAX_DIMENSION + 1] {
        let err = store
            .create_index(CreateIndex::new("ok", dimension))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                VectorError::InvalidRequest {
                    field: "dimension",
                    ..
                }
            ),
            "{err}"
        );
    }
    store
        .create_index(CreateIndex::new(format!("_{}", "x".repeat(51)), 3))
        .await
        .unwrap();
    assert!(store.list_indexes().await.unwrap().len() == 1);
}

pub async fn upsert_ids_and_replacement(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 3))
        .await
        .unwrap();
    // Without ids, each vector gets a new UUID.
    let ids = store
        .upsert(Upsert {
            vectors: vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]],
            ..Upsert::new("docs")
        })
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| uuid::Uuid::parse_str(id).is_ok()));
    // An existing id is replaced; a repeated id in one request: the last wins.
    let ids = store
        .upsert(
            Upsert::new("docs")
                .vector("a", vec![0.0, 0.0, 1.0], metadata(json!({"v": 1})))
                .vector("a", vec![0.0, 1.0, 1.0], metadata(json!({"v": 2}))),
        )
        .await
        .unwrap();
    assert_eq!(ids, ["a", "a"]);
    store
        .upsert(Upsert::new("docs").vector("a", vec![1.0, 1.0, 1.0], metadata(json!({"v": 3}))))
        .await
        .unwrap();
    assert_eq!(store.describe_index("docs").await.unwrap().count, 3);
    let found = store
        .query(
            VectorQuery::new("docs", vec![1.0, 1.0, 1.0])
                .top_k(1)
                .include_vector(true),
        )
        .await
        .unwrap();
    assert_eq!(found[0].id, "a");
    assert_eq!(found[0].metadata, metadata(json!({"v": 3})));
    assert_eq!(found[0].vector.as_deref(), Some(&[1.0, 1.0, 1.0][..]));
    // Metadata of every JSON kind comes back as stored.
    let rich = metadata(json!({
        "text": "ünïcødé ✓ 'quoted' \"double\"",
        "n": 1.5, "i": -7, "big": 9_007_199_254_740_991_i64, "flag": true, "none": null,
        "list": [1, "two", {"three": 3}], "nested": {"deep": {"er": []}}
    }));
    store
        .upsert(Upsert::new("docs").vector("rich", vec![0.5, 0.5, 0.0], rich.clone()))
        .await
        .unwrap();
    let found = store
        .query(VectorQuery::by_filter(
            "docs",
            Filter::parse(json!({"flag": true})).unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].metadata, rich);
}

pub async fn upsert_is_all_or_nothing(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 3))
        .await
        .unwrap();
    let bad_dimension = Upsert::new("docs")
        .vector("ok", vec![1.0, 0.0, 0.0], Metadata::new())
        .vector("short", vec![1.0, 0.0], Metadata::new());
    let err = store.upsert(bad_dimension).await.unwrap_err();
    assert!(
        matches!(
            err,
            VectorError::DimensionMismatch {
                expected: 3,
                actual: 2,
                position: 1,
                ..
            }
        ),
        "{err}"
    );
    let non_finite = Upsert::new("docs")
        .vector("ok", vec![1.0, 0.0, 0.0], Metadata::new())
        .vector("nan", vec![f32::NAN, 0.0, 0.0], Metadata::new());
    assert!(matches!(
        store.upsert(non_finite).await.unwrap_err(),
        VectorError::InvalidRequest {
            field: "vectors",
            ..
        }
    ));
    let zero = Upsert::new("docs").vector("zero", vec![0.0; 3], Metadata::new());
    assert!(matches!(
        store.upsert(zero).await.unwrap_err(),
        VectorError::InvalidRequest {
            field: "vectors",
            ..
        }
    ));
    let mismatched = Upsert {
        vectors: vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]],
        ids: vec!["one".into()],
        ..Upsert::new("docs")
    };
    assert!(matches!(
        store.upsert(mismatched).await.unwrap_err(),
        VectorError::InvalidRequest { field: "ids", .. }
    ));
    let mismatched = Upsert {
        vectors: vec![vec![1.0, 0.0, 0.0]],
        metadata: vec![Metadata::new(), Metadata::new()],
        ..Upsert::new("docs")
    };
    assert!(matches!(
        store.upsert(mismatched).await.unwrap_err(),
        VectorError::InvalidRequest {
            field: "metadata",
            ..
        }
    ));
    let bad_id = Upsert::new("docs").vector("", vec![1.0, 0.0, 0.0], Metadata::new());
    assert!(matches!(
        store.upsert(bad_id).await.unwrap_err(),
        VectorError::InvalidRequest { field: "ids", .. }
    ));
    assert_eq!(store.describe_index("docs").await.unwrap().count, 0);
    // The zero vector is fine where the metric has a meaning for it.
    store
        .create_index(CreateIndex::new("dots", 3).metric(Metric::DotProduct))
        .await
        .unwrap();
    store
        .upsert(Upsert::new("dots").vector("zero", vec![0.0; 3], Metadata::new()))
        .await
        .unwrap();
}

pub async fn upsert_delete_filter_replaces(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    let chunk = |doc: &str, i: usize| metadata(json!({"doc": doc, "chunk": i}));
    store
        .upsert(
            Upsert::new("docs")
                .vector("a0", vec![1.0, 0.0], chunk("a", 0))
                .vector("a1", vec![1.0, 0.1], chunk("a", 1))
                .vector("a2", vec![1.0, 0.2], chunk("a", 2))
                .vector("b0", vec![0.0, 1.0], chunk("b", 0)),
        )
        .await
        .unwrap();
    // Document "a" now has one chunk: the old three go in the same write.
    store
        .upsert(
            Upsert::new("docs")
                .vector("a-new", vec![1.0, 0.5], chunk("a", 0))
                .delete_first(Filter::parse(json!({"doc": "a"})).unwrap()),
        )
        .await
        .unwrap();
    let mut ids = ids_of(store, VectorQuery::new("docs", vec![1.0, 1.0]).top_k(10)).await;
    ids.sort();
    assert_eq!(ids, ["a-new", "b0"]);
}

pub async fn query_scores_per_metric(store: &dyn VectorStore) {
    let vectors = [
        ("p", vec![3.0, 4.0]),
        ("q", vec![-1.0, 0.0]),
        ("r", vec![0.0, 2.0]),
    ];
    let query = vec![1.0, 0.0];
    for metric in [Metric::Cosine, Metric::Euclidean, Metric::DotProduct] {
        let name = format!("m_{metric}");
        store
            .create_index(CreateIndex::new(&name, 2).metric(metric))
            .await
            .unwrap();
        let mut upsert = Upsert::new(&name);
        for (id, v) in &vectors {
            upsert = upsert.vector(*id, v.clone(), Metadata::new());
        }
        store.upsert(upsert).await.unwrap();
        let results = store
            .query(VectorQuery::new(&name, query.clone()))
            .await
            .unwrap();
        let expected: Vec<(&str, f32)> = match metric {
            Metric::Cosine => vec![("p", 0.6), ("r", 0.0), ("q", -1.0)],
            // 1 / (1 + distance): distances 2 (q), √5 (r), √20 (p).
            Metric::Euclidean => vec![
                ("q", 1.0 / 3.0),
                ("r", 1.0 / (1.0 + 5f32.sqrt())),
                ("p", 1.0 / (1.0 + 20f32.sqrt())),
            ],
            Metric::DotProduct => vec![("p", 3.0), ("r", 0.0), ("q", -1.0)],
        };
        assert_eq!(results.len(), 3, "{metric}");
        for (result, (id, score)) in results.iter().zip(&expected) {
            assert_eq!(result.id, *id, "{metric}: {results:?}");
            assert!(
                (result.score - score).abs() < 1e-5,
                "{metric}: {} scored {}, expected {score}",
                result.id,
                result.score
            );
        }
    }
}

pub async fn query_order_top_k_and_min_score(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    // Four vectors in the same direction (ties, broken by id) and one apart.
    let mut upsert = Upsert::new("docs");
    for id in ["d", "b", "a", "c"] {
        upsert = upsert.vector(id, vec![2.0, 0.0], Metadata::new());
    }
    upsert = upsert.vector("e", vec![1.0, 1.0], Metadata::new());
    store.upsert(upsert).await.unwrap();
    let query = || VectorQuery::new("docs", vec![1.0, 0.0]);
    assert_eq!(ids_of(store, query()).await, ["a", "b", "c", "d", "e"]);
    assert_eq!(ids_of(store, query().top_k(2)).await, ["a", "b"]);
    // Cosine of e is √½ ≈ 0.707.
    assert_eq!(
        ids_of(store, query().min_score(0.8)).await,
        ["a", "b", "c", "d"]
    );
    assert_eq!(ids_of(store, query().min_score(0.7)).await.len(), 5);
    assert!(ids_of(store, query().min_score(1.01)).await.is_empty());
}

pub async fn query_include_vector_round_trips(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 4))
        .await
        .unwrap();
    let vector = vec![0.1, -2.5e-8, 3.402_823_5e38, 1.0e-38];
    store
        .upsert(Upsert::new("docs").vector("v", vector.clone(), Metadata::new()))
        .await
        .unwrap();
    let with = store
        .query(VectorQuery::new("docs", vec![1.0, 0.0, 0.0, 0.0]).include_vector(true))
        .await
        .unwrap();
    assert_eq!(with[0].vector.as_deref(), Some(&vector[..]));
    let without = store
        .query(VectorQuery::new("docs", vec![1.0, 0.0, 0.0, 0.0]))
        .await
        .unwrap();
    assert_eq!(without[0].vector, None);
}

pub async fn query_checks_its_input(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 3))
        .await
        .unwrap();
    let err = store
        .query(VectorQuery::new("docs", vec![1.0, 0.0]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, VectorError::DimensionMismatch { .. }),
        "{err}"
    );
    for (query, field) in [
        (
            VectorQuery::new("docs", vec![1.0, 0.0, 0.0]).top_k(0),
            "topK",
        ),
        (
            VectorQuery::new("docs", vec![1.0, 0.0, 0.0]).top_k(crate::vector::MAX_TOP_K + 1),
            "topK",
        ),
        (
            VectorQuery::new("docs", vec![f32::INFINITY, 0.0, 0.0]),
            "queryVector",
        ),
        (VectorQuery::new("docs", vec![0.0, 0.0, 0.0]), "queryVector"),
        (
            VectorQuery::new("docs", vec![1.0, 0.0, 0.0]).min_score(f32::NAN),
            "minScore",
        ),
        (
            VectorQuery::by_filter("docs", Filter::empty()),
            "queryVector",
        ),
    ] {
        let err = store.query(query).await.unwrap_err();
        assert!(
            matches!(&err, VectorError::InvalidRequest { field: f, .. } if *f == field),
            "{field}: {err}"
        );
    }
}

pub async fn query_by_filter_only(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    let mut upsert = Upsert::new("docs");
    for (id, kind) in [("c", "x"), ("a", "x"), ("b", "y"), ("d", "x")] {
        upsert = upsert.vector(id, vec![1.0, 0.0], metadata(json!({"kind": kind})));
    }
    store.upsert(upsert).await.unwrap();
    let filter = Filter::parse(json!({"kind": "x"})).unwrap();
    let results = store
        .query(VectorQuery::by_filter("docs", filter.clone()).top_k(2))
        .await
        .unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "c"]);
    assert!(results.iter().all(|r| r.score == 0.0));
}

/// The documents the filter cases run on.
pub fn filter_documents() -> Vec<(&'static str, Value)> {
    vec![
        (
            "a",
            json!({"category": "guide", "year": 2021, "price": 10.5, "tags": ["rust", "ai"],
                   "author": {"name": "Ada", "age": 36}, "title": "Getting Started",
                   "published": true}),
        ),
        (
            "b",
            json!({"category": "guide", "year": 2023, "price": 20, "tags": ["python"],
                   "author": {"name": "Bob", "age": 41}, "title": "advanced topics",
                   "published": false}),
        ),
        (
            "c",
            json!({"category": "reference", "year": 2024, "price": 0, "tags": [],
                   "title": "API Reference", "published": true, "date": "2024-03-01"}),
        ),
        (
            "d",
            json!({"category": "blog", "year": "2022", "tags": ["rust"], "title": "Why Rust?",
                   "note": null, "date": "2023-12-31"}),
        ),
        (
            "e",
            json!({"category": "blog", "year": 2020, "price": -3, "tags": "rust",
                   "scores": [{"name": "speed", "value": 9}, {"name": "safety", "value": 10}],
                   "title": "ünïcødé ✓"}),
        ),
        (
            "f",
            json!({"category": "'; DROP TABLE kestrel; --", "year": 2025, "price": 1e3,
                   "scores": [{"name": "speed", "value": 4}], "ratings": [3, 8, 9],
                   "title": "Quote's \"test\""}),
        ),
        ("g", json!({})),
        (
            "h",
            json!({"category": "guide", "nested": {"deep": {"level": 3}}, "key with space": "yes",
                   "ratings": [1, 2], "title": "Multi\nLine"}),
        ),
    ]
}

/// Filters over [`filter_documents`] and the ids each selects, by the language's rules.
pub const FILTER_CASES: &[(&str, &str)] = &[
    (r#"{"category": "guide"}"#, "a b h"),
    (r#"{"category": {"$eq": "blog"}}"#, "d e"),
    (r#"{"category": {"$ne": "guide"}}"#, "c d e f g"),
    (r#"{"year": {"$gt": 2021}}"#, "b c f"),
    (r#"{"year": {"$gte": 2021, "$lt": 2024}}"#, "a b"),
    (r#"{"year": {"$lte": "2022"}}"#, "d"),
    (r#"{"price": {"$lt": 0}}"#, "e"),
    (r#"{"price": {"$gte": 1000}}"#, "f"),
    (r#"{"price": 10.5}"#, "a"),
    (r#"{"price": {"$eq": 20.0}}"#, "b"),
    (r#"{"tags": "rust"}"#, "a d e"),
    (r#"{"tags": {"$in": ["python", "ai"]}}"#, "a b"),
    (r#"{"tags": {"$nin": ["rust"]}}"#, "b c f g h"),
    (r#"{"tags": {"$all": ["rust", "ai"]}}"#, "a"),
    (r#"{"tags": {"$all": ["rust"]}}"#, "a d e"),
    (r#"{"tags": {"$in": []}}"#, ""),
    (r#"{"category": ["blog", "reference"]}"#, "c d e"),
    (r#"{"year": {"$in": [2021, "2022"]}}"#, "a d"),
    (r#"{"author.name": "Ada"}"#, "a"),
    (r#"{"author": {"age": {"$gt": 40}}}"#, "b"),
    (r#"{"author": "Ada"}"#, ""),
    (r#"{"nested.deep.level": 3}"#, "h"),
    (r#"{"note": null}"#, "a b c d e f g h"),
    (r#"{"note": {"$exists": true}}"#, "d"),
    (r#"{"price": {"$exists": false}}"#, "d g h"),
    (
        r#"{"author": {"$exists": true}, "author.age": {"$lt": 40}}"#,
        "a",
    ),
    (r#"{"title": {"$regex": "^getting", "$options": "i"}}"#, "a"),
    (r#"{"title": {"$regex": "Rust"}}"#, "d"),
    (r#"{"title": {"$regex": "^Line", "$options": "m"}}"#, "h"),
    (r#"{"title": {"$regex": "^Line"}}"#, ""),
    (r#"{"title": {"$regex": "Multi.Line"}}"#, ""),
    (
        r#"{"title": {"$regex": "Multi.Line", "$options": "s"}}"#,
        "h",
    ),
    (r#"{"category": {"$regex": "^(guide|blog)$"}}"#, "a b d e h"),
    (
        r#"{"scores": {"$elemMatch": {"name": "speed", "value": {"$gte": 5}}}}"#,
        "e",
    ),
    (r#"{"scores": {"$elemMatch": {"value": 10}}}"#, "e"),
    (r#"{"ratings": {"$elemMatch": {"$gte": 8, "$lt": 9}}}"#, "f"),
    (r#"{"ratings": {"$elemMatch": {"$gt": 2, "$lt": 3}}}"#, ""),
    (r#"{"ratings": {"$gt": 8}}"#, "f"),
    (r#"{"ratings": 2}"#, "h"),
    (
        r#"{"$or": [{"category": "reference"}, {"year": {"$lt": 2021}}]}"#,
        "c e",
    ),
    (
        r#"{"$and": [{"category": "guide"}, {"published": true}]}"#,
        "a",
    ),
    (
        r#"{"$nor": [{"category": "guide"}, {"category": "blog"}]}"#,
        "c f g",
    ),
    (r#"{"$not": {"category": "guide"}}"#, "c d e f g"),
    (r#"{"year": {"$not": {"$gt": 2021}}}"#, "a d e g h"),
    (r#"{"$or": [{"category": "guide", "year": 2023}]}"#, "b"),
    (r#"{"$or": []}"#, ""),
    (
        r#"{"$or": [{"$and": [{"published": true}, {"price": {"$gt": 5}}]}, {"tags": "python"}]}"#,
        "a b",
    ),
    (r#"{"category": "'; DROP TABLE kestrel; --"}"#, "f"),
    (r#"{"title": "Quote's \"test\""}"#, "f"),
    (r#"{"key with space": "yes"}"#, "h"),
    (r#"{"title": "ünïcødé ✓"}"#, "e"),
    (r#"{"published": false}"#, "b"),
    (r#"{"published": {"$ne": true}}"#, "b d e f g h"),
    (r#"{"date": {"$gte": "2024-01-01"}}"#, "c"),
    (r#"{"date": {"$lt": "2024-01-01"}}"#, "d"),
];

/// The ids a case expects, sorted.
pub fn expected_ids(expected: &str) -> Vec<String> {
    let set: BTreeSet<&str> = expected.split_whitespace().collect();
    set.into_iter().map(str::to_owned).collect()
}

pub async fn filters_select_what_the_rules_say(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    let mut upsert = Upsert::new("docs");
    for (i, (id, meta)) in filter_documents().into_iter().enumerate() {
        upsert = upsert.vector(id, vec![1.0, i as f32], metadata(meta));
    }
    store.upsert(upsert).await.unwrap();
    let mut failures = Vec::new();
    for (filter, expected) in FILTER_CASES {
        let parsed = Filter::from_json_str(filter).unwrap();
        let expected = expected_ids(expected);
        // With a query vector (scored, then sorted by id here) and without one.
        let mut scored = ids_of(
            store,
            VectorQuery::new("docs", vec![1.0, 1.0])
                .top_k(100)
                .filter(parsed.clone()),
        )
        .await;
        scored.sort();
        if scored != expected {
            failures.push(format!(
                "{filter}: scored query gave {scored:?}, expected {expected:?}"
            ));
        }
        if !parsed.is_empty() {
            let by_filter = ids_of(store, VectorQuery::by_filter("docs", parsed).top_k(100)).await;
            if by_filter != expected {
                failures.push(format!(
                    "{filter}: filter-only query gave {by_filter:?}, expected {expected:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub async fn update_by_id_and_filter(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    store
        .upsert(
            Upsert::new("docs")
                .vector("a", vec![1.0, 0.0], metadata(json!({"kind": "x"})))
                .vector("b", vec![0.0, 1.0], metadata(json!({"kind": "x"})))
                .vector("c", vec![1.0, 1.0], metadata(json!({"kind": "y"}))),
        )
        .await
        .unwrap();
    // A new vector for "a": it is now nearest [0, 1] with "b", ahead of it by id.
    let n = store
        .update(
            "docs",
            Selector::id("a"),
            VectorUpdate {
                vector: Some(vec![0.0, 2.0]),
                metadata: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        ids_of(store, VectorQuery::new("docs", vec![0.0, 1.0]).top_k(2)).await,
        ["a", "b"]
    );
    // New metadata for every "x".
    let n = store
        .update(
            "docs",
            Selector::Filter(Filter::parse(json!({"kind": "x"})).unwrap()),
            VectorUpdate {
                vector: None,
                metadata: Some(metadata(json!({"kind": "z"}))),
            },
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    let z = ids_of(
        store,
        VectorQuery::by_filter("docs", Filter::parse(json!({"kind": "z"})).unwrap()),
    )
    .await;
    assert_eq!(z, ["a", "b"]);
    // Unknown ids update nothing; bad updates are refused.
    assert_eq!(
        store
            .update(
                "docs",
                Selector::id("nope"),
                VectorUpdate {
                    vector: None,
                    metadata: Some(Metadata::new()),
                }
            )
            .await
            .unwrap(),
        0
    );
    for (selector, update) in [
        (Selector::id("a"), VectorUpdate::default()),
        (
            Selector::id("a"),
            VectorUpdate {
                vector: Some(vec![1.0]),
                metadata: None,
            },
        ),
        (
            Selector::Filter(Filter::empty()),
            VectorUpdate {
                vector: None,
                metadata: Some(Metadata::new()),
            },
        ),
    ] {
        assert!(store.update("docs", selector, update).await.is_err());
    }
}

pub async fn delete_by_id_and_filter(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 2))
        .await
        .unwrap();
    let mut upsert = Upsert::new("docs");
    for i in 0..10 {
        upsert = upsert.vector(
            format!("v{i}"),
            vec![1.0, i as f32],
            metadata(json!({"even": i % 2 == 0})),
        );
    }
    store.upsert(upsert).await.unwrap();
    let n = store
        .delete(
            "docs",
            Selector::Ids(vec![
                "v1".into(),
                "v3".into(),
                "v3".into(),
                "missing".into(),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    let n = store
        .delete(
            "docs",
            Selector::Filter(Filter::parse(json!({"even": true})).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(n, 5);
    let mut left = ids_of(store, VectorQuery::new("docs", vec![1.0, 0.0]).top_k(100)).await;
    left.sort();
    assert_eq!(left, ["v5", "v7", "v9"]);
    let err = store
        .delete("docs", Selector::Filter(Filter::empty()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            VectorError::InvalidRequest {
                field: "filter",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.describe_index("docs").await.unwrap().count, 3);
}

/// A deterministic pseudo-random vector (xorshift), components in [-1, 1).
pub fn pseudo_random_vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..dimension)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

pub async fn exact_top_k_matches_brute_force(store: &dyn VectorStore) {
    const N: usize = 600;
    const DIMENSION: usize = 24;
    for metric in [Metric::Cosine, Metric::Euclidean, Metric::DotProduct] {
        let name = format!("exact_{metric}");
        store
            .create_index(
                CreateIndex::new(&name, DIMENSION)
                    .metric(metric)
                    .index_config(IndexConfig::flat()),
            )
            .await
            .unwrap();
        let vectors: Vec<Vec<f32>> = (0..N)
            .map(|i| pseudo_random_vector(i as u64 + 1, DIMENSION))
            .collect();
        let upsert = Upsert {
            ids: (0..N).map(|i| format!("v{i:04}")).collect(),
            metadata: (0..N).map(|i| metadata(json!({"bucket": i % 3}))).collect(),
            vectors: vectors.clone(),
            ..Upsert::new(&name)
        };
        store.upsert(upsert).await.unwrap();
        for q in 0..5 {
            let query = pseudo_random_vector(10_000 + q, DIMENSION);
            let query_norm = crate::vector::norm(&query);
            let mut expected: Vec<(f32, String)> = vectors
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 3 == 1)
                .map(|(i, v)| (metric.score(&query, query_norm, v), format!("v{i:04}")))
                .collect();
            expected.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            expected.truncate(10);
            let results = store
                .query(
                    VectorQuery::new(&name, query)
                        .top_k(10)
                        .filter(Filter::parse(json!({"bucket": 1})).unwrap()),
                )
                .await
                .unwrap();
            let got: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
            let want: Vec<&str> = expected.iter().map(|(_, id)| id.as_str()).collect();
            assert_eq!(got, want, "{metric}, query {q}");
            for (result, (score, _)) in results.iter().zip(&expected) {
                assert!(
                    (result.score - score).abs() < 1e-4,
                    "{metric}: {} scored {} here, {score} by brute force",
                    result.id,
                    result.score
                );
            }
        }
    }
}

pub async fn concurrent_upserts_all_land(store: &dyn VectorStore) {
    store
        .create_index(CreateIndex::new("docs", 4))
        .await
        .unwrap();
    let writes = (0..8).map(|task| async move {
        for batch in 0..5 {
            let mut upsert = Upsert::new("docs");
            for i in 0..10 {
                let n = task * 1000 + batch * 10 + i;
                upsert = upsert.vector(
                    format!("t{task}-{batch}-{i}"),
                    pseudo_random_vector(n as u64 + 1, 4),
                    metadata(json!({"task": task})),
                );
            }
            store.upsert(upsert).await.unwrap();
        }
    });
    futures::future::join_all(writes).await;
    assert_eq!(store.describe_index("docs").await.unwrap().count, 400);
}
