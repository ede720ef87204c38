//! The event stream of an agent run: exact order and JSON wire form, and a run that is stopped,
//! serialised and continued elsewhere producing the same events and result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use kestrel_core::agent::{Agent, RunOptions, RunState};
use kestrel_core::event::Event;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct AddInput {
    a: i64,
    b: i64,
}

fn add_agent(model: Arc<ScriptedModel>) -> Agent {
    let add = create_tool("add")
        .description("Adds two integers")
        .execute(|i: AddInput, _ctx| async move { Ok(json!({ "sum": i.a + i.b })) });
    Agent::builder("calculator")
        .instructions("You add numbers with the add tool.")
        .model(model)
        .tool(add)
        .build()
        .unwrap()
}

fn round_trip_script() -> ScriptedModel {
    ScriptedModel::new()
        .respond(ScriptedResponse::tool_call(
            "call-1",
            "add",
            json!({"a": 2, "b": 3}),
        ))
        .respond(ScriptedResponse::text_deltas(["2 + 3", " = ", "5"]))
}

/// Replaces every UUID-shaped string by `<id-N>` (numbered by first appearance) and
/// `startedAt` by 0, so runs with fresh ids compare equal.
fn normalize(events: &[Event]) -> Vec<Value> {
    let mut ids: HashMap<String, String> = HashMap::new();
    fn walk(v: &mut Value, ids: &mut HashMap<String, String>) {
        match v {
            Value::String(s) if s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4 => {
                let n = ids.len();
                *s = ids
                    .entry(s.clone())
                    .or_insert_with(|| format!("<id-{n}>"))
                    .clone();
            }
            Value::Object(map) => {
                if map.contains_key("startedAt") {
                    map.insert("startedAt".into(), json!(0));
                }
                for (_, v) in map.iter_mut() {
                    walk(v, ids);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, ids)),
            _ => {}
        }
    }
    events
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            walk(&mut v, &mut ids);
            v
        })
        .collect()
}

#[tokio::test]
async fn one_tool_round_trip_emits_mastras_order_and_json() {
    let model = Arc::new(round_trip_script());
    let agent = add_agent(model.clone());
    let stream = agent.stream("What is 2 + 3?").run_id("run-1").into_stream();
    let (events, result) = stream.collect().await;
    let result = result.unwrap();

    let types: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        types,
        [
            "start",
            "step-start",
            "tool-call-input-streaming-start",
            "tool-call-delta",
            "tool-call-input-streaming-end",
            "tool-call",
            "tool-result",
            "step-finish",
            "step-start",
            "text-start",
            "text-delta",
            "text-delta",
            "text-delta",
            "text-end",
            "step-finish",
            "finish",
        ]
    );

    let m1 = result.steps[0].message_id.clone();
    let m2 = result.steps[1].message_id.clone();
    let usage = |i: u64, o: u64| json!({"inputTokens": i, "outputTokens": o, "totalTokens": i + o});
    let ev = |t: &str, payload: Value| json!({"type": t, "runId": "run-1", "from": "AGENT", "payload": payload});
    let mut actual: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    for v in &mut actual {
        if let Some(p) = v["payload"].as_object_mut()
            && p.contains_key("startedAt")
        {
            assert!(p["startedAt"].as_u64().unwrap() > 1_600_000_000_000);
            p.insert("startedAt".into(), json!(0));
        }
    }
    let expected = vec![
        ev("start", json!({"id": "calculator", "messageId": m1})),
        ev(
            "step-start",
            json!({"messageId": m1, "startedAt": 0, "warnings": []}),
        ),
        ev(
            "tool-call-input-streaming-start",
            json!({"toolCallId": "call-1", "toolName": "add"}),
        ),
        ev(
            "tool-call-delta",
            json!({"toolCallId": "call-1", "toolName": "add", "argsTextDelta": "{\"a\":2,\"b\":3}"}),
        ),
        ev(
            "tool-call-input-streaming-end",
            json!({"toolCallId": "call-1"}),
        ),
        ev(
            "tool-call",
            json!({"toolCallId": "call-1", "toolName": "add", "args": {"a": 2, "b": 3}}),
        ),
        ev(
            "tool-result",
            json!({"toolCallId": "call-1", "toolName": "add", "args": {"a": 2, "b": 3}, "result": {"sum": 5}, "isError": false}),
        ),
        ev(
            "step-finish",
            json!({"messageId": m1, "stepResult": {"reason": "tool-calls", "isContinued": true}, "output": {"text": "", "usage": usage(10, 1)}}),
        ),
        ev(
            "step-start",
            json!({"messageId": m2, "startedAt": 0, "warnings": []}),
        ),
        ev("text-start", json!({"id": m2})),
        ev("text-delta", json!({"id": m2, "text": "2 + 3"})),
        ev("text-delta", json!({"id": m2, "text": " = "})),
        ev("text-delta", json!({"id": m2, "text": "5"})),
        ev("text-end", json!({"id": m2})),
        ev(
            "step-finish",
            json!({"messageId": m2, "stepResult": {"reason": "stop", "isContinued": false}, "output": {"text": "2 + 3 = 5", "usage": usage(10, 3)}}),
        ),
        ev(
            "finish",
            json!({"stepResult": {"reason": "stop", "isContinued": false}, "output": {"text": "2 + 3 = 5", "usage": usage(20, 4)}}),
        ),
    ];
    assert_eq!(actual, expected);

    // Each event's JSON reads back into the same event.
    for e in &events {
        let back: Event = serde_json::from_str(&e.to_json()).unwrap();
        assert_eq!(&back, e);
    }
    // The wire form starts with the type.
    assert!(
        events[0]
            .to_json()
            .starts_with("{\"type\":\"start\",\"runId\":\"run-1\"")
    );

    assert_eq!(result.text, "2 + 3 = 5");
    assert_eq!(result.run_id, "run-1");
    assert_eq!(result.tool_calls.len(), 1);
    assert_eq!(result.tool_results[0].result, json!({"sum": 5}));
    assert_eq!(result.usage.total_tokens, 24);

    // The second model call saw the instructions, the question, the call and its result.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let second = serde_json::to_value(&requests[1].messages).unwrap();
    assert_eq!(second[0]["role"], "system");
    assert_eq!(second[1]["parts"][0]["text"], "What is 2 + 3?");
    assert_eq!(second[2]["parts"][0]["type"], "tool-call");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["parts"][0]["result"], json!({"sum": 5}));
    assert_eq!(requests[0].tools[0].name, "add");
}

#[tokio::test]
async fn a_run_stopped_after_one_step_continues_elsewhere_with_the_same_events() {
    // Uninterrupted reference run.
    let reference = add_agent(Arc::new(round_trip_script()));
    let (all_events, all_result) = reference
        .stream("What is 2 + 3?")
        .run_id("run-x")
        .into_stream()
        .collect()
        .await;
    let all_result = all_result.unwrap();

    // Interrupted: one step, then the state goes through JSON into a fresh agent.
    let first = add_agent(Arc::new(round_trip_script()));
    let mut run = first
        .start_run("What is 2 + 3?", RunOptions::new().run_id("run-x"))
        .collect_events();
    assert!(
        run.step().await.unwrap(),
        "a second step follows the tool call"
    );
    let mut events = run.take_events();
    let json = serde_json::to_string(&run.into_state()).unwrap();
    drop(first);

    let state: RunState = serde_json::from_str(&json).unwrap();
    assert_eq!(state.version, kestrel_core::agent::RUN_STATE_VERSION);
    assert_eq!(state.steps.len(), 1);
    let second_model = Arc::new(
        ScriptedModel::new().respond(ScriptedResponse::text_deltas(["2 + 3", " = ", "5"])),
    );
    let fresh = add_agent(second_model.clone());
    let (rest, result) = fresh
        .continue_run(state, RunOptions::new())
        .unwrap()
        .into_stream()
        .collect()
        .await;
    events.extend(rest);
    let result = result.unwrap();

    assert_eq!(normalize(&events), normalize(&all_events));
    assert_eq!(result.text, all_result.text);
    assert_eq!(result.run_id, "run-x");
    assert_eq!(result.usage, all_result.usage);
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.tool_results, all_result.tool_results);
    assert_eq!(result.finish_reason, all_result.finish_reason);
    // The continued run sent the whole conversation to its model.
    assert_eq!(second_model.requests()[0].messages.len(), 4);
}

#[tokio::test]
async fn continuing_a_state_checks_version_agent_and_status() {
    let agent = add_agent(Arc::new(round_trip_script()));
    let mut run = agent.start_run("hi", RunOptions::new());
    run.step().await.unwrap();
    let state = run.into_state();

    let mut wrong_version = state.clone();
    wrong_version.version = 99;
    let err = agent
        .continue_run(wrong_version, RunOptions::new())
        .unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");

    let mut wrong_agent = state.clone();
    wrong_agent.agent_id = "other".into();
    let err = agent
        .continue_run(wrong_agent, RunOptions::new())
        .unwrap_err();
    assert!(err.to_string().contains("\"other\""), "{err}");

    let mut run = agent.continue_run(state, RunOptions::new()).unwrap();
    assert!(!run.step().await.unwrap());
    let finished = run.into_state();
    let err = agent.continue_run(finished, RunOptions::new()).unwrap_err();
    assert!(err.to_string().contains("already finished"), "{err}");
}
