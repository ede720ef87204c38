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

on_every_backend!(an_instance_keeps_live_scores_in_its_storage);

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
