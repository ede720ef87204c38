//! The Anthropic provider against a scripted server replaying Messages API streams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::fake_server::{FakeServer, Reply};
use futures::StreamExt;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    FinishReason, LanguageModel, ModelError, ModelEvent, ModelRequest, ModelSettings,
    ResponseFormat, ToolChoice, ToolDefinition, Usage, generate,
};
use kestrel_core::providers::HttpConfig;
use kestrel_core::providers::anthropic::Anthropic;
use serde_json::{Value, json};

fn model(base_url: &str) -> Anthropic {
    let config = HttpConfig::new(base_url)
        .with_api_key("sk-ant-test")
        .with_backoff(Duration::from_millis(1), Duration::from_millis(20));
    Anthropic::new("claude-test", config)
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user(text)].into(),
        ..Default::default()
    }
}

/// An event as the API sends it: `event:` line, `data:` line, blank line.
fn event(data: Value) -> String {
    let name = data["type"].as_str().unwrap().to_string();
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start(input_tokens: u64, cache_read: u64) -> String {
    event(json!({ "type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [],
        "model": "claude-test", "stop_reason": null, "stop_sequence": null,
        "usage": { "input_tokens": input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read },
    } }))
}

fn block_start(index: u32, block: Value) -> String {
    event(json!({ "type": "content_block_start", "index": index, "content_block": block }))
}

fn block_delta(index: u32, delta: Value) -> String {
    event(json!({ "type": "content_block_delta", "index": index, "delta": delta }))
}

fn block_stop(index: u32) -> String {
    event(json!({ "type": "content_block_stop", "index": index }))
}

fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
    vec![
        event(
            json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason, "stop_sequence": null }, "usage": { "output_tokens": output_tokens } }),
        ),
        event(json!({ "type": "message_stop" })),
    ]
}

fn text_transcript(text: &str) -> Vec<String> {
    let mut transcript = vec![
        message_start(10, 0),
        block_start(0, json!({ "type": "text", "text": "" })),
        event(json!({ "type": "ping" })),
        block_delta(0, json!({ "type": "text_delta", "text": text })),
        block_stop(0),
    ];
    transcript.extend(message_end("end_turn", 5));
    transcript
}

async fn run(model: &Anthropic, request: ModelRequest) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut stream = match model.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), Some(error)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

#[tokio::test]
async fn streams_thinking_text_and_a_tool_use_with_usage() {
    let mut transcript = vec![
        message_start(472, 100),
        block_start(
            0,
            json!({ "type": "thinking", "thinking": "", "signature": "" }),
        ),
        event(json!({ "type": "ping" })),
        block_delta(
            0,
            json!({ "type": "thinking_delta", "thinking": "The user wants the weather." }),
        ),
        block_delta(
            0,
            json!({ "type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h" }),
        ),
        block_stop(0),
        block_start(1, json!({ "type": "text", "text": "" })),
        block_delta(
            1,
            json!({ "type": "text_delta", "text": "Okay, let's check" }),
        ),
        block_delta(1, json!({ "type": "text_delta", "text": " the weather." })),
        block_stop(1),
        block_start(
            2,
            json!({ "type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "input": {} }),
        ),
        block_delta(2, json!({ "type": "input_json_delta", "partial_json": "" })),
        block_delta(
            2,
            json!({ "type": "input_json_delta", "partial_json": "{\"location\":" }),
        ),
        block_delta(
            2,
            json!({ "type": "input_json_delta", "partial_json": " \"San Fra" }),
        ),
        block_delta(
            2,
            json!({ "type": "input_json_delta", "partial_json": "ncisco, CA\"}" }),
        ),
        block_stop(2),
    ];
    transcript.extend(message_end("tool_use", 89));
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;

    let (events, error) = run(&model(&server.url), request("Weather in SF?")).await;
    assert_eq!(error, None);
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_string();
    let delta = |piece: &str| ModelEvent::ToolInputDelta {
        id: id.clone(),
        delta: piece.into(),
    };
    let mut usage = Usage::new(572, 89);
    usage.cached_input_tokens = Some(100);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta {
                text: "The user wants the weather.".into()
            },
            ModelEvent::TextDelta {
                text: "Okay, let's check".into()
            },
            ModelEvent::TextDelta {
                text: " the weather.".into()
            },
            ModelEvent::ToolInputStart {
                id: id.clone(),
                name: "get_weather".into()
            },
            delta("{\"location\":"),
            delta(" \"San Fra"),
            delta("ncisco, CA\"}"),
            ModelEvent::ToolInputEnd { id: id.clone() },
            ModelEvent::ToolCall {
                id: id.clone(),
                name: "get_weather".into(),
                input: "{\"location\": \"San Francisco, CA\"}".into(),
            },
            ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage
            },
        ]
    );
}

#[tokio::test]
async fn a_tool_use_without_input_gets_an_empty_object() {
    let mut transcript = vec![
        message_start(5, 0),
        block_start(
            0,
            json!({ "type": "tool_use", "id": "toolu_1", "name": "now", "input": {} }),
        ),
        block_stop(0),
    ];
    transcript.extend(message_end("tool_use", 3));
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let response = generate(&model(&server.url), request("time?"))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].input, "{}");
}

#[tokio::test]
async fn maps_stop_reasons() {
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other),
    ];
    let replies = cases
        .iter()
        .map(|(reason, _)| {
            let mut transcript = text_transcript("x");
            transcript.truncate(transcript.len() - 2);
            transcript.extend(message_end(reason, 1));
            Reply::sse(transcript)
        })
        .collect();
    let server = FakeServer::start(replies).await;
    let model = model(&server.url);
    let mut usage = Usage::new(10, 1);
    usage.cached_input_tokens = Some(0);
    for (wire, expected) in cases {
        let response = generate(&model, request("?")).await.unwrap();
        assert_eq!(response.finish_reason, Some(expected), "{wire}");
        assert_eq!(response.usage, usage);
    }
}

#[tokio::test]
async fn an_error_event_mid_stream_is_a_typed_error() {
    let transcript = vec![
        message_start(10, 0),
        block_start(0, json!({ "type": "text", "text": "" })),
        block_delta(0, json!({ "type": "text_delta", "text": "Hi" })),
        event(
            json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ),
    ];
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(events, vec![ModelEvent::TextDelta { text: "Hi".into() }]);
    assert_eq!(
        error,
        Some(ModelError::Server {
            provider: "anthropic".into(),
            status: 529,
            attempts: 1,
            message: "Overloaded".into(),
        })
    );
}

#[tokio::test]
async fn end_of_body_before_message_stop_is_a_connection_error() {
    let mut transcript = text_transcript("Hi");
    transcript.pop();
    let server = FakeServer::start(vec![Reply::sse(transcript)]).await;
    let (events, error) = run(&model(&server.url), request("Hi")).await;
    assert_eq!(events, vec![ModelEvent::TextDelta { text: "Hi".into() }]);
    assert!(
        matches!(error, Some(ModelError::Connection { .. })),
        "{error:?}"
    );
}

fn api_error(kind: &str, message: &str) -> Value {
    json!({ "type": "error", "error": { "type": kind, "message": message } })
}

#[tokio::test]
async fn maps_error_statuses() {
    let server = FakeServer::start(vec![
        Reply::json(401, api_error("authentication_error", "invalid x-api-key")),
        Reply::json(
            400,
            api_error("invalid_request_error", "messages: roles must alternate"),
        ),
        Reply::json(529, api_error("overloaded_error", "Overloaded")),
        Reply::json(529, api_error("overloaded_error", "Overloaded")),
        Reply::json(529, api_error("overloaded_error", "Overloaded")),
        Reply::json(529, api_error("overloaded_error", "Overloaded")),
    ])
    .await;
    let model = model(&server.url);

    let (_, auth) = run(&model, request("Hi")).await;
    assert_eq!(
        auth,
        Some(ModelError::Auth {
            provider: "anthropic".into(),
            status: 401,
            message: "invalid x-api-key".into(),
        })
    );
    let (_, bad) = run(&model, request("Hi")).await;
    assert_eq!(
        bad,
        Some(ModelError::BadRequest {
            provider: "anthropic".into(),
            status: 400,
            message: "messages: roles must alternate".into(),
        })
    );
    assert_eq!(server.request_count(), 2, "4xx errors are not retried");
    // 529 is retried like any 5xx: 1 attempt + 3 retries.
    let (_, overloaded) = run(&model, request("Hi")).await;
    assert_eq!(
        overloaded,
        Some(ModelError::Server {
            provider: "anthropic".into(),
            status: 529,
            attempts: 4,
            message: "Overloaded".into(),
        })
    );
    assert_eq!(server.request_count(), 6);
}

fn tool_result(id: &str, result: Value, is_error: bool) -> Part {
    Part::ToolResult {
        tool_call_id: id.into(),
        tool_name: "get_weather".into(),
        result,
        is_error,
        denied: false,
    }
}

fn tool_call(id: &str, args: Value) -> Part {
    Part::ToolCall {
        tool_call_id: id.into(),
        tool_name: "get_weather".into(),
        args,
    }
}

#[tokio::test]
async fn sends_the_documented_request_shape() {
    let server = FakeServer::start(vec![Reply::sse(text_transcript("ok"))]).await;
    let messages = vec![
        Message::system("You are terse."),
        Message::system("Use metric units."),
        Message::user("Weather in Paris and Oslo?"),
        Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning {
                    text: "dropped".into(),
                },
                Part::Text {
                    text: "Checking.".into(),
                },
                tool_call("call_1", json!({ "city": "Paris" })),
                // Invalid JSON the model produced, kept as raw text.
                tool_call("call_2", json!("{\"city\": Oslo")),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![
                tool_result("call_1", json!({ "temp": 21 }), false),
                tool_result("call_2", json!("invalid input"), true),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![tool_call("call_3", json!({ "city": "Oslo" }))],
        ),
        Message::new(
            Role::Tool,
            vec![tool_result("call_3", json!("12 °C"), false)],
        ),
        Message::user("And tomorrow?"),
    ];
    let request = ModelRequest {
        messages: messages.into(),
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather in a city".into(),
            input_schema: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
            auxiliary: false,
        }]
        .into(),
        tool_choice: ToolChoice::Required,
        settings: ModelSettings {
            temperature: Some(0.5),
            top_p: Some(0.25),
            stop_sequences: vec!["END".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    generate(&model(&server.url), request).await.unwrap();

    let recorded = server.single_request();
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.headers["x-api-key"], "sk-ant-test");
    assert_eq!(recorded.headers["anthropic-version"], "2023-06-01");
    assert!(!recorded.headers.contains_key("authorization"));
    let tool_use = |id: &str, input: Value| json!({ "type": "tool_use", "id": id, "name": "get_weather", "input": input });
    assert_eq!(
        recorded.body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "stream": true,
            "system": "You are terse.\n\nUse metric units.",
            "messages": [
                { "role": "user", "content": [{ "type": "text", "text": "Weather in Paris and Oslo?" }] },
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Checking." },
                    tool_use("call_1", json!({ "city": "Paris" })),
                    tool_use("call_2", json!({})),
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "call_1", "content": "{\"temp\":21}" },
                    { "type": "tool_result", "tool_use_id": "call_2", "content": "invalid input", "is_error": true },
                ] },
                { "role": "assistant", "content": [tool_use("call_3", json!({ "city": "Oslo" }))] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "call_3", "content": "12 °C" },
                    { "type": "text", "text": "And tomorrow?" },
                ] },
            ],
            "tools": [{ "name": "get_weather", "description": "Current weather in a city",
                        "input_schema": { "type": "object", "properties": { "city": { "type": "string" } } } }],
            "tool_choice": { "type": "any" },
            "stop_sequences": ["END"],
            "temperature": 0.5,
            "top_p": 0.25,
        })
    );
}

#[tokio::test]
async fn maps_tool_choices_limits_and_json_response_format() {
    let replies = (0..3).map(|_| Reply::sse(text_transcript("{}"))).collect();
    let server = FakeServer::start(replies).await;
    let model = model(&server.url).with_default_max_tokens(1000);
    let tools = vec![ToolDefinition {
        name: "t".into(),
        description: "d".into(),
        input_schema: json!({ "type": "object" }),
        auxiliary: false,
    }];
    for choice in [
        ToolChoice::Auto,
        ToolChoice::None,
        ToolChoice::Tool("t".into()),
    ] {
        let request = ModelRequest {
            tools: tools.clone().into(),
            tool_choice: choice,
            ..request("Hi")
        };
        generate(&model, request).await.unwrap();
    }
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies[0]["tool_choice"], json!({ "type": "auto" }));
    assert_eq!(bodies[1]["tool_choice"], json!({ "type": "none" }));
    assert_eq!(
        bodies[2]["tool_choice"],
        json!({ "type": "tool", "name": "t" })
    );
    assert_eq!(bodies[0]["max_tokens"], 1000);
    assert!(bodies[0].get("system").is_none());

    let server = FakeServer::start(vec![Reply::sse(text_transcript("{}"))]).await;
    let request = ModelRequest {
        messages: vec![Message::system("Be brief."), Message::user("Rate it")].into(),
        response_format: Some(ResponseFormat::Json {
            schema: json!({ "type": "object", "properties": { "score": { "type": "integer" } } }),
            name: None,
        }),
        settings: ModelSettings {
            max_output_tokens: Some(64),
            ..Default::default()
        },
        ..Default::default()
    };
    generate(&self::model(&server.url), request).await.unwrap();
    let body = server.single_request().body;
    let system = body["system"].as_str().unwrap();
    assert!(system.starts_with("Be brief.\n\n"), "{system}");
    assert!(system.contains("JSON schema"), "{system}");
    assert!(system.contains("\"score\""), "{system}");
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[tokio::test]
async fn reports_its_provider_and_model() {
    let model = model("http://127.0.0.1:9");
    assert_eq!(model.provider(), "anthropic");
    assert_eq!(model.model_id(), "claude-test");
}
