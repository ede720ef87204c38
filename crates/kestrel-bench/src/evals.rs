//! Evals benchmarks (issue 42).
//!
//! ```text
//! kestrel-bench evals-scorers [N]        # scorings/s of each code scorer, N runs (10,000)
//! kestrel-bench evals-experiment [ITEMS] # an experiment of ITEMS items (100) on the scripted model
//! ```
//!
//! **Scorers.** Each deterministic code scorer scores the same agent turn N times (a 25-word
//! question and a 60-word answer, about 120 and 330 characters; tool-call and trajectory
//! accuracy get an answer with two tool calls): scorings per second, median of 3 passes.
//!
//! **Experiment.** An agent on the scripted model (answers at once) over ITEMS items, with
//! content similarity and keyword coverage, 4 items at once, scores stored in memory: wall
//! time and the process's peak RSS.

use std::sync::Arc;
use std::time::Instant;

use kestrel::agent::Agent;
use kestrel::eval::{AgentInput, ExpectedStep, ScorerRun, SharedScorer};
use kestrel::evals::code::{
    Completeness, ContentSimilarity, KeywordCoverage, TextualDifference, Tone, ToolCallAccuracy,
    TrajectoryAccuracy,
};
use kestrel::evals::experiment::{Dataset, DatasetItem, Experiment};
use kestrel::message::{Message, Part, Role};
use kestrel::model::{ScriptedModel, ScriptedResponse};
use kestrel::store::InMemoryScoreStore;
use serde_json::json;

type BoxError = Box<dyn std::error::Error>;

const QUESTION: &str = "Could you please summarize what the quarterly budget review decided about \
hiring, marketing spend and the new office, and whether anything changed since last month?";
const ANSWER: &str = "The quarterly budget review decided to pause new hiring until the autumn, \
to cut the marketing spend by ten percent and to move the new office to next year. Compared \
with last month, the only change is the office: it was planned for this summer. Everything \
else stays as agreed, and the team will review the numbers again in six weeks.";

fn turn() -> ScorerRun {
    let mut parts = vec![Part::Text {
        text: ANSWER.into(),
    }];
    for (i, tool) in ["search", "summarize"].iter().enumerate() {
        parts.push(Part::ToolCall {
            tool_call_id: format!("c{i}"),
            tool_name: (*tool).into(),
            args: json!({"q": QUESTION}),
        });
    }
    ScorerRun::agent(
        AgentInput {
            input_messages: vec![Message::user(QUESTION)],
            ..AgentInput::default()
        },
        vec![Message::new(Role::Assistant, parts)],
    )
}

/// Scorings per second of each code scorer.
pub async fn scorers(n: usize) -> Result<(), BoxError> {
    let all: Vec<SharedScorer> = vec![
        Arc::new(ContentSimilarity::new()),
        Arc::new(TextualDifference::new()),
        Arc::new(KeywordCoverage::new()),
        Arc::new(Completeness::new()),
        Arc::new(Tone::new()),
        Arc::new(ToolCallAccuracy::order(["search", "summarize"])),
        Arc::new(TrajectoryAccuracy::new().expected(vec![
            ExpectedStep::tool_call("search"),
            ExpectedStep::tool_call("summarize"),
        ])),
    ];
    let run = turn();
    println!(
        "evals-scorers: {n} scorings each, a {}-character question and a {}-character answer, median of 3",
        QUESTION.len(),
        ANSWER.len()
    );
    for scorer in all {
        let mut rates = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            for _ in 0..n {
                let result = scorer.run(run.clone()).await?;
                std::hint::black_box(result);
            }
            rates.push(n as f64 / started.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "  {}: {:.0} scorings/s ({:.1} µs each)",
            scorer.id(),
            rates[1],
            1e6 / rates[1]
        );
    }
    Ok(())
}

/// An experiment of `items` items on the scripted model.
pub async fn experiment(items: usize) -> Result<(), BoxError> {
    let model = Arc::new(
        ScriptedModel::from_fn(|req| {
            let question = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text(format!("About {question}: {ANSWER}"))
        })
        .without_recording(),
    );
    let agent = Agent::builder("bench").model(model).build()?;
    let dataset = Dataset::new(
        "bench",
        (0..items)
            .map(|i| {
                DatasetItem::new(i.to_string(), format!("Question {i}: {QUESTION}"))
                    .ground_truth(ANSWER)
            })
            .collect(),
    );
    let store = Arc::new(InMemoryScoreStore::new());
    let started = Instant::now();
    let report = Experiment::new(agent, dataset)
        .scorer(ContentSimilarity::new())
        .scorer(KeywordCoverage::new())
        .concurrency(4)
        .store(store)
        .run()
        .await?;
    let wall = started.elapsed();
    println!(
        "evals-experiment: {items} items, 2 scorers, 4 at once: wall {:.1} ms, {} failed, means {}, peak RSS {:.1} MB",
        wall.as_secs_f64() * 1000.0,
        report.failed_items,
        report
            .summary
            .iter()
            .map(|(id, s)| format!("{id} {:.3}", s.mean.unwrap_or(f64::NAN)))
            .collect::<Vec<_>>()
            .join(", "),
        super::peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}
