//! Scorer pipelines (`create_scorer`): function and judge steps in order, `NotScorable`,
//! typed errors naming the failed step, empty runs refused, judges answering through
//! structured output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{
    JudgePrompt, NotScorable, ScoreSampling, Scorer, ScorerBuildError, ScorerError, ScorerRun,
    ScorerStep, create_scorer,
};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use serde_json::{Value, json};

fn judge(model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("judge")
        .model(model)
        .instructions("You are a strict grader. Answer in JSON.")
        .build()
        .unwrap()
}

#[tokio::test]
async fn function_steps_run_in_order_and_see_what_came_before() {
    let scorer = create_scorer("word-overlap")
        .name("Word overlap")
        .preprocess(|cx| async move {
            let words = |t: String| -> Vec<String> {
                t.to_lowercase()
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            };
            Ok(json!({
                "input": words(cx.run.input_text()),
                "output": words(cx.run.output_text()),
            }))
        })
        .analyze(|cx| async move {
            let pre = cx.preprocess.unwrap();
            let output: Vec<&str> = pre["output"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let shared = pre["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| output.contains(&w.as_str().unwrap()))
                .count();
            Ok(json!({"shared": shared, "total": pre["input"].as_array().unwrap().len()}))
        })
        .generate_score(|cx| async move {
            let a = cx.analyze.unwrap();
            Ok(a["shared"].as_f64().unwrap() / a["total"].as_f64().unwrap())
        })
        .generate_reason(|cx| async move { Ok(format!("{} of the words", cx.score.unwrap())) })
        .build()
        .unwrap();
    assert_eq!(scorer.id(), "word-overlap");
    assert_eq!(scorer.name(), "Word overlap");
    assert!(!scorer.uses_judge());
    let result = scorer
        .run(ScorerRun::texts("sunny in Paris", "It is sunny in Lyon").run_id("r1"))
        .await
        .unwrap();
    assert_eq!(result.run_id, "r1");
    assert!((result.score.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(
        result.analyze_step_result,
        Some(json!({"shared": 2, "total": 3}))
    );
    assert_eq!(
        result.reason.as_deref(),
        Some("0.6666666666666666 of the words")
    );
    assert!(result.preprocess_prompt.is_none());
}

#[tokio::test]
async fn a_step_may_say_not_scorable_and_errors_name_the_step() {
    let scorer = create_scorer("needs-tools")
        .preprocess(|cx| async move {
            if cx.run.tool_calls().is_empty() {
                return Err(NotScorable::new("no tool was called").into());
            }
            Ok(json!({}))
        })
        .generate_score(|_| async { Ok(1.0) })
        .build()
        .unwrap();
    let result = scorer.run(ScorerRun::texts("hi", "hello")).await.unwrap();
    assert_eq!(result.score, None);
    assert_eq!(result.not_scorable.as_deref(), Some("no tool was called"));

    let failing = create_scorer("failing")
        .preprocess(|_| async { Ok(json!(1)) })
        .analyze(|_| async { Err(std::io::Error::other("the analysis broke").into()) })
        .generate_score(|_| async { Ok(1.0) })
        .build()
        .unwrap();
    let error = failing
        .run(ScorerRun::texts("hi", "hello"))
        .await
        .unwrap_err();
    match &error {
        ScorerError::Step {
            scorer,
            failed_step,
            completed_steps,
            ..
        } => {
            assert_eq!(scorer, "failing");
            assert_eq!(*failed_step, ScorerStep::Analyze);
            assert_eq!(completed_steps, &[ScorerStep::Preprocess]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "scorer `failing`: step `analyze` failed (after preprocess): the analysis broke"
    );
    assert_eq!(error.kind(), "step");

    let nan = create_scorer("nan")
        .generate_score(|_| async { Ok(f64::NAN) })
        .build()
        .unwrap();
    let error = nan.run(ScorerRun::texts("a", "b")).await.unwrap_err();
    assert!(error.to_string().contains("not a finite number"), "{error}");
}

#[tokio::test]
async fn empty_runs_are_refused_unless_allowed() {
    let scorer = create_scorer("any")
        .generate_score(|_| async { Ok(0.0) })
        .build()
        .unwrap();
    for run in [
        ScorerRun::texts("", "an answer"),
        ScorerRun::texts("a question", ""),
    ] {
        let error = scorer.run(run).await.unwrap_err();
        assert!(matches!(error, ScorerError::InvalidRun { .. }), "{error:?}");
        assert!(error.to_string().contains("is empty"), "{error}");
    }
    let lenient = create_scorer("lenient")
        .allow_empty()
        .generate_score(|_| async { Ok(0.5) })
        .build()
        .unwrap();
    let result = lenient.run(ScorerRun::texts("", "")).await.unwrap();
    assert_eq!(result.score, Some(0.5));
}

#[tokio::test]
async fn builds_are_checked() {
    assert_eq!(
        create_scorer("x").build().unwrap_err(),
        ScorerBuildError::NoScoreStep("x".into())
    );
    assert_eq!(
        create_scorer(" ")
            .generate_score(|_| async { Ok(1.0) })
            .build()
            .unwrap_err(),
        ScorerBuildError::EmptyId
    );
    let error = create_scorer("judged")
        .analyze_judge(JudgePrompt::new(|_| "judge this".into()))
        .generate_score(|_| async { Ok(1.0) })
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        ScorerBuildError::NoJudge {
            scorer: "judged".into(),
            step: ScorerStep::Analyze
        }
    );
}

#[tokio::test]
async fn judge_steps_answer_through_structured_output() {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text(
                r#"{"verdicts": [{"statement": "It is sunny", "verdict": "yes"}, {"statement": "in Lyon", "verdict": "no"}]}"#,
            ))
            .respond(ScriptedResponse::text(r#"{"score": 0.5}"#))
            .respond(ScriptedResponse::text("Half of the statements answer the question.")),
    );
    let scorer = create_scorer("relevancy")
        .judge(judge(model.clone()))
        .analyze_judge(
            JudgePrompt::new(|cx| {
                format!(
                    "Question: {}\nAnswer: {}\nJudge each statement.",
                    cx.run.input_text(),
                    cx.run.output_text()
                )
            })
            .schema(json!({
                "type": "object",
                "properties": {"verdicts": {"type": "array", "items": {"type": "object"}}},
                "required": ["verdicts"]
            })),
        )
        .generate_score_judge(JudgePrompt::new(|cx| {
            format!(
                "Verdicts: {}. Give the share of yes.",
                cx.analyze.clone().unwrap()
            )
        }))
        .generate_reason_judge(JudgePrompt::new(|cx| {
            format!("Explain the score {}.", cx.score.unwrap())
        }))
        .build()
        .unwrap();
    assert!(scorer.uses_judge());
    let result = scorer
        .run(ScorerRun::texts(
            "Is it sunny in Paris?",
            "It is sunny in Lyon.",
        ))
        .await
        .unwrap();
    assert_eq!(result.score, Some(0.5));
    assert_eq!(
        result.analyze_step_result.as_ref().unwrap()["verdicts"][1]["verdict"],
        "no"
    );
    assert_eq!(
        result.reason.as_deref(),
        Some("Half of the statements answer the question.")
    );
    assert!(
        result
            .analyze_prompt
            .as_deref()
            .unwrap()
            .starts_with("Question: Is it sunny in Paris?")
    );
    assert_eq!(
        result.generate_reason_prompt.as_deref(),
        Some("Explain the score 0.5.")
    );
    // The judge read its instructions and was asked for JSON of the step's schema.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0].response_format.is_some(),
        "{:?}",
        requests[0].response_format
    );
    assert!(requests[2].response_format.is_none());
}

#[tokio::test]
async fn a_judge_out_of_shape_fails_its_step() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("I think 7/10")));
    let scorer = create_scorer("scored-by-judge")
        .judge(judge(model))
        .generate_score_judge(JudgePrompt::new(|_| "score it".into()))
        .build()
        .unwrap();
    let error = scorer.run(ScorerRun::texts("q", "a")).await.unwrap_err();
    match error {
        ScorerError::Step {
            failed_step,
            completed_steps,
            ..
        } => {
            assert_eq!(failed_step, ScorerStep::GenerateScore);
            assert!(completed_steps.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn sampling_serializes_as_mastra_does() {
    assert_eq!(
        serde_json::to_value(ScoreSampling::None).unwrap(),
        json!({"type": "none"})
    );
}

mod live {
    use std::sync::Arc;
    use std::time::Duration;

    use kestrel_core::agent::Agent;
    use kestrel_core::eval::{ScoreSampling, Scorer, ScorerInput, create_scorer};
    use kestrel_core::kestrel::Kestrel;
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    use kestrel_core::store::{ScoreQuery, ScoreSource};
    use kestrel_core::trace::TracingConfig;

    fn answering(text: &'static str) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel::from_fn(move |_| {
            ScriptedResponse::text(text)
        }))
    }

    fn mentions(word: &'static str) -> impl Scorer {
        create_scorer(format!("mentions-{word}"))
            .generate_score(move |cx| async move {
                Ok(if cx.run.output_text().contains(word) {
                    1.0
                } else {
                    0.0
                })
            })
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_finished_run_is_scored_after_it_returns_and_stored_live() {
        let slow = create_scorer("slow")
            .generate_score(|_| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(0.5)
            })
            .build()
            .unwrap();
        let agent = Agent::builder("weather")
            .model(answering("Sunny in Paris."))
            .instructions("You tell the weather.")
            .scorer(mentions("Paris"), ScoreSampling::None)
            .scorer(slow, ScoreSampling::None)
            .build()
            .unwrap();
        let result = agent
            .generate("Weather in Paris?")
            .run_id("run-a")
            .await
            .unwrap();
        assert_eq!(result.text, "Sunny in Paris.");
        // The scorers run off the run's path: the slow one is still going.
        assert_eq!(agent.scoring().pending(), 1);
        agent.scoring().idle().await;
        let page = agent
            .score_store()
            .list_scores(&ScoreQuery::new().run("run-a"))
            .await
            .unwrap();
        assert_eq!(page.total, 2);
        let mention = page
            .scores
            .iter()
            .find(|s| s.scorer_id == "mentions-Paris")
            .unwrap();
        assert_eq!(mention.score, Some(1.0));
        assert_eq!(mention.source, ScoreSource::Live);
        assert_eq!(mention.entity_type, "AGENT");
        assert_eq!(mention.entity_id, "weather");
        assert_eq!(mention.scorer["id"], "mentions-Paris");
        // What the scorer read: the user's input and the system prompt, and the answer.
        assert_eq!(
            mention.input["inputMessages"][0]["parts"][0]["text"],
            "Weather in Paris?"
        );
        assert_eq!(mention.input["systemMessages"][0], "You tell the weather.");
        assert_eq!(mention.output[0]["parts"][0]["text"], "Sunny in Paris.");
        let counts = agent.scoring().counts("weather", "mentions-Paris");
        assert_eq!(
            (
                counts.eligible,
                counts.sampled,
                counts.scored,
                counts.failed
            ),
            (1, 1, 1, 0)
        );
    }

    #[tokio::test]
    async fn sampling_is_decided_from_the_run_id_as_mastra_does() {
        let agent = Agent::builder("a")
            .model(answering("ok"))
            .scorer(mentions("ok"), ScoreSampling::ratio(0.5))
            .build()
            .unwrap();
        // sha256("run-1") → 0.306 (sampled at 0.5); sha256("a") → 0.791 (not).
        agent.generate("hi").run_id("run-1").await.unwrap();
        agent.generate("hi").run_id("a").await.unwrap();
        agent.scoring().idle().await;
        let counts = agent.scoring().counts("a", "mentions-ok");
        assert_eq!((counts.eligible, counts.sampled, counts.scored), (2, 1, 1));
        let all = agent
            .score_store()
            .list_scores(&ScoreQuery::new())
            .await
            .unwrap();
        assert_eq!(all.total, 1);
        assert_eq!(all.scores[0].run_id, "run-1");
    }

    #[tokio::test]
    async fn a_failing_scorer_leaves_a_visible_failure() {
        let broken = create_scorer("broken")
            .analyze(|_| async { Err("the judge is down".into()) })
            .generate_score(|_| async { Ok(1.0) })
            .build()
            .unwrap();
        let agent = Agent::builder("a")
            .model(answering("ok"))
            .scorer(broken, ScoreSampling::None)
            .build()
            .unwrap();
        agent.generate("hi").run_id("r").await.unwrap();
        agent.scoring().idle().await;
        let page = agent
            .score_store()
            .list_scores(&ScoreQuery::new().scorer("broken"))
            .await
            .unwrap();
        let failure = &page.scores[0];
        assert_eq!(failure.score, None);
        let error = &failure.metadata.as_ref().unwrap()["error"];
        assert_eq!(error["failedStep"], "analyze");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("the judge is down")
        );
        assert_eq!(agent.scoring().counts("a", "broken").failed, 1);
    }

    #[tokio::test]
    async fn a_traced_run_links_its_score_to_the_trace() {
        let agent = Agent::builder("t")
            .model(answering("ok"))
            .scorer(mentions("ok"), ScoreSampling::None)
            .build()
            .unwrap();
        let kestrel = Kestrel::builder()
            .agent(agent)
            .tracing(TracingConfig::new())
            .build()
            .unwrap();
        let agent = kestrel.agent("t").unwrap();
        let result = agent.generate("hi").await.unwrap();
        agent.scoring().idle().await;
        let page = agent
            .score_store()
            .list_scores(&ScoreQuery::new().run(result.run_id.clone()))
            .await
            .unwrap();
        let score = &page.scores[0];
        assert_eq!(score.trace_id, result.trace_id);
        assert!(score.span_id.as_deref().is_some_and(|s| s.len() == 16));
        assert!(matches!(
            serde_json::from_value::<ScorerInput>(score.input.clone()).unwrap(),
            ScorerInput::Agent(_)
        ));
    }
}
