//! Kestrel's code scorers against `@mastra/evals` 1.10.2 on the same inputs
//! (`tests/fixtures/code-scorers.json`, written by `compat-tests/eval-fixtures/generate.mjs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_core::eval::{
    ExpectedStep, Ordering, Scorer, ScorerRun, StepKind, Trajectory, TrajectoryStep,
    sample_fraction,
};
use kestrel_core::message::{Message, Part, Role};
use kestrel_evals::code::{
    Completeness, ContentSimilarity, KeywordCoverage, TextualDifference, Tone, ToolCallAccuracy,
    TrajectoryAccuracy,
};
use serde_json::{Value, json};

fn fixtures() -> Value {
    serde_json::from_str(include_str!("fixtures/code-scorers.json")).unwrap()
}

fn cases(name: &str) -> Vec<Value> {
    fixtures()["scorers"][name].as_array().unwrap().clone()
}

/// Equal as JSON, numbers compared as `f64` (JavaScript has one number type: `1` is `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn text(case: &Value, key: &str) -> String {
    case[key].as_str().unwrap().to_owned()
}

/// Runs `scorer` on every text case of `name` and compares scores (and the step results
/// named in `keys`) exactly; `known` lists the inputs where Kestrel is known to differ.
async fn text_parity(
    name: &str,
    make: impl Fn(&Value) -> Box<dyn Scorer>,
    keys: &[&str],
    known: &[&str],
) {
    let mut checked = 0;
    for case in cases(name) {
        let (input, output) = (text(&case, "input"), text(&case, "output"));
        if known.contains(&input.as_str()) {
            continue;
        }
        let scorer = make(&case["options"]);
        let result = scorer.run(ScorerRun::texts(&input, &output)).await.unwrap();
        let want = case["score"].as_f64().unwrap();
        assert_eq!(
            result.score,
            Some(want),
            "{name} {:?}: {input:?} / {output:?}",
            case["options"]
        );
        let have = result.preprocess_step_result.clone().unwrap_or(Value::Null);
        for key in keys {
            let want = &case["preprocessStepResult"][key];
            let mut have = have[key].clone();
            if let (Value::Array(h), Value::Array(_)) = (&mut have, want) {
                h.sort_by_key(ToString::to_string);
            }
            let mut want = want.clone();
            if let Value::Array(w) = &mut want {
                w.sort_by_key(ToString::to_string);
            }
            assert!(
                same(&have, &want),
                "{name} {key}: {input:?} / {output:?}: {have} != {want}"
            );
        }
        checked += 1;
    }
    assert_eq!(
        checked + known.len() * cases(name).len() / 33,
        cases(name).len(),
        "{name}: a known case is missing from the fixtures"
    );
}

#[tokio::test]
async fn content_similarity_is_mastras() {
    text_parity(
        "content-similarity",
        |o| {
            Box::new(
                ContentSimilarity::new()
                    .ignore_case(o["ignoreCase"].as_bool().unwrap())
                    .ignore_whitespace(o["ignoreWhitespace"].as_bool().unwrap()),
            )
        },
        &["processedInput", "processedOutput"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn textual_difference_is_mastras() {
    text_parity(
        "textual-difference",
        |_| Box::new(TextualDifference::new()),
        &["ratio", "confidence", "changes", "lengthDiff"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn keyword_coverage_is_mastras() {
    text_parity(
        "keyword-coverage",
        |_| Box::new(KeywordCoverage::new()),
        &[],
        &[],
    )
    .await;
    // The keyword sets too.
    for case in cases("keyword-coverage") {
        let result = KeywordCoverage::new()
            .run(ScorerRun::texts(
                text(&case, "input"),
                text(&case, "output"),
            ))
            .await
            .unwrap();
        let have = result.preprocess_step_result.unwrap();
        for key in ["referenceKeywords", "responseKeywords"] {
            if case["preprocessStepResult"].get(key).is_some() {
                assert!(
                    same(&have[key], &case["preprocessStepResult"][key]),
                    "{key}: {case}"
                );
            }
        }
    }
}

#[tokio::test]
async fn tone_is_mastras() {
    text_parity(
        "tone",
        |o| {
            let tone = Tone::new();
            Box::new(match o["referenceTone"].as_str() {
                Some(reference) => tone.reference_tone(reference),
                None => tone,
            })
        },
        &[
            "score",
            "avgSentiment",
            "sentimentVariance",
            "responseSentiment",
            "referenceSentiment",
            "difference",
        ],
        &[],
    )
    .await;
}

/// Inputs whose verbs compromise's tagger rewrites in place (see `Completeness`'s docs).
const COMPLETENESS_TAGGER_CASES: &[&str] = &[
    "What is the weather in Berlin today?",
    "Summarize the meeting notes about the Q3 budget review",
    "Explain how photosynthesis works in plants",
    "The service was not good at all",
    "Running, jumped, swimming and was eating",
    "The cats are running quickly across the gardens",
    "OpenAI GPT-4o and Claude-3 models compared",
    "Can you help me reset my password for my account?",
    "don't won't can't shouldn't",
    "Numbers 123 and 4567 appear with words like alpha",
];

#[tokio::test]
async fn completeness_is_mastras_where_no_tagger_is_needed() {
    text_parity(
        "completeness",
        |_| Box::new(Completeness::new()),
        &[],
        COMPLETENESS_TAGGER_CASES,
    )
    .await
}

fn assistant_with_tools(tools: &[String]) -> Vec<Message> {
    let mut parts = vec![Part::Text {
        text: "Done.".into(),
    }];
    for (i, tool) in tools.iter().enumerate() {
        parts.push(Part::ToolCall {
            tool_call_id: format!("call-{i}"),
            tool_name: tool.clone(),
            args: json!({"q": i}),
        });
    }
    vec![Message::new(Role::Assistant, parts)]
}

#[tokio::test]
async fn tool_call_accuracy_is_mastras() {
    let all = cases("tool-call-accuracy");
    assert_eq!(all.len(), 35);
    for case in all {
        let o = &case["options"];
        let strict = o["strictMode"].as_bool().unwrap_or(false);
        let scorer = match o["expectedToolOrder"].as_array() {
            Some(order) => ToolCallAccuracy::order(order.iter().map(|t| t.as_str().unwrap())),
            None => ToolCallAccuracy::tool(o["expectedTool"].as_str().unwrap()),
        }
        .strict(strict);
        let tools: Vec<String> = serde_json::from_value(case["tools"].clone()).unwrap();
        let run = ScorerRun::agent(
            kestrel_core::eval::AgentInput {
                input_messages: vec![Message::user("Do it")],
                ..Default::default()
            },
            assistant_with_tools(&tools),
        );
        let result = scorer.run(run).await.unwrap();
        assert_eq!(result.score, case["score"].as_f64(), "{case}");
        let pre = result.preprocess_step_result.unwrap();
        for key in [
            "actualTools",
            "correctToolCalled",
            "correctOrderCalled",
            "hasToolCalls",
        ] {
            assert!(
                same(&pre[key], &case["preprocessStepResult"][key]),
                "{key}: {case}"
            );
        }
    }
}

#[tokio::test]
async fn trajectory_accuracy_is_mastras() {
    let all = cases("trajectory-accuracy");
    assert_eq!(all.len(), 35);
    for case in all {
        let expected: Vec<ExpectedStep> = case["expected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| ExpectedStep::tool_call(n.as_str().unwrap()))
            .collect();
        let o = &case["comparisonOptions"];
        let ordering: Ordering = serde_json::from_value(o["ordering"].clone()).unwrap();
        let scorer = TrajectoryAccuracy::new()
            .expected(expected)
            .ordering(ordering)
            .allow_repeated_steps(o["allowRepeatedSteps"].as_bool().unwrap());
        let steps = case["actual"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| TrajectoryStep::new(StepKind::ToolCall, n.as_str().unwrap()))
            .collect();
        let result = scorer
            .run(ScorerRun::trajectory(
                "Find and summarize",
                Trajectory::new(steps),
            ))
            .await
            .unwrap();
        assert_eq!(result.score, case["score"].as_f64(), "{case}");
        let comparison = &result.preprocess_step_result.unwrap()["comparison"];
        assert!(
            same(comparison, &case["comparison"]),
            "{comparison} != {case}"
        );
    }
}

#[test]
fn sampling_fractions_are_mastras() {
    for case in fixtures()["sampling"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        assert_eq!(
            sample_fraction(id),
            case["fraction"].as_f64().unwrap(),
            "{id}"
        );
    }
}
