//! Evals: score runs with Mastra's scorers, on their own and live on an agent.
//!
//! 1. A code scorer on its own (`@mastra/evals`' values: "The quick brown fox" against "The
//!    quick brown dog" is 0.8).
//! 2. A scorer of your own, built with `create_scorer`: a function step and a judge step
//!    answered through structured output (here by a scripted judge; any model works).
//! 3. Live scoring: the agent scores a share of its runs after each one, off its path; the
//!    scores land in the instance's SQLite file with the denominator kept.
//!
//! ```sh
//! cargo run -p kestrel --example evals --features evals,sqlite
//! ```

use std::sync::Arc;

use kestrel::agent::Agent;
use kestrel::eval::{JudgePrompt, ScoreSampling, Scorer, ScorerRun, create_scorer};
use kestrel::evals::code::{ContentSimilarity, ToolCallAccuracy};
use kestrel::kestrel::Kestrel;
use kestrel::model::{ScriptedModel, ScriptedResponse};
use kestrel::storage::SqliteStorage;
use kestrel::store::ScoreQuery;
use serde_json::json;

/// The weather tool's input.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    /// The city.
    #[allow(dead_code)]
    city: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A code scorer on its own.
    let similarity = ContentSimilarity::new()
        .run(ScorerRun::texts(
            "The quick brown fox",
            "The quick brown dog",
        ))
        .await?;
    println!("content similarity: {:?}", similarity.score);
    assert_eq!(similarity.score, Some(0.8));

    // 2. A scorer of your own: the judge lists the answer's claims (JSON checked against the
    //    schema), a function turns them into a score, a function explains it.
    let judge = Agent::builder("judge")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text(r#"{"claims": ["It is sunny", "It is 21 degrees"]}"#)
        })))
        .instructions("You list the factual claims of an answer. Reply in JSON.")
        .build()?;
    let concise = create_scorer("concise")
        .description("1 with at most two claims, less with more")
        .judge(judge)
        .analyze_judge(
            JudgePrompt::new(|cx| format!("List the claims of: {}", cx.run.output_text())).schema(
                json!({
                    "type": "object",
                    "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
                    "required": ["claims"]
                }),
            ),
        )
        .generate_score(|cx| async move {
            let claims = cx
                .analyze
                .as_ref()
                .and_then(|a| a["claims"].as_array())
                .map_or(0, Vec::len);
            Ok(if claims <= 2 {
                1.0
            } else {
                2.0 / claims as f64
            })
        })
        .generate_reason(|cx| async move { Ok(format!("score {}", cx.score.unwrap_or(0.0))) })
        .build()?;
    let judged = concise
        .run(ScorerRun::texts(
            "Weather in Paris?",
            "Sunny and 21 degrees.",
        ))
        .await?;
    println!("concise: {:?} ({:?})", judged.score, judged.reason);
    assert_eq!(judged.score, Some(1.0));

    // 3. Live scoring: every run of the agent is scored after it returns, the scores kept
    //    in the instance's storage.
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        if req
            .messages
            .iter()
            .any(|m| m.role == kestrel::message::Role::Tool)
        {
            ScriptedResponse::text("Sunny in Paris.")
        } else {
            ScriptedResponse::tool_call("c1", "weather", json!({"city": "Paris"}))
        }
    }));
    let weather = kestrel::tool::create_tool("weather")
        .description("The weather in a city")
        .execute(|_: City, _ctx| async move { Ok(json!({"sky": "sunny"})) });
    let agent = Agent::builder("weather")
        .model(model)
        .tool(weather)
        .scorer(ToolCallAccuracy::tool("weather"), ScoreSampling::None)
        .scorer(ContentSimilarity::new(), ScoreSampling::ratio(0.5))
        .build()?;
    let dir = tempfile::tempdir()?;
    let storage = SqliteStorage::open(dir.path().join("kestrel.db")).await?;
    let kestrel = Kestrel::builder()
        .agent(agent)
        .storage(storage.clone())
        .build()?;
    let agent = kestrel.agent("weather")?;
    for run in ["run-1", "run-2", "run-3", "run-4"] {
        agent.generate("Weather in Paris?").run_id(run).await?;
    }
    kestrel.scoring().idle().await;
    for scorer in [
        "code-tool-call-accuracy-scorer",
        "content-similarity-scorer",
    ] {
        let counts = kestrel.scoring().counts("weather", scorer);
        println!(
            "{scorer}: {} eligible, {} sampled, {} scored, {} failed",
            counts.eligible, counts.sampled, counts.scored, counts.failed
        );
    }
    let stored = kestrel
        .stores()
        .scores
        .list_scores(&ScoreQuery::new().scorer("code-tool-call-accuracy-scorer"))
        .await?;
    assert_eq!(stored.total, 4);
    assert!(stored.scores.iter().all(|s| s.score == Some(1.0)));
    println!("{} tool-call scores in SQLite, all 1.0", stored.total);
    Ok(())
}
