//! Tool calls inside a run: validation, failures the model sees, concurrency and ordering.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::event::EventKind;
use kestrel_core::message::Part;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::{ToolContext, ToolError, create_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct AddInput {
    a: i64,
    b: i64,
}

fn add_tool() -> kestrel_core::tool::FnTool {
    create_tool("add")
        .description("Adds two integers")
        .execute(|i: AddInput, _ctx| async move { Ok(i.a + i.b) })
}

/// The tool results the model received on its second call, in order.
fn results_seen_by_model(model: &ScriptedModel) -> Vec<(String, Value, bool)> {
    let requests = model.requests();
    let last = requests.last().unwrap();
    last.messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult {
                tool_call_id,
                result,
                is_error,
                ..
            } => Some((tool_call_id.clone(), result.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn bad_calls_become_tool_errors_the_model_sees() {
    let failing = create_tool("fails")
        .description("Always fails")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async move { Err::<Value, _>(ToolError::new("disk full")) });
    let panics = create_tool("panics")
        .description("Panics")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async move {
            if true {
                panic!("boom");
            }
            Ok(Value::Null)
        });
    let model = Arc::new(
        ScriptedModel::new()
            .respond(
                ScriptedResponse::raw_tool_call("c1", "add", "{\"a\": 1, ")
                    .and_tool_call("c2", "nope", "{}")
                    .and_tool_call("c3", "add", r#"{"a": "one", "b": 2}"#)
                    .and_tool_call("c4", "fails", "{}")
                    .and_tool_call("c5", "panics", "{}")
                    .and_tool_call("c6", "add", r#"{"a": 1, "b": 2}"#),
            )
            .respond(ScriptedResponse::text("done")),
    );
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(add_tool())
        .tool(failing)
        .tool(panics)
        .build()
        .unwrap();
    let (events, result) = agent.stream("go").into_stream().collect().await;
    let result = result.unwrap();
    assert_eq!(result.text, "done");

    let errors: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolError(p) => Some((p.tool_call_id.clone(), p.error.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert_eq!(errors[0].0, "c1");
    assert!(
        errors[0]
            .1
            .contains("Invalid JSON arguments for tool \"add\""),
        "{}",
        errors[0].1
    );
    assert!(
        errors[1]
            .1
            .contains("Tool \"nope\" not found. Available tools: add, fails, panics")
    );
    assert!(
        errors[2].1.contains("Invalid input for tool \"add\""),
        "{}",
        errors[2].1
    );
    assert!(
        errors[2].1.contains("/a"),
        "names the offending field: {}",
        errors[2].1
    );
    assert_eq!(errors[3].1, "disk full");
    assert!(errors[4].1.contains("panicked"));

    // The invalid JSON is carried as the raw text in the tool-call event.
    let raw = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCall(p) if p.tool_call_id == "c1" => Some(p.args.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(raw, json!("{\"a\": 1, "));

    let seen = results_seen_by_model(&model);
    let ids: Vec<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6"]);
    assert!(seen[..5].iter().all(|(_, _, err)| *err));
    assert_eq!(seen[5], ("c6".into(), json!(3), false));
}

#[tokio::test]
async fn tool_calls_of_one_step_run_concurrently_and_keep_the_models_order() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (i2, p2) = (in_flight.clone(), peak.clone());
    let slow = create_tool("slow")
        .description("Sleeps then echoes")
        .input_schema(json!({"type": "object", "properties": {"ms": {"type": "integer"}}}))
        .execute(move |input: Value, _ctx| {
            let (in_flight, peak) = (i2.clone(), p2.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap())).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(input["ms"].clone())
            }
        });
    let script = || {
        ScriptedModel::new()
            .respond(
                ScriptedResponse::tool_call("a", "slow", json!({"ms": 80}))
                    .and_tool_call("b", "slow", r#"{"ms": 10}"#)
                    .and_tool_call("c", "slow", r#"{"ms": 40}"#),
            )
            .respond(ScriptedResponse::text("ok"))
    };

    let model = Arc::new(script());
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(slow.clone())
        .build()
        .unwrap();
    let (events, result) = agent.stream("go").into_stream().collect().await;
    result.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 3, "all three calls overlapped");
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(p) => Some(p.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["a", "b", "c"], "results keep the model's order");
    let seen: Vec<String> = results_seen_by_model(&model)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(seen, ["a", "b", "c"]);

    // With a limit of one, calls never overlap.
    peak.store(0, Ordering::SeqCst);
    let agent = Agent::builder("t")
        .model(Arc::new(script()))
        .tool(slow)
        .build()
        .unwrap();
    agent.generate("go").tool_concurrency(1).await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_get_run_identity_request_context_and_a_writer() {
    let probe = create_tool("probe")
        .description("Reports its context")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, ctx: ToolContext| async move {
            ctx.writer().write(json!({"progress": 50})).await?;
            ctx.request_context().set("seen-by-tool", true);
            Ok(json!({
                "runId": ctx.run_id(),
                "toolCallId": ctx.tool_call_id(),
                "thread": ctx.thread_id(),
                "resource": ctx.resource_id(),
                "user": ctx.request_context().get("user"),
            }))
        });
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call("p1", "probe", json!({})))
            .respond(ScriptedResponse::text("ok")),
    );
    let agent = Agent::builder("t")
        .model(model)
        .tool(probe)
        .build()
        .unwrap();
    let ctx = kestrel_core::context::RequestContext::new();
    ctx.set("user", "ada");
    let (events, result) = agent
        .stream("go")
        .run_id("r-9")
        .request_context(ctx.clone())
        .memory("thread-1", "user-1")
        .into_stream()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(
        result.tool_results[0].result,
        json!({"runId": "r-9", "toolCallId": "p1", "thread": "thread-1", "resource": "user-1", "user": "ada"})
    );
    assert_eq!(ctx.get("seen-by-tool"), Some(json!(true)));
    let output = events
        .iter()
        .position(
            |e| matches!(&e.kind, EventKind::ToolOutput(p) if p.output == json!({"progress": 50})),
        )
        .expect("tool-output event");
    let result_at = events
        .iter()
        .position(|e| e.type_name() == "tool-result")
        .unwrap();
    assert!(output < result_at);
    assert_eq!(
        events[output].to_json(),
        r#"{"type":"tool-output","runId":"r-9","from":"AGENT","payload":{"toolCallId":"p1","toolName":"probe","output":{"progress":50}}}"#
    );
}

#[tokio::test]
async fn a_tool_can_be_executed_on_its_own() {
    use kestrel_core::tool::Tool;
    let tool = add_tool();
    let out = tool
        .execute(json!({"a": 4, "b": 5}), ToolContext::standalone("add"))
        .await
        .unwrap();
    assert_eq!(out, json!(9));
    assert_eq!(tool.input_schema()["type"], "object");
    assert_eq!(tool.input_schema()["required"], json!(["a", "b"]));
}

/// A tool as a struct, with its own error type.
struct Divide {
    calls: Arc<AtomicUsize>,
}

#[derive(Deserialize, JsonSchema)]
struct DivideInput {
    a: i64,
    b: i64,
}

#[derive(Debug, thiserror::Error)]
enum DivideError {
    #[error("cannot divide {0} by zero")]
    ByZero(i64),
}

impl kestrel_core::tool::TypedTool for Divide {
    const NAME: &'static str = "divide";
    const DESCRIPTION: &'static str = "Divides a by b";
    type Input = DivideInput;
    type Output = i64;
    type Error = DivideError;

    async fn call(&self, input: DivideInput, _ctx: ToolContext) -> Result<i64, DivideError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if input.b == 0 {
            return Err(DivideError::ByZero(input.a));
        }
        Ok(input.a / input.b)
    }
}

#[tokio::test]
async fn a_typed_tool_validates_its_input_and_reports_its_own_errors() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(
        ScriptedModel::new()
            .respond(
                ScriptedResponse::tool_call("c1", "divide", json!({"a": 9, "b": 3}))
                    .and_tool_call("c2", "divide", r#"{"a": 1, "b": 0}"#)
                    .and_tool_call("c3", "divide", r#"{"a": "nine", "b": 3}"#),
            )
            .respond(ScriptedResponse::text("done")),
    );
    let agent = Agent::builder("calculator")
        .model(model.clone())
        .tool(Divide {
            calls: calls.clone(),
        })
        .build()
        .unwrap();
    let definition = &agent.tools().definitions()[0];
    assert_eq!(definition.name, "divide");
    assert_eq!(definition.description, "Divides a by b");
    assert_eq!(definition.input_schema["required"], json!(["a", "b"]));

    let result = agent.generate("divide").await.unwrap();
    assert_eq!(result.text, "done");
    let seen = results_seen_by_model(&model);
    assert_eq!(seen[0], ("c1".into(), json!(3), false));
    assert_eq!(
        seen[1],
        ("c2".into(), json!("cannot divide 1 by zero"), true)
    );
    // The schema refused the third call before the tool ran.
    assert!(seen[2].2, "{:?}", seen[2]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
