//! Steering a supervisor's loop between iterations, and deciding when its task is done.
//!
//! `cargo run -p kestrel --example supervisor_iteration`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then the agents, and the
//! rubric's judge, run on it).
//!
//! 1. `on_iteration_complete` sees each iteration (its number, the step limit, why the model
//!    stopped, its text); feedback after an answer asks the model for another iteration.
//! 2. `is_task_complete` judges each final answer with scorers: a custom one, and the rubric
//!    scorer, an LLM judge over a list of criteria. Until both pass, their feedback enters the
//!    conversation and the loop goes on (within `max_steps`).

use std::sync::Arc;

use kestrel::agent::iteration::{
    CompletionStrategy, IterationDecision, RubricScorer, Score, ScorerFn, TaskCompletion,
};
use kestrel::model::{ModelRequest, ModelSpec};
use kestrel::prelude::*;
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

/// Whether the model was given feedback (a `[feedback] ...` message, from a hook or a scorer).
fn has_feedback(req: &ModelRequest) -> bool {
    (req.messages.iter()).any(|m| m.role == Role::User && m.text().starts_with("[feedback]"))
}

/// A supervisor that asks its researcher for facts, then answers with an analysis; once it has
/// been given feedback, the analysis ends with a recommendation.
fn supervisor() -> Result<Agent, Error> {
    let research = Agent::builder("research")
        .description("Gathers facts and returns them as short bullet points.")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("- Kestrels hover\n- They need field margins to hunt voles")
        })))
        .build()?;
    let script = ScriptedModel::from_fn(|req| {
        let researched = req.messages.iter().any(|m| m.role == Role::Tool);
        match (researched, has_feedback(req)) {
            (false, _) => ScriptedResponse::tool_call(
                "d1",
                "agent-research",
                json!({"prompt": "Facts about kestrels and farmland"}),
            ),
            (true, false) => ScriptedResponse::text("Analysis: kestrels hunt over field margins."),
            (true, true) => ScriptedResponse::text(
                "Analysis: kestrels hunt over field margins. Recommendation: leave margins uncut.",
            ),
        }
    });
    Ok(Agent::builder("supervisor")
        .instructions(
            "You coordinate research. Delegate fact finding to agent-research, then answer \
             with an analysis of the findings.",
        )
        .model(model_or(script))
        .agents([research])
        .max_steps(6)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    println!("1. on_iteration_complete");
    let options = RunOptions::new().on_iteration_complete(|it| async move {
        println!(
            "   iteration {}/{}, finish reason {}: {:?}",
            it.iteration,
            it.max_iterations,
            it.finish_reason.as_str(),
            it.text
        );
        // Inject feedback to guide the agent.
        if it.is_final && !it.text.contains("Recommendation") {
            return Ok(IterationDecision::proceed().feedback("Include concrete recommendations."));
        }
        // Stop early once the answer is long enough (it never is here).
        if it.text.len() > 1000 && it.finish_reason == FinishReason::Stop {
            return Ok(IterationDecision::stop());
        }
        Ok(IterationDecision::proceed())
    });
    let run = supervisor()?
        .generate("Research kestrels on farmland")
        .options(options)
        .await?;
    println!("   answer: {}\n", run.text);
    if !run.text.contains("Recommendation") {
        return Err("the feedback did not lead to another iteration".into());
    }

    println!("2. is_task_complete: a custom scorer and the rubric scorer");
    let custom = ScorerFn::new("task-complete", |task| async move {
        let passed = task.answer.contains("Analysis") && task.answer.contains("Recommendation");
        Ok(Score {
            scorer: String::new(), // filled in with the scorer's name
            passed,
            score: if passed { 1.0 } else { 0.0 },
            reason: (!passed).then(|| "Give an analysis and a recommendation.".to_owned()),
        })
    });
    // The judge reads the task, the answer and the criteria, and answers in JSON.
    let judge = model_or(ScriptedModel::from_fn(|req| {
        let data = req.messages.last().map(Message::text).unwrap_or_default();
        let passed = data.contains("Recommendation:");
        let reason = if passed {
            "Both criteria are met."
        } else {
            "No recommendations."
        };
        let verdict =
            json!({"passed": passed, "score": if passed { 1.0 } else { 0.3 }, "reason": reason});
        ScriptedResponse::text(verdict.to_string())
    }));
    let rubric = RubricScorer::with_model(
        judge,
        [
            "The response contains an analysis section",
            "The response contains concrete recommendations",
        ],
    )?;
    let completion = TaskCompletion::new()
        .scorer(custom)
        .scorer(rubric)
        .strategy(CompletionStrategy::All)
        .on_complete(|scores, complete| {
            let verdicts: Vec<String> = (scores.iter())
                .map(|s| {
                    format!(
                        "{} {}",
                        s.scorer,
                        if s.passed { "passed" } else { "failed" }
                    )
                })
                .collect();
            println!("   task complete: {complete} ({})", verdicts.join(", "));
        });
    let run = supervisor()?
        .generate("Research kestrels on farmland")
        .is_task_complete(completion)
        .await?;
    println!("   answer: {}", run.text);
    if !run.text.contains("Recommendation") {
        return Err("the scorers did not keep the loop going".into());
    }
    Ok(())
}
