//! The checks of scores (core's `ScoreStore` on a storage): exact round trips, upserts by
//! id, listings (filters, newest first, paging, counts), refused records, pending scorings.

use std::sync::Arc;

use kestrel_core::store::{PendingScore, ScoreQuery, ScoreRecord, ScoreSource};
use serde_json::json;

use crate::scores::MAX_SCORE_ID_BYTES;
use crate::storage::Storage;

/// A score of `scorer` on `run` of agent `agent`, made at `created_at` (ms).
pub fn score(id: &str, scorer: &str, run: &str, agent: &str, created_at: u64) -> ScoreRecord {
    let mut record = ScoreRecord::new(
        scorer,
        json!({"id": scorer, "name": scorer, "description": ""}),
        run,
        "AGENT",
        agent,
        ScoreSource::Live,
        json!({"inputMessages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}),
        json!([{"role": "assistant", "parts": [{"type": "text", "text": "hello"}]}]),
    );
    record.id = id.to_owned();
    record.created_at = created_at;
    record.updated_at = created_at;
    record.score = Some(0.5);
    record
}

/// A record read back equals the one saved, every field (unicode and nested JSON included);
/// a save with the same id replaces it.
pub async fn scores_round_trip_and_upsert(store: Arc<dyn Storage>) {
    let mut full = score("s1", "relevancy", "run-1", "weather", 1_000);
    full.reason = Some("Ünïcode ✓ and \"quotes\"".into());
    full.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    full.span_id = Some("00f067aa0ba902b7".into());
    full.preprocess_step_result = Some(json!({"statements": ["a", "b"], "n": 2}));
    full.analyze_prompt = Some("judge \u{0} this".into());
    full.ground_truth = Some(json!("Paris"));
    full.metadata = Some(json!({"error": null, "nested": {"deep": [1, 2.5, true]}}));
    full.thread_id = Some("t1".into());
    full.resource_id = Some("u1".into());
    full.experiment_id = Some("exp-1".into());
    store.save_score(&full).await.unwrap();
    assert_eq!(store.get_score("s1").await.unwrap(), Some(full.clone()));
    assert_eq!(store.get_score("missing").await.unwrap(), None);

    let mut updated = full.clone();
    updated.score = None;
    updated.not_scorable = Some("no context".into());
    store.save_score(&updated).await.unwrap();
    assert_eq!(store.get_score("s1").await.unwrap(), Some(updated));
    assert_eq!(
        store.list_scores(&ScoreQuery::new()).await.unwrap().total,
        1
    );
}

/// Listings filter by run, scorer, entity, source and experiment, newest first (ties: the
/// larger id first), paged, with the total of all matches.
pub async fn scores_list_filters_order_and_paging(store: Arc<dyn Storage>) {
    for (i, (scorer, run, agent)) in [
        ("relevancy", "run-1", "weather"),
        ("toxicity", "run-1", "weather"),
        ("relevancy", "run-2", "weather"),
        ("relevancy", "run-3", "travel"),
    ]
    .into_iter()
    .enumerate()
    {
        store
            .save_score(&score(
                &format!("s{i}"),
                scorer,
                run,
                agent,
                1_000 + i as u64,
            ))
            .await
            .unwrap();
    }
    let mut test = score("s9", "relevancy", "run-9", "weather", 1_003);
    test.source = ScoreSource::Test;
    test.experiment_id = Some("exp".into());
    store.save_score(&test).await.unwrap();

    let ids = |page: kestrel_core::store::ScorePage| -> Vec<String> {
        page.scores.into_iter().map(|s| s.id).collect()
    };
    let all = store.list_scores(&ScoreQuery::new()).await.unwrap();
    assert_eq!(all.total, 5);
    // s9 and s3 were made at the same time: the larger id first.
    assert_eq!(ids(all), vec!["s9", "s3", "s2", "s1", "s0"]);
    let run = store
        .list_scores(&ScoreQuery::new().run("run-1"))
        .await
        .unwrap();
    assert_eq!(ids(run), vec!["s1", "s0"]);
    let scorer = store
        .list_scores(&ScoreQuery::new().scorer("relevancy"))
        .await
        .unwrap();
    assert_eq!(scorer.total, 4);
    let entity = store
        .list_scores(&ScoreQuery::new().entity("AGENT", "travel"))
        .await
        .unwrap();
    assert_eq!(ids(entity), vec!["s3"]);
    let mut live = ScoreQuery::new();
    live.source = Some(ScoreSource::Live);
    assert_eq!(store.list_scores(&live).await.unwrap().total, 4);
    let mut experiment = ScoreQuery::new();
    experiment.experiment_id = Some("exp".into());
    assert_eq!(
        ids(store.list_scores(&experiment).await.unwrap()),
        vec!["s9"]
    );
    let page = store
        .list_scores(&ScoreQuery::new().page(1, 2))
        .await
        .unwrap();
    assert_eq!(page.total, 5);
    assert_eq!(ids(page), vec!["s2", "s1"]);
    let past = store
        .list_scores(&ScoreQuery::new().page(9, 2))
        .await
        .unwrap();
    assert!(past.scores.is_empty() && past.total == 5);
    // A page is bounded.
    assert_eq!(ScoreQuery::new().page(0, 100_000).page_size(), 100);
}

/// Records with an empty, oversized or NUL-holding id, or a score that is not a finite
/// number, are refused with the field named; nothing is written.
pub async fn scores_refuse_bad_records(store: Arc<dyn Storage>) {
    let mut bad = score("", "s", "r", "a", 1);
    let error = store.save_score(&bad).await.unwrap_err().to_string();
    assert!(error.contains("id"), "{error}");
    bad.id = "x".repeat(MAX_SCORE_ID_BYTES + 1);
    assert!(store.save_score(&bad).await.is_err());
    bad.id = "ok".into();
    bad.run_id = "r\u{0}".into();
    let error = store.save_score(&bad).await.unwrap_err().to_string();
    assert!(error.contains("runId"), "{error}");
    bad.run_id = "r".into();
    bad.score = Some(f64::NAN);
    let error = store.save_score(&bad).await.unwrap_err().to_string();
    assert!(error.contains("score"), "{error}");
    assert_eq!(
        store.list_scores(&ScoreQuery::new()).await.unwrap().total,
        0
    );
}

/// A pending scoring of `scorer` on `run` of agent `agent`, made at `created_at` (ms).
fn pending(scorer: &str, run: &str, agent: &str, created_at: u64) -> PendingScore {
    let mut pending = PendingScore::new(
        scorer,
        "AGENT",
        agent,
        run,
        json!({"runId": run, "input": {"inputMessages": []}, "output": "Ünïcode ✓"}),
    );
    pending.created_at = created_at;
    pending.thread_id = Some("t1".into());
    pending
}

/// Pending scorings read back exactly, oldest first and made before the bound asked,
/// at most the limit; saved again they are replaced; completing one stores its score and
/// forgets it, and only it.
pub async fn pending_scores_kept_until_completed(store: Arc<dyn Storage>) {
    let first = pending("relevancy", "run-1", "weather", 1_000);
    let second = pending("toxicity", "run-1", "weather", 1_000);
    let third = pending("relevancy", "run-2", "weather", 2_000);
    assert_ne!(first.id, second.id, "one id per run and scorer");
    assert_eq!(first.id, PendingScore::id_for("run-1", "relevancy"));
    store
        .save_pending_scores(&[first.clone(), second.clone(), third.clone()])
        .await
        .unwrap();
    store.save_pending_scores(&[]).await.unwrap();
    let mut by_id = [first.clone(), second.clone()];
    by_id.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        store.pending_scores(1_500, 10).await.unwrap(),
        by_id.to_vec(),
        "made before 1500, ties by id"
    );
    assert_eq!(store.pending_scores(u64::MAX, 10).await.unwrap().len(), 3);
    assert_eq!(store.pending_scores(u64::MAX, 1).await.unwrap().len(), 1);
    assert!(store.pending_scores(1_000, 10).await.unwrap().is_empty());

    let mut retried = first.clone();
    retried.attempts = 2;
    store
        .save_pending_scores(std::slice::from_ref(&retried))
        .await
        .unwrap();
    let kept = store.pending_scores(u64::MAX, 10).await.unwrap();
    assert_eq!(kept.len(), 3, "saved again, replaced");
    assert!(kept.contains(&retried));

    let done = score(&first.id, "relevancy", "run-1", "weather", 3_000);
    store.complete_pending_score(&done).await.unwrap();
    assert_eq!(store.get_score(&first.id).await.unwrap(), Some(done));
    let left: Vec<String> = store
        .pending_scores(u64::MAX, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&first.id));
    // A score completing nothing is stored all the same.
    let other = score("unrelated", "relevancy", "run-7", "weather", 3_000);
    store.complete_pending_score(&other).await.unwrap();
    assert_eq!(store.pending_scores(u64::MAX, 10).await.unwrap().len(), 2);

    // A bad one among good ones: none is kept, the field named.
    let mut bad = pending("relevancy", "run-3", "weather", 1);
    bad.entity_id = String::new();
    let error = store
        .save_pending_scores(&[pending("bias", "run-3", "weather", 1), bad])
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("entityId"), "{error}");
    assert_eq!(store.pending_scores(u64::MAX, 10).await.unwrap().len(), 2);
}
