//! Vector stores over HTTP: Mastra's `/api/vector/{vectorName}` routes on an in-memory store,
//! end to end over a real socket, with their error codes, the listing routes, and the token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::embedding::HashEmbedder;
use kestrel_core::kestrel::Kestrel;
use kestrel_rag::vector::sqlite::SqliteVectorStore;
use kestrel_rag::vector::{IndexStats, Selector, SharedVectorStore};
use kestrel_rag::{
    CreateIndex, InMemoryVectorStore, QueryResult, Upsert, VectorError, VectorQuery, VectorStore,
    VectorUpdate,
};
use kestrel_server::{ServeError, ServedEmbedder, ServedVectorStore, Server};
use serde_json::{Value, json};

async fn start(configure: impl FnOnce(Server) -> Server) -> String {
    let server = configure(Server::new(Kestrel::builder().build().unwrap()));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

/// A server with an in-memory store named `default`.
async fn with_store() -> String {
    start(|s| s.vector("default", Arc::new(InMemoryVectorStore::new()))).await
}

/// Sends `method path` with `body` (when given); answers the status and the JSON.
async fn call(method: &str, url: String, body: Option<Value>) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut request = http.request(method.parse().unwrap(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Asserts an error answer: its status and code; answers its message.
fn error(answer: &(u16, Value), status: u16, code: &str) -> String {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    answer.1["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_index_is_created_filled_queried_described_and_deleted_in_memory() {
    index_lifecycle(Arc::new(InMemoryVectorStore::new())).await;
}

#[tokio::test]
async fn an_index_is_created_filled_queried_described_and_deleted_on_sqlite() {
    index_lifecycle(Arc::new(SqliteVectorStore::open_in_memory().unwrap())).await;
}

/// Every route on `store`, served as `default`.
async fn index_lifecycle(store: impl Into<ServedVectorStore>) {
    let base = start(|s| s.vector("default", store)).await;
    let store = format!("{base}/vector/default");

    let created = json!({"indexName": "docs", "dimension": 3, "metric": "cosine"});
    let answer = call(
        "POST",
        format!("{store}/create-index"),
        Some(created.clone()),
    )
    .await;
    assert_eq!(answer, (200, json!({"success": true})));
    // The same index again is kept (Mastra's createIndex is idempotent).
    let again = call("POST", format!("{store}/create-index"), Some(created)).await;
    assert_eq!(again, (200, json!({"success": true})));
    let other = json!({"indexName": "notes", "dimension": 2, "metric": "euclidean"});
    let answer = call("POST", format!("{store}/create-index"), Some(other)).await;
    assert_eq!(answer.0, 200);

    let upsert = json!({
        "indexName": "docs",
        "vectors": [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 1.0, 0.0], [0.7, 0.7, 0.0]],
        "metadata": [
            {"kind": "guide", "year": 2024},
            {"kind": "guide", "year": 2019},
            {"kind": "faq", "year": 2024},
            {"kind": "faq", "year": 2022},
        ],
        "ids": ["a", "b", "c", "d"],
    });
    let answer = call("POST", format!("{store}/upsert"), Some(upsert)).await;
    assert_eq!(answer, (200, json!({"ids": ["a", "b", "c", "d"]})));
    // Without ids, each vector gets a new one.
    let fresh = json!({"indexName": "notes", "vectors": [[1.0, 2.0], [3.0, 4.0]]});
    let (status, body) = call("POST", format!("{store}/upsert"), Some(fresh)).await;
    assert_eq!(status, 200, "{body}");
    let ids = body["ids"].as_array().unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);

    let indexes = call("GET", format!("{store}/indexes"), None).await;
    assert_eq!(indexes, (200, json!(["docs", "notes"])));
    let described = call("GET", format!("{store}/indexes/docs"), None).await;
    assert_eq!(
        described,
        (200, json!({"dimension": 3, "count": 4, "metric": "cosine"}))
    );

    // Nearest first; Mastra's result shape.
    let (status, results) = call(
        "POST",
        format!("{store}/query"),
        Some(json!({"indexName": "docs", "queryVector": [1.0, 0.0, 0.0], "topK": 2})),
    )
    .await;
    assert_eq!(status, 200, "{results}");
    let ids: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(results[0]["score"], 1.0);
    assert_eq!(
        results[0]["metadata"],
        json!({"kind": "guide", "year": 2024})
    );
    assert!(results[0].get("vector").is_none(), "{results}");

    // A filter and a minimum score: the guides and FAQs of 2022 on, scoring at least 0.5.
    let (status, results) = call(
        "POST",
        format!("{store}/query"),
        Some(json!({
            "indexName": "docs",
            "queryVector": [1.0, 0.0, 0.0],
            "filter": {"year": {"$gte": 2022}},
            "minScore": 0.5,
            "includeVector": true,
        })),
    )
    .await;
    assert_eq!(status, 200, "{results}");
    let ids: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    // `c` (2024) scores 0; `b` is from 2019.
    assert_eq!(ids, ["a", "d"]);
    assert_eq!(results[0]["vector"], json!([1.0, 0.0, 0.0]));
    let score = results[1]["score"].as_f64().unwrap();
    assert!(
        (score - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6,
        "{score}"
    );

    // Replacing a document's vectors: the filter deletes first.
    let replace = json!({
        "indexName": "docs",
        "vectors": [[0.0, 0.0, 1.0]],
        "ids": ["e"],
        "metadata": [{"kind": "faq", "year": 2025}],
        "deleteFilter": {"kind": "faq"},
    });
    let answer = call("POST", format!("{store}/upsert"), Some(replace)).await;
    assert_eq!(answer, (200, json!({"ids": ["e"]})));
    let described = call("GET", format!("{store}/indexes/docs"), None).await;
    assert_eq!(described.1["count"], 3, "{}", described.1);

    let deleted = call("DELETE", format!("{store}/indexes/docs"), None).await;
    assert_eq!(deleted, (200, json!({"success": true})));
    let gone = call("GET", format!("{store}/indexes/docs"), None).await;
    let message = error(&gone, 404, "not_found");
    assert!(message.contains("\"docs\""), "{message}");
    let indexes = call("GET", format!("{store}/indexes"), None).await;
    assert_eq!(indexes, (200, json!(["notes"])));
}

#[tokio::test]
async fn requests_the_store_refuses_name_what_is_wrong() {
    let base = with_store().await;
    let store = format!("{base}/vector/default");
    let create = |body: Value| call("POST", format!("{store}/create-index"), Some(body));
    assert_eq!(
        create(json!({"indexName": "docs", "dimension": 3})).await.0,
        200
    );

    // An unknown store: 404 naming the ones there are, on every route.
    for (method, path, body) in [
        ("GET", "indexes", None),
        ("GET", "indexes/docs", None),
        ("DELETE", "indexes/docs", None),
        (
            "POST",
            "create-index",
            Some(json!({"indexName": "docs", "dimension": 3})),
        ),
        (
            "POST",
            "upsert",
            Some(json!({"indexName": "docs", "vectors": [[1, 0, 0]]})),
        ),
        (
            "POST",
            "query",
            Some(json!({"indexName": "docs", "queryVector": [1, 0, 0]})),
        ),
    ] {
        let answer = call(method, format!("{base}/vector/nowhere/{path}"), body).await;
        let message = error(&answer, 404, "not_found");
        assert!(
            message.contains("\"nowhere\"") && message.contains("default"),
            "{method} {path}: {message}"
        );
    }

    // An unknown index.
    let query = json!({"indexName": "missing", "queryVector": [1, 0, 0]});
    let answer = call("POST", format!("{store}/query"), Some(query)).await;
    let message = error(&answer, 404, "not_found");
    assert!(message.contains("\"missing\""), "{message}");
    let upsert = json!({"indexName": "missing", "vectors": [[1, 0, 0]]});
    error(
        &call("POST", format!("{store}/upsert"), Some(upsert)).await,
        404,
        "not_found",
    );
    error(
        &call("DELETE", format!("{store}/indexes/missing"), None).await,
        404,
        "not_found",
    );
    // A name no index can have, in a path: not found either (not a body to refuse).
    let answer = call("GET", format!("{store}/indexes/no-such%20name"), None).await;
    let message = error(&answer, 404, "not_found");
    assert!(message.contains("index names are"), "{message}");

    // The same name with another shape.
    let answer = create(json!({"indexName": "docs", "dimension": 4})).await;
    let message = error(&answer, 409, "index_exists");
    assert!(message.contains("dimension 3"), "{message}");

    // A vector of the wrong length.
    let upsert = json!({"indexName": "docs", "vectors": [[1, 0, 0], [1, 0]]});
    let answer = call("POST", format!("{store}/upsert"), Some(upsert)).await;
    let message = error(&answer, 422, "dimension_mismatch");
    assert!(message.contains("vector 1 has 2 dimensions"), "{message}");
    let query = json!({"indexName": "docs", "queryVector": [1, 0]});
    error(
        &call("POST", format!("{store}/query"), Some(query)).await,
        422,
        "dimension_mismatch",
    );
    // Nothing of a refused upsert is written.
    let described = call("GET", format!("{store}/indexes/docs"), None).await;
    assert_eq!(described.1["count"], 0, "{}", described.1);

    // A filter the language does not have.
    let query =
        json!({"indexName": "docs", "queryVector": [1, 0, 0], "filter": {"year": {"$near": 3}}});
    let answer = call("POST", format!("{store}/query"), Some(query)).await;
    let message = error(&answer, 422, "invalid_filter");
    assert!(message.contains("$.year"), "{message}");
    let upsert = json!({"indexName": "docs", "vectors": [[1, 0, 0]], "deleteFilter": {"$and": 1}});
    let answer = call("POST", format!("{store}/upsert"), Some(upsert)).await;
    let message = error(&answer, 422, "invalid_filter");
    assert!(message.starts_with("invalid deleteFilter"), "{message}");

    // Values: the zero vector has no cosine, and values are bounded so scores stay finite.
    let upsert = json!({"indexName": "docs", "vectors": [[0, 0, 0]]});
    error(
        &call("POST", format!("{store}/upsert"), Some(upsert)).await,
        422,
        "invalid_vector",
    );
    let query = json!({"indexName": "docs", "queryVector": [1e20, 0, 0]});
    let message = error(
        &call("POST", format!("{store}/query"), Some(query)).await,
        422,
        "invalid_vector",
    );
    assert!(message.contains("1e15"), "{message}");

    // Unknown fields, and fields of the wrong shape.
    for body in [
        json!({"indexName": "docs", "dimension": 3, "dimensions": 3}),
        json!({"indexName": "docs", "dimension": 0}),
        json!({"indexName": "docs", "dimension": 16001}),
        json!({"indexName": "1docs", "dimension": 3}),
        json!({"indexName": "docs", "dimension": 3, "metric": "manhattan"}),
        json!({"indexName": "docs", "dimension": 3, "indexConfig": {"type": "hnsw", "hnsw": {"m": 1, "efConstruction": 64}}}),
    ] {
        let answer = create(body.clone()).await;
        error(&answer, 422, "invalid_body");
    }
    let query = json!({"indexName": "docs", "queryVector": [1, 0, 0], "topk": 3});
    let message = error(
        &call("POST", format!("{store}/query"), Some(query)).await,
        422,
        "invalid_body",
    );
    assert!(message.contains("topk"), "{message}");
    let query = json!({"indexName": "docs", "queryVector": [1, 0, 0], "topK": 10001});
    let message = error(
        &call("POST", format!("{store}/query"), Some(query)).await,
        422,
        "invalid_body",
    );
    assert!(message.contains("topK"), "{message}");
    let upsert = json!({"indexName": "docs", "vectors": [[1, 0, 0]], "ids": ["a", "b"]});
    let message = error(
        &call("POST", format!("{store}/upsert"), Some(upsert)).await,
        422,
        "invalid_body",
    );
    assert!(message.contains("ids"), "{message}");
    // Bounds the document states: vectors per upsert, id length.
    let many = vec![json!([1, 0, 0]); 10_001];
    let upsert = json!({"indexName": "docs", "vectors": many});
    let message = error(
        &call("POST", format!("{store}/upsert"), Some(upsert)).await,
        422,
        "invalid_body",
    );
    assert!(
        message.starts_with("vectors: may hold at most 10000"),
        "{message}"
    );
    let upsert = json!({"indexName": "docs", "vectors": [[1, 0, 0]], "ids": ["é".repeat(129)]});
    let message = error(
        &call("POST", format!("{store}/upsert"), Some(upsert)).await,
        422,
        "invalid_body",
    );
    assert!(
        message.starts_with("ids[0]: may be at most 128"),
        "{message}"
    );
}

#[tokio::test]
async fn stores_and_embedders_are_listed() {
    let memory: SharedVectorStore = Arc::new(InMemoryVectorStore::new());
    let base = start(|s| {
        s.vector("default", Arc::new(InMemoryVectorStore::new()))
            .vector(
                "local",
                Arc::new(SqliteVectorStore::open_in_memory().unwrap()),
            )
            .vector(
                "docs",
                ServedVectorStore::new(memory, "pgvector").description("The handbook"),
            )
            .embedder(
                ServedEmbedder::new(Arc::new(HashEmbedder::new(16)), 512)
                    .description("Hashed words, for tests"),
            )
    })
    .await;
    let vectors = call("GET", format!("{base}/vectors"), None).await;
    assert_eq!(
        vectors,
        (
            200,
            json!({"vectors": [
                {"id": "default", "name": "default", "type": "memory"},
                {"id": "docs", "name": "docs", "type": "pgvector", "description": "The handbook"},
                {"id": "local", "name": "local", "type": "sqlite"},
            ]})
        )
    );
    let embedders = call("GET", format!("{base}/embedders"), None).await;
    assert_eq!(
        embedders,
        (
            200,
            json!({"embedders": [{
                "id": "hash/hash-16",
                "provider": "hash",
                "name": "hash-16",
                "description": "Hashed words, for tests",
                "dimensions": 16,
                "maxInputTokens": 512,
            }]})
        )
    );

    // A server without any answers empty lists, and 404 for a store.
    let bare = start(|s| s).await;
    assert_eq!(
        call("GET", format!("{bare}/vectors"), None).await,
        (200, json!({"vectors": []}))
    );
    assert_eq!(
        call("GET", format!("{bare}/embedders"), None).await,
        (200, json!({"embedders": []}))
    );
    let answer = call("GET", format!("{bare}/vector/default/indexes"), None).await;
    let message = error(&answer, 404, "not_found");
    assert!(message.contains("Server::vector"), "{message}");
}

#[tokio::test]
async fn store_names_must_be_path_segments_and_unique() {
    let kestrel = || Kestrel::builder().build().unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();
    let bad = Server::new(kestrel()).vector("a/b", Arc::new(InMemoryVectorStore::new()));
    assert!(matches!(
        bad.bind(addr).await,
        Err(ServeError::VectorStoreName { name, .. }) if name == "a/b"
    ));
    let twice = Server::new(kestrel())
        .vector("default", Arc::new(InMemoryVectorStore::new()))
        .vector("default", Arc::new(InMemoryVectorStore::new()));
    assert!(matches!(
        twice.bind(addr).await,
        Err(ServeError::VectorStoreName { name, .. }) if name == "default"
    ));
}

#[tokio::test]
async fn the_vector_routes_need_the_token_and_refuse_pinned_callers() {
    let base = start(|s| {
        s.token("secret")
            .resource_token("user-token", "alice")
            .vector("default", Arc::new(InMemoryVectorStore::new()))
    })
    .await;
    let http = reqwest::Client::new();
    let create = json!({"indexName": "docs", "dimension": 2});
    for path in ["/vectors", "/embedders", "/vector/default/indexes"] {
        let refused = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let refused = http
        .post(format!("{base}/vector/default/create-index"))
        .bearer_auth("wrong")
        .json(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    // A token pinned to a resource reaches no index: they belong to no resource.
    let pinned = http
        .post(format!("{base}/vector/default/create-index"))
        .bearer_auth("user-token")
        .json(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(pinned.status(), 403);
    let body: Value = pinned.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden");

    let created = http
        .post(format!("{base}/vector/default/create-index"))
        .bearer_auth("secret")
        .json(&create)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let indexes: Value = http
        .get(format!("{base}/vector/default/indexes"))
        .bearer_auth("secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(indexes, json!(["docs"]));
}

/// A store whose backend fails, with a secret in its error.
struct Broken;

#[async_trait]
impl VectorStore for Broken {
    async fn create_index(&self, _: CreateIndex) -> Result<(), VectorError> {
        Err(failure("create_index"))
    }
    async fn list_indexes(&self) -> Result<Vec<String>, VectorError> {
        Err(failure("list_indexes"))
    }
    async fn describe_index(&self, _: &str) -> Result<IndexStats, VectorError> {
        Err(failure("describe_index"))
    }
    async fn delete_index(&self, _: &str) -> Result<(), VectorError> {
        Err(failure("delete_index"))
    }
    async fn upsert(&self, _: Upsert) -> Result<Vec<String>, VectorError> {
        Err(failure("upsert"))
    }
    async fn query(&self, _: VectorQuery) -> Result<Vec<QueryResult>, VectorError> {
        Err(failure("query"))
    }
    async fn update(&self, _: &str, _: Selector, _: VectorUpdate) -> Result<u64, VectorError> {
        Err(failure("update"))
    }
    async fn delete(&self, _: &str, _: Selector) -> Result<u64, VectorError> {
        Err(failure("delete"))
    }
}

fn failure(operation: &'static str) -> VectorError {
    VectorError::backend(
        operation,
        "connection to postgres://admin:hunter2@db failed",
    )
}

#[tokio::test]
async fn a_failing_backend_is_a_500_that_leaks_nothing() {
    let base = start(|s| {
        s.vector(
            "broken",
            ServedVectorStore::new(Arc::new(Broken), "pgvector"),
        )
    })
    .await;
    let store = format!("{base}/vector/broken");
    for (method, path, body) in [
        ("GET", "indexes", None),
        ("GET", "indexes/docs", None),
        ("DELETE", "indexes/docs", None),
        (
            "POST",
            "create-index",
            Some(json!({"indexName": "docs", "dimension": 3})),
        ),
        (
            "POST",
            "upsert",
            Some(json!({"indexName": "docs", "vectors": [[1, 0, 0]]})),
        ),
        (
            "POST",
            "query",
            Some(json!({"indexName": "docs", "queryVector": [1, 0, 0]})),
        ),
    ] {
        let answer = call(method, format!("{store}/{path}"), body).await;
        let message = error(&answer, 500, "internal");
        assert!(!message.contains("hunter2"), "{method} {path}: {message}");
    }
}
