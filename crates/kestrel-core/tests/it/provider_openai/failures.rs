//! Failures: retries after 429 and server errors, typed errors with the provider's message,
//! malformed or cut streams, connection failures, abort and the idle timeout.

use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel_core::abort::AbortSignal;
use kestrel_core::model::{LanguageModel, ModelError, generate};
use kestrel_core::providers::openai::OpenAiCompatible;
use serde_json::json;

use super::{PROMPTLY, chunk, config, data, model, ms, request, run, text_delta, text_transcript};
use crate::fake_server::{FakeServer, Reply, cut_connection_server, refused_url};

#[tokio::test]
async fn retries_after_429_honouring_retry_after() {
    let rate_limited = Reply::json(
        429,
        json!({ "error": { "message": "Rate limit reached for gpt-test", "type": "requests", "param": null, "code": "rate_limit_exceeded" } }),
    )
    .with_header("retry-after", "0");
    let server = FakeServer::start(vec![rate_limited, Reply::sse(text_transcript())]).await;
    let response = generate(&model(&server.url), request("Hi")).await.unwrap();
    assert_eq!(response.text, "Hello, world");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn rate_limit_that_persists_is_reported_with_attempts() {
    let rate_limited = || {
        Reply::json(429, json!({ "error": { "message": "slow down" } }))
            .with_header("retry-after", "0")
    };
    let server = FakeServer::start(vec![rate_limited(), rate_limited()]).await;
    let model = OpenAiCompatible::new(
        "openai",
        "gpt-test",
        config(&server.url).with_max_retries(1),
    );
    let (_, error) = run(&model, request("Hi")).await;
    assert_eq!(
        error,
        Some(ModelError::RateLimited {
            provider: "openai".into(),
            attempts: 2,
            retry_after: Some(Duration::ZERO),
            message: "slow down".into(),
        })
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_backoff_cap_is_not_waited_for() {
    let rate_limited = Reply::json(429, json!({ "error": { "message": "daily quota" } }))
        .with_header("retry-after", "3600");
    let server = FakeServer::start(vec![rate_limited]).await;
    let started = Instant::now();
    let (_, error) = run(&model(&server.url), request("Hi")).await;
    assert!(started.elapsed() < PROMPTLY);
    assert!(
        matches!(&error, Some(ModelError::RateLimited { attempts: 1, retry_after: Some(d), .. }) if d.as_secs() == 3600),
        "{error:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let unavailable = || {
        Reply::json(
            503,
            json!({ "error": { "message": "The server is overloaded" } }),
        )
    };
    let server = FakeServer::start(vec![unavailable(), unavailable(), unavailable()]).await;
    let model = OpenAiCompatible::new(
        "openai",
        "gpt-test",
        config(&server.url).with_max_retries(2),
    );
    let (_, error) = run(&model, request("Hi")).await;
    assert_eq!(
        error,
        Some(ModelError::Server {
            provider: "openai".into(),
            status: 503,
            attempts: 3,
            message: "The server is overloaded".into(),
        })
    );
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_with_the_provider_message_and_no_retry() {
    let body = json!({ "error": {
        "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key" } });
    let server =
        FakeServer::start(vec![Reply::json(401, body), Reply::sse(text_transcript())]).await;
    let (_, error) = run(&model(&server.url), request("Hi")).await;
    match error {
        Some(ModelError::Auth {
            provider,
            status,
            message,
        }) => {
            assert_eq!(provider, "openai");
            assert_eq!(status, 401);
            assert!(
                message.starts_with("Incorrect API key provided"),
                "{message}"
            );
        }
        other => panic!("expected an auth error, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn bad_request_carries_the_provider_message() {
    let body = json!({ "error": {
        "message": "Invalid schema for function 'get_weather': 'object' is not valid under any of the given schemas.",
        "type": "invalid_request_error", "param": "tools[0].function.parameters", "code": "invalid_function_parameters" } });
    let server = FakeServer::start(vec![Reply::json(400, body)]).await;
    let (_, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(
        error,
        Some(ModelError::BadRequest {
            provider: "openai".into(),
            status: 400,
            message: "Invalid schema for function 'get_weather': 'object' is not valid under any of the given schemas."
                .into(),
        })
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_non_json_error_body_is_kept_as_text() {
    let server = FakeServer::start(vec![Reply::text(404, "404 page not found")]).await;
    let (_, error) = run(&model(&server.url), request("Hi")).await;
    assert!(
        matches!(&error, Some(ModelError::BadRequest { status: 404, message, .. }) if message == "404 page not found"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_malformed_data_line_is_a_protocol_error_quoting_it() {
    let transcript = vec![
        chunk(json!({ "content": "Hi" }), None),
        "data: {\"choices\": [{\"delta\": oops\n\n".to_string(),
        chunk(json!({ "content": "never seen" }), None),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(events, vec![text_delta("Hi")]);
    match error {
        Some(ModelError::Protocol { line, .. }) => {
            assert_eq!(line.as_deref(), Some("{\"choices\": [{\"delta\": oops"))
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_error_chunk_mid_stream_is_a_typed_error() {
    let transcript = vec![
        chunk(json!({ "content": "Hi" }), None),
        data(json!({ "error": { "message": "Provider returned error", "code": 502 } })),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(events, vec![text_delta("Hi")]);
    assert!(
        matches!(&error, Some(ModelError::Server { status: 502, message, .. }) if message == "Provider returned error"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_json_body_instead_of_a_stream_is_a_protocol_error() {
    let server = FakeServer::start(vec![Reply::json(200, json!({ "choices": [] }))]).await;
    let (_, error) = run(&model(&server.url), request("Hi")).await;
    assert!(
        matches!(error, Some(ModelError::Protocol { .. })),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_a_connection_error() {
    let partial = chunk(json!({ "content": "Hel" }), None);
    let url = cut_connection_server(&partial).await;
    let (events, error) = run(&model(&url), request("Hi")).await;
    assert_eq!(events, vec![text_delta("Hel")]);
    match error {
        // The transport notices the missing end of the chunked body.
        Some(ModelError::Connection { message, .. }) => {
            assert!(
                message.contains("connection lost while streaming"),
                "{message}"
            )
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    let url = refused_url().await;
    let model = OpenAiCompatible::new("openai", "gpt-test", config(&url).with_max_retries(2));
    let (_, error) = run(&model, request("Hi")).await;
    match error {
        Some(ModelError::Connection { message, .. }) => {
            assert!(message.contains("after 3 attempt(s)"), "{message}")
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[tokio::test]
async fn abort_mid_stream_cancels_promptly() {
    let reply = Reply::sse([chunk(json!({ "content": "Hel" }), None)]).then_hang();
    let server = FakeServer::start(vec![reply]).await;
    let abort = AbortSignal::new();
    let mut request = request("Hi");
    request.abort = abort.clone();
    let mut stream = model(&server.url).stream(request).await.unwrap();
    assert_eq!(stream.next().await, Some(Ok(text_delta("Hel"))));

    let aborter = abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(50)).await;
        aborter.abort();
    });
    let next = tokio::time::timeout(PROMPTLY, stream.next())
        .await
        .expect("abort must end the stream promptly");
    assert_eq!(next, Some(Err(ModelError::Cancelled)));
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn an_aborted_signal_sends_nothing() {
    let server = FakeServer::start(vec![Reply::sse(text_transcript())]).await;
    let request = request("Hi");
    request.abort.abort();
    let (_, error) = run(&model(&server.url), request).await;
    assert_eq!(error, Some(ModelError::Cancelled));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout() {
    let reply = Reply::sse([chunk(json!({ "content": "Hel" }), None)]).then_hang();
    let server = FakeServer::start(vec![reply]).await;
    let model = OpenAiCompatible::new(
        "openai",
        "gpt-test",
        config(&server.url).with_idle_timeout(ms(300)),
    );
    let started = Instant::now();
    let (events, error) = run(&model, request("Hi")).await;
    assert!(started.elapsed() < PROMPTLY);
    assert_eq!(events, vec![text_delta("Hel")]);
    assert_eq!(
        error,
        Some(ModelError::Timeout {
            provider: "openai".into(),
            phase: "idle",
            after: ms(300),
        })
    );
}
