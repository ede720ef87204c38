//! Live scorings kept pending until stored: what a sampled run leaves in the score store
//! before its scorers end, and what `Kestrel::resume_pending_scores` does with what a
//! stopped process left (scores it; gives up, visibly, on what it cannot score).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{MAX_SCORING_ATTEMPTS, ScoreSampling, Scorer, create_scorer};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::{InMemoryScoreStore, PendingScore, ScoreQuery, SharedScoreStore, Stores};
use kestrel_core::workflow::Workflow;
use serde_json::{Value, json};

fn constant(id: &str, score: f64) -> impl Scorer + 'static {
    create_scorer(id)
        .generate_score(move |_| async move { Ok(score) })
        .build()
        .unwrap()
}

fn stuck(id: &str) -> impl Scorer + 'static {
    create_scorer(id)
        .generate_score(|_| std::future::pending())
        .build()
        .unwrap()
}

fn agent(scorer: impl Scorer + 'static) -> Agent {
    Agent::builder("weather")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Sunny.")
        })))
        .scorer(scorer, ScoreSampling::None)
        .build()
        .unwrap()
}

fn instance(scores: &SharedScoreStore, agent: Agent) -> Kestrel {
    Kestrel::builder()
        .storage(Stores::in_memory().with_scores(Arc::clone(scores)))
        .agent(agent)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_sampled_run_is_pending_until_its_score_is_stored() {
    let scores: SharedScoreStore = Arc::new(InMemoryScoreStore::new());
    let kestrel = instance(&scores, agent(stuck("s")));
    let agent = kestrel.agent("weather").unwrap();
    agent.generate("hi").run_id("r1").await.unwrap();
    // Kept before the run returned, with what the scorer will read.
    let pending = scores.pending_scores(u64::MAX, 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    let kept = &pending[0];
    assert_eq!(kept.id, PendingScore::id_for("r1", "s"));
    assert_eq!(
        (
            kept.entity_type.as_str(),
            kept.entity_id.as_str(),
            kept.run_id.as_str()
        ),
        ("AGENT", "weather", "r1")
    );
    assert_eq!(kept.run["output"][0]["parts"][0]["text"], "Sunny.");
    assert_eq!(kept.attempts, 0);

    // A scorer that ends leaves nothing pending.
    let kestrel = instance(&scores, agent_with_id("other", constant("t", 1.0)));
    let other = kestrel.agent("other").unwrap();
    other.generate("hi").run_id("r2").await.unwrap();
    kestrel.scoring().idle().await;
    let left = scores.pending_scores(u64::MAX, 10).await.unwrap();
    assert_eq!(left.len(), 1, "only the stuck one: {left:?}");
    assert!(
        scores
            .get_score(&PendingScore::id_for("r2", "t"))
            .await
            .unwrap()
            .is_some()
    );
}

fn agent_with_id(id: &str, scorer: impl Scorer + 'static) -> Agent {
    Agent::builder(id)
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("ok")
        })))
        .scorer(scorer, ScoreSampling::None)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_workflow_run_is_kept_pending_and_resumed_as_a_workflow() {
    let scores: SharedScoreStore = Arc::new(InMemoryScoreStore::new());
    let echo = |scorer| {
        Workflow::builder("echo")
            .map(|input, _ctx| async move { Ok(input) })
            .scorer(scorer, ScoreSampling::None)
            .commit()
            .unwrap()
    };
    let first = Kestrel::builder()
        .storage(Stores::in_memory().with_scores(Arc::clone(&scores)))
        .workflow(echo(
            create_scorer("w")
                .generate_score(|_| std::future::pending())
                .build()
                .unwrap(),
        ))
        .build()
        .unwrap();
    let run = first.workflow("echo").unwrap().create_run();
    run.start(json!({"x": 1})).await.unwrap();
    let pending = scores.pending_scores(u64::MAX, 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].entity_type, "WORKFLOW");

    let second = Kestrel::builder()
        .storage(Stores::in_memory().with_scores(Arc::clone(&scores)))
        .workflow(echo(
            create_scorer("w")
                .generate_score(|_| async { Ok(0.25) })
                .build()
                .unwrap(),
        ))
        .build()
        .unwrap();
    assert_eq!(second.resume_pending_scores().await, 1);
    second.scoring().idle().await;
    let score = scores.get_score(&pending[0].id).await.unwrap().unwrap();
    assert_eq!(score.score, Some(0.25));
    assert_eq!(
        (score.entity_type.as_str(), score.entity_id.as_str()),
        ("WORKFLOW", "echo")
    );
    assert_eq!(score.input, json!({"x": 1}));
    assert!(
        scores
            .pending_scores(u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A pending scoring of `scorer` on run `run` of agent `agent`, as a stopped process left it.
fn left(scorer: &str, run: &str, agent: &str, attempts: u32, kept_run: Value) -> PendingScore {
    let mut pending = PendingScore::new(scorer, "AGENT", agent, run, kept_run);
    pending.attempts = attempts;
    pending.created_at = 1;
    pending
}

#[tokio::test]
async fn what_cannot_be_scored_is_stored_as_a_failure_saying_why() {
    let scores: SharedScoreStore = Arc::new(InMemoryScoreStore::new());
    let good_run = json!({
        "runId": "r", "input": "Weather?", "output": "Sunny."
    });
    let left_behind = [
        left("gone", "r1", "weather", 0, good_run.clone()),
        left("s", "r2", "retired-agent", 0, good_run.clone()),
        left("s", "r3", "weather", MAX_SCORING_ATTEMPTS, good_run.clone()),
        left("s", "r4", "weather", 0, json!({"not": "a run"})),
        left("s", "r5", "weather", 1, good_run),
    ];
    scores.save_pending_scores(&left_behind).await.unwrap();
    let kestrel = instance(&scores, agent(constant("s", 0.75)));
    assert_eq!(kestrel.resume_pending_scores().await, 5);
    kestrel.scoring().idle().await;
    assert!(
        scores
            .pending_scores(u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let kind = |run: &str, scorer: &str| {
        let scores = Arc::clone(&scores);
        let id = PendingScore::id_for(run, scorer);
        async move {
            let score = scores.get_score(&id).await.unwrap().unwrap();
            let error = score
                .metadata
                .as_ref()
                .and_then(|m| m["error"]["kind"].as_str().map(str::to_owned));
            (score.score, error, score.metadata)
        }
    };
    let (value, error, metadata) = kind("r1", "gone").await;
    assert_eq!((value, error.as_deref()), (None, Some("unknown-scorer")));
    assert!(
        metadata.unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"gone\"")
    );
    assert_eq!(kind("r2", "s").await.1.as_deref(), Some("unknown-scorer"));
    assert_eq!(kind("r3", "s").await.1.as_deref(), Some("abandoned"));
    assert_eq!(kind("r4", "s").await.1.as_deref(), Some("corrupt"));
    // One that had been tried once before is tried again, and scored.
    assert_eq!(kind("r5", "s").await.0, Some(0.75));

    let all = scores.list_scores(&ScoreQuery::new()).await.unwrap();
    assert_eq!(all.total, 5, "one score per scoring left behind");
    let counts = kestrel.scoring().counts("weather", "s");
    assert_eq!((counts.scored, counts.failed), (1, 2));
}
