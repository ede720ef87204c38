//! Sub-agents as tools: the delegation tool's shape, what the sub-agent receives (the parent's
//! conversation as text, the prompt, a copy of the request context), what the parent model sees
//! (the text only, or a generic failure), nested streaming, abort propagation and the depth
//! limit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The tests, by topic; the agents and helpers they share are here.
mod hooks;
mod results;
mod sub_agents;

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use serde_json::json;

/// The tool results the model reads last, joined.
fn last_results(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last()?;
    (last.role == Role::Tool).then(|| {
        last.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult {
                    result, is_error, ..
                } => Some(format!(
                    "{}{}",
                    if *is_error { "error: " } else { "" },
                    result.as_str().unwrap_or_default()
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" | ")
    })
}

fn tool_messages(req: &ModelRequest) -> usize {
    req.messages.iter().filter(|m| m.role == Role::Tool).count()
}

/// A supervisor that delegates to research, then to writing, then answers with both results.
fn supervisor(research: Agent, writing: Agent) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(|req| match tool_messages(req) {
        0 => ScriptedResponse::tool_call(
            "d1",
            "agent-research",
            json!({"prompt": "Find facts about kestrels"}),
        ),
        1 => ScriptedResponse::tool_call(
            "d2",
            "agent-writing",
            json!({"prompt": "Write one line from the facts"}),
        ),
        _ => {
            let results: Vec<String> = req
                .messages
                .iter()
                .filter(|m| m.role == Role::Tool)
                .flat_map(|m| m.parts.iter())
                .filter_map(|p| match p {
                    Part::ToolResult { result, .. } => result.as_str().map(str::to_owned),
                    _ => None,
                })
                .collect();
            ScriptedResponse::text(format!("final: {}", results.join(" + ")))
        }
    }));
    let agent = Agent::builder("supervisor")
        .instructions("Delegate.")
        .model(model.clone())
        .agents([research, writing])
        .build()
        .unwrap();
    (agent, model)
}

fn sub_agent(id: &str, description: &str, answer: &'static str) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(move |_| {
        ScriptedResponse::text_deltas([answer, "."])
    }));
    let agent = Agent::builder(id)
        .description(description)
        .instructions(format!("You are the {id} agent."))
        .model(model.clone())
        .build()
        .unwrap();
    (agent, model)
}
