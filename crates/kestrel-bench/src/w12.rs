//! W12: an agent network of three iterations — a sub-agent, a workflow, a tool — then the
//! router's `none`, on scripted models, sequential runs. The network agent's memory is
//! kestrel-memory's `Memory` over the in-memory store (a network needs one; SQLite's cost is
//! W4's), each run on a thread of its own. Every iteration also runs the default completion
//! check, as Mastra's does: 4 routing calls, 3 checks and the sub-agent's call, 8 model calls
//! a run.

use std::sync::Arc;

use kestrel::memory::Memory;
use kestrel::model::{ModelRequest, ResponseFormat};
use kestrel::network::NetworkStatus;
use kestrel::prelude::*;
use kestrel::storage::InMemoryStorage;
use kestrel::workflow::{Workflow, create_step};
use serde_json::{Value, json};

fn router_answer(request: &ModelRequest) -> ScriptedResponse {
    let asked = match &request.response_format {
        Some(ResponseFormat::Json { name, .. }) => name.as_deref(),
        _ => None,
    };
    let records = request
        .messages
        .iter()
        .filter(|m| m.text().contains("\"isNetwork\":true"))
        .count();
    let answer = match (asked, records) {
        (Some("completion"), _) => {
            json!({"isComplete": false, "completionReason": "go on", "finalResult": ""})
        }
        (_, 0) => {
            json!({"primitiveId": "research", "primitiveType": "agent", "prompt": "facts", "selectionReason": "facts first"})
        }
        (_, 1) => {
            json!({"primitiveId": "count", "primitiveType": "workflow", "prompt": "{\"text\": \"a b c\"}", "selectionReason": "count them"})
        }
        (_, 2) => {
            json!({"primitiveId": "shout", "primitiveType": "tool", "prompt": "{\"text\": \"done\"}", "selectionReason": "shout it"})
        }
        _ => {
            json!({"primitiveId": "none", "primitiveType": "none", "prompt": "", "selectionReason": "done"})
        }
    };
    ScriptedResponse::text(answer.to_string())
}

fn network_agent() -> Result<Agent, Box<dyn std::error::Error>> {
    let research = Agent::builder("research")
        .description("Finds facts")
        .model(Arc::new(
            ScriptedModel::from_fn(|_| ScriptedResponse::text_deltas(super::DELTAS))
                .without_recording(),
        ))
        .build()?;
    let words = create_step("words").execute(|input: Value, _ctx| async move {
        Ok(json!({"words": input["text"].as_str().unwrap_or_default().split_whitespace().count()}))
    });
    let count = Workflow::builder("count")
        .description("Counts words")
        .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .then(words)
        .commit()?;
    let shout = create_tool("shout")
        .description("Upper-cases a text")
        .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .execute(|input: Value, _ctx| async move {
            Ok(input["text"].as_str().unwrap_or_default().to_uppercase())
        });
    Ok(Agent::builder("network")
        .instructions("You route.")
        .model(Arc::new(
            ScriptedModel::from_fn(router_answer).without_recording(),
        ))
        .memory(Memory::new(Arc::new(InMemoryStorage::new())))
        .agents([research])
        .workflow(count)
        .tool(shout)
        .build()?)
}

/// W12, printing the median µs per run.
pub(crate) async fn w12(runs: usize, batches: usize) -> Result<(), Box<dyn std::error::Error>> {
    let agent = network_agent()?;
    let mut n = 0usize;
    super::per_run_batches(
        "w12 network (agent, workflow, tool, then none; 8 model calls)",
        runs,
        batches,
        || {
            n += 1;
            let agent = agent.clone();
            let thread = format!("t{n}");
            async move {
                let result = agent
                    .network("Research, count and shout")
                    .memory(thread, "bench")
                    .max_steps(4)
                    .result()
                    .await?;
                debug_assert_eq!(result.status, NetworkStatus::Complete);
                debug_assert_eq!(result.iteration, 3);
                if result.status != NetworkStatus::Complete {
                    return Err(format!(
                        "the network ended {:?}: {:?}",
                        result.status, result.error
                    )
                    .into());
                }
                Ok(())
            }
        },
    )
    .await
}
