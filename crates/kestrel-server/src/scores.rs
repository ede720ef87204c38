//! Scores, under Mastra's routes (`@mastra/client-js`'s `listScorers`, `getScorer`,
//! `listScoresByRunId`, `listScoresByScorerId`, `listScoresByEntityId`, `saveScore`):
//!
//! - `GET /scores/scorers`: the agents' live scorers, by id, with the agents that run them,
//!   their sampling and their counts (eligible, sampled, scored, failed);
//! - `GET /scores/scorers/{scorerId}`: one of them;
//! - `GET /scores/run/{runId}`, `GET /scores/scorer/{scorerId}`,
//!   `GET /scores/entity/{entityType}/{entityId}`: a page of scores, newest first;
//! - `POST /scores`: saves a score (a caller's own scoring; an `id` given again replaces it).
//!
//! Scores are not kept per resource: a caller pinned to a resource is refused (403).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use kestrel_core::eval::ScoreCounts;
use kestrel_core::store::{ScoreQuery, ScoreRecord, ScoreSource, SharedScoreStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Caller;
use crate::extract::Query;
use crate::openapi::{Doc, Routes};
use crate::paging::{PageQuery, Pagination, checked_page, unpinned};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

const TAG: &str = "scores";

/// The longest id a score route takes (the stores' bound).
const MAX_ID_BYTES: usize = kestrel_storage::MAX_SCORE_ID_BYTES;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/scores/scorers",
            list_scorers,
            Doc::json(TAG, "The agents' live scorers, by id")
                .returns::<BTreeMap<String, ScorerView>>(),
        )
        .get(
            "/scores/scorers/{scorer_id}",
            get_scorer,
            Doc::json(TAG, "One live scorer").returns::<ScorerView>(),
        )
        .get(
            "/scores/run/{run_id}",
            by_run,
            Doc::json(TAG, "The scores of a run, newest first")
                .query::<PageQuery>()
                .returns::<ScoreList>(),
        )
        .get(
            "/scores/scorer/{scorer_id}",
            by_scorer,
            Doc::json(TAG, "The scores a scorer gave, newest first")
                .query::<PageQuery>()
                .returns::<ScoreList>(),
        )
        .get(
            "/scores/entity/{entity_type}/{entity_id}",
            by_entity,
            Doc::json(
                TAG,
                "The scores of an agent's or workflow's runs, newest first",
            )
            .query::<PageQuery>()
            .returns::<ScoreList>(),
        )
        .post(
            "/scores",
            save_score,
            Doc::json(TAG, "Save a score")
                .body::<SaveBody>()
                .returns::<Saved>(),
        )
}

/// A live scorer as listed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ScorerView {
    /// `{id, name, description, type}`.
    scorer: Value,
    /// Which runs it scores (`{type: "none"}` or `{type: "ratio", rate}`).
    sampling: Value,
    /// The agents that run it.
    agent_ids: Vec<String>,
    /// Their names.
    agent_names: Vec<String>,
    /// The workflows that run it.
    workflow_ids: Vec<String>,
    /// Whether it is registered in code.
    is_registered: bool,
    /// `code`.
    source: &'static str,
    /// Runs eligible, sampled, scored and failed, over its agents.
    counts: Value,
}

/// A page of scores.
#[derive(Debug, Serialize, JsonSchema)]
struct ScoreList {
    /// Where the page is.
    pagination: Pagination,
    /// The scores (Mastra's `mastra_scorers` rows, camelCase).
    scores: Vec<Value>,
}

/// `POST /scores`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SaveBody {
    /// The score.
    score: ScoreBody,
}

/// A score to save.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScoreBody {
    /// Its id: given again, the score replaces the first (default: a new id).
    #[schemars(length(min = 1, max = 512))]
    id: Option<String>,
    /// The scorer's id.
    #[schemars(length(min = 1, max = 512))]
    scorer_id: String,
    /// The scored run.
    #[schemars(length(min = 1, max = 512))]
    run_id: String,
    /// `AGENT`, `WORKFLOW`...
    #[schemars(length(min = 1, max = 512))]
    entity_type: String,
    /// The agent's or workflow's id.
    #[schemars(length(min = 1, max = 512))]
    entity_id: String,
    /// The score (a finite number).
    score: f64,
    /// Why.
    #[schemars(length(max = 65_536))]
    reason: Option<String>,
    /// `LIVE` or `TEST` (default `TEST`).
    source: Option<ScoreSource>,
    /// The scorer as listed (`{id, name, description}`).
    scorer: Option<Value>,
    /// What the scorer read as input.
    input: Option<Value>,
    /// What the scorer read as output.
    output: Option<Value>,
    /// The run's trace.
    #[schemars(length(max = 64))]
    trace_id: Option<String>,
    /// The run's span.
    #[schemars(length(max = 64))]
    span_id: Option<String>,
    /// Anything else.
    metadata: Option<Value>,
}

/// A saved score.
#[derive(Debug, Serialize, JsonSchema)]
struct Saved {
    /// The score as stored.
    score: Value,
}

/// `id` when it is 1 to [`MAX_ID_BYTES`] bytes without NUL: else a 400 (a path's id) or a
/// 422 (a body's).
fn checked_id<'a>(name: &str, id: &'a str) -> Result<&'a str, ApiError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.contains('\0') {
        let message = format!("{name} must be 1 to {MAX_ID_BYTES} bytes without NUL");
        return Err(if name.starts_with("score.") {
            ApiError::invalid(message)
        } else {
            ApiError::invalid_query(message)
        });
    }
    Ok(id)
}

fn store(state: &AppState) -> &SharedScoreStore {
    &state.kestrel.stores().scores
}

fn failed(error: impl std::fmt::Display) -> ApiError {
    tracing::warn!(%error, "the score store failed");
    ApiError::internal(&"the score store failed")
}

/// The view of `live`, the first time its scorer is met.
fn view_of(live: &kestrel_core::eval::LiveScorer) -> ScorerView {
    let scorer = &live.scorer;
    ScorerView {
        scorer: serde_json::json!({
            "id": scorer.id(),
            "name": scorer.name(),
            "description": scorer.description(),
            "type": scorer.kind(),
        }),
        sampling: serde_json::to_value(live.sampling).unwrap_or(Value::Null),
        agent_ids: Vec::new(),
        agent_names: Vec::new(),
        workflow_ids: Vec::new(),
        is_registered: true,
        source: "code",
        counts: Value::Null,
    }
}

fn views(state: &AppState) -> BTreeMap<String, ScorerView> {
    let mut views: BTreeMap<String, ScorerView> = BTreeMap::new();
    for agent in state.kestrel.agents() {
        for live in agent.scorers() {
            let view = views
                .entry(live.scorer.id().to_owned())
                .or_insert_with(|| view_of(live));
            view.agent_ids.push(agent.id().to_owned());
            view.agent_names.push(agent.name().to_owned());
        }
    }
    for workflow in state.kestrel.workflows() {
        for live in workflow.scorers() {
            views
                .entry(live.scorer.id().to_owned())
                .or_insert_with(|| view_of(live))
                .workflow_ids
                .push(workflow.id().to_owned());
        }
    }
    for (id, view) in &mut views {
        let mut total = ScoreCounts::default();
        for entity in view.agent_ids.iter().chain(&view.workflow_ids) {
            let c = state.kestrel.scoring().counts(entity, id);
            total.eligible += c.eligible;
            total.sampled += c.sampled;
            total.scored += c.scored;
            total.failed += c.failed;
        }
        view.counts = serde_json::to_value(total).unwrap_or_default();
    }
    views
}

async fn list_scorers(
    State(state): Shared,
    caller: Caller,
) -> Result<Json<BTreeMap<String, ScorerView>>, ApiError> {
    unpinned(&caller, "scores")?;
    Ok(Json(views(&state)))
}

async fn get_scorer(
    State(state): Shared,
    caller: Caller,
    Path(scorer_id): Path<String>,
) -> Result<Json<ScorerView>, ApiError> {
    unpinned(&caller, "scores")?;
    checked_id("scorerId", &scorer_id)?;
    views(&state)
        .remove(&scorer_id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no live scorer `{scorer_id}`")))
}

async fn page_of(
    state: &AppState,
    mut query: ScoreQuery,
    page: PageQuery,
) -> Result<Json<ScoreList>, ApiError> {
    (query.page, query.per_page) = checked_page(page.page, page.per_page)?;
    let found = store(state).list_scores(&query).await.map_err(failed)?;
    let per_page = query.page_size();
    Ok(Json(ScoreList {
        pagination: Pagination::new(found.total, query.page, per_page),
        scores: found
            .scores
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect(),
    }))
}

async fn by_run(
    State(state): Shared,
    caller: Caller,
    Path(run_id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Result<Json<ScoreList>, ApiError> {
    unpinned(&caller, "scores")?;
    let run_id = checked_id("runId", &run_id)?;
    page_of(&state, ScoreQuery::new().run(run_id), page).await
}

async fn by_scorer(
    State(state): Shared,
    caller: Caller,
    Path(scorer_id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Result<Json<ScoreList>, ApiError> {
    unpinned(&caller, "scores")?;
    let scorer_id = checked_id("scorerId", &scorer_id)?;
    page_of(&state, ScoreQuery::new().scorer(scorer_id), page).await
}

async fn by_entity(
    State(state): Shared,
    caller: Caller,
    Path((entity_type, entity_id)): Path<(String, String)>,
    Query(page): Query<PageQuery>,
) -> Result<Json<ScoreList>, ApiError> {
    unpinned(&caller, "scores")?;
    let entity_type = checked_id("entityType", &entity_type)?;
    let entity_id = checked_id("entityId", &entity_id)?;
    page_of(
        &state,
        ScoreQuery::new().entity(entity_type, entity_id),
        page,
    )
    .await
}

async fn save_score(
    State(state): Shared,
    caller: Caller,
    Body(body): Body<SaveBody>,
) -> Result<Json<Saved>, ApiError> {
    unpinned(&caller, "scores")?;
    let body = body.score;
    for (name, id) in [
        ("score.scorerId", &body.scorer_id),
        ("score.runId", &body.run_id),
        ("score.entityType", &body.entity_type),
        ("score.entityId", &body.entity_id),
    ] {
        checked_id(name, id)?;
    }
    if !body.score.is_finite() {
        return Err(ApiError::invalid("score.score must be a finite number"));
    }
    let scorer = body.scorer.unwrap_or_else(
        || serde_json::json!({"id": body.scorer_id, "name": body.scorer_id, "description": ""}),
    );
    let mut record = ScoreRecord::new(
        body.scorer_id,
        scorer,
        body.run_id,
        body.entity_type,
        body.entity_id,
        body.source.unwrap_or(ScoreSource::Test),
        body.input.unwrap_or(Value::Null),
        body.output.unwrap_or(Value::Null),
    );
    if let Some(id) = body.id {
        record.id = checked_id("score.id", &id)?.to_owned();
        if let Some(kept) = store(&state).get_score(&id).await.map_err(failed)? {
            record.created_at = kept.created_at;
        }
    }
    record.score = Some(body.score);
    record.reason = body.reason;
    record.trace_id = body.trace_id;
    record.span_id = body.span_id;
    record.metadata = body.metadata;
    store(&state).save_score(&record).await.map_err(failed)?;
    Ok(Json(Saved {
        score: serde_json::to_value(&record).unwrap_or_default(),
    }))
}
