//! Streams and the AI SDK's fixtures: text turns in both versions, regenerations, tool turns
//! and approvals byte for byte, and failed runs.

use serde_json::{Value, json};

use super::protocol::reduce;
use super::{V, error_of, read_stream, start, submit, user};

#[tokio::test]
async fn a_text_turn_streams_in_both_versions() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("text-{}", v.name());
        let stream = read_stream(
            f.post("/chat/echo", submit(&chat, "Ada", v.name())).await,
            v,
            &[],
        )
        .await;
        assert_eq!(
            stream.types(),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        let text: String = stream
            .of_type("text-delta")
            .iter()
            .map(|c| c["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, "hello Ada");
        match v {
            V::V5 => assert_eq!(stream.chunks.last().unwrap(), &json!({"type": "finish"})),
            V::V6 => assert_eq!(
                stream.chunks.last().unwrap(),
                &json!({"type": "finish", "finishReason": "stop"})
            ),
        }
        // The stored history is the conversation, with the streamed message id.
        let history = f.history("echo", &chat, v.name()).await;
        assert_eq!(history.len(), 2);
        assert_eq!(history[0], user(&format!("{chat}-u1"), "Ada"));
        assert_eq!(history[1]["id"], stream.message_id());
        assert_eq!(
            history[1]["parts"],
            json!(reduce(Vec::new(), &stream.chunks))
        );
    }
}

#[tokio::test]
async fn a_regeneration_replaces_the_stored_answer() {
    let f = start(|s| s).await;
    let first = read_stream(
        f.post("/chat/echo", submit("regen", "Ada", "v6")).await,
        V::V6,
        &[],
    )
    .await;
    // useChat's regenerate(): the messages up to the user's, and the answer it replaces.
    let body = json!({
        "id": "regen",
        "messages": [user("regen-u1", "Ada")],
        "trigger": "regenerate-message",
        "messageId": first.message_id(),
        "version": "v6",
    });
    let again = read_stream(f.post("/chat/echo", body).await, V::V6, &[]).await;
    assert_ne!(again.message_id(), first.message_id());
    let history = f.history("echo", "regen", "v6").await;
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[0], user("regen-u1", "Ada"));
    assert_eq!(history[1]["id"], again.message_id());
    assert_eq!(
        history[1]["parts"],
        json!(reduce(Vec::new(), &again.chunks))
    );
}

#[tokio::test]
async fn a_failed_regeneration_keeps_the_history_and_a_good_one_replaces_the_answer() {
    let f = start(|s| {
        s.resource_token("tok-a", "alice")
            .resource_token("tok-b", "bob")
    })
    .await;
    let first = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", submit("flaky", "Hi", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let history_of = || async {
        let response = f
            .get_as(Some("tok-a"), "/chat/flaky/flaky/messages?version=v6")
            .await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        body["uiMessages"].as_array().unwrap().clone()
    };
    let before = history_of().await;
    assert_eq!(before.len(), 2);
    let regenerate = json!({
        "id": "flaky",
        "messages": [user("flaky-u1", "Hi")],
        "trigger": "regenerate-message",
        "messageId": first.message_id(),
        "version": "v6",
    });
    // The model fails this time: the answer it would have replaced is still there.
    let failed = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", regenerate.clone())
            .await,
        V::V6,
        &[],
    )
    .await;
    assert!(failed.types().contains(&"error"), "{}", failed.raw);
    assert_eq!(
        history_of().await,
        before,
        "a failed regenerate changed the history"
    );
    // Another resource's caller cannot regenerate (nor learn of) this thread.
    let foreign = f.post_as(Some("tok-b"), "/chat/flaky", {
        let mut body = regenerate.clone();
        body["memory"] = json!({"thread": "flaky", "resource": "bob"});
        body
    });
    let message = error_of(foreign.await, 404, "not_found").await;
    assert!(message.contains("not found"), "{message}");
    assert_eq!(history_of().await, before);
    // It works the next time: the new answer replaces the old one, which the model did not
    // see (no answer in its context).
    let again = read_stream(
        f.post_as(Some("tok-a"), "/chat/flaky", regenerate).await,
        V::V6,
        &[],
    )
    .await;
    let text: String = again
        .of_type("text-delta")
        .iter()
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "answer 2, 0 answers seen");
    let after = history_of().await;
    assert_eq!(after.len(), 2, "{after:#?}");
    assert_eq!(after[0], before[0]);
    assert_eq!(after[1]["id"], again.message_id());
}

/// Replaces the ids Kestrel chose with the fixture's, in the raw body: the bytes are otherwise
/// compared as they are.
fn with_ids(raw: &str, ids: &[(&str, &str)]) -> String {
    let mut raw = raw.to_owned();
    for (ours, theirs) in ids {
        raw = raw.replace(ours, theirs);
    }
    raw
}

#[tokio::test]
async fn a_tool_turn_matches_fixture_a_byte_for_byte() {
    let f = start(|s| s).await;
    for v in [V::V6, V::V5] {
        let mut body = submit("fixture-a", "weather?", v.name());
        // One step, as the fixture's mock model took.
        body["maxSteps"] = json!(1);
        let stream = read_stream(f.post("/chat/weather", body).await, v, &[]).await;
        let message_id = stream.message_id();
        let text_id = stream.of_type("text-start")[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        // The message id is also the text part's: name the start's alone first.
        let raw = stream.raw.replacen(
            &format!("\"messageId\":\"{message_id}\""),
            "\"messageId\":\"msg_1\"",
            1,
        );
        let raw = with_ids(&raw, &[(&text_id, "t1")]);
        // serde_json writes object keys sorted, so the tool's output reads {"city","temp"}
        // where the fixture's JavaScript object kept {"temp","city"}: the one difference.
        let finish = match v {
            V::V6 => r#"{"type":"finish","finishReason":"tool-calls"}"#,
            V::V5 => r#"{"type":"finish"}"#,
        };
        let fixture = format!(
            "data: {{\"type\":\"start\",\"messageId\":\"msg_1\"}}\n\n\
             data: {{\"type\":\"start-step\"}}\n\n\
             data: {{\"type\":\"text-start\",\"id\":\"t1\"}}\n\n\
             data: {{\"type\":\"text-delta\",\"id\":\"t1\",\"delta\":\"Hello\"}}\n\n\
             data: {{\"type\":\"text-end\",\"id\":\"t1\"}}\n\n\
             data: {{\"type\":\"tool-input-start\",\"toolCallId\":\"c1\",\"toolName\":\"weather\"}}\n\n\
             data: {{\"type\":\"tool-input-delta\",\"toolCallId\":\"c1\",\"inputTextDelta\":\"{{\\\"city\\\":\\\"Paris\\\"}}\"}}\n\n\
             data: {{\"type\":\"tool-input-available\",\"toolCallId\":\"c1\",\"toolName\":\"weather\",\"input\":{{\"city\":\"Paris\"}}}}\n\n\
             data: {{\"type\":\"tool-output-available\",\"toolCallId\":\"c1\",\"output\":{{\"city\":\"Paris\",\"temp\":20}}}}\n\n\
             data: {{\"type\":\"finish-step\"}}\n\n\
             data: {finish}\n\n\
             data: [DONE]\n\n"
        );
        assert_eq!(raw, fixture, "{}", v.name());
    }
}

#[tokio::test]
async fn an_approval_matches_fixture_b_in_v6() {
    let f = start(|s| s).await;
    let stream = read_stream(
        f.post("/chat/thinker", submit("fixture-b", "delete x", "v6"))
            .await,
        V::V6,
        &[],
    )
    .await;
    let message_id = stream.message_id();
    let reasoning_id = stream.of_type("reasoning-start")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approval = stream.of_type("tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = approval.strip_suffix("::c2").unwrap().to_owned();
    // Kestrel adds the data part Mastra sends (the fixture, from the AI SDK alone, has none),
    // and always streams a call's input (its driver announces every call with
    // `tool-call-input-streaming-start` and a delta), which the fixture's mock did not.
    let data = stream.of_type("data-tool-call-approval")[0].clone();
    assert_eq!(data["id"], "c2");
    assert_eq!(data["data"]["runId"], json!(run_id));
    assert_eq!(data["data"]["state"], "data-tool-call-approval");
    assert_eq!(data["data"]["args"], json!({"id": "x"}));
    let raw: String = stream
        .raw
        .split_inclusive("\n\n")
        .filter(|frame| {
            !frame.contains("data-tool-call-approval")
                && !frame.contains("\"tool-input-start\"")
                && !frame.contains("\"tool-input-delta\"")
        })
        .collect();
    let raw = raw.replacen(
        &format!("\"messageId\":\"{message_id}\""),
        "\"messageId\":\"msg_2\"",
        1,
    );
    let raw = with_ids(
        &raw,
        &[
            (&reasoning_id, "r1"),
            (&approval, "aitxt-ubG65u51h75lMvQPTjqCi3b8"),
        ],
    );
    // The fixture's finish also carried the `messageMetadata` its test asked for.
    let fixture = [
        r#"{"type":"start","messageId":"msg_2"}"#,
        r#"{"type":"start-step"}"#,
        r#"{"type":"reasoning-start","id":"r1"}"#,
        r#"{"type":"reasoning-delta","id":"r1","delta":"think"}"#,
        r#"{"type":"reasoning-end","id":"r1"}"#,
        r#"{"type":"tool-input-available","toolCallId":"c2","toolName":"del","input":{"id":"x"}}"#,
        r#"{"type":"tool-approval-request","approvalId":"aitxt-ubG65u51h75lMvQPTjqCi3b8","toolCallId":"c2"}"#,
        r#"{"type":"finish-step"}"#,
        r#"{"type":"finish","finishReason":"tool-calls"}"#,
        "[DONE]",
    ]
    .map(|frame| format!("data: {frame}\n\n"))
    .concat();
    assert_eq!(raw, fixture);
}

#[tokio::test]
async fn a_failed_run_ends_with_an_error_chunk_without_the_provider_text() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let stream = read_stream(
            f.post("/chat/broken", submit("broken", "hi", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        // Fixture C's error frame, byte for byte (with Kestrel's own message).
        assert!(
            stream
                .raw
                .ends_with("data: {\"type\":\"error\",\"errorText\":\"The model provider failed.\"}\n\ndata: [DONE]\n\n"),
            "{}",
            stream.raw
        );
        assert!(!stream.raw.contains("sk-secret"), "{}", stream.raw);
    }
}

#[tokio::test]
async fn a_blocked_answer_streams_mastras_tripwire_part_and_never_its_text() {
    let f = start(|s| s).await;
    for v in [V::V5, V::V6] {
        let chat = format!("blocked-{}", v.name());
        let stream = read_stream(
            f.post("/chat/guarded", submit(&chat, "the key?", v.name()))
                .await,
            v,
            &[],
        )
        .await;
        assert_eq!(
            stream.types(),
            [
                "start",
                "start-step",
                "finish-step",
                "data-tripwire",
                "finish"
            ]
        );
        let tripwire = &stream.of_type("data-tripwire")[0]["data"];
        assert_eq!(tripwire["reason"], "the answer matched openai-api-key");
        assert_eq!(tripwire["processorId"], "regex-filter");
        assert_eq!(tripwire["retry"], false);
        assert_eq!(tripwire["metadata"]["rules"], json!(["openai-api-key"]));
        if v == V::V6 {
            assert_eq!(
                stream.chunks.last().unwrap(),
                &json!({"type": "finish", "finishReason": "other"})
            );
        }
        assert!(!stream.raw.contains("sk-proj"), "{}", stream.raw);
        let history = f.history("guarded", &chat, v.name()).await;
        assert!(
            !serde_json::to_string(&history).unwrap().contains("sk-proj"),
            "{history:?}"
        );
    }
}
