//! The OpenAI-compatible provider against a scripted server replaying Chat Completions streams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The tests, by topic; the stream builders and helpers they share are here.
mod failures;
mod requests;
mod streaming;

use std::time::Duration;

use futures::StreamExt;
use kestrel_core::message::Message;
use kestrel_core::model::{LanguageModel, ModelError, ModelEvent, ModelRequest};
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
        messages: vec![Message::user(text)].into(),
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
