//! A server's questions answered through suspend and resume: server-everything asks with
//! `elicitation/create` while its tool call is in flight (the `initialize` era); the run
//! suspends with an [`McpElicitation`], and a resume answers it. Its progress notifications
//! reach the run's stream as `tool-output` events.

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::event::EventKind;
use kestrel_core::model::{FinishReason, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::SharedTool;
use kestrel_mcp::{McpClient, McpElicitation, McpServerConfig};
use serde_json::{Value, json};

use super::everything::everything;

/// A model that calls `tool` with `args`, then answers with the tool's result.
fn model(tool: &str, args: Value) -> Arc<ScriptedModel> {
    let tool = tool.to_owned();
    Arc::new(ScriptedModel::from_fn(move |req| {
        let result = req.messages.last().and_then(|m| {
            m.parts.iter().find_map(|p| match p {
                kestrel_core::message::Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
        });
        match result {
            Some(result) => ScriptedResponse::text(format!("result: {result}")),
            None => ScriptedResponse::tool_call("call-1", tool.clone(), args.clone()),
        }
    }))
}

fn agent(tools: &[SharedTool], tool: &str, args: Value) -> Agent {
    Agent::builder("asker")
        .model(model(tool, args))
        .tools(tools.iter().cloned())
        .build()
        .unwrap()
}

/// The question a suspended run asks.
fn question(events: &[kestrel_core::event::Event]) -> McpElicitation {
    let suspended = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallSuspended(p) => Some(p),
            _ => None,
        })
        .expect("the run suspended");
    let schema: Value = serde_json::from_str(&suspended.resume_schema).unwrap();
    assert_eq!(
        schema["properties"]["action"]["enum"],
        json!(["accept", "decline", "cancel"])
    );
    serde_json::from_value(suspended.suspend_payload.clone()).unwrap()
}

/// A client of server-everything over stdio, and its tools (none when the JS tests are off).
async fn everything_over_stdio() -> Option<(McpClient, Vec<SharedTool>)> {
    let bin = everything()?;
    let mcp = McpClient::builder()
        .server(
            "everything",
            McpServerConfig::stdio(bin.to_string_lossy()).arg("stdio"),
        )
        .build()
        .unwrap();
    let tools = mcp.list_tools().await.unwrap();
    Some((mcp, tools))
}

#[tokio::test]
async fn server_everything_asks_and_a_resume_answers() {
    let Some((mcp, tools)) = everything_over_stdio().await else {
        return;
    };
    let tool = "everything_trigger-elicitation-request";
    assert!(
        tools.iter().any(|t| t.id() == tool),
        "the client declares elicitation"
    );
    let asker = agent(&tools, tool, json!({}));

    let (events, stopped) = asker.stream("ask me").into_stream().collect().await;
    let stopped = stopped.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let asked = question(&events);
    assert_eq!(asked.kind, McpElicitation::TYPE);
    assert_eq!(asked.server, "everything");
    assert_eq!(asked.tool, "trigger-elicitation-request");
    assert_eq!(asked.mode, "form");
    assert!(
        asked.message.contains("Please provide"),
        "{}",
        asked.message
    );
    let schema = asked.requested_schema.clone().unwrap();
    assert_eq!(schema["required"], json!(["name"]), "{schema}");

    // An answer outside the form's shape asks again, saying why.
    let run = asker.run(&stopped.run_id);
    let (events, again) = run
        .resume(
            "call-1",
            json!({"action": "accept", "content": {"integer": 7}}),
        )
        .stream()
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(again.unwrap().finish_reason, FinishReason::Suspended);
    let asked_again = question(&events);
    assert!(
        asked_again
            .invalid_answer
            .iter()
            .any(|e| e.contains("name")),
        "{:?}",
        asked_again.invalid_answer
    );

    let done = run
        .resume(
            "call-1",
            json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true, "integer": 7}}),
        )
        .await
        .unwrap();
    assert!(done.text.contains("Name: Ada Lovelace"), "{}", done.text);
    assert!(done.text.contains("Favorite Integer: 7"), "{}", done.text);

    // Declining is an answer too.
    let (_, stopped) = asker.stream("ask me again").into_stream().collect().await;
    let stopped = stopped.unwrap();
    let done = asker
        .run(&stopped.run_id)
        .resume("call-1", json!({"action": "decline"}))
        .await
        .unwrap();
    assert!(done.text.contains("declined"), "{}", done.text);
    mcp.disconnect().await;
}

#[tokio::test]
async fn server_everything_progress_reaches_the_stream() {
    let Some((mcp, tools)) = everything_over_stdio().await else {
        return;
    };
    let asker = agent(
        &tools,
        "everything_trigger-long-running-operation",
        json!({"duration": 0.3, "steps": 3}),
    );
    let (events, done) = asker.stream("work").into_stream().collect().await;
    assert_eq!(done.unwrap().finish_reason, FinishReason::Stop);
    let progress: Vec<&Value> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolOutput(p) if p.output["type"] == "mcp-progress" => Some(&p.output),
            _ => None,
        })
        .collect();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert_eq!(progress[2]["progress"], json!(3.0), "{progress:?}");
    assert_eq!(progress[2]["total"], json!(3.0), "{progress:?}");
    assert_eq!(progress[0]["server"], "everything");
    mcp.disconnect().await;
}
