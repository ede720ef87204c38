//! The UI message stream protocol, as a client checks it: the fields of every chunk type per
//! version, the ordering rules, SSE framing, and the parts a client builds from the chunks.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::V;

/// The fields a chunk type has (required, optional) in a version; `None` for a type the
/// version does not know.
fn fields(kind: &str, v: V) -> Option<(&'static [&'static str], &'static [&'static str])> {
    const PM: &str = "providerMetadata";
    Some(match kind {
        "start" => (&[], &["messageId", "messageMetadata"]),
        "start-step" | "finish-step" => (&[], &[]),
        "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => (&["id"], &[PM]),
        "text-delta" | "reasoning-delta" => (&["id", "delta"], &[PM]),
        "tool-input-start" => (
            &["toolCallId", "toolName"],
            &[
                "providerExecuted",
                PM,
                "dynamic",
                "title",
                "inputEncoding",
                "toolMetadata",
            ],
        ),
        "tool-input-delta" => (&["toolCallId", "inputTextDelta"], &[]),
        "tool-input-available" => (
            &["toolCallId", "toolName", "input"],
            &["providerExecuted", PM, "dynamic", "title", "toolMetadata"],
        ),
        "tool-input-error" => (
            &["toolCallId", "toolName", "input", "errorText"],
            &["providerExecuted", PM, "dynamic", "title"],
        ),
        "tool-approval-request" if v == V::V6 => (
            &["approvalId", "toolCallId"],
            &["approvalDescriptor", "inputSchemaInput", "signature"],
        ),
        "tool-output-available" => (
            &["toolCallId", "output"],
            &[
                "providerExecuted",
                PM,
                "dynamic",
                "preliminary",
                "toolMetadata",
            ],
        ),
        "tool-output-error" => (
            &["toolCallId", "errorText"],
            &["providerExecuted", PM, "dynamic", "toolMetadata"],
        ),
        "tool-output-denied" if v == V::V6 => (&["toolCallId"], &[]),
        "finish" if v == V::V6 => (&[], &["finishReason", "messageMetadata"]),
        "finish" => (&[], &["messageMetadata"]),
        "error" => (&["errorText"], &[]),
        "abort" => (&[], &["reason"]),
        "message-metadata" => (&["messageMetadata"], &[]),
        "source-url" => (&["sourceId", "url"], &["title", PM]),
        "source-document" => (&["sourceId", "mediaType", "title"], &["filename", PM]),
        "file" => (&["url", "mediaType"], &[PM]),
        k if k.starts_with("data-") => (&["data"], &["id", "transient"]),
        _ => return None,
    })
}

/// Checks every rule of the protocol on one stream's chunks. `known` are the tool calls the
/// message already has (a continuation's), `continuation` whether the stream continues one.
#[allow(clippy::collapsible_match)] // one arm per chunk type reads as the protocol's rules
pub(super) fn validate(chunks: &[Value], v: V, known: &HashSet<String>) {
    let fail = |i: usize, why: &str| -> ! {
        panic!("chunk {i} ({}): {why}\nstream: {chunks:#?}", chunks[i])
    };
    assert!(!chunks.is_empty(), "an empty stream");
    let mut calls: HashSet<String> = known.clone();
    let mut streaming: HashSet<String> = HashSet::new();
    let mut available: HashSet<String> = known.clone();
    let mut open_text: HashSet<String> = HashSet::new();
    let mut open_reasoning: HashSet<String> = HashSet::new();
    let mut step_open = false;
    for (i, chunk) in chunks.iter().enumerate() {
        let Some(object) = chunk.as_object() else {
            fail(i, "not an object")
        };
        let Some(kind) = object.get("type").and_then(Value::as_str) else {
            fail(i, "no type")
        };
        let Some((required, optional)) = fields(kind, v) else {
            fail(i, &format!("{kind:?} is not a {} chunk type", v.name()))
        };
        for field in required {
            if !object.contains_key(*field) {
                fail(i, &format!("missing {field}"));
            }
        }
        for key in object.keys() {
            if key != "type"
                && !required.contains(&key.as_str())
                && !optional.contains(&key.as_str())
            {
                fail(i, &format!("unexpected field {key}"));
            }
        }
        for key in [
            "id",
            "toolCallId",
            "toolName",
            "delta",
            "errorText",
            "approvalId",
            "messageId",
        ] {
            if let Some(value) = object.get(key)
                && !value.is_string()
            {
                fail(i, &format!("{key} must be a string"));
            }
        }
        if (i == 0) != (kind == "start") {
            fail(i, "start comes first, once");
        }
        let terminal = matches!(kind, "finish" | "error" | "abort");
        if terminal != (i == chunks.len() - 1) {
            fail(i, "one finish, error or abort ends the stream");
        }
        let id = object
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let call = object
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind {
            "start-step" => {
                if step_open {
                    fail(i, "start-step inside a step");
                }
                step_open = true;
            }
            "finish-step" => {
                if !step_open {
                    fail(i, "finish-step without start-step");
                }
                if !open_text.is_empty() || !open_reasoning.is_empty() {
                    fail(i, "a step ends with open text or reasoning");
                }
                step_open = false;
            }
            "text-start" | "text-delta" | "text-end" | "reasoning-start" | "reasoning-delta"
            | "reasoning-end" => {
                let (part, phase) = kind.split_once('-').unwrap();
                let open = if part == "text" {
                    &mut open_text
                } else {
                    &mut open_reasoning
                };
                match phase {
                    "start" if !step_open || !open.insert(id.clone()) => {
                        fail(i, "a part starts outside a step or twice")
                    }
                    "delta" | "end" if !open.contains(&id) => fail(i, "a part before its start"),
                    "end" => {
                        open.remove(&id);
                    }
                    _ => {}
                }
            }
            "tool-input-start" => {
                if !step_open || !calls.insert(call.clone()) {
                    fail(i, "tool-input-start outside a step or for a known call");
                }
                streaming.insert(call);
            }
            "tool-input-delta" => {
                if !streaming.contains(&call) {
                    fail(i, "tool-input-delta before tool-input-start");
                }
            }
            "tool-input-available" => {
                if !step_open && !calls.contains(&call) {
                    fail(i, "a new call outside a step");
                }
                if !available.insert(call.clone()) {
                    fail(i, "tool-input-available twice");
                }
                calls.insert(call.clone());
                streaming.remove(&call);
            }
            "tool-approval-request" => {
                if !available.contains(&call) {
                    fail(i, "tool-approval-request before tool-input-available");
                }
                let approval = object["approvalId"].as_str().unwrap_or_default();
                if !approval.ends_with(&format!("::{call}")) {
                    fail(i, "approvalId is not <runId>::<toolCallId>");
                }
            }
            "tool-output-available" | "tool-output-error" | "tool-output-denied" => {
                if !available.contains(&call) {
                    fail(i, "tool output for a call the message does not have");
                }
            }
            "finish" | "error" | "abort" => {
                if step_open || !open_text.is_empty() || !open_reasoning.is_empty() {
                    fail(i, "the message ends inside a step or a part");
                }
                if let Some(reason) = object.get("finishReason")
                    && ![
                        "stop",
                        "length",
                        "content-filter",
                        "tool-calls",
                        "error",
                        "other",
                    ]
                    .contains(&reason.as_str().unwrap_or_default())
                {
                    fail(i, "unknown finishReason");
                }
            }
            k if k.starts_with("data-") => {
                if let Some(transient) = object.get("transient")
                    && !transient.is_boolean()
                {
                    fail(i, "transient must be a boolean");
                }
            }
            _ => {}
        }
    }
}

#[test]
fn the_validator_refuses_what_a_client_would_reject() {
    let turn = || {
        vec![
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "hi"}),
            json!({"type": "text-end", "id": "t"}),
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}}),
            json!({"type": "tool-output-available", "toolCallId": "c", "output": 1}),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ]
    };
    let refused = |chunks: Vec<Value>, v: V| {
        std::panic::catch_unwind(|| validate(&chunks, v, &HashSet::new())).is_err()
    };
    assert!(!refused(turn(), V::V5));
    assert!(!refused(turn(), V::V6));
    type Breaks = Box<dyn Fn(&mut Vec<Value>)>;
    let broken: Vec<(&str, Breaks, V)> = vec![
        (
            "no start",
            Box::new(|c| {
                c.remove(0);
            }),
            V::V5,
        ),
        ("delta before start", Box::new(|c| c.swap(2, 3)), V::V5),
        (
            "output of an unknown call",
            Box::new(|c| {
                c.remove(5);
            }),
            V::V5,
        ),
        (
            "finish not last",
            Box::new(|c| c.push(json!({"type": "start-step"}))),
            V::V5,
        ),
        (
            "a step left open",
            Box::new(|c| {
                c.remove(7);
            }),
            V::V5,
        ),
        (
            "text left open",
            Box::new(|c| {
                c.remove(4);
            }),
            V::V5,
        ),
        (
            "v6 chunk in v5",
            Box::new(|c| {
                c.insert(6, json!({"type": "tool-approval-request", "approvalId": "r::c", "toolCallId": "c"}))
            }),
            V::V5,
        ),
        (
            "finishReason in v5",
            Box::new(|c| c[8] = json!({"type": "finish", "finishReason": "stop"})),
            V::V5,
        ),
        (
            "unknown type",
            Box::new(|c| c.insert(1, json!({"type": "custom", "data": 1}))),
            V::V6,
        ),
        (
            "unexpected field",
            Box::new(|c| c[3]["text"] = json!("hi")),
            V::V6,
        ),
        (
            "missing field",
            Box::new(|c| {
                c[6].as_object_mut().unwrap().remove("output");
            }),
            V::V6,
        ),
        (
            "a bad approval id",
            Box::new(|c| {
                c.insert(
                    6,
                    json!({"type": "tool-approval-request", "approvalId": "r", "toolCallId": "c"}),
                )
            }),
            V::V6,
        ),
    ];
    for (why, breaks, v) in broken {
        let mut chunks = turn();
        breaks(&mut chunks);
        assert!(refused(chunks, v), "accepted: {why}");
    }
}

/// The chunks of an SSE body: `data: <json>\n\n` frames (comments ignored), `[DONE]` last.
pub(super) fn parse_frames(raw: &str) -> Vec<Value> {
    assert!(
        raw.ends_with("data: [DONE]\n\n"),
        "the stream ends with [DONE]: {raw}"
    );
    let frames: Vec<&str> = raw
        .split("\n\n")
        .filter(|f| !f.is_empty() && !f.starts_with(':'))
        .collect();
    let (done, frames) = frames.split_last().unwrap();
    assert_eq!(*done, "data: [DONE]");
    frames
        .iter()
        .map(|frame| {
            assert!(!frame.contains('\n'), "one data line per frame: {frame:?}");
            let data = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
        })
        .collect()
}

/// The message parts a client builds from chunks (AI SDK's `processUIMessageStream`), starting
/// from `parts` (a continued message's).
pub(super) fn reduce(mut parts: Vec<Value>, chunks: &[Value]) -> Vec<Value> {
    fn tool<'a>(parts: &'a mut [Value], call: &Value) -> &'a mut Value {
        parts
            .iter_mut()
            .find(|p| p["toolCallId"] == *call && p["type"].as_str().unwrap().starts_with("tool-"))
            .unwrap_or_else(|| panic!("No tool invocation found for {call}"))
    }
    let mut text: HashMap<String, usize> = HashMap::new();
    let mut reasoning: HashMap<String, usize> = HashMap::new();
    for chunk in chunks {
        let kind = chunk["type"].as_str().unwrap();
        match kind {
            "start-step" => parts.push(json!({"type": "step-start"})),
            "finish-step" => {
                text.clear();
                reasoning.clear();
            }
            "text-start" => {
                text.insert(chunk["id"].as_str().unwrap().into(), parts.len());
                parts.push(json!({"type": "text", "text": "", "state": "streaming"}));
            }
            "text-delta" => {
                let part = &mut parts[text[chunk["id"].as_str().unwrap()]];
                let joined = format!(
                    "{}{}",
                    part["text"].as_str().unwrap(),
                    chunk["delta"].as_str().unwrap()
                );
                part["text"] = json!(joined);
            }
            "text-end" => parts[text[chunk["id"].as_str().unwrap()]]["state"] = json!("done"),
            "reasoning-start" => {
                reasoning.insert(chunk["id"].as_str().unwrap().into(), parts.len());
                parts.push(json!({"type": "reasoning", "text": "", "state": "streaming"}));
            }
            "reasoning-delta" => {
                let part = &mut parts[reasoning[chunk["id"].as_str().unwrap()]];
                let joined = format!(
                    "{}{}",
                    part["text"].as_str().unwrap(),
                    chunk["delta"].as_str().unwrap()
                );
                part["text"] = json!(joined);
            }
            "reasoning-end" => {
                parts[reasoning[chunk["id"].as_str().unwrap()]]["state"] = json!("done")
            }
            "tool-input-start" => parts.push(json!({
                "type": format!("tool-{}", chunk["toolName"].as_str().unwrap()),
                "toolCallId": chunk["toolCallId"],
                "state": "input-streaming",
            })),
            "tool-input-delta" => {}
            "tool-input-available" => {
                let exists = parts.iter().any(|p| p["toolCallId"] == chunk["toolCallId"]);
                if !exists {
                    parts.push(json!({
                        "type": format!("tool-{}", chunk["toolName"].as_str().unwrap()),
                        "toolCallId": chunk["toolCallId"],
                    }));
                }
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("input-available");
                part["input"] = chunk["input"].clone();
            }
            "tool-approval-request" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("approval-requested");
                part["approval"] = json!({"id": chunk["approvalId"]});
            }
            "tool-output-available" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("output-available");
                part["output"] = chunk["output"].clone();
            }
            "tool-output-error" => {
                let part = tool(&mut parts, &chunk["toolCallId"]);
                part["state"] = json!("output-error");
                part["errorText"] = chunk["errorText"].clone();
            }
            "tool-output-denied" => {
                tool(&mut parts, &chunk["toolCallId"])["state"] = json!("output-denied");
            }
            k if k.starts_with("data-") => {
                if chunk["transient"] == true {
                    continue;
                }
                let mut part = json!({"type": k, "data": chunk["data"]});
                if let Some(id) = chunk.get("id") {
                    part["id"] = id.clone();
                    if let Some(same) = parts.iter_mut().find(|p| p["type"] == k && p["id"] == *id)
                    {
                        *same = part;
                        continue;
                    }
                }
                parts.push(part);
            }
            _ => {}
        }
    }
    parts
}
