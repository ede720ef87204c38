//! Experiments: an agent over a dataset, scored, with bounded concurrency, retries, progress,
//! stored TEST scores and a comparison of two versions of the agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::model::{ModelError, ScriptedModel, ScriptedResponse};
use kestrel_core::store::{InMemoryScoreStore, ScoreQuery, ScoreSource, ScoreStore};
use kestrel_evals::code::{ContentSimilarity, ToolCallAccuracy};
use kestrel_evals::experiment::{
    Dataset, DatasetError, DatasetItem, Experiment, ExperimentError, compare,
};

const JSONL: &str = r#"
{"input": "What is the capital of France?", "groundTruth": "Paris"}
{"id": "de", "input": "What is the capital of Germany?", "groundTruth": "Berlin"}

{"input": "What is the capital of Spain?", "groundTruth": "Madrid"}
"#;

/// An agent that answers `answer(question)`.
fn agent(answer: fn(&str) -> String) -> Agent {
    Agent::builder("geo")
        .model(Arc::new(ScriptedModel::from_fn(move |req| {
            let question = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text(answer(&question))
        })))
        .build()
        .unwrap()
}

#[test]
fn datasets_read_from_jsonl_name_their_bad_lines() {
    let dataset = Dataset::from_jsonl("capitals", JSONL).unwrap();
    let ids: Vec<&str> = dataset.items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, vec!["2", "de", "5"], "ids default to line numbers");
    assert_eq!(dataset.version, 1);
    assert_eq!(
        dataset.with_items(vec![DatasetItem::new("a", "q")]).version,
        2
    );
    for (text, want) in [
        ("{\"input\": \"a\"}\nnot json", "dataset line 2"),
        ("{\"input\": \"  \"}", "dataset line 1: `input` is empty"),
        (
            "{\"id\": \"x\", \"input\": \"a\"}\n{\"id\": \"x\", \"input\": \"b\"}",
            "the id `x` is already used",
        ),
        ("{\"input\": \"a\", \"colour\": 1}", "dataset line 1"),
    ] {
        let error = Dataset::from_jsonl("d", text).unwrap_err().to_string();
        assert!(error.contains(want), "{text}: {error}");
    }
    assert!(matches!(
        Dataset::from_jsonl("d", "\n\n"),
        Err(DatasetError::Empty)
    ));
}

#[tokio::test]
async fn an_experiment_scores_every_item_and_stores_test_scores() {
    let dataset = Dataset::from_jsonl("capitals", JSONL).unwrap();
    let store = Arc::new(InMemoryScoreStore::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let progress = Arc::clone(&seen);
    let report = Experiment::new(agent(|q| format!("{q} Paris.")), dataset)
        .name("baseline")
        .scorer(ContentSimilarity::new())
        .scorer(ToolCallAccuracy::tool("search"))
        .concurrency(2)
        .store(store.clone())
        .on_progress(move |p| progress.lock().unwrap().push((p.done, p.total)))
        .run()
        .await
        .unwrap();
    assert_eq!(report.items.len(), 3);
    assert_eq!(
        report.items[1].item_id, "de",
        "items keep the dataset's order"
    );
    assert!(
        report
            .items
            .iter()
            .all(|i| i.attempts == 1 && i.error.is_none())
    );
    let similarity = &report.summary["content-similarity-scorer"];
    assert_eq!(similarity.scored, 3);
    assert!(similarity.mean.unwrap() > 0.5);
    // No tool was called: tool-call accuracy scores 0 on every item.
    assert_eq!(
        report.summary["code-tool-call-accuracy-scorer"].mean,
        Some(0.0)
    );
    assert_eq!(report.below(0.5), vec!["code-tool-call-accuracy-scorer"]);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec![(1, 3), (2, 3), (3, 3)]);

    let mut query = ScoreQuery::new();
    query.experiment_id = Some(report.experiment_id.clone());
    let stored = store.list_scores(&query).await.unwrap();
    assert_eq!(stored.total, 6);
    let one = &stored.scores[0];
    assert_eq!(one.source, ScoreSource::Test);
    assert_eq!(one.dataset_id.as_deref(), Some("capitals"));
    assert!(one.dataset_item_id.is_some() && one.ground_truth.is_some());
}

#[tokio::test]
async fn concurrency_is_bounded_and_failed_runs_are_retried() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (r, m, c) = (running.clone(), most.clone(), calls.clone());
    let slow = create_slow_tool_agent(r, m, c);
    let items = (0..8)
        .map(|i| DatasetItem::new(i.to_string(), format!("q{i}")))
        .collect();
    let report = Experiment::new(slow, Dataset::new("d", items))
        .scorer(ContentSimilarity::new())
        .concurrency(3)
        .retries(1)
        .run()
        .await
        .unwrap();
    assert!(most.load(Ordering::SeqCst) <= 3, "at most 3 items at once");
    // Every first attempt fails, every retry succeeds.
    assert!(
        report
            .items
            .iter()
            .all(|i| i.attempts == 2 && i.error.is_none()),
        "{report:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 16);

    let broken = Agent::builder("broken")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::error(ModelError::Protocol {
                provider: "test".into(),
                message: "down".into(),
                line: None,
            })
        })))
        .build()
        .unwrap();
    let report = Experiment::new(broken, Dataset::new("d", vec![DatasetItem::new("a", "q")]))
        .scorer(ContentSimilarity::new())
        .retries(2)
        .run()
        .await
        .unwrap();
    assert_eq!(report.failed_items, 1);
    assert_eq!(report.items[0].attempts, 3);
    assert!(report.items[0].error.as_deref().unwrap().contains("down"));
    assert_eq!(report.summary["content-similarity-scorer"].failed, 1);
    assert_eq!(
        report.below(0.0),
        vec!["content-similarity-scorer"],
        "nothing scored fails a gate"
    );
}

/// An agent whose model fails every odd call (the first attempt of each item, run one at a
/// time per item) and waits a little, counting how many calls run at once.
fn create_slow_tool_agent(
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
) -> Agent {
    let attempts: Arc<Mutex<std::collections::HashMap<String, usize>>> = Arc::default();
    Agent::builder("slow")
        .model(Arc::new(ScriptedModel::from_fn(move |req| {
            calls.fetch_add(1, Ordering::SeqCst);
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            running.fetch_sub(1, Ordering::SeqCst);
            let question = req.messages.last().map(|m| m.text()).unwrap_or_default();
            let mut seen = attempts.lock().unwrap();
            let n = seen.entry(question.clone()).or_default();
            *n += 1;
            if *n == 1 {
                ScriptedResponse::error(ModelError::Protocol {
                    provider: "test".into(),
                    message: "flaky".into(),
                    line: None,
                })
            } else {
                ScriptedResponse::text(format!("answer to {question}"))
            }
        })))
        .build()
        .unwrap()
}

#[tokio::test]
async fn two_experiments_compare_item_by_item() {
    let dataset = Dataset::from_jsonl("capitals", JSONL).unwrap();
    let baseline = Experiment::new(agent(|q| q.to_owned()), dataset.clone())
        .scorer(ContentSimilarity::new())
        .run()
        .await
        .unwrap();
    let candidate = Experiment::new(
        agent(|q| {
            if q.contains("Germany") {
                "Berlin.".into()
            } else {
                q.to_owned()
            }
        }),
        dataset,
    )
    .scorer(ContentSimilarity::new())
    .run()
    .await
    .unwrap();
    let diff = compare(&baseline, &candidate);
    assert_eq!(diff.len(), 1);
    let similarity = &diff[0];
    assert_eq!(similarity.baseline, Some(1.0));
    assert!(similarity.delta.unwrap() < 0.0);
    assert_eq!(similarity.regressed, vec!["de"]);
    assert!(similarity.improved.is_empty());
}

#[tokio::test]
async fn an_experiment_needs_distinct_scorers() {
    let dataset = Dataset::new("d", vec![DatasetItem::new("a", "q")]);
    let error = Experiment::new(agent(|q| q.to_owned()), dataset.clone())
        .run()
        .await
        .unwrap_err();
    assert!(matches!(error, ExperimentError::NoScorer));
    let error = Experiment::new(agent(|q| q.to_owned()), dataset)
        .scorer(ContentSimilarity::new())
        .scorer(ContentSimilarity::new())
        .run()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "two scorers share the id `content-similarity-scorer`"
    );
}

#[tokio::test]
async fn datasets_are_kept_in_versions_and_experiments_record_their_results() {
    use kestrel_core::store::{DatasetStore, ExperimentStatus, InMemoryDatasetStore};
    let store = Arc::new(InMemoryDatasetStore::new());
    let mut dataset = Dataset::from_jsonl("capitals", JSONL).unwrap();
    assert_eq!(dataset.save(&*store).await.unwrap(), 1);
    // The next version drops Spain and changes Germany's answer.
    let mut next = dataset.with_items(vec![
        DatasetItem::new("2", "What is the capital of France?").ground_truth("Paris"),
        DatasetItem::new("de", "What is the capital of Germany?").ground_truth("Bonn?"),
    ]);
    assert_eq!(next.save(&*store).await.unwrap(), 2);
    let first = Dataset::load(&*store, "capitals", Some(1)).await.unwrap();
    // A stored dataset's items come back in id order.
    dataset.items.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(first, dataset, "version 1 reads back as it was");
    let latest = Dataset::load(&*store, "capitals", None).await.unwrap();
    assert_eq!(latest.version, 2);
    assert_eq!(latest.items.len(), 2);
    assert_eq!(
        latest.items[1].ground_truth,
        Some(serde_json::json!("Bonn?"))
    );
    assert!(matches!(
        Dataset::load(&*store, "nope", None).await,
        Err(DatasetError::Store(_))
    ));

    let experiment = Experiment::new(agent(|q| format!("{q} Paris.")), first)
        .scorer(ContentSimilarity::new())
        .record_in(store.clone());
    let id = experiment.experiment_id().to_owned();
    let report = experiment.run().await.unwrap();
    let record = store.get_experiment(&id).await.unwrap().unwrap();
    assert_eq!(record.status, ExperimentStatus::Completed);
    assert_eq!((record.total_items, record.succeeded_count), (3, 3));
    assert_eq!(record.dataset_version, 1);
    assert_eq!(record.scorer_ids, ["content-similarity-scorer"]);
    let results = store.list_experiment_results(&id).await.unwrap();
    assert_eq!(results.len(), 3);
    let de = results.iter().find(|r| r.item_id == "de").unwrap();
    let reported = report.items.iter().find(|i| i.item_id == "de").unwrap();
    assert_eq!(de.output, Some(serde_json::json!(reported.output)));
    assert_eq!(de.run_id, reported.run_id);
    assert_eq!(de.scores[0]["scorerId"], "content-similarity-scorer");
    assert_eq!(de.status, "success");

    // An experiment over a dataset the store does not keep is refused before any run.
    let unknown = Experiment::new(
        agent(|q| q.to_owned()),
        Dataset::from_jsonl("x", JSONL).unwrap(),
    )
    .scorer(ContentSimilarity::new())
    .record_in(store.clone())
    .run()
    .await;
    assert!(
        matches!(unknown, Err(ExperimentError::Record(_))),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn an_items_tool_mocks_answer_instead_of_its_tools() {
    use kestrel_core::message::{Part, Role};
    use serde_json::json;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct City {
        #[allow(dead_code)]
        city: String,
    }
    let weather = kestrel_core::tool::create_tool("get_weather")
        .description("The weather")
        .execute(move |_: City, _ctx| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"sky": "real"}))
            }
        });
    let agent = Agent::builder("forecaster")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            match req.messages.last().filter(|m| m.role == Role::Tool) {
                Some(tool) => {
                    let Part::ToolResult { result, .. } = &tool.parts[0] else {
                        panic!()
                    };
                    ScriptedResponse::text(format!(
                        "The sky is {}.",
                        result["sky"].as_str().unwrap_or("?")
                    ))
                }
                None => ScriptedResponse::tool_call("w1", "get_weather", json!({"city": "Oslo"})),
            }
        })))
        .tool(weather)
        .build()
        .unwrap();
    let jsonl = r#"{"id": "mocked", "input": "Weather in Oslo?", "toolMocks": {"get_weather": {"sky": "mocked"}}}
{"id": "real", "input": "Weather in Oslo?"}"#;
    let dataset = Dataset::from_jsonl("weather", jsonl).unwrap();
    assert_eq!(
        dataset.items[0].tool_mocks.as_ref().unwrap()["get_weather"],
        json!({"sky": "mocked"})
    );
    let report = Experiment::new(agent, dataset)
        .scorer(ContentSimilarity::new())
        .concurrency(1)
        .run()
        .await
        .unwrap();
    assert_eq!(report.items[0].output, "The sky is mocked.");
    assert_eq!(report.items[1].output, "The sky is real.");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the mocked call never ran the tool"
    );
}

#[tokio::test]
async fn a_workflow_runs_over_json_inputs_traced_and_retried() {
    use kestrel_core::eval::create_scorer;
    use kestrel_core::kestrel::Kestrel;
    use kestrel_core::trace::TracingConfig;
    use kestrel_core::workflow::{StepError, Workflow};
    use kestrel_evals::experiment::Target;

    // Doubles `n`; fails the first time it sees 7 (a flaky dependency).
    let flaked = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&flaked);
    let double = Workflow::builder("double")
        .map(move |input, _ctx| {
            let seen = Arc::clone(&seen);
            async move {
                let n = input["n"].as_i64().unwrap_or_default();
                if n == 7 && seen.fetch_add(1, Ordering::AcqRel) == 0 {
                    return Err(StepError::new("flaky"));
                }
                Ok(serde_json::json!({"doubled": n * 2}))
            }
        })
        .commit()
        .unwrap();
    let kestrel = Kestrel::builder()
        .workflow(double)
        .tracing(TracingConfig::new())
        .build()
        .unwrap();
    let dataset = Dataset::from_jsonl(
        "numbers",
        r#"{"id": "a", "input": {"n": 2}, "groundTruth": {"doubled": 4}}
{"id": "b", "input": {"n": 7}, "groundTruth": {"doubled": 14}}
{"id": "c", "input": {"n": 1}, "toolMocks": {"search": "nothing"}}"#,
    )
    .unwrap();
    let exact = create_scorer("exact")
        .generate_score(|cx| async move {
            let output = serde_json::to_value(&cx.run.output).unwrap_or_default();
            Ok(if cx.run.ground_truth.as_ref() == Some(&output) {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    let workflow = kestrel.workflow("double").unwrap().clone();
    let target = Target::from(workflow);
    assert_eq!((target.kind(), target.id()), ("workflow", "double"));
    let report = Experiment::new(target, dataset)
        .scorer(exact)
        .retries(1)
        .concurrency(1)
        .run()
        .await
        .unwrap();
    assert_eq!(
        (report.target_type.as_str(), report.target_id.as_str()),
        ("workflow", "double")
    );
    let a = &report.items[0];
    assert_eq!(a.input, serde_json::json!({"n": 2}));
    assert_eq!(a.output, serde_json::json!({"doubled": 4}));
    assert_eq!(a.scores[0].score, Some(1.0));
    assert!(
        a.trace_id.as_deref().is_some_and(|t| t.len() == 32),
        "{a:?}"
    );
    assert!(a.run_id.is_some());
    let b = &report.items[1];
    assert_eq!(
        (b.attempts, b.error.as_deref()),
        (2, None),
        "retried once: {b:?}"
    );
    assert_eq!(b.scores[0].score, Some(1.0));
    let c = &report.items[2];
    assert!(
        c.error
            .as_deref()
            .unwrap()
            .contains("toolMocks apply to agent targets"),
        "{c:?}"
    );
    assert_eq!(report.summary["exact"].mean, Some(1.0));
    assert_eq!(report.failed_items, 1);
}
