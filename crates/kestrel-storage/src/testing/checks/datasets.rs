//! The checks of datasets and experiments (core's `DatasetStore` on a storage): datasets
//! created once, items changed in versions that read back as they were, experiments and
//! their results, deletion of a whole dataset, refused records, concurrent changes.

use std::sync::Arc;

use kestrel_core::store::{
    DatasetItemRecord, DatasetQuery, DatasetRecord, DatasetStoreError, ExperimentRecord,
    ExperimentResultRecord, ExperimentStatus, ItemChange,
};
use serde_json::json;

use crate::storage::Storage;

/// An item `id` of dataset `dataset` asking `question`.
pub fn dataset_item(dataset: &str, id: &str, question: &str) -> DatasetItemRecord {
    let mut item = DatasetItemRecord::new(id, dataset, json!({"prompt": question}));
    item.ground_truth = Some(json!("Ünïcode ✓"));
    item.expected_trajectory = Some(json!({"steps": [{"kind": "tool", "name": "get_weather"}]}));
    item.metadata = Some(json!({"tags": ["smoke"], "n": 2.5}));
    item
}

/// An experiment `id` over dataset `dataset`, made at `created_at` (ms).
pub fn experiment(id: &str, dataset: &str, created_at: u64) -> ExperimentRecord {
    ExperimentRecord {
        id: id.to_owned(),
        name: Some(format!("run {id}")),
        dataset_id: dataset.to_owned(),
        dataset_version: 1,
        target_type: "agent".to_owned(),
        target_id: "weather".to_owned(),
        target_version: None,
        scorer_ids: vec!["trajectory-accuracy".to_owned()],
        status: ExperimentStatus::Pending,
        total_items: 2,
        succeeded_count: 0,
        failed_count: 0,
        skipped_count: 0,
        error: None,
        created_at,
        started_at: None,
        completed_at: None,
    }
}

fn result(id: &str, experiment: &str, item: &str) -> ExperimentResultRecord {
    ExperimentResultRecord {
        id: id.to_owned(),
        experiment_id: experiment.to_owned(),
        item_id: item.to_owned(),
        input: json!({"prompt": "weather in Oslo?"}),
        output: Some(json!({"text": "Clear."})),
        ground_truth: Some(json!("Clear")),
        error: None,
        status: "success".to_owned(),
        retry_count: 1,
        run_id: Some("run-1".to_owned()),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
        scores: vec![json!({"scorerId": "trajectory-accuracy", "score": 1.0})],
        duration_ms: 12,
        created_at: 5,
    }
}

/// A dataset is created once (a second create of its id is refused), read back equal, listed
/// newest first with a total, and starts at version 0 whatever it was given.
pub async fn datasets_create_get_and_list(store: Arc<dyn Storage>) {
    let mut first = DatasetRecord::new("ds-1", "Weather questions");
    first.description = Some("Cities, \"quoted\"".into());
    first.metadata = Some(json!({"owner": "evals"}));
    first.created_at = 1_000;
    first.updated_at = 1_000;
    first.version = 7;
    store.create_dataset(&first).await.unwrap();
    first.version = 0;
    assert_eq!(
        store.get_dataset("ds-1").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.get_dataset("nope").await.unwrap(), None);
    let again = store.create_dataset(&first).await.unwrap_err();
    assert!(
        matches!(again, DatasetStoreError::DatasetExists(ref id) if id == "ds-1"),
        "{again:?}"
    );
    for (id, at) in [("ds-2", 2_000), ("ds-3", 3_000)] {
        let mut dataset = DatasetRecord::new(id, id);
        dataset.created_at = at;
        store.create_dataset(&dataset).await.unwrap();
    }
    let page = store
        .list_datasets(&DatasetQuery::page(0, 2))
        .await
        .unwrap();
    let ids: Vec<&str> = page.datasets.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["ds-3", "ds-2"]);
    assert_eq!(page.total, 3);
    let next = store
        .list_datasets(&DatasetQuery::page(1, 2))
        .await
        .unwrap();
    assert_eq!(next.datasets[0].id, "ds-1");
}

/// Each change of items is one version; every version reads back as it was (a replaced
/// item's old content, a deleted item, at the versions that had them); a change of an
/// unknown dataset, or an invalid one, changes nothing.
pub async fn dataset_items_change_in_versions(store: Arc<dyn Storage>) {
    store
        .create_dataset(&DatasetRecord::new("ds", "versions"))
        .await
        .unwrap();
    assert!(
        store
            .list_dataset_items("ds", None)
            .await
            .unwrap()
            .is_empty()
    );
    let v1 = store
        .change_dataset_items(
            "ds",
            &[
                ItemChange::Put(dataset_item("ds", "b", "Rain in Bergen?")),
                ItemChange::Put(dataset_item("ds", "a", "Sun in Lisbon?")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(v1, 1);
    let v2 = store
        .change_dataset_items(
            "ds",
            &[
                ItemChange::Put(dataset_item("ds", "a", "Sun in Porto?")),
                ItemChange::Delete("b".into()),
                ItemChange::Put(dataset_item("ds", "c", "Snow in Oslo?")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(v2, 2);
    assert_eq!(store.change_dataset_items("ds", &[]).await.unwrap(), 2);
    let prompts = |items: &[DatasetItemRecord]| -> Vec<(String, String, u32)> {
        items
            .iter()
            .map(|i| {
                (
                    i.id.clone(),
                    i.input["prompt"].as_str().unwrap_or("").to_owned(),
                    i.dataset_version,
                )
            })
            .collect()
    };
    let now = store.list_dataset_items("ds", None).await.unwrap();
    assert_eq!(
        prompts(&now),
        [
            ("a".into(), "Sun in Porto?".into(), 2),
            ("c".into(), "Snow in Oslo?".into(), 2)
        ]
    );
    let then = store.list_dataset_items("ds", Some(1)).await.unwrap();
    assert_eq!(
        prompts(&then),
        [
            ("a".into(), "Sun in Lisbon?".into(), 1),
            ("b".into(), "Rain in Bergen?".into(), 1)
        ]
    );
    let mut expected = dataset_item("ds", "b", "Rain in Bergen?");
    expected.dataset_version = 1;
    expected.created_at = then[1].created_at;
    assert_eq!(then[1], expected, "every field read back");
    assert!(
        store
            .list_dataset_items("ds", Some(0))
            .await
            .unwrap()
            .is_empty()
    );
    let dataset = store.get_dataset("ds").await.unwrap().unwrap();
    assert_eq!(dataset.version, 2);

    let missing = store
        .change_dataset_items("nope", &[ItemChange::Delete("x".into())])
        .await
        .unwrap_err();
    assert!(
        matches!(missing, DatasetStoreError::DatasetNotFound(_)),
        "{missing:?}"
    );
    assert!(matches!(
        store.list_dataset_items("nope", None).await.unwrap_err(),
        DatasetStoreError::DatasetNotFound(_)
    ));
    for bad in [
        vec![ItemChange::Put(dataset_item("other", "x", "?"))],
        vec![
            ItemChange::Delete("a".into()),
            ItemChange::Put(dataset_item("ds", "a", "?")),
        ],
        vec![ItemChange::Delete(String::new())],
        vec![ItemChange::Put(dataset_item("ds", "nul\0id", "?"))],
    ] {
        let error = store.change_dataset_items("ds", &bad).await.unwrap_err();
        assert!(
            matches!(
                error,
                DatasetStoreError::InvalidChange { .. } | DatasetStoreError::InvalidRecord(_)
            ),
            "{error:?}"
        );
    }
    assert_eq!(store.get_dataset("ds").await.unwrap().unwrap().version, 2);
}

/// Concurrent changes of one dataset each get a version of their own, and none is lost.
pub async fn dataset_items_concurrent_changes(store: Arc<dyn Storage>) {
    store
        .create_dataset(&DatasetRecord::new("busy", "busy"))
        .await
        .unwrap();
    let changes = (0..8).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .change_dataset_items(
                    "busy",
                    &[ItemChange::Put(dataset_item("busy", &format!("i{i}"), "?"))],
                )
                .await
                .unwrap()
        })
    });
    let mut versions: Vec<u32> = Vec::new();
    for change in changes {
        versions.push(change.await.unwrap());
    }
    versions.sort_unstable();
    assert_eq!(versions, (1..=8).collect::<Vec<u32>>());
    assert_eq!(
        store.list_dataset_items("busy", None).await.unwrap().len(),
        8
    );
}

/// Experiments and their results are kept, replaced by id, listed (by dataset, newest
/// first); a result of an unknown experiment and an experiment of an unknown dataset are
/// refused; deleting the dataset deletes them all.
pub async fn experiments_and_results_round_trip(store: Arc<dyn Storage>) {
    store
        .create_dataset(&DatasetRecord::new("ds", "with experiments"))
        .await
        .unwrap();
    store
        .create_dataset(&DatasetRecord::new("other", "other"))
        .await
        .unwrap();
    let mut first = experiment("e1", "ds", 100);
    store.save_experiment(&first).await.unwrap();
    store
        .save_experiment(&experiment("e2", "ds", 200))
        .await
        .unwrap();
    store
        .save_experiment(&experiment("e3", "other", 300))
        .await
        .unwrap();
    first.status = ExperimentStatus::Completed;
    first.succeeded_count = 2;
    first.completed_at = Some(150);
    store.save_experiment(&first).await.unwrap();
    assert_eq!(store.get_experiment("e1").await.unwrap(), Some(first));
    let (of_ds, total) = store
        .list_experiments(Some("ds"), &DatasetQuery::default())
        .await
        .unwrap();
    let ids: Vec<&str> = of_ds.iter().map(|e| e.id.as_str()).collect();
    assert_eq!((ids, total), (vec!["e2", "e1"], 2));
    let (all, total) = store
        .list_experiments(None, &DatasetQuery::page(0, 1))
        .await
        .unwrap();
    assert_eq!((all[0].id.as_str(), total), ("e3", 3));
    let refused = store
        .save_experiment(&experiment("e4", "nope", 1))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, DatasetStoreError::DatasetNotFound(_)),
        "{refused:?}"
    );

    store
        .save_experiment_result(&result("r2", "e1", "b"))
        .await
        .unwrap();
    let mut r1 = result("r1", "e1", "a");
    store.save_experiment_result(&r1).await.unwrap();
    r1.status = "failed".into();
    r1.output = None;
    r1.error = Some("the model failed".into());
    store.save_experiment_result(&r1).await.unwrap();
    let results = store.list_experiment_results("e1").await.unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0], r1);
    assert_eq!(results[1].item_id, "b");
    let refused = store
        .save_experiment_result(&result("r9", "nope", "a"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, DatasetStoreError::ExperimentNotFound(_)),
        "{refused:?}"
    );

    assert!(store.delete_dataset("ds").await.unwrap());
    assert!(!store.delete_dataset("ds").await.unwrap());
    assert_eq!(store.get_experiment("e1").await.unwrap(), None);
    assert!(
        store
            .list_experiment_results("e1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_experiment("e3").await.unwrap().is_some());
    let bad = store
        .create_dataset(&DatasetRecord::new("", "empty id"))
        .await
        .unwrap_err();
    assert!(
        matches!(bad, DatasetStoreError::InvalidRecord(_)),
        "{bad:?}"
    );
}
