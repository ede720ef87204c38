//! Live scorings survive a process stopping: a run sampled for scoring whose process stopped
//! before its score was stored is scored by the next process on the same SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::eval::{ScoreSampling, Scorer, create_scorer};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::store::{PendingScore, ScoreQuery, ScoreSource, ScoreStore};
use kestrel_storage::sqlite::SqliteStorage;

/// The weather agent, its answers scored by `scorer` on every run.
fn weather(scorer: impl Scorer + 'static) -> Agent {
    Agent::builder("weather")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Sunny in Paris.")
        })))
        .scorer(scorer, ScoreSampling::None)
        .build()
        .unwrap()
}

/// The first process: runs the agent once with a scorer that never ends, and stops (its
/// runtime, and the scoring on it, dropped) once the run has returned.
fn first_process(path: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let storage = SqliteStorage::open(path).await.unwrap();
        let stuck = create_scorer("mentions-paris")
            .generate_score(|_| std::future::pending())
            .build()
            .unwrap();
        let kestrel = Kestrel::builder()
            .storage(storage.clone())
            .agent(weather(stuck))
            .build()
            .unwrap();
        let agent = kestrel.agent("weather").unwrap();
        agent
            .generate("Weather in Paris?")
            .run_id("run-1")
            .await
            .unwrap();
        assert_eq!(kestrel.scoring().pending(), 1, "the scoring is running");
        let pending = storage.pending_scores(u64::MAX, 10).await.unwrap();
        assert_eq!(pending.len(), 1, "and kept pending");
        storage.close().await;
    });
    runtime.shutdown_background();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoring_cut_short_by_a_stop_is_scored_by_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kestrel.db");
    let first = path.clone();
    std::thread::spawn(move || first_process(&first))
        .join()
        .unwrap();

    let storage = SqliteStorage::open(&path).await.unwrap();
    assert!(
        storage
            .list_scores(&ScoreQuery::new())
            .await
            .unwrap()
            .scores
            .is_empty(),
        "the first process stored no score"
    );
    let mentions = create_scorer("mentions-paris")
        .generate_score(|cx| async move {
            Ok(if cx.run.output_text().contains("Paris") {
                1.0
            } else {
                0.0
            })
        })
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(storage.clone())
        .agent(weather(mentions))
        .build()
        .unwrap();
    assert_eq!(kestrel.resume_pending_scores().await, 1);
    kestrel.scoring().idle().await;

    let page = storage
        .list_scores(&ScoreQuery::new().run("run-1"))
        .await
        .unwrap();
    assert_eq!(page.total, 1);
    let score = &page.scores[0];
    assert_eq!(score.id, PendingScore::id_for("run-1", "mentions-paris"));
    assert_eq!(score.score, Some(1.0));
    assert_eq!(score.source, ScoreSource::Live);
    assert_eq!(
        (score.entity_type.as_str(), score.entity_id.as_str()),
        ("AGENT", "weather")
    );
    assert_eq!(
        score.input["inputMessages"][0]["parts"][0]["text"],
        "Weather in Paris?"
    );
    assert!(
        storage
            .pending_scores(u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let counts = kestrel.scoring().counts("weather", "mentions-paris");
    assert_eq!((counts.scored, counts.failed), (1, 0));
    // Nothing is left to resume.
    assert_eq!(kestrel.resume_pending_scores().await, 0);
    storage.close().await;
}
