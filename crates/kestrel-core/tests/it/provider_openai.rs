//! The OpenAI-compatible provider against a scripted server replaying Chat Completions streams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::fake_server::{FakeServer, Reply, cut_connection_server, refused_url};
use futures::StreamExt;
use kestrel_core::abort::AbortSignal;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRequest, ModelSettings,
    ResponseFormat, ToolChoice, ToolDefinition, Usage, generate,
};
use kestrel_core::providers::HttpConfig;
use kestrel_core::providers::openai::OpenAiCompatible;
use serde_json::{Value, json};

const DONE: &str = "data: [DONE]\n\n";

/// Generous bound for "promptly": far below the 60 s default idle timeout.
const PROMPTLY: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config(base_url: &str) -> HttpConfig {
    HttpConfig::new(format!("{base_url}/v1"))
        .with_api_key("sk-test")
        .with_backoff(ms(1), ms(20))
}

fn model(base_url: &str) -> OpenAiCompatible {
    OpenAiCompatible::new("openai", "gpt-test", config(base_url))
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user(text)],
        ..Default::default()
    }
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

/// A chunk shaped like OpenAI's, with the fields clients must ignore.
fn chunk(delta: Value, finish_reason: Option<&str>) -> String {
    data(json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1_694_268_190,
        "model": "gpt-test",
        "system_fingerprint": "fp_44709d6fcb",
        "service_tier": "default",
        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
        "usage": null,
    }))
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    data(json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1_694_268_190,
        "model": "gpt-test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": { "cached_tokens": 3, "audio_tokens": 0 },
            "completion_tokens_details": { "reasoning_tokens": 2, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0 },
        },
    }))
}

fn tool_delta(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut call = json!({ "index": index, "function": { "arguments": arguments } });
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    chunk(json!({ "tool_calls": [call] }), None)
}

fn text_transcript() -> Vec<String> {
    vec![
        chunk(
            json!({ "role": "assistant", "content": "", "refusal": null }),
            None,
        ),
        chunk(json!({ "content": "Hello" }), None),
        chunk(json!({ "content": ", world" }), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(12, 4),
        DONE.to_string(),
    ]
}

/// Runs a request and returns the events before the first error, and that error.
async fn run(
    model: &OpenAiCompatible,
    request: ModelRequest,
) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut stream = match model.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), Some(error)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(
                    stream.next().await.is_none(),
                    "the stream must end after an error"
                );
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

fn text_delta(text: &str) -> ModelEvent {
    ModelEvent::TextDelta { text: text.into() }
}

#[tokio::test]
async fn streams_text_and_takes_usage_from_the_final_usage_only_chunk() {
    let server = FakeServer::start(vec![Reply::sse(text_transcript())]).await;
    let (events, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(error, None);
    let mut usage = Usage::new(12, 4);
    usage.reasoning_tokens = Some(2);
    usage.cached_input_tokens = Some(3);
    assert_eq!(
        events,
        vec![
            text_delta("Hello"),
            text_delta(", world"),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage
            },
        ]
    );
    let request = server.single_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
}

#[tokio::test]
async fn assembles_a_tool_call_split_over_many_deltas() {
    let mut transcript = vec![
        chunk(json!({ "role": "assistant", "content": null }), None),
        tool_delta(0, Some("call_abc"), Some("get_weather"), ""),
    ];
    for piece in ["{\"", "city", "\":\"", "Par", "is\"", "}"] {
        transcript.push(tool_delta(0, None, None, piece));
    }
    transcript.extend([
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(30, 9),
        DONE.into(),
    ]);
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;

    let (events, error) = run(&model(&server.url), request("Weather in Paris?")).await;
    assert_eq!(error, None);
    let id = "call_abc".to_string();
    let mut expected = vec![ModelEvent::ToolInputStart {
        id: id.clone(),
        name: "get_weather".into(),
    }];
    for piece in ["{\"", "city", "\":\"", "Par", "is\"", "}"] {
        expected.push(ModelEvent::ToolInputDelta {
            id: id.clone(),
            delta: piece.into(),
        });
    }
    expected.extend([
        ModelEvent::ToolInputEnd { id: id.clone() },
        ModelEvent::ToolCall {
            id,
            name: "get_weather".into(),
            input: r#"{"city":"Paris"}"#.into(),
        },
    ]);
    assert_eq!(&events[..expected.len()], &expected[..]);
    assert!(matches!(
        events.last(),
        Some(ModelEvent::Finish { reason: FinishReason::ToolCalls, usage }) if usage.input_tokens == 30
    ));
    assert_eq!(events.len(), expected.len() + 1);
}

#[tokio::test]
async fn keeps_interleaved_parallel_tool_calls_apart_by_index() {
    let transcript = vec![
        tool_delta(0, Some("call_a"), Some("get_weather"), ""),
        tool_delta(1, Some("call_b"), Some("get_time"), ""),
        tool_delta(1, None, None, "{\"tz\":"),
        tool_delta(0, None, None, "{\"city\":"),
        tool_delta(0, None, None, "\"Oslo\"}"),
        tool_delta(1, None, None, "\"CET\"}"),
        chunk(json!({}), Some("tool_calls")),
        DONE.into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let response = generate(&model(&server.url), request("two things"))
        .await
        .unwrap();

    let calls: Vec<(&str, &str, &str)> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.input.as_str()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a", "get_weather", r#"{"city":"Oslo"}"#),
            ("call_b", "get_time", r#"{"tz":"CET"}"#),
        ]
    );
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    // No usage chunk was sent.
    assert_eq!(response.usage, Usage::default());
}

#[tokio::test]
async fn tool_call_events_are_ordered_start_deltas_end_call() {
    let transcript = vec![
        tool_delta(0, Some("call_a"), Some("a"), "{}"),
        tool_delta(1, Some("call_b"), Some("b"), ""),
        chunk(json!({}), Some("tool_calls")),
        DONE.into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("go")).await;
    assert_eq!(error, None);
    let start = |id: &str, name: &str| ModelEvent::ToolInputStart {
        id: id.into(),
        name: name.into(),
    };
    assert_eq!(
        events[..6],
        [
            start("call_a", "a"),
            ModelEvent::ToolInputDelta {
                id: "call_a".into(),
                delta: "{}".into()
            },
            start("call_b", "b"),
            ModelEvent::ToolInputEnd {
                id: "call_a".into()
            },
            ModelEvent::ToolCall {
                id: "call_a".into(),
                name: "a".into(),
                input: "{}".into()
            },
            ModelEvent::ToolInputEnd {
                id: "call_b".into()
            },
        ]
    );
    // Empty arguments become `{}`.
    assert_eq!(
        events[6],
        ModelEvent::ToolCall {
            id: "call_b".into(),
            name: "b".into(),
            input: "{}".into()
        }
    );
}

#[tokio::test]
async fn mints_ids_for_calls_without_one_and_reports_tool_calls_despite_stop() {
    let transcript = vec![
        chunk(
            json!({ "tool_calls": [{ "index": 0, "function": { "name": "lookup", "arguments": "{\"q\":1}" } }] }),
            None,
        ),
        chunk(json!({}), Some("stop")),
        DONE.into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let response = generate(&model(&server.url), request("q")).await.unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    assert!(response.tool_calls[0].id.starts_with("call_"));
    assert_eq!(response.tool_calls[0].input, r#"{"q":1}"#);
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn tolerates_calls_without_index_and_indexes_reused_for_new_calls() {
    let call = |index: Option<u32>, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut call = json!({ "function": { "arguments": args } });
        if let Some(index) = index {
            call["index"] = json!(index);
        }
        if let Some(id) = id {
            call["id"] = json!(id);
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        chunk(json!({ "tool_calls": [call] }), None)
    };
    let transcript = vec![
        // No index at all: calls are told apart by id, continuations go to the latest call.
        call(None, Some("call_x"), Some("first"), "{\"a\":"),
        call(None, None, None, "1}"),
        // Index 0 again, but a new id: a new call, not a continuation of the one above.
        call(Some(0), Some("call_y"), Some("second"), "{\"b\":2}"),
        chunk(json!({}), Some("tool_calls")),
        DONE.into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let response = generate(&model(&server.url), request("go")).await.unwrap();
    let calls: Vec<(&str, &str, &str)> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.input.as_str()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_x", "first", r#"{"a":1}"#),
            ("call_y", "second", r#"{"b":2}"#)
        ]
    );
}

#[tokio::test]
async fn reasoning_content_and_reasoning_become_reasoning_deltas() {
    let transcript = vec![
        // DeepSeek / vLLM.
        chunk(
            json!({ "role": "assistant", "content": null, "reasoning_content": "Let me " }),
            None,
        ),
        chunk(
            json!({ "content": null, "reasoning_content": "think." }),
            None,
        ),
        // OpenRouter / Ollama.
        chunk(json!({ "content": "", "reasoning": " More." }), None),
        chunk(json!({ "content": "42", "reasoning_content": null }), None),
        chunk(json!({}), Some("stop")),
        DONE.into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("?")).await;
    assert_eq!(error, None);
    let reasoning = |t: &str| ModelEvent::ReasoningDelta { text: t.into() };
    assert_eq!(
        events[..4],
        [
            reasoning("Let me "),
            reasoning("think."),
            reasoning(" More."),
            text_delta("42")
        ]
    );
}

#[tokio::test]
async fn finishes_at_end_of_body_after_a_finish_reason_without_done() {
    let transcript = vec![
        chunk(json!({ "content": "ok" }), None),
        chunk(json!({}), Some("length")),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let response = generate(&model(&server.url), request("?")).await.unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(response.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn end_of_body_before_a_finish_reason_is_a_connection_error() {
    let transcript = vec![chunk(json!({ "content": "partial" }), None)];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("?")).await;
    assert_eq!(events, vec![text_delta("partial")]);
    match error {
        Some(ModelError::Connection { message, .. }) => {
            assert!(
                message.contains("stream ended before the model finished"),
                "{message}"
            )
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

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

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather in a city".into(),
        input_schema: json!({ "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] }),
        auxiliary: false,
    }
}

fn conversation() -> Vec<Message> {
    vec![
        Message::system("You are terse."),
        Message::user("Weather in Paris and Oslo?"),
        Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning {
                    text: "two calls".into(),
                },
                Part::Text {
                    text: "Checking.".into(),
                },
                Part::ToolCall {
                    tool_call_id: "call_1".into(),
                    tool_name: "get_weather".into(),
                    args: json!({ "city": "Paris" }),
                },
                Part::ToolCall {
                    tool_call_id: "call_2".into(),
                    tool_name: "get_weather".into(),
                    // Invalid JSON the model produced, kept as raw text.
                    args: json!("{\"city\": Oslo"),
                },
            ],
        ),
        Message::new(
            Role::Tool,
            vec![
                Part::ToolResult {
                    tool_call_id: "call_1".into(),
                    tool_name: "get_weather".into(),
                    result: json!({ "temp": 21 }),
                    is_error: false,
                    denied: false,
                },
                Part::ToolResult {
                    tool_call_id: "call_2".into(),
                    tool_name: "get_weather".into(),
                    result: json!("invalid input"),
                    is_error: true,
                    denied: false,
                },
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                tool_call_id: "call_3".into(),
                tool_name: "get_weather".into(),
                args: json!({ "city": "Oslo" }),
            }],
        ),
    ]
}

#[tokio::test]
async fn sends_the_documented_request_shape() {
    let server = FakeServer::start(vec![Reply::sse(text_transcript())]).await;
    let request = ModelRequest {
        messages: conversation(),
        tools: vec![weather_tool()].into(),
        tool_choice: ToolChoice::Tool("get_weather".into()),
        response_format: Some(ResponseFormat::Json {
            schema: json!({ "type": "object" }),
            name: Some("weather".into()),
        }),
        settings: ModelSettings {
            temperature: Some(0.5),
            top_p: Some(0.25),
            max_output_tokens: Some(256),
            stop_sequences: vec!["END".into()],
            seed: Some(7),
        },
        ..Default::default()
    };
    generate(&model(&server.url), request).await.unwrap();

    let body = server.single_request().body;
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": { "include_usage": true },
            "messages": [
                { "role": "system", "content": "You are terse." },
                { "role": "user", "content": "Weather in Paris and Oslo?" },
                { "role": "assistant", "content": "Checking.", "tool_calls": [
                    { "id": "call_1", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } },
                    { "id": "call_2", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\": Oslo" } },
                ] },
                { "role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":21}" },
                { "role": "tool", "tool_call_id": "call_2", "content": "invalid input" },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "call_3", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } },
                ] },
            ],
            "tools": [{ "type": "function", "function": {
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] },
            } }],
            "tool_choice": { "type": "function", "function": { "name": "get_weather" } },
            "response_format": { "type": "json_schema", "json_schema": { "name": "weather", "schema": { "type": "object" }, "strict": false } },
            "temperature": 0.5,
            "top_p": 0.25,
            "max_completion_tokens": 256,
            "stop": ["END"],
            "seed": 7,
        })
    );
}

#[tokio::test]
async fn maps_tool_choices_and_omits_tools_when_there_are_none() {
    let replies = (0..4).map(|_| Reply::sse(text_transcript())).collect();
    let server = FakeServer::start(replies).await;
    let model = model(&server.url);
    for choice in [ToolChoice::Auto, ToolChoice::None, ToolChoice::Required] {
        let request = ModelRequest {
            tools: vec![weather_tool()].into(),
            tool_choice: choice,
            ..request("Hi")
        };
        generate(&model, request).await.unwrap();
    }
    generate(&model, request("no tools")).await.unwrap();
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies[0]["tool_choice"], "auto");
    assert_eq!(bodies[1]["tool_choice"], "none");
    assert_eq!(bodies[2]["tool_choice"], "required");
    assert!(bodies[3].get("tools").is_none() && bodies[3].get("tool_choice").is_none());
    assert!(bodies[3].get("response_format").is_none());
}

#[tokio::test]
async fn compatible_providers_get_max_tokens_and_extra_headers() {
    let server = FakeServer::start(vec![Reply::sse(text_transcript())]).await;
    let config =
        HttpConfig::new(format!("{}/v1/", server.url)).with_header("x-title", "kestrel-tests");
    let model = OpenAiCompatible::new("vllm", "Qwen/Qwen3-8B", config);
    assert_eq!(model.provider(), "vllm");
    assert_eq!(model.model_id(), "Qwen/Qwen3-8B");
    let request = ModelRequest {
        settings: ModelSettings {
            max_output_tokens: Some(100),
            ..Default::default()
        },
        ..request("Hi")
    };
    generate(&model, request).await.unwrap();
    let recorded = server.single_request();
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.body["max_tokens"], 100);
    assert_eq!(recorded.body["model"], "Qwen/Qwen3-8B");
    assert!(recorded.body.get("max_completion_tokens").is_none());
    assert_eq!(recorded.headers["x-title"], "kestrel-tests");
    // No key configured: no authorization header.
    assert!(!recorded.headers.contains_key("authorization"));
}
