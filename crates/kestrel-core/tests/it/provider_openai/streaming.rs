//! Streams: text and usage, tool calls assembled from deltas (split, interleaved, ordered,
//! without ids or indexes), reasoning, and how a body may end.

use kestrel_core::model::{FinishReason, ModelError, ModelEvent, Usage, generate};
use serde_json::json;

use super::{
    DONE, chunk, model, request, run, text_delta, text_transcript, tool_delta, usage_chunk,
};
use crate::fake_server::{FakeServer, Reply};

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
