//! The OpenAI-compatible embeddings provider against a scripted server on 127.0.0.1 replaying
//! `/v1/embeddings` answers.

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::fake_server::{FakeServer, Reply, Step, refused_url};
use kestrel_core::abort::AbortSignal;
use kestrel_core::embedding::{EmbedError, Embedder, EmbedderRegistry};
use kestrel_core::model::{ModelError, Usage};
use kestrel_core::providers::HttpConfig;
use kestrel_core::providers::openai_embeddings::OpenAiEmbeddings;
use serde_json::{Value, json};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config(server: &FakeServer) -> HttpConfig {
    HttpConfig::new(server.base("/v1"))
        .with_api_key("sk-test")
        .with_backoff(ms(1), ms(20))
}

fn embedder(server: &FakeServer, model: &str) -> OpenAiEmbeddings {
    OpenAiEmbeddings::new("openai", model, config(server))
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// An answer shaped like OpenAI's, with `items` as (index, vector) in the order given.
fn answer(items: &[(usize, Vec<f32>)], prompt_tokens: u64) -> Value {
    json!({
        "object": "list",
        "data": items
            .iter()
            .map(|(index, vector)| json!({ "object": "embedding", "index": index, "embedding": vector }))
            .collect::<Vec<_>>(),
        "model": "text-embedding-3-small",
        "usage": { "prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens },
    })
}

/// A vector of `dimension` values starting at `seed` (distinct per text).
fn vector(seed: f32, dimension: usize) -> Vec<f32> {
    (0..dimension).map(|i| seed + i as f32 / 1000.0).collect()
}

#[tokio::test]
async fn sends_the_openai_request_shape_and_returns_vectors_in_index_order() {
    // The server lists the embeddings out of order; they must come back in input order.
    let server = FakeServer::start(vec![Reply::json(
        200,
        answer(
            &[
                (2, vector(0.3, 1536)),
                (0, vector(0.1, 1536)),
                (1, vector(0.2, 1536)),
            ],
            12,
        ),
    )])
    .await;
    let embedder = embedder(&server, "text-embedding-3-small");
    assert_eq!(embedder.dimension(), 1536);
    let embeddings = embedder
        .embed_with_usage(&texts(&["one", "two", "three"]), &AbortSignal::new())
        .await
        .unwrap();

    let request = server.single_request();
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["accept"], "application/json");
    assert_eq!(
        request.body,
        json!({
            "model": "text-embedding-3-small",
            "input": ["one", "two", "three"],
            "encoding_format": "float",
        })
    );
    let firsts: Vec<f32> = embeddings.vectors.iter().map(|v| v[0]).collect();
    assert_eq!(firsts, [0.1, 0.2, 0.3]);
    assert!(embeddings.vectors.iter().all(|v| v.len() == 1536));
    assert_eq!(embeddings.usage, Usage::new(12, 0));
}

#[tokio::test]
async fn large_inputs_are_sent_in_batches_and_usage_is_summed() {
    let server = FakeServer::start(vec![
        Reply::json(200, answer(&[(0, vec![1.0, 0.0]), (1, vec![0.0, 1.0])], 4)),
        Reply::json(200, answer(&[(0, vec![0.5, 0.5])], 2)),
    ])
    .await;
    let embedder = embedder(&server, "tiny").with_batch_size(2);
    assert_eq!(embedder.dimension(), 0, "unknown model, not learned yet");
    let embeddings = embedder
        .embed_with_usage(&texts(&["a", "b", "c"]), &AbortSignal::new())
        .await
        .unwrap();
    assert_eq!(
        embeddings.vectors,
        vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.5]]
    );
    assert_eq!(embeddings.usage.input_tokens, 6);
    assert_eq!(embedder.dimension(), 2, "learned from the first answer");
    let inputs: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.body["input"].clone())
        .collect();
    assert_eq!(inputs, [json!(["a", "b"]), json!(["c"])]);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert_eq!(server.request_count(), 2, "an empty batch sends nothing");
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_without_retry() {
    let server = FakeServer::start(vec![
        Reply::json(
            401,
            json!({ "error": { "message": "Incorrect API key provided", "type": "invalid_request_error" } }),
        ),
        Reply::json(200, answer(&[(0, vector(0.1, 1536))], 1)),
    ])
    .await;
    let error = embedder(&server, "text-embedding-3-small")
        .embed_one("hello")
        .await
        .unwrap_err();
    assert_eq!(
        error,
        EmbedError::Model(ModelError::Auth {
            provider: "openai".into(),
            status: 401,
            message: "Incorrect API key provided".into(),
        })
    );
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_429_is_retried_and_then_succeeds() {
    let server = FakeServer::start(vec![
        Reply::json(429, json!({ "error": { "message": "slow down" } }))
            .with_header("retry-after-ms", "5"),
        Reply::json(200, answer(&[(0, vector(0.1, 1536))], 1)),
    ])
    .await;
    let vectors = embedder(&server, "text-embedding-3-small")
        .embed(&texts(&["hello"]))
        .await
        .unwrap();
    assert_eq!(vectors.len(), 1);
    assert_eq!(server.request_count(), 2);
    assert_eq!(server.requests()[0].body, server.requests()[1].body);
}

#[tokio::test]
async fn rate_limits_that_outlast_the_retries_are_typed() {
    let limited = || {
        Reply::json(429, json!({ "error": { "message": "quota" } })).with_header("retry-after", "0")
    };
    let server = FakeServer::start(vec![limited(), limited()]).await;
    let embedder = OpenAiEmbeddings::new(
        "openai",
        "text-embedding-3-small",
        config(&server).with_max_retries(1),
    );
    let error = embedder.embed_one("hello").await.unwrap_err();
    assert!(
        matches!(
            &error,
            EmbedError::Model(ModelError::RateLimited { attempts: 2, .. })
        ),
        "{error:?}"
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn malformed_answers_are_protocol_errors() {
    let not_json = Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        steps: vec![Step::Chunk("{\"data\": [".into())],
    };
    let cases = [
        (not_json, "not valid JSON"),
        (
            Reply::json(200, json!({ "object": "list", "results": [] })),
            "unexpected embeddings answer",
        ),
        (
            Reply::json(
                200,
                json!({ "data": [{ "index": 0, "embedding": "AAAAAA==" }] }),
            ),
            "unexpected embeddings answer",
        ),
        (
            Reply::json(200, answer(&[(0, vec![1.0]), (0, vec![2.0])], 1)),
            "index 0 appears twice",
        ),
        (
            Reply::json(200, answer(&[(5, vec![1.0])], 1)),
            "index 5 is out of range",
        ),
    ];
    for (reply, expected) in cases {
        let server = FakeServer::start(vec![reply]).await;
        let error = embedder(&server, "tiny").embed_one("x").await.unwrap_err();
        match &error {
            EmbedError::Model(ModelError::Protocol { message, .. }) => {
                assert!(message.contains(expected), "{message:?} vs {expected:?}")
            }
            other => panic!("expected a protocol error for {expected:?}, got {other:?}"),
        }
        assert!(!error.is_retryable());
    }
}

#[tokio::test]
async fn an_error_body_with_status_200_is_reported() {
    let server = FakeServer::start(vec![Reply::json(
        200,
        json!({ "error": { "message": "model not found" } }),
    )])
    .await;
    let error = embedder(&server, "nope").embed_one("x").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "openai: the embeddings answer is an error: model not found"
    );
}

#[tokio::test]
async fn wrong_dimensions_and_counts_are_typed_errors() {
    let server = FakeServer::start(vec![
        Reply::json(200, answer(&[(0, vec![0.1; 1535])], 1)),
        Reply::json(200, answer(&[(0, vec![0.1; 1536])], 1)),
        Reply::json(200, answer(&[(0, vec![1.0, 0.0])], 1)),
        Reply::json(200, answer(&[(0, vec![1.0, 0.0, 0.0])], 1)),
    ])
    .await;
    let small = embedder(&server, "text-embedding-3-small");
    assert_eq!(
        small.embed_one("x").await.unwrap_err(),
        EmbedError::DimensionMismatch {
            provider: "openai".into(),
            model: "text-embedding-3-small".into(),
            index: 0,
            expected: 1536,
            actual: 1535,
        }
    );
    assert!(matches!(
        small.embed(&texts(&["x", "y"])).await,
        Err(EmbedError::CountMismatch {
            expected: 2,
            actual: 1,
            ..
        })
    ));
    // A learned dimension is enforced afterwards.
    let learned = embedder(&server, "tiny");
    assert_eq!(learned.embed_one("x").await.unwrap().len(), 2);
    assert!(matches!(
        learned.embed_one("y").await,
        Err(EmbedError::DimensionMismatch {
            expected: 2,
            actual: 3,
            ..
        })
    ));
}

#[tokio::test]
async fn servers_that_omit_the_index_keep_the_array_order() {
    let server = FakeServer::start(vec![Reply::json(
        200,
        json!({ "data": [{ "embedding": [1.0, 0.0] }, { "embedding": [0.0, 1.0] }] }),
    )])
    .await;
    let vectors = embedder(&server, "tiny")
        .embed(&texts(&["a", "b"]))
        .await
        .unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
}

#[tokio::test]
async fn requested_dimensions_are_sent() {
    let server = FakeServer::start(vec![Reply::json(200, answer(&[(0, vec![0.5; 256])], 1))]).await;
    let embedder = embedder(&server, "text-embedding-3-large").with_dimensions(256);
    assert_eq!(embedder.dimension(), 256);
    embedder.embed_one("x").await.unwrap();
    assert_eq!(server.single_request().body["dimensions"], 256);
}

#[tokio::test]
async fn connection_failures_and_aborts_are_typed() {
    let url = refused_url().await;
    let embedder = OpenAiEmbeddings::new(
        "openai",
        "text-embedding-3-small",
        HttpConfig::new(format!("{url}/v1"))
            .with_max_retries(1)
            .with_backoff(ms(1), ms(5)),
    );
    assert!(matches!(
        embedder.embed_one("x").await,
        Err(EmbedError::Model(ModelError::Connection { .. }))
    ));

    let abort = AbortSignal::new();
    abort.abort();
    assert_eq!(
        embedder
            .embed_with_usage(&texts(&["x"]), &abort)
            .await
            .unwrap_err(),
        EmbedError::Model(ModelError::Cancelled)
    );
}

#[tokio::test]
async fn a_server_that_stops_answering_times_out() {
    let hanging = Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        steps: vec![Step::Chunk("{\"data\": ".into()), Step::Hang],
    };
    let server = FakeServer::start(vec![hanging]).await;
    let embedder =
        OpenAiEmbeddings::new("openai", "tiny", config(&server).with_idle_timeout(ms(200)));
    assert!(matches!(
        embedder.embed_one("x").await,
        Err(EmbedError::Model(ModelError::Timeout { phase: "idle", .. }))
    ));
}

#[tokio::test]
async fn the_registry_resolves_a_configured_endpoint_end_to_end() {
    let server = FakeServer::start(vec![Reply::json(200, answer(&[(0, vec![0.6, 0.8])], 3))]).await;
    let base = server.base("/v1");
    let registry = EmbedderRegistry::from_env_with(move |key| match key {
        "KESTREL_OPENAI_COMPATIBLE" => Some("my-tei".into()),
        "KESTREL_OPENAI_COMPATIBLE_MY_TEI_BASE_URL" => Some(base.clone()),
        _ => None,
    });
    let embedder = registry.resolve("my-tei/bge-small").unwrap();
    assert_eq!(embedder.embed_one("x").await.unwrap(), vec![0.6, 0.8]);
    let request = server.single_request();
    assert_eq!(request.body["model"], "bge-small");
    assert!(!request.headers.contains_key("authorization"));
}
