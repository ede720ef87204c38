//! An agent network: the `coordinator` agent's routing agent hands the task, iteration by
//! iteration, to its sub-agent (`researcher`), its workflow (`word-count`) or its tool
//! (`shout`), says why each time, and stops when it finds the task done. The stream shows
//! each routing decision, the primitive's own output and each completion check.
//!
//! `cargo run -p kestrel --example network --features sqlite`
//!
//! Without configuration scripted models play the LLMs (the routing decisions below are
//! theirs), so the example runs the same everywhere; with `KESTREL_MODEL` set (say
//! `openai/gpt-5-mini` and `OPENAI_API_KEY`) every agent runs on that model and decides for
//! itself.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::event::EventKind;
use kestrel::memory::Memory;
use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use kestrel::storage::InMemoryStorage;
use kestrel::workflow::{Workflow, create_step};
use serde_json::{Value, json};

/// `KESTREL_MODEL`, else these scripted answers, in order.
fn model(script: &[Value]) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script.iter().fold(
            ScriptedModel::new(),
            |m, r| {
                m.respond(ScriptedResponse::text(match r {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                }))
            },
        ))),
    }
}

fn route(id: &str, kind: &str, prompt: &str, reason: &str) -> Value {
    json!({"primitiveId": id, "primitiveType": kind, "prompt": prompt, "selectionReason": reason})
}

fn check(done: bool, reason: &str) -> Value {
    json!({"isComplete": done, "completionReason": reason, "finalResult": ""})
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let researcher = Agent::builder("researcher")
        .description("Finds one fact about a subject")
        .instructions("Give one short fact about the subject you are asked about.")
        .model(model(&[json!(
            "Kestrels hover by flying into the wind at the speed it blows."
        )]))
        .build()?;
    let count = create_step("count").execute(|input: Value, _ctx| async move {
        let words = input["text"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .count();
        Ok(json!({"words": words}))
    });
    let word_count = Workflow::builder("word-count")
        .description("Counts the words of a text")
        .input_schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }))
        .then(count)
        .commit()?;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Shout {
        /// The text to shout.
        text: String,
    }
    let shout = create_tool("shout")
        .description("Upper-cases a text")
        .execute(|input: Shout, _ctx| async move { Ok(input.text.to_uppercase()) });

    let fact = "Kestrels hover by flying into the wind at the speed it blows.";
    let coordinator = Agent::builder("coordinator")
        .instructions("Answer with one fact, its word count, and the fact shouted.")
        .model(model(&[
            route(
                "researcher",
                "agent",
                "One fact about kestrels",
                "the researcher finds facts",
            ),
            check(false, "the word count is missing"),
            route(
                "word-count",
                "workflow",
                &json!({"text": fact}).to_string(),
                "counting is a workflow",
            ),
            check(false, "the fact is not shouted yet"),
            route(
                "shout",
                "tool",
                &json!({"text": fact}).to_string(),
                "shout upper-cases",
            ),
            check(false, "all three parts are there; the router will say so"),
            route(
                "none",
                "none",
                "",
                "the fact, its 12 words and the shouted fact are all there",
            ),
        ]))
        .memory(Memory::default())
        .agents([researcher])
        .workflow(word_count)
        .tool(shout)
        .storage(InMemoryStorage::new())
        .build()?;

    let mut stream = coordinator
        .network("Tell me a fact about kestrels, count its words and shout it")
        .memory("network-demo", "user-1")
        .max_steps(5)
        .await?;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::RoutingAgentEnd(end) => println!(
                "[{}] route to {} {:?}: {}",
                end.decision.iteration,
                end.decision.primitive_type.as_str(),
                end.decision.primitive_id,
                end.decision.selection_reason
            ),
            EventKind::AgentExecutionEnd(end) => println!("    agent said: {}", end.result),
            EventKind::WorkflowExecutionEnd(end) => {
                println!("    workflow gave: {}", end.result["result"])
            }
            EventKind::ToolExecutionEnd(end) => println!("    tool gave: {}", end.result),
            EventKind::NetworkValidationEnd(check) => println!(
                "    complete? {} ({})",
                check.passed,
                check.reason.as_deref().unwrap_or("")
            ),
            EventKind::NetworkFinish(finish) => {
                println!(
                    "done after {} iterations: {}",
                    finish.iteration + 1,
                    finish.result
                )
            }
            _ => {}
        }
    }
    let result = stream.result().await?;
    assert_eq!(result.status, kestrel::network::NetworkStatus::Complete);
    Ok(())
}
