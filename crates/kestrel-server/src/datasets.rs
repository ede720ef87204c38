//! Datasets and experiments, under Mastra's routes:
//!
//! - `GET|POST /datasets`, `GET|DELETE /datasets/{datasetId}`: datasets, kept in the
//!   instance's dataset store;
//! - `GET /datasets/{datasetId}/items?version=`, `POST /datasets/{datasetId}/items`,
//!   `DELETE /datasets/{datasetId}/items/{itemId}`: items, each change a new version;
//! - `POST /datasets/{datasetId}/experiments`: runs an agent over a version of the dataset
//!   with scorers (the agents' live scorers, or the code scorers by name), in the background,
//!   bounded; the answer names the experiment at once;
//! - `GET /experiments`, `GET /experiments/{experimentId}`: experiments, and one with its
//!   results item by item;
//! - `POST /datasets/{datasetId}/compare`: two experiments side by side, scorer by scorer and
//!   item by item.
//!
//! Datasets are the instance's, not a resource's: a caller pinned to a resource is refused
//! (403).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::eval::SharedScorer;
use kestrel_core::store::{
    DatasetItemRecord, DatasetQuery, DatasetRecord, DatasetStoreError, ExperimentRecord,
    ExperimentResultRecord, ExperimentStatus, ItemChange, SharedDatasetStore,
};
use kestrel_evals::experiment::{Dataset, Experiment, MAX_CONCURRENCY, MAX_RETRIES, Target};
use kestrel_storage::MAX_DATASET_ID_BYTES;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::extract::Query;
use crate::openapi::{Doc, Routes};
use crate::paging::{PageQuery, Pagination, checked_page, unpinned};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

const TAG: &str = "datasets";

/// The most items one `POST …/items` adds.
const MAX_ITEMS_PER_CHANGE: usize = 1_000;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/datasets",
            list_datasets,
            Doc::json(TAG, "Datasets, newest first")
                .query::<PageQuery>()
                .returns::<DatasetList>(),
        )
        .post(
            "/datasets",
            create_dataset,
            Doc::json(TAG, "Create a dataset")
                .body::<CreateBody>()
                .returns::<Value>()
                .conflict("a dataset of this id exists"),
        )
        .get(
            "/datasets/{dataset_id}",
            get_dataset,
            Doc::json(TAG, "A dataset").returns::<Value>(),
        )
        .delete(
            "/datasets/{dataset_id}",
            delete_dataset,
            Doc::json(TAG, "Delete a dataset, its items, experiments and results")
                .returns::<Value>(),
        )
        .get(
            "/datasets/{dataset_id}/items",
            list_items,
            Doc::json(TAG, "A dataset's items at a version (default: its latest)")
                .query::<VersionQuery>()
                .returns::<ItemList>(),
        )
        .post(
            "/datasets/{dataset_id}/items",
            add_items,
            Doc::json(TAG, "Add or replace items: one new version")
                .body::<ItemsBody>()
                .returns::<ItemList>()
                .conflict("two items of the body share an id"),
        )
        .delete(
            "/datasets/{dataset_id}/items/{item_id}",
            delete_item,
            Doc::json(TAG, "Remove an item: one new version").returns::<Value>(),
        )
        .post(
            "/datasets/{dataset_id}/experiments",
            start_experiment,
            Doc::json(
                TAG,
                "Run an agent over the dataset with scorers, in the background",
            )
            .body::<ExperimentBody>()
            .returns::<Value>()
            .conflict("the dataset has no items at the version"),
        )
        .post(
            "/datasets/{dataset_id}/compare",
            compare_experiments,
            Doc::json(TAG, "Two experiments side by side")
                .body::<CompareBody>()
                .returns::<Value>(),
        )
        .get(
            "/experiments",
            list_experiments,
            Doc::json(TAG, "Experiments, newest first")
                .query::<ExperimentQuery>()
                .returns::<ExperimentList>(),
        )
        .get(
            "/experiments/{experiment_id}",
            get_experiment,
            Doc::json(TAG, "An experiment and its results item by item").returns::<Value>(),
        )
}

/// `?datasetId=&page=&perPage=`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExperimentQuery {
    /// Only this dataset's experiments.
    #[schemars(length(min = 1, max = 512))]
    dataset_id: Option<String>,
    /// The page, from 0.
    #[schemars(range(max = 100_000))]
    page: Option<u32>,
    /// Per page (default 20, at most 100).
    #[schemars(range(min = 1, max = 100))]
    per_page: Option<u32>,
}

/// `?version=`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VersionQuery {
    /// The dataset version (default: its latest).
    version: Option<u32>,
}

/// A page of datasets.
#[derive(Debug, Serialize, JsonSchema)]
struct DatasetList {
    /// Where the page is.
    pagination: Pagination,
    /// The datasets.
    datasets: Vec<Value>,
}

/// A page of experiments.
#[derive(Debug, Serialize, JsonSchema)]
struct ExperimentList {
    /// Where the page is.
    pagination: Pagination,
    /// The experiments.
    experiments: Vec<Value>,
}

/// A dataset's items at a version.
#[derive(Debug, Serialize, JsonSchema)]
struct ItemList {
    /// The version.
    version: u32,
    /// The items, in id order.
    items: Vec<Value>,
}

/// `POST /datasets`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    /// Its id (default: a new one).
    #[schemars(length(min = 1, max = 512))]
    id: Option<String>,
    /// Its name.
    #[schemars(length(min = 1, max = 512), regex(pattern = r"\S"))]
    name: String,
    /// What it is for.
    #[schemars(length(max = 4096))]
    description: Option<String>,
    /// Anything else.
    metadata: Option<Value>,
}

/// An item to add or replace.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ItemBody {
    /// Its id (default: a new one; an existing id replaces that item).
    #[schemars(length(min = 1, max = 512))]
    id: Option<String>,
    /// What the run is given: an agent's prompt (a string, or `{prompt}`), a workflow's input.
    #[schemars(schema_with = "not_null")]
    input: Value,
    /// What it should answer.
    ground_truth: Option<Value>,
    /// What it should do, step by step.
    expected_trajectory: Option<Value>,
    /// What its tools answer instead of running.
    tool_mocks: Option<Value>,
    /// What the answer should rest on: passages the context judges check it against (at
    /// most 100).
    #[schemars(length(max = 100))]
    context: Option<Vec<String>>,
    /// Anything else.
    metadata: Option<Value>,
}

/// `POST /datasets/{id}/items`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ItemsBody {
    /// The items (1 to 1000).
    #[schemars(length(min = 1, max = 1000))]
    items: Vec<ItemBody>,
}

/// `POST /datasets/{id}/experiments`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExperimentBody {
    /// `agent` or `workflow`.
    target_type: TargetType,
    /// The agent or workflow.
    #[schemars(length(min = 1, max = 512))]
    target_id: String,
    /// The scorers: an agent's or workflow's live scorer's id, or a code scorer's name
    /// (`content-similarity`, `trajectory-accuracy`...).
    #[schemars(length(min = 1, max = 20))]
    scorer_ids: Vec<String>,
    /// The dataset version (default: its latest). Whole numbers may be written `3.0`, as JSON
    /// Schema's `integer` allows.
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    version: Option<u32>,
    /// Items run at once (1 to 64, default 4).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(min = 1, max = 64))]
    max_concurrency: Option<u32>,
    /// Runs again of an item whose run failed (at most 10).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(max = 10))]
    retries: Option<u32>,
    /// Its name.
    #[schemars(length(max = 512))]
    name: Option<String>,
}

/// What an experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum TargetType {
    /// An agent, asked each item's prompt.
    Agent,
    /// A workflow, started with each item's input.
    Workflow,
}

/// `POST /datasets/{id}/compare`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompareBody {
    /// The baseline.
    #[schemars(length(min = 1, max = 512))]
    experiment_id_a: String,
    /// The candidate.
    #[schemars(length(min = 1, max = 512))]
    experiment_id_b: String,
}

/// Any JSON but `null`.
fn not_null(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"not": {"type": "null"}})
}

/// `id` when it is 1 to [`MAX_DATASET_ID_BYTES`] bytes without NUL: else a 400 (a path's) or
/// a 422 (a body's).
fn checked<'a>(name: &str, id: &'a str, in_body: bool) -> Result<&'a str, ApiError> {
    if id.is_empty() || id.len() > MAX_DATASET_ID_BYTES || id.contains('\0') {
        let message = format!("{name} must be 1 to {MAX_DATASET_ID_BYTES} bytes without NUL");
        return Err(if in_body {
            ApiError::invalid(message)
        } else {
            ApiError::invalid_query(message)
        });
    }
    Ok(id)
}

fn store(state: &AppState) -> &SharedDatasetStore {
    &state.kestrel.stores().datasets
}

fn store_error(error: DatasetStoreError) -> ApiError {
    match error {
        DatasetStoreError::DatasetNotFound(_) | DatasetStoreError::ExperimentNotFound(_) => {
            ApiError::not_found(error.to_string())
        }
        DatasetStoreError::DatasetExists(_) => {
            ApiError::new(StatusCode::CONFLICT, "dataset_exists", error.to_string())
        }
        // The one invalid change a body can make: an id twice.
        DatasetStoreError::InvalidChange { .. } => {
            ApiError::new(StatusCode::CONFLICT, "invalid_change", error.to_string())
        }
        DatasetStoreError::InvalidRecord(_) => ApiError::invalid(error.to_string()),
        other => {
            tracing::warn!(error = %other, "the dataset store failed");
            ApiError::internal(&"the dataset store failed")
        }
    }
}

fn page(page: Option<u32>, per_page: Option<u32>) -> Result<DatasetQuery, ApiError> {
    let (page, per_page) = checked_page(page, per_page)?;
    Ok(DatasetQuery::page(page, per_page))
}

fn pagination(total: usize, query: &DatasetQuery) -> Pagination {
    Pagination::new(total, query.page, query.page_size())
}

fn json_of<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

async fn list_datasets(
    State(state): Shared,
    caller: Caller,
    Query(query): Query<PageQuery>,
) -> Result<Json<DatasetList>, ApiError> {
    unpinned(&caller, "datasets")?;
    let query = page(query.page, query.per_page)?;
    let found = store(&state)
        .list_datasets(&query)
        .await
        .map_err(store_error)?;
    Ok(Json(DatasetList {
        pagination: pagination(found.total, &query),
        datasets: found.datasets.iter().map(json_of).collect(),
    }))
}

async fn create_dataset(
    State(state): Shared,
    caller: Caller,
    Body(body): Body<CreateBody>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    let id = match &body.id {
        Some(id) => checked("id", id, true)?.to_owned(),
        None => kestrel_core::id::new_id(),
    };
    if body.name.trim().is_empty() || body.name.len() > 512 || body.name.contains('\0') {
        return Err(ApiError::invalid(
            "name must be 1 to 512 bytes of text without NUL",
        ));
    }
    let mut dataset = DatasetRecord::new(id, body.name);
    dataset.description = body.description;
    dataset.metadata = body.metadata;
    store(&state)
        .create_dataset(&dataset)
        .await
        .map_err(store_error)?;
    Ok(Json(json_of(&dataset)))
}

async fn get_dataset(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    let dataset = store(&state)
        .get_dataset(&dataset_id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("dataset {dataset_id:?} not found")))?;
    Ok(Json(json_of(&dataset)))
}

async fn delete_dataset(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    if !store(&state)
        .delete_dataset(&dataset_id)
        .await
        .map_err(store_error)?
    {
        return Err(ApiError::not_found(format!(
            "dataset {dataset_id:?} not found"
        )));
    }
    Ok(Json(json!({"success": true})))
}

async fn list_items(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
    Query(query): Query<VersionQuery>,
) -> Result<Json<ItemList>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    let store = store(&state);
    let dataset = store
        .get_dataset(&dataset_id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("dataset {dataset_id:?} not found")))?;
    let version = query.version.unwrap_or(dataset.version);
    if version > dataset.version {
        return Err(ApiError::not_found(format!(
            "dataset {dataset_id:?} has no version {version} (its latest is {})",
            dataset.version
        )));
    }
    let items = store
        .list_dataset_items(&dataset_id, Some(version))
        .await
        .map_err(store_error)?;
    Ok(Json(ItemList {
        version,
        items: items.iter().map(json_of).collect(),
    }))
}

async fn add_items(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
    Body(body): Body<ItemsBody>,
) -> Result<Json<ItemList>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    if body.items.is_empty() || body.items.len() > MAX_ITEMS_PER_CHANGE {
        return Err(ApiError::invalid(format!(
            "items must hold 1 to {MAX_ITEMS_PER_CHANGE} items"
        )));
    }
    let mut changes = Vec::with_capacity(body.items.len());
    for (index, item) in body.items.into_iter().enumerate() {
        let id = match item.id {
            Some(id) => checked(&format!("items[{index}].id"), &id, true)?.to_owned(),
            None => kestrel_core::id::new_id(),
        };
        if item.input.is_null() {
            return Err(ApiError::invalid(format!(
                "items[{index}].input is required"
            )));
        }
        let mut record = DatasetItemRecord::new(id, &dataset_id, item.input);
        record.ground_truth = item.ground_truth;
        record.expected_trajectory = item.expected_trajectory;
        record.tool_mocks = item.tool_mocks;
        if let Some(context) = item.context {
            if context.len() > 100 {
                return Err(ApiError::invalid(format!(
                    "items[{index}].context holds {} passages, at most 100",
                    context.len()
                )));
            }
            record.context = Some(Value::from(context));
        }
        record.metadata = item.metadata;
        changes.push(ItemChange::Put(record));
    }
    let store = store(&state);
    let version = store
        .change_dataset_items(&dataset_id, &changes)
        .await
        .map_err(store_error)?;
    let items = store
        .list_dataset_items(&dataset_id, Some(version))
        .await
        .map_err(store_error)?;
    Ok(Json(ItemList {
        version,
        items: items.iter().map(json_of).collect(),
    }))
}

async fn delete_item(
    State(state): Shared,
    caller: Caller,
    Path((dataset_id, item_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    checked("itemId", &item_id, false)?;
    let store = store(&state);
    let items = store
        .list_dataset_items(&dataset_id, None)
        .await
        .map_err(store_error)?;
    if !items.iter().any(|i| i.id == item_id) {
        return Err(ApiError::not_found(format!(
            "item {item_id:?} not found in dataset {dataset_id:?}"
        )));
    }
    let version = store
        .change_dataset_items(&dataset_id, &[ItemChange::Delete(item_id)])
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"success": true, "version": version})))
}

/// The scorer `id`: an agent's or workflow's live scorer of that id, or a code scorer of
/// that name.
fn scorer_of(state: &AppState, id: &str) -> Option<SharedScorer> {
    let kestrel = &state.kestrel;
    kestrel
        .agents()
        .flat_map(|agent| agent.scorers().iter())
        .chain(kestrel.workflows().flat_map(|w| w.scorers().iter()))
        .find(|live| live.scorer.id() == id)
        .map(|live| Arc::clone(&live.scorer))
        .or_else(|| kestrel_evals::code::by_name(id))
}

async fn start_experiment(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
    Body(body): Body<ExperimentBody>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    let target: Target = match body.target_type {
        TargetType::Agent => state
            .kestrel
            .agent(&body.target_id)
            .map_err(|_| ApiError::not_found(format!("agent {:?} not found", body.target_id)))?
            .clone()
            .into(),
        TargetType::Workflow => state
            .kestrel
            .workflow(&body.target_id)
            .map_err(|_| ApiError::not_found(format!("workflow {:?} not found", body.target_id)))?
            .clone()
            .into(),
    };
    if body.scorer_ids.is_empty() || body.scorer_ids.len() > 20 {
        return Err(ApiError::invalid("scorerIds must name 1 to 20 scorers"));
    }
    let mut scorers = Vec::with_capacity(body.scorer_ids.len());
    for id in &body.scorer_ids {
        let scorer = scorer_of(&state, id).ok_or_else(|| {
            ApiError::not_found(format!(
                "scorer {id:?} is neither a live scorer of an agent or workflow nor a code \
                 scorer ({})",
                kestrel_evals::code::NAMES
            ))
        })?;
        scorers.push(scorer);
    }
    let concurrency = body.max_concurrency.unwrap_or(4) as usize;
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
        return Err(ApiError::invalid(format!(
            "maxConcurrency must be between 1 and {MAX_CONCURRENCY}"
        )));
    }
    let retries = body.retries.unwrap_or(0);
    if retries > MAX_RETRIES {
        return Err(ApiError::invalid(format!(
            "retries must be at most {MAX_RETRIES}"
        )));
    }
    let store = Arc::clone(store(&state));
    let kept = store
        .get_dataset(&dataset_id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("dataset {dataset_id:?} not found")))?;
    if let Some(version) = body.version.filter(|v| *v > kept.version) {
        return Err(ApiError::not_found(format!(
            "dataset {dataset_id:?} has no version {version} (its latest is {})",
            kept.version
        )));
    }
    let dataset = Dataset::load(&*store, &dataset_id, body.version)
        .await
        .map_err(|error| match error {
            kestrel_evals::experiment::DatasetError::Store(error) => store_error(error),
            other => ApiError::invalid(other.to_string()),
        })?;
    if dataset.items.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "dataset_empty",
            format!(
                "dataset {dataset_id:?} has no items at version {}",
                dataset.version
            ),
        ));
    }
    let target_type = target.kind();
    let mut experiment = Experiment::new(target, dataset.clone())
        .concurrency(concurrency)
        .retries(retries)
        .store(Arc::clone(&state.kestrel.stores().scores))
        .record_in(Arc::clone(&store));
    if let Some(name) = body.name {
        experiment = experiment.name(name);
    }
    for scorer in scorers {
        experiment = experiment.scorer(scorer);
    }
    let id = experiment.experiment_id().to_owned();
    // Kept before the answer, so the id it names can be read at once.
    let pending = ExperimentRecord {
        id: id.clone(),
        name: None,
        dataset_id: dataset.id.clone(),
        dataset_version: dataset.version,
        target_type: target_type.to_owned(),
        target_id: body.target_id.clone(),
        target_version: None,
        scorer_ids: body.scorer_ids.clone(),
        status: ExperimentStatus::Pending,
        total_items: u32::try_from(dataset.items.len()).unwrap_or(u32::MAX),
        succeeded_count: 0,
        failed_count: 0,
        skipped_count: 0,
        error: None,
        created_at: now_ms(),
        started_at: None,
        completed_at: None,
    };
    store.save_experiment(&pending).await.map_err(store_error)?;
    tokio::spawn(async move {
        if let Err(error) = experiment.run().await {
            tracing::warn!(%error, experiment = %id, "an experiment failed");
            if let Ok(Some(mut record)) = store.get_experiment(&id).await {
                record.status = ExperimentStatus::Failed;
                record.error = Some(error.to_string());
                record.completed_at = Some(now_ms());
                if let Err(error) = store.save_experiment(&record).await {
                    tracing::warn!(%error, experiment = %id, "an experiment's failure could not be recorded");
                }
            }
        }
    });
    Ok(Json(json_of(&pending)))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn list_experiments(
    State(state): Shared,
    caller: Caller,
    Query(query): Query<ExperimentQuery>,
) -> Result<Json<ExperimentList>, ApiError> {
    unpinned(&caller, "datasets")?;
    if let Some(id) = &query.dataset_id {
        checked("datasetId", id, false)?;
    }
    let paging = page(query.page, query.per_page)?;
    let (experiments, total) = store(&state)
        .list_experiments(query.dataset_id.as_deref(), &paging)
        .await
        .map_err(store_error)?;
    Ok(Json(ExperimentList {
        pagination: pagination(total, &paging),
        experiments: experiments.iter().map(json_of).collect(),
    }))
}

/// An experiment and its results, or a 404.
async fn experiment_of(
    store: &SharedDatasetStore,
    id: &str,
) -> Result<(ExperimentRecord, Vec<ExperimentResultRecord>), ApiError> {
    let experiment = store
        .get_experiment(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("experiment {id:?} not found")))?;
    let results = store
        .list_experiment_results(id)
        .await
        .map_err(store_error)?;
    Ok((experiment, results))
}

async fn get_experiment(
    State(state): Shared,
    caller: Caller,
    Path(experiment_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("experimentId", &experiment_id, false)?;
    let (experiment, results) = experiment_of(store(&state), &experiment_id).await?;
    Ok(Json(json!({
        "experiment": json_of(&experiment),
        "results": results.iter().map(json_of).collect::<Vec<_>>(),
        "summary": summary(&results),
    })))
}

/// Each scorer's mean over the results it scored, and how many it scored.
fn summary(results: &[ExperimentResultRecord]) -> BTreeMap<String, Value> {
    let mut scores: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for result in results {
        for score in &result.scores {
            let Some(id) = score.get("scorerId").and_then(Value::as_str) else {
                continue;
            };
            let entry = scores.entry(id.to_owned()).or_default();
            if let Some(value) = score.get("score").and_then(Value::as_f64) {
                entry.push(value);
            }
        }
    }
    scores
        .into_iter()
        .map(|(id, values)| {
            let mean =
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
            (id, json!({"mean": mean, "scored": values.len()}))
        })
        .collect()
}

/// A result's score by `scorer`.
fn score_of(result: &ExperimentResultRecord, scorer: &str) -> Option<f64> {
    result
        .scores
        .iter()
        .find(|s| s.get("scorerId").and_then(Value::as_str) == Some(scorer))
        .and_then(|s| s.get("score"))
        .and_then(Value::as_f64)
}

async fn compare_experiments(
    State(state): Shared,
    caller: Caller,
    Path(dataset_id): Path<String>,
    Body(body): Body<CompareBody>,
) -> Result<Json<Value>, ApiError> {
    unpinned(&caller, "datasets")?;
    checked("datasetId", &dataset_id, false)?;
    checked("experimentIdA", &body.experiment_id_a, true)?;
    checked("experimentIdB", &body.experiment_id_b, true)?;
    let store = store(&state);
    let (a, a_results) = experiment_of(store, &body.experiment_id_a).await?;
    let (b, b_results) = experiment_of(store, &body.experiment_id_b).await?;
    for experiment in [&a, &b] {
        if experiment.dataset_id != dataset_id {
            return Err(ApiError::not_found(format!(
                "experiment {:?} ran on dataset {:?}, not {dataset_id:?}",
                experiment.id, experiment.dataset_id
            )));
        }
    }
    let (a_summary, b_summary) = (summary(&a_results), summary(&b_results));
    let mut scorers: Vec<&String> = a_summary.keys().chain(b_summary.keys()).collect();
    scorers.sort();
    scorers.dedup();
    let mean = |summary: &BTreeMap<String, Value>, id: &str| {
        summary.get(id).and_then(|s| s["mean"].as_f64())
    };
    let scorer_rows: Vec<Value> = scorers
        .iter()
        .map(|id| {
            let (baseline, candidate) = (mean(&a_summary, id), mean(&b_summary, id));
            json!({
                "scorerId": id,
                "baseline": baseline,
                "candidate": candidate,
                "delta": baseline.zip(candidate).map(|(x, y)| y - x),
            })
        })
        .collect();
    let mut item_ids: Vec<&str> = a_results
        .iter()
        .chain(&b_results)
        .map(|r| r.item_id.as_str())
        .collect();
    item_ids.sort_unstable();
    item_ids.dedup();
    let items: Vec<Value> = item_ids
        .iter()
        .map(|item| {
            let find = |results: &[ExperimentResultRecord]| {
                results.iter().find(|r| r.item_id == *item).cloned()
            };
            let (x, y) = (find(&a_results), find(&b_results));
            let scores: Vec<Value> = scorers
                .iter()
                .map(|id| {
                    json!({
                        "scorerId": id,
                        "baseline": x.as_ref().and_then(|r| score_of(r, id)),
                        "candidate": y.as_ref().and_then(|r| score_of(r, id)),
                    })
                })
                .collect();
            json!({
                "itemId": item,
                "baselineOutput": x.as_ref().and_then(|r| r.output.clone()),
                "candidateOutput": y.as_ref().and_then(|r| r.output.clone()),
                "scores": scores,
            })
        })
        .collect();
    Ok(Json(json!({
        "baseline": json_of(&a),
        "candidate": json_of(&b),
        "scorers": scorer_rows,
        "items": items,
    })))
}
