//! What a supervisor's model reads of its delegations, and how later delegations reuse it.
//!
//! `cargo run -p kestrel --example supervisor_results`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then every agent runs on it).
//!
//! 1. By default the supervisor's model reads the sub-agent's final text only; with
//!    `include_sub_agent_tool_results_in_model_context` it also reads the sub-agent's tool
//!    calls and results. Either way the application gets the whole result (tool results,
//!    run id, thread) in `on_delegation_complete`.
//! 2. `enable_result_references`: each result comes back tagged `[ref: research-1]`; a later
//!    delegation names it in `contextFromRefs` and the writer receives the text verbatim, in a
//!    labelled block before its prompt (the start hook sees the expanded prompt).
//! 3. A failed delegation: `on_delegation_complete` replaces the generic failure text the
//!    supervisor's model reads with `result_text`; the delegation stays failed.

use std::sync::{Arc, Mutex};

use kestrel::agent::{DelegationCompleteOutcome, DelegationOptions, DelegationStartOutcome};
use kestrel::model::{ModelError, ModelRequest, ModelSpec};
use kestrel::prelude::*;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

/// The texts of the tool results the model has read so far.
fn results(req: &ModelRequest) -> Vec<String> {
    (req.messages.iter().filter(|m| m.role == Role::Tool))
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { result, .. } => Some(result.as_str().unwrap_or_default().into()),
            _ => None,
        })
        .collect()
}

/// What the supervisor's model read as the result of its first delegation.
fn first_result(run: &GenerateResult) -> String {
    let result = run.tool_results.first().map(|r| &r.result);
    result
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A researcher that looks facts up with a tool, then summarises them.
fn researcher() -> Result<Agent, Error> {
    let lookup = create_tool("lookup")
        .description("Looks a species up")
        .input_schema(json!({"type": "object", "properties": {"species": {"type": "string"}}}))
        .execute(|_: Value, _ctx| async { Ok("wingspan 70 cm; eats voles") });
    let script = ScriptedModel::from_fn(|req| match results(req).first() {
        None => ScriptedResponse::tool_call("l1", "lookup", json!({"species": "kestrel"})),
        Some(_) => ScriptedResponse::text("- Kestrels hover\n- They eat voles"),
    });
    Ok(Agent::builder("research")
        .description("Gathers facts and returns them as short bullet points.")
        .model(model_or(script))
        .tool(lookup)
        .build()?)
}

fn supervisor(script: ScriptedModel, agents: Vec<Agent>) -> Result<Agent, Error> {
    Ok(Agent::builder("supervisor")
        .instructions("Delegate research to agent-research and writing to agent-writing.")
        .model(model_or(script))
        .agents(agents)
        .build()?)
}

/// Delegates research once, then answers with what it read.
fn researches() -> ScriptedModel {
    ScriptedModel::from_fn(|req| match results(req).pop() {
        None => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "Kestrels"})),
        Some(result) => ScriptedResponse::text(result),
    })
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    println!("1. Sub-agent tool results in the supervisor's context");
    for include in [false, true] {
        let hooks = DelegationOptions::new()
            .include_sub_agent_tool_results_in_model_context(include)
            .on_delegation_complete(|done| async move {
                let tools = done.result.map(|r| r.sub_agent_tool_results.len());
                println!("   the hook sees {} tool result(s)", tools.unwrap_or(0));
                Ok(DelegationCompleteOutcome::keep())
            });
        let run = supervisor(researches(), vec![researcher()?])?
            .generate("Research kestrels")
            .delegation(hooks)
            .await?;
        let read = first_result(&run);
        println!("   include = {include}: the model read {read:?}");
        if read.contains("returned \"wingspan") != include {
            return Err("the sub-agent's tool results were not handled as asked".into());
        }
    }

    println!("\n2. Result references");
    let writer = Agent::builder("writing")
        .description("Turns research into one paragraph.")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Kestrels hover over the fields, hunting voles.")
        })))
        .build()?;
    let script = ScriptedModel::from_fn(|req| match results(req).len() {
        0 => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "Kestrels"})),
        // The model read "[ref: research-1]" after the research, and hands it on by its id.
        1 => ScriptedResponse::tool_call(
            "d2",
            "agent-writing",
            json!({
                "prompt": "Write a paragraph.",
                "contextFromRefs": [{"ref": "research-1", "as": "notes", "note": "facts to use"}],
            }),
        ),
        _ => ScriptedResponse::text(results(req)[1].clone()),
    });
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let seen = prompts.clone();
    let hooks = DelegationOptions::new()
        .enable_result_references(true)
        .on_delegation_start(move |start| {
            let seen = seen.clone();
            async move {
                seen.lock().map_err(|e| e.to_string())?.push(start.prompt);
                Ok(DelegationStartOutcome::proceed())
            }
        });
    let run = supervisor(script, vec![researcher()?, writer])?
        .generate("Write about kestrels")
        .delegation(hooks)
        .await?;
    let writer_prompt = prompts.lock().map_err(|e| e.to_string())?.pop();
    let writer_prompt = writer_prompt.unwrap_or_default();
    println!("   research came back as {:?}", first_result(&run));
    println!("   the writer received:\n{writer_prompt}");
    if !first_result(&run).ends_with("[ref: research-1]") || !writer_prompt.contains("eat voles") {
        return Err("the reference did not carry the research to the writer".into());
    }

    println!("\n3. Replacing a failed delegation's text");
    let broken = Agent::builder("research")
        .description("Gathers facts.")
        // This sub-agent always fails, whatever model is configured.
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::Scripted("upstream timeout at 10.0.0.7".into()))
        })))
        .build()?;
    let hooks = DelegationOptions::new().on_delegation_complete(|done| async move {
        println!("   hook: success {}, error {:?}", done.success, done.error);
        if done.success {
            return Ok(DelegationCompleteOutcome::keep());
        }
        // A message of your own, not the raw error (provider errors may hold secrets).
        Ok(DelegationCompleteOutcome::keep()
            .result_text("The research agent is unavailable. Try another approach."))
    });
    let run = supervisor(researches(), vec![broken])?
        .generate("Research kestrels")
        .delegation(hooks)
        .await?;
    let failed = run.tool_results.first().is_some_and(|r| r.is_error);
    println!(
        "   the model read {:?} (failed: {failed})",
        first_result(&run)
    );
    if !failed || !first_result(&run).contains("unavailable") {
        return Err("the failure text was not replaced, or the failure was lost".into());
    }
    Ok(())
}
