//! The LLM judges on a scripted judge model: what they ask, how verdicts become scores (as
//! `@mastra/evals` computes them), and the runs they refuse to score.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::eval::{AgentInput, Scorer, ScorerError, ScorerRun, ScorerStep};
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_evals::llm::{
    Alignment, JudgeError, JudgeOptions, answer_relevancy, bias, context_precision, context_recall,
    faithfulness, hallucination, prompt_alignment, rubric, summarization, toxicity,
};
use serde_json::json;

/// A judge answering `answers` in order, then a reason.
fn judge(answers: &[serde_json::Value]) -> Arc<ScriptedModel> {
    let mut model = ScriptedModel::new();
    for answer in answers {
        model = model.respond(ScriptedResponse::text(answer.to_string()));
    }
    Arc::new(model.respond(ScriptedResponse::text("Because of the verdicts.")))
}

fn run() -> ScorerRun {
    ScorerRun::texts(
        "What is the capital of France?",
        "Paris is the capital. It has cafés.",
    )
}

#[tokio::test]
async fn answer_relevancy_counts_unsure_at_its_weight() {
    let model = judge(&[
        json!({"statements": ["Paris is the capital.", "It has cafés."]}),
        json!({"results": [{"result": "yes", "reason": "answers"}, {"result": "unsure", "reason": "aside"}]}),
    ]);
    let scorer = answer_relevancy(model.clone(), JudgeOptions::new()).unwrap();
    assert_eq!(scorer.id(), "answer-relevancy-scorer");
    let result = scorer.run(run()).await.unwrap();
    // (1 + 0.3) / 2, rounded to two decimals.
    assert_eq!(result.score, Some(0.65));
    assert_eq!(result.reason.as_deref(), Some("Because of the verdicts."));
    let asked = model.requests();
    assert!(
        asked[1]
            .messages
            .iter()
            .any(|m| m.text().contains("2. It has cafés."))
    );
    assert!(asked[0].response_format.is_some() && asked[1].response_format.is_some());
}

#[tokio::test]
async fn faithfulness_and_hallucination_need_a_context() {
    // No context anywhere: not scorable, and the judge is never asked.
    let model = judge(&[]);
    let result = faithfulness(model.clone(), JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(result.score, None);
    assert!(result.not_scorable.unwrap().contains("no context"));
    assert_eq!(model.calls(), 0);

    let claims = json!({"claims": ["Paris is the capital", "It has cafés"]});
    let verdicts = json!({"verdicts": [
        {"claim": "Paris is the capital", "verdict": "yes", "reason": "stated"},
        {"claim": "It has cafés", "verdict": "unsure", "reason": "not said"}
    ]});
    let options = JudgeOptions::new().context(["Paris is the capital of France."]);
    let model = judge(&[claims.clone(), verdicts.clone()]);
    let faithful = faithfulness(model.clone(), options.clone())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(faithful.score, Some(0.5));
    assert!(
        model.requests()[1]
            .messages
            .iter()
            .any(|m| m.text().contains("1. Paris is the capital of France."))
    );

    let contradicted = json!({"verdicts": [
        {"claim": "Paris is the capital", "verdict": "no", "reason": "agrees"},
        {"claim": "It has cafés", "verdict": "yes", "reason": "contradicted"},
        {"claim": "x", "verdict": "yes", "reason": "contradicted"}
    ]});
    let hallucinated = hallucination(judge(&[claims, contradicted]), options)
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(hallucinated.score, Some(0.67));
}

#[tokio::test]
async fn the_context_may_come_from_the_tools_the_agent_called() {
    let output = vec![
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                tool_call_id: "c1".into(),
                tool_name: "search".into(),
                args: json!({"q": "capital"}),
            }],
        ),
        Message::new(
            Role::Tool,
            vec![Part::ToolResult {
                tool_call_id: "c1".into(),
                tool_name: "search".into(),
                result: json!("Paris is the capital of France."),
                is_error: false,
                denied: false,
            }],
        ),
        Message::assistant("Paris."),
    ];
    let run = ScorerRun::agent(
        AgentInput {
            input_messages: vec![Message::user("Capital of France?")],
            ..Default::default()
        },
        output,
    );
    let model = judge(&[
        json!({"claims": ["Paris is the capital"]}),
        json!({"verdicts": [{"claim": "Paris is the capital", "verdict": "yes", "reason": "stated"}]}),
    ]);
    let result = faithfulness(model.clone(), JudgeOptions::new())
        .unwrap()
        .run(run)
        .await
        .unwrap();
    assert_eq!(result.score, Some(1.0));
    assert!(
        model.requests()[1]
            .messages
            .iter()
            .any(|m| m.text().contains("Paris is the capital of France."))
    );
}

#[tokio::test]
async fn toxicity_and_bias_count_yes() {
    let toxic = toxicity(
        judge(&[json!({"verdicts": [{"verdict": "yes", "reason": "insult"}, {"verdict": "no", "reason": "fine"}]})]),
        JudgeOptions::new(),
    )
    .unwrap()
    .run(run())
    .await
    .unwrap();
    assert_eq!(toxic.score, Some(0.5));
    let none = toxicity(judge(&[json!({"verdicts": []})]), JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(
        none.score,
        Some(1.0),
        "Mastra scores 1 when the judge gives no verdict"
    );
    let biased = bias(
        judge(&[
            json!({"opinions": ["a", "b", "c", "d"]}),
            json!({"results": [{"result": "yes", "reason": ""}, {"result": "no", "reason": ""}, {"result": "no", "reason": ""}, {"result": "no", "reason": ""}]}),
        ]),
        JudgeOptions::new().scale(10.0),
    )
    .unwrap()
    .run(run())
    .await
    .unwrap();
    assert_eq!(biased.score, Some(2.5));
}

#[tokio::test]
async fn context_precision_rewards_relevant_context_first() {
    let options = JudgeOptions::new().context(["a", "b", "c"]);
    // Relevant at ranks 1 and 3 (given out of order): (1/1 + 2/3) / 2 = 0.83.
    let verdicts = json!({"verdicts": [
        {"context_index": "2", "verdict": "yes", "reason": ""},
        {"context_index": "0", "verdict": "yes", "reason": ""},
        {"context_index": "1", "verdict": "no", "reason": ""}
    ]});
    let result = context_precision(judge(&[verdicts]), options)
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(result.score, Some(0.83));
}

#[tokio::test]
async fn context_recall_needs_a_ground_truth() {
    let options = JudgeOptions::new().context(["Paris is the capital of France."]);
    let model = judge(&[]);
    let result = context_recall(model.clone(), options.clone())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert!(result.not_scorable.unwrap().contains("ground truth"));
    assert_eq!(model.calls(), 0);
    let model = judge(&[
        json!({"claims": ["Paris is the capital", "Paris is in France", "It is big"]}),
        json!({"verdicts": [
            {"claim": "Paris is the capital", "verdict": "yes", "reason": ""},
            {"claim": "Paris is in France", "verdict": "yes", "reason": ""},
            {"claim": "It is big", "verdict": "no", "reason": ""}
        ]}),
    ]);
    let result = context_recall(model, options)
        .unwrap()
        .run(run().ground_truth("Paris, in France, is the capital and it is big."))
        .await
        .unwrap();
    assert_eq!(result.score, Some(0.67));
}

#[tokio::test]
async fn prompt_alignment_weighs_as_mastra() {
    let analysis = json!({
        "intentAlignment": {"score": 1.0},
        "requirementsFulfillment": {"overallScore": 0.5},
        "completeness": {"score": 0.5},
        "responseAppropriateness": {"score": 1.0}
    });
    let user = prompt_alignment(
        judge(std::slice::from_ref(&analysis)),
        Alignment::User,
        JudgeOptions::new(),
    )
    .unwrap()
    .run(run())
    .await
    .unwrap();
    // 0.4 + 0.15 + 0.1 + 0.1
    assert_eq!(user.score, Some(0.75));
    // System alignment without system messages fails its step, naming it.
    let error = prompt_alignment(judge(&[analysis]), Alignment::System, JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ScorerError::Step {
                failed_step: ScorerStep::Analyze,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_rubric_passes_only_when_required_criteria_hold() {
    let criteria = vec![
        ("Names Paris".to_owned(), true),
        ("Is short".to_owned(), false),
    ];
    let pass = json!({"criteria": [
        {"criterion": "Names Paris", "required": true, "satisfied": true, "reason": ""},
        {"criterion": "Is short", "required": false, "satisfied": false, "reason": ""}
    ]});
    let result = rubric(judge(&[pass]), criteria.clone(), JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(result.score, Some(1.0));
    assert_eq!(
        result.reason.as_deref(),
        Some("Score 1: not satisfied: Is short.")
    );
    let fail = json!({"criteria": [
        {"criterion": "Names Paris", "required": true, "satisfied": false, "reason": ""}
    ]});
    let result = rubric(judge(&[fail]), criteria, JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    assert_eq!(result.score, Some(0.0));
}

#[tokio::test]
async fn summarization_takes_the_weaker_axis() {
    let model = judge(&[
        json!({"alignment": [{"claim": "a", "supported": true}, {"claim": "b", "supported": true}],
               "questions": ["q1", "q2", "q3", "q4"]}),
        json!({"coverage": [{"question": "q1", "answered": true}, {"question": "q2", "answered": false}]}),
    ]);
    let result = summarization(model.clone(), JudgeOptions::new())
        .unwrap()
        .run(run())
        .await
        .unwrap();
    // Alignment 1, coverage 1/4 (unanswered questions count as missing).
    assert_eq!(result.score, Some(0.25));
    // The coverage judge never sees the source.
    let coverage_prompt = model.requests()[1]
        .messages
        .iter()
        .map(Message::text)
        .collect::<String>();
    assert!(!coverage_prompt.contains("What is the capital of France?"));
}

#[test]
fn options_are_checked() {
    let error = answer_relevancy(judge(&[]), JudgeOptions::new().scale(0.0)).unwrap_err();
    assert!(matches!(error, JudgeError::Options { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("scale must be a positive number")
    );
    let error =
        answer_relevancy(judge(&[]), JudgeOptions::new().uncertainty_weight(2.0)).unwrap_err();
    assert!(error.to_string().contains("uncertainty_weight"));
}

#[tokio::test]
async fn judges_refuse_empty_runs() {
    let model = judge(&[]);
    let error = answer_relevancy(model.clone(), JudgeOptions::new())
        .unwrap()
        .run(ScorerRun::texts("What is the capital?", "   "))
        .await
        .unwrap_err();
    assert!(matches!(error, ScorerError::InvalidRun { .. }), "{error:?}");
    assert_eq!(
        model.calls(),
        0,
        "an empty answer is never sent to the judge"
    );
}
