//! What is sent: the documented request shape, tool choices, and compatible providers'
//! `max_tokens` and extra headers.

use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    LanguageModel, ModelRequest, ModelSettings, ResponseFormat, ToolChoice, ToolDefinition,
    generate,
};
use kestrel_core::providers::HttpConfig;
use kestrel_core::providers::openai::OpenAiCompatible;
use serde_json::{Value, json};

use super::{model, request, text_transcript};
use crate::fake_server::{FakeServer, Reply};

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
        messages: conversation().into(),
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
