//! Steering the loop: `on_iteration_complete` (continue with feedback, stop, a last turn) and
//! `is_task_complete` (custom and rubric scorers, all/any), always within `max_steps`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use kestrel_core::agent::iteration::{
    CompletionStrategy, IterationDecision, RubricScorer, Score, ScorerFn, TaskCompletion,
};
use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::message::Role;
use kestrel_core::model::{
    FinishReason, ModelRequest, ModelSpec, ScriptedModel, ScriptedResponse, ToolChoice,
};
use kestrel_core::tool::create_tool;
use serde_json::{Value, json};

fn feedback_of(req: &ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter(|m| m.role == Role::User && m.text().starts_with("[feedback]"))
        .map(|m| m.text())
        .collect()
}

/// A writer whose answer mentions recommendations once it was told to.
fn writer() -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        if feedback_of(req).is_empty() {
            ScriptedResponse::text("An analysis.")
        } else {
            ScriptedResponse::text("An analysis with a recommendation.")
        }
    }));
    let agent = Agent::builder("writer")
        .model(model.clone())
        .max_steps(4)
        .build()
        .unwrap();
    (agent, model)
}

#[tokio::test]
async fn feedback_after_a_final_answer_asks_the_model_again() {
    let (agent, model) = writer();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let options = RunOptions::new().on_iteration_complete(move |ctx| {
        let record = record.clone();
        async move {
            record
                .lock()
                .unwrap()
                .push((ctx.iteration, ctx.max_iterations, ctx.is_final));
            if ctx.text.contains("recommendation") {
                Ok(IterationDecision::proceed())
            } else {
                Ok(IterationDecision::proceed().feedback("Add a concrete recommendation."))
            }
        }
    });
    let result = agent
        .generate("Analyse kestrels")
        .options(options)
        .await
        .unwrap();
    assert_eq!(result.text, "An analysis with a recommendation.");
    assert_eq!(model.calls(), 2);
    assert_eq!(
        feedback_of(&model.requests()[1]),
        ["[feedback] Add a concrete recommendation."]
    );
    assert_eq!(*seen.lock().unwrap(), [(0, 4, true), (1, 4, true)]);
}

fn tool_agent(model: Arc<ScriptedModel>) -> Agent {
    let lookup = create_tool("lookup")
        .description("Looks up")
        .input_schema(json!({"type": "object"}))
        .execute(|_input: Value, _ctx| async { Ok("data") });
    Agent::builder("looker")
        .model(model)
        .tool(lookup)
        .max_steps(5)
        .build()
        .unwrap()
}

/// Calls `lookup` until told otherwise, answering only when it may not call tools.
fn eager_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        if req.tool_choice == ToolChoice::None {
            ScriptedResponse::text("Here is what I found.")
        } else {
            ScriptedResponse::tool_call("c", "lookup", json!({}))
        }
    }))
}

#[tokio::test]
async fn stopping_after_tool_calls_ends_the_run_or_grants_one_last_turn() {
    let model = eager_model();
    let agent = tool_agent(model.clone());
    let stop = RunOptions::new().on_iteration_complete(|_| async { Ok(IterationDecision::stop()) });
    let result = agent.generate("look").options(stop).await.unwrap();
    assert_eq!(model.calls(), 1, "no model call after the stop");
    assert_eq!(result.finish_reason, FinishReason::Stop);
    assert_eq!(result.tool_results.len(), 1);

    let model = eager_model();
    let agent = tool_agent(model.clone());
    let last_turn = RunOptions::new().on_iteration_complete(|_| async {
        Ok(IterationDecision::stop().feedback("Summarise now."))
    });
    let result = agent.generate("look").options(last_turn).await.unwrap();
    assert_eq!(model.calls(), 2);
    let last = &model.requests()[1];
    assert_eq!(last.tool_choice, ToolChoice::None);
    assert_eq!(feedback_of(last), ["[feedback] Summarise now."]);
    assert_eq!(result.text, "Here is what I found.");
}

#[tokio::test]
async fn scorers_keep_the_loop_going_until_the_task_is_complete() {
    let (agent, model) = writer();
    let verdicts = Arc::new(Mutex::new(Vec::new()));
    let record = verdicts.clone();
    let completion = TaskCompletion::new()
        .scorer(ScorerFn::new("has-recommendation", |task| async move {
            let passed = task.answer.contains("recommendation");
            Ok(Score {
                scorer: String::new(),
                passed,
                score: if passed { 1.0 } else { 0.0 },
                reason: (!passed).then(|| "It needs a recommendation.".to_owned()),
            })
        }))
        .on_complete(move |scores, complete| {
            record.lock().unwrap().push((scores.len(), complete));
        });
    let result = agent
        .generate("Analyse kestrels")
        .is_task_complete(completion)
        .await
        .unwrap();
    assert_eq!(result.text, "An analysis with a recommendation.");
    assert_eq!(
        feedback_of(&model.requests()[1]),
        ["[feedback] has-recommendation: It needs a recommendation."]
    );
    assert_eq!(*verdicts.lock().unwrap(), [(1, false), (1, true)]);
}

#[tokio::test]
async fn max_steps_bounds_a_task_that_never_completes_and_any_needs_one_pass() {
    let (agent, model) = writer();
    let never = TaskCompletion::new().scorer(ScorerFn::new("never", |_| async {
        Ok(Score {
            scorer: String::new(),
            passed: false,
            score: 0.0,
            reason: Some("no".into()),
        })
    }));
    let result = agent
        .generate("x")
        .is_task_complete(never.clone())
        .await
        .unwrap();
    assert_eq!(model.calls(), 4, "max_steps (4) bounds the loop");
    assert_eq!(result.steps.len(), 4);

    let (agent, model) = writer();
    let always = ScorerFn::new("always", |_| async {
        Ok(Score {
            scorer: String::new(),
            passed: true,
            score: 1.0,
            reason: None,
        })
    });
    let any = never.scorer(always).strategy(CompletionStrategy::Any);
    agent.generate("x").is_task_complete(any).await.unwrap();
    assert_eq!(model.calls(), 1);
}

#[tokio::test]
async fn the_rubric_scorer_asks_a_judge_model_over_the_criteria() {
    let judge = Arc::new(ScriptedModel::from_fn(|req| {
        let data = req.messages.last().unwrap().text();
        if data.contains("recommendation.\n</answer>") {
            ScriptedResponse::text(r#"{"passed": true, "score": 0.9, "reason": "Complete."}"#)
        } else {
            ScriptedResponse::text(
                "```json\n{\"passed\": false, \"score\": 0.2, \"reason\": \"No recommendation.\"}\n```",
            )
        }
    }));
    let (agent, model) = writer();
    let rubric = RubricScorer::with_model(
        ModelSpec::Model(judge.clone()),
        ["Gives a concrete recommendation"],
    )
    .unwrap();
    // A model string resolves like an agent's; an unknown provider is refused up front.
    let unknown = RubricScorer::with_model("nowhere/judge", ["Anything"]).unwrap_err();
    assert!(unknown.to_string().contains("nowhere"), "{unknown}");
    let result = agent
        .generate("Analyse kestrels")
        .is_task_complete(TaskCompletion::new().scorer(rubric))
        .await
        .unwrap();
    assert_eq!(result.text, "An analysis with a recommendation.");
    assert_eq!(
        feedback_of(&model.requests()[1]),
        ["[feedback] rubric: No recommendation."]
    );
    let asked = &judge.requests()[0];
    assert_eq!(asked.messages[0].role, Role::System);
    let data = asked.messages[1].text();
    assert!(data.contains("<task>\nAnalyse kestrels\n</task>"), "{data}");
    assert!(
        data.contains("1. Gives a concrete recommendation"),
        "{data}"
    );

    // A judge that does not answer in JSON counts as not passing, with the reason.
    let broken = Arc::new(ScriptedModel::from_fn(|_| {
        ScriptedResponse::text("Looks fine!")
    }));
    let (agent, model) = writer();
    let rubric = RubricScorer::new(broken, ["Anything"]).named("strict");
    agent
        .generate("x")
        .is_task_complete(TaskCompletion::new().scorer(rubric))
        .await
        .unwrap();
    let feedback = feedback_of(&model.requests()[1]);
    assert!(
        feedback[0].starts_with("[feedback] strict: the scorer failed: the rubric judge's answer is not the expected JSON"),
        "{feedback:?}"
    );
}
