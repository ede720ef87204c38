//! The supervisor pattern: a parent agent delegates research and writing to two sub-agents.
//!
//! `cargo run -p kestrel --example supervisor`
//!
//! Without configuration, scripted models play the three LLMs so the example runs the same
//! everywhere. With `KESTREL_MODEL` set (say `openai/gpt-5-mini` and `OPENAI_API_KEY`), the
//! agents run on that model instead.
//!
//! What it shows: the sub-agents as `agent-research` / `agent-writing` tools, a start hook that
//! sharpens the research prompt and passes a value through the request context, a complete hook
//! that watches every delegation, and the sub-agents' events arriving nested under each
//! delegation's tool call.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::agent::{
    DelegationCompleteOutcome, DelegationOptions, DelegationStartOutcome, MessageFilterContext,
};
use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use serde_json::json;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

fn tool_results(req: &kestrel::model::ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { result, .. } => result.as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let research = Agent::builder("research")
        .description("Gathers facts on a topic and returns them as short bullet points.")
        .instructions("You research topics. Answer with three short bullet points.")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text_deltas([
                "- Kestrels hover in the wind\n",
                "- They hunt voles\n",
                "- They nest in cavities",
            ])
        })))
        .build()?;
    let writing = Agent::builder("writing")
        .description("Turns notes into one polished paragraph.")
        .instructions("You write one short paragraph from the notes you are given.")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text(
                "Kestrels hang in the wind above the fields, watching for voles, and raise \
                 their young in cavities.",
            )
        })))
        .build()?;
    let supervisor = Agent::builder("supervisor")
        .instructions(
            "You coordinate. Delegate research to agent-research, then ask agent-writing for \
             a paragraph from the findings, then give the paragraph to the user.",
        )
        .model(model_or(ScriptedModel::from_fn(|req| {
            let results = tool_results(req);
            match results.len() {
                0 => ScriptedResponse::tool_call(
                    "call-research",
                    "agent-research",
                    json!({"prompt": "Facts about the common kestrel"}),
                ),
                1 => ScriptedResponse::tool_call(
                    "call-writing",
                    "agent-writing",
                    json!({"prompt": format!("Write a paragraph from these notes:\n{}", results[0])}),
                ),
                _ => ScriptedResponse::text(results[1].clone()),
            }
        })))
        .agents([research, writing])
        .build()?;

    let hooks = DelegationOptions::new()
        .on_delegation_start(|start| async move {
            println!(
                "→ delegating to {} (step {})",
                start.primitive_id, start.iteration
            );
            start.request_context.set("audience", "birdwatchers");
            if start.primitive_id == "research" {
                let prompt = format!(
                    "{}\n\nKeep it to facts a birdwatcher can check.",
                    start.prompt
                );
                return Ok(DelegationStartOutcome::proceed()
                    .prompt(prompt)
                    .max_steps(3));
            }
            Ok(DelegationStartOutcome::proceed())
        })
        .message_filter(|ctx: MessageFilterContext| async move {
            // Sub-agents get the user's words, not the supervisor's own chatter.
            Ok(ctx
                .messages
                .into_iter()
                .filter(|m| m.role == Role::User)
                .collect())
        })
        .on_delegation_complete(|done| async move {
            let words = done
                .result
                .as_ref()
                .map_or(0, |r| r.text.split_whitespace().count());
            println!(
                "← {} answered ({words} words, success: {})",
                done.primitive_id, done.success
            );
            Ok(DelegationCompleteOutcome::keep())
        });

    let mut stream = supervisor
        .stream("Write me a paragraph about kestrels.")
        .delegation(hooks)
        .into_stream();
    let mut nested = 0;
    while let Some(event) = stream.next().await {
        if let EventKind::ToolOutput(output) = &event.kind {
            // A sub-agent's own event, under the delegation's tool call id.
            if output.output["type"] == "text-delta" {
                nested += 1;
            }
        }
    }
    let result = stream.result().await?;
    println!("\n{}\n", result.text);
    println!(
        "({} steps, {nested} text deltas streamed from the sub-agents)",
        result.steps.len()
    );
    Ok(())
}
