//! Live scores on every backend: an instance given a storage keeps its agents' live scores
//! there (Mastra's #7938 and #11057: scorers that silently did not run, or whose table was
//! never created), linked to the run and found by run, scorer and agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{ScoreSampling, create_scorer};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::{ScoreQuery, ScoreSource, ScoreStore};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;

on_every_backend!(
    an_instance_keeps_live_scores_in_its_storage,
    a_workflows_successful_runs_are_scored_live
);

async fn an_instance_keeps_live_scores_in_its_storage(store: Store) {
    let polite = create_scorer("polite")
        .generate_score(|cx| async move {
            Ok(if cx.run.output_text().contains("please") {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    let agent = Agent::builder("concierge")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Yes, please wait a moment.")
        })))
        .scorer(polite, ScoreSampling::None)
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .agent(agent)
        .storage(Arc::clone(&store))
        .build()
        .unwrap();
    let agent = kestrel.agent("concierge").unwrap();
    for run in ["run-1", "run-2"] {
        agent
            .generate("Can I check in early?")
            .run_id(run)
            .await
            .unwrap();
    }
    agent.scoring().idle().await;
    // Through the storage itself, not the instance: the scores are there.
    let scores: Arc<dyn ScoreStore> = store;
    let page = scores
        .list_scores(&ScoreQuery::new().entity("AGENT", "concierge"))
        .await
        .unwrap();
    assert_eq!(page.total, 2);
    let first = scores
        .list_scores(&ScoreQuery::new().run("run-1"))
        .await
        .unwrap();
    let score = &first.scores[0];
    assert_eq!(
        (score.scorer_id.as_str(), score.score, score.source),
        ("polite", Some(1.0), ScoreSource::Live)
    );
    assert_eq!(
        scores.get_score(&score.id).await.unwrap().as_ref(),
        Some(score)
    );
}

/// A workflow's live scorer scores its successful runs (input the run's input, output its
/// result) as a `WORKFLOW` entity, in the instance's storage; a failed run is not eligible.
async fn a_workflows_successful_runs_are_scored_live(store: Store) {
    use kestrel_core::workflow::{Workflow, create_step};
    use serde_json::{Value, json};
    let doubled = create_scorer("doubled")
        .generate_score(|cx| async move {
            let input = serde_json::to_value(&cx.run.input).unwrap_or_default();
            let output = serde_json::to_value(&cx.run.output).unwrap_or_default();
            Ok(
                if output["v"] == json!(input["v"].as_i64().unwrap_or(0) * 2) {
                    1.0
                } else {
                    0.0
                },
            )
        })
        .build()
        .unwrap();
    let double = create_step("double").execute(|n: Value, _ctx| async move {
        let v = n["v"].as_i64().unwrap_or(0);
        if v < 0 {
            return Err(kestrel_core::workflow::StepError::new("negative"));
        }
        Ok(json!({"v": v * 2}))
    });
    let workflow = Workflow::builder("doubler")
        .then(double)
        .scorer(doubled, ScoreSampling::None)
        .commit()
        .unwrap();
    let kestrel = Kestrel::builder()
        .workflow(workflow)
        .storage(Arc::clone(&store))
        .build()
        .unwrap();
    let workflow = kestrel.workflow("doubler").unwrap();
    assert_eq!(workflow.scorers().len(), 1);
    for v in [2, -1] {
        workflow.create_run().start(json!({"v": v})).await.unwrap();
    }
    kestrel.scoring().idle().await;
    let scores: Arc<dyn ScoreStore> = store;
    let page = scores
        .list_scores(&ScoreQuery::new().entity("WORKFLOW", "doubler"))
        .await
        .unwrap();
    assert_eq!(page.total, 1, "the failed run is not scored");
    let score = &page.scores[0];
    assert_eq!(score.score, Some(1.0));
    assert_eq!(score.source, ScoreSource::Live);
    assert_eq!(score.input, json!({"v": 2}));
    let counts = kestrel.scoring().counts("doubler", "doubled");
    assert_eq!((counts.eligible, counts.scored), (1, 1));
}
