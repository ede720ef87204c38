//! Delegation hooks: change or refuse a delegation, choose what the sub-agent sees, stop the
//! supervisor with feedback for the next turn, and what happens when a hook itself fails.
//!
//! `cargo run -p kestrel --features memory --example supervisor_hooks`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then every agent runs on it,
//! except the sub-agent of part 3, which always fails).
//!
//! 1. `on_delegation_start` rewrites the research prompt and limits its steps, and refuses
//!    delegations after the second iteration: the supervisor reads the reason and synthesises.
//! 2. `message_filter` keeps messages marked confidential (and all but the last ten) away
//!    from the sub-agent.
//! 3. `on_delegation_complete` with `bail()` and feedback: a failed delegation stops the loop
//!    at once; the feedback is saved to the supervisor's thread and read on the next turn.
//! 4. A failing hook is skipped by default; with `HookErrorStrategy::Throw` the delegation
//!    fails instead. Either way the failure is recorded in the run's request context.

use std::sync::Arc;

use kestrel::agent::delegation::DELEGATION_HOOK_ERRORS_KEY;
use kestrel::agent::{
    DelegationCompleteOutcome, DelegationOptions, DelegationStartOutcome, HookErrorStrategy,
};
use kestrel::memory::Memory;
use kestrel::model::{ModelError, ModelRequest, ModelSpec};
use kestrel::prelude::*;
use kestrel::storage::InMemoryStorage;
use serde_json::json;

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

/// A researcher that tells what it was given: the supervisor's conversation, then the prompt.
fn researcher() -> Result<Agent, Error> {
    let script = ScriptedModel::from_fn(|req| {
        let seen: Vec<String> = (req.messages.iter().filter(|m| m.role != Role::System))
            .map(Message::text)
            .collect();
        ScriptedResponse::text(format!("I was given: {}", seen.join(" / ")))
    });
    Ok(Agent::builder("research")
        .description("Gathers facts on a topic.")
        .model(model_or(script))
        .build()?)
}

/// Delegates to research once, then answers with what it read; if its thread holds feedback
/// about a failure, it answers without delegating.
fn delegates_once() -> ScriptedModel {
    ScriptedModel::from_fn(|req| {
        let feedback =
            (req.messages.iter()).find(|m| m.role == Role::System && m.text().contains("failed"));
        if let Some(feedback) = feedback {
            return ScriptedResponse::text(format!(
                "Noted \"{}\" I answer from what I know.",
                feedback.text()
            ));
        }
        match results(req).pop() {
            None => {
                ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "AI trends"}))
            }
            Some(result) => ScriptedResponse::text(format!("read: {result}")),
        }
    })
}

fn supervisor(script: ScriptedModel, research: Agent) -> Result<Agent, Error> {
    Ok(Agent::builder("supervisor")
        .instructions("Delegate research to agent-research, then answer from its findings.")
        .model(model_or(script))
        .agents([research])
        .memory(Memory::default())
        .storage(InMemoryStorage::new())
        .max_steps(10)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    println!("1. on_delegation_start");
    // Delegates until a delegation is refused, then synthesises.
    let script = ScriptedModel::from_fn(|req| match results(req).last() {
        Some(last) if last.contains("rejected") => {
            ScriptedResponse::text(format!("Synthesis. ({last})"))
        }
        _ => ScriptedResponse::tool_call(
            format!("d{}", results(req).len()),
            "agent-research",
            json!({"prompt": "AI trends"}),
        ),
    });
    let hooks = DelegationOptions::new().on_delegation_start(|start| async move {
        println!(
            "   delegating to {} (iteration {})",
            start.primitive_id, start.iteration
        );
        if start.iteration > 1 {
            return Ok(DelegationStartOutcome::reject(
                "Max iterations reached. Synthesize current findings.",
            ));
        }
        let prompt = format!("{}. Focus on 2024-2025 data.", start.prompt);
        Ok(DelegationStartOutcome::proceed()
            .prompt(prompt)
            .max_steps(5))
    });
    let run = supervisor(script, researcher()?)?
        .generate("Research AI trends")
        .delegation(hooks)
        .await?;
    let first = run.tool_results.first().and_then(|r| r.result.as_str());
    println!(
        "   first result: {}\n   answer: {}\n",
        first.unwrap_or(""),
        run.text
    );
    if run.tool_results.len() != 3 || !run.text.contains("Max iterations reached") {
        return Err("the start hook did not change and then refuse the delegations".into());
    }

    println!("2. message_filter");
    let hooks = DelegationOptions::new().message_filter(|ctx| async move {
        let kept: Vec<Message> = (ctx.messages.into_iter())
            .filter(|m| !m.text().contains("confidential"))
            .collect();
        Ok(kept[kept.len().saturating_sub(10)..].to_vec())
    });
    let input = vec![
        Message::user("Internal note, confidential: the budget is 2M."),
        Message::user("Research AI trends."),
    ];
    let run = supervisor(delegates_once(), researcher()?)?
        .generate(input)
        .delegation(hooks)
        .await?;
    println!("   {}\n", run.text);
    if run.text.contains("confidential") {
        return Err("the filtered message reached the sub-agent".into());
    }

    println!("3. bail() and feedback");
    let broken = Agent::builder("research")
        .description("Gathers facts on a topic.")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::Scripted("upstream down".into()))
        })))
        .build()?;
    let hooks = DelegationOptions::new().on_delegation_complete(|done| async move {
        println!(
            "   completed: {} (success: {})",
            done.primitive_id, done.success
        );
        match done.error {
            Some(_) => Ok(DelegationCompleteOutcome::keep().bail().feedback(format!(
                "Delegation to {} failed. Try a different approach.",
                done.primitive_id
            ))),
            None => Ok(DelegationCompleteOutcome::keep()),
        }
    });
    let agent = supervisor(delegates_once(), broken)?;
    let options = || {
        RunOptions::new()
            .memory("thread-1", "user-1")
            .delegation(hooks.clone())
    };
    let first = agent
        .generate("Research AI trends")
        .options(options())
        .await?;
    println!("   the loop stopped after {} step", first.steps.len());
    let next = agent.generate("Any news?").options(options()).await?;
    println!("   next turn: {}\n", next.text);
    if first.steps.len() != 1 || !next.text.contains("Try a different approach") {
        return Err("bail() did not stop the loop, or the feedback was not saved".into());
    }

    println!("4. A failing hook");
    for strategy in [HookErrorStrategy::Continue, HookErrorStrategy::Throw] {
        let hooks = DelegationOptions::new()
            .hook_error_strategy(strategy)
            .on_delegation_complete(|_| async { Err("the analytics service is down".into()) });
        let context = RequestContext::new();
        let options = RunOptions::new()
            .delegation(hooks)
            .request_context(context.clone());
        let run = supervisor(delegates_once(), researcher()?)?
            .generate("Research AI trends")
            .options(options)
            .await?;
        let errors = context.get(DELEGATION_HOOK_ERRORS_KEY).unwrap_or_default();
        println!("   {strategy:?}: {}\n   recorded: {errors}", run.text);
        let failed = run.tool_results.first().is_some_and(|r| r.is_error);
        if failed != (strategy == HookErrorStrategy::Throw)
            || errors[0]["hook"] != "onDelegationComplete"
        {
            return Err("the hook failure was not handled as its strategy says".into());
        }
    }
    Ok(())
}
