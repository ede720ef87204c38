//! The traces of the instance's runs (see `kestrel::trace`), under Mastra's routes:
//!
//! - `GET /observability/traces`: a page of traces, newest first, each as its root span with
//!   its status (filters: agent or workflow, run, thread, resource, user, span type, status);
//! - `GET /observability/traces/{traceId}`: every span of a trace;
//! - `GET /observability/traces/{traceId}/spans/{spanId}`: one span;
//! - `POST /observability/traces/delete`: deletes traces.
//!
//! Times are ISO 8601 (`startedAt`, `endedAt`), as Mastra gives them. A caller pinned to a
//! resource sees only the traces of its resource and deletes none. An instance that does not
//! trace answers 404 `no_tracing`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::trace::{
    SharedSpanStore, SpanRecord, SpanType, TraceContext, TraceQuery, TraceStatus,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::extract::Query;
use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

/// The most traces one delete names.
const MAX_DELETE: usize = 100;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/observability/traces",
            list_traces,
            Doc::json(
                "observability",
                "List traces, newest first, each as its root span",
            )
            .query::<TracesQuery>()
            .returns::<TraceList>(),
        )
        .get(
            "/observability/traces/{trace_id}",
            get_trace,
            Doc::json("observability", "Every span of a trace").returns::<TraceDetail>(),
        )
        .get(
            "/observability/traces/{trace_id}/spans/{span_id}",
            get_span,
            Doc::json("observability", "One span of a trace").returns::<SpanView>(),
        )
        .post(
            "/observability/traces/delete",
            delete_traces,
            Doc::json("observability", "Delete traces")
                .body::<DeleteBody>()
                .returns::<Deleted>(),
        )
}

/// `GET /observability/traces`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TracesQuery {
    /// The page, from 0.
    #[schemars(range(max = 100_000))]
    page: Option<u32>,
    /// Traces per page (default 20, at most 100).
    #[schemars(range(min = 1, max = 100))]
    per_page: Option<u32>,
    /// `agent`, `workflow`...
    #[schemars(length(max = 100))]
    entity_type: Option<String>,
    /// The agent's or workflow's id.
    #[schemars(length(max = 200))]
    entity_id: Option<String>,
    /// The run.
    #[schemars(length(max = 200))]
    run_id: Option<String>,
    /// The thread.
    #[schemars(length(max = 200))]
    thread_id: Option<String>,
    /// The resource.
    #[schemars(length(max = 200))]
    resource_id: Option<String>,
    /// The user.
    #[schemars(length(max = 200))]
    user_id: Option<String>,
    /// The root span's type (`agent_run`, `workflow_run`...).
    span_type: Option<SpanType>,
    /// `success` or `error`.
    status: Option<TraceStatus>,
    /// The root span's name.
    #[schemars(length(max = 500))]
    name: Option<String>,
    /// The agent's or workflow's name.
    #[schemars(length(max = 200))]
    entity_name: Option<String>,
    /// `@mastra/client-js`'s `getTraces` date range: JSON `{"start": ISO, "end": ISO}`
    /// (either may be left out); traces whose root started within it.
    #[schemars(skip)]
    date_range: Option<String>,
    /// `@mastra/client-js`'s `listTraces` form of the same range.
    #[schemars(skip)]
    started_at: Option<String>,
}

/// A `{start, end}` range of ISO 8601 times, as Unix nanoseconds (start included, end not).
fn time_range(name: &str, range: Option<&str>) -> Result<(Option<u64>, Option<u64>), ApiError> {
    let Some(range) = range else {
        return Ok((None, None));
    };
    let bad = |why: String| ApiError::invalid(format!("{name}: {why}"));
    let parsed: Map<String, Value> = serde_json::from_str(range)
        .map_err(|_| bad("expected JSON {\"start\": ISO time, \"end\": ISO time}".into()))?;
    let at = |key: &str| -> Result<Option<u64>, ApiError> {
        match parsed.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => chrono::DateTime::parse_from_rfc3339(text)
                .ok()
                .and_then(|t| t.timestamp_nanos_opt())
                .and_then(|ns| u64::try_from(ns).ok())
                .map(Some)
                .ok_or_else(|| bad(format!("{key} is not an ISO 8601 time: {text:?}"))),
            Some(other) => Err(bad(format!(
                "{key} must be an ISO 8601 string, not {other}"
            ))),
        }
    };
    Ok((at("start")?, at("end")?))
}

/// A page of traces.
#[derive(Debug, Serialize, JsonSchema)]
struct TraceList {
    /// Where the page is.
    pagination: Pagination,
    /// The traces' root spans, with `status`, `hasChildError` and `spanCount`.
    spans: Vec<Value>,
}

/// Where a page is.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Pagination {
    /// Matching traces in all.
    total: usize,
    /// This page.
    page: u32,
    /// Traces per page.
    per_page: u32,
    /// Whether a later page has more.
    has_more: bool,
}

/// A trace whole.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TraceDetail {
    /// Its id.
    trace_id: String,
    /// Its spans, by start time.
    spans: Vec<Value>,
}

/// One span, as the routes give it: the stored record, times in ISO 8601.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
struct SpanView(Value);

/// `POST /observability/traces/delete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteBody {
    /// The traces to delete (at most 100; ids that cannot be trace ids delete nothing).
    #[schemars(length(max = 100))]
    trace_ids: Vec<String>,
}

/// What a delete removed.
#[derive(Debug, Serialize, JsonSchema)]
struct Deleted {
    /// How many spans went.
    deleted: u64,
}

/// The span store, once the spans ended so far are in it (a run's trace is read whole right
/// after the run).
async fn flushed(state: &AppState) -> Result<&SharedSpanStore, ApiError> {
    if let Some(tracer) = state.kestrel.tracer() {
        tracer.flush().await;
    }
    store(state)
}

fn store(state: &AppState) -> Result<&SharedSpanStore, ApiError> {
    state.kestrel.span_store().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_tracing",
            "this instance does not trace its runs (KestrelBuilder::tracing)",
        )
    })
}

fn failed(error: impl std::fmt::Display) -> ApiError {
    tracing::warn!(%error, "the span store failed");
    ApiError::internal(&"the span store failed")
}

/// Unix nanoseconds as ISO 8601 (milliseconds, UTC).
fn iso(ns: u64) -> Value {
    let seconds = i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX);
    let nanos = u32::try_from(ns % 1_000_000_000).unwrap_or(0);
    chrono::DateTime::from_timestamp(seconds, nanos)
        .map(|t| Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)))
        .unwrap_or(Value::Null)
}

/// A span as the routes give it.
fn view(span: &SpanRecord) -> Value {
    let mut value = serde_json::to_value(span).unwrap_or(Value::Null);
    if let Some(fields) = value.as_object_mut() {
        fields.insert("startedAt".into(), iso(span.started_at));
        fields.insert("endedAt".into(), iso(span.ended_at));
        fields.insert(
            "durationMs".into(),
            Value::from(span.duration_ns() as f64 / 1_000_000.0),
        );
    }
    value
}

/// Whether a pinned caller may see the trace whose spans are `spans`.
fn visible(caller: &Caller, spans: &[SpanRecord]) -> bool {
    match &caller.resource {
        None => true,
        Some(resource) => kestrel_core::trace::local_root(spans)
            .is_some_and(|root| root.resource_id.as_deref() == Some(resource.as_str())),
    }
}

async fn list_traces(
    State(state): Shared,
    caller: Caller,
    Query(query): Query<TracesQuery>,
) -> Result<Json<TraceList>, ApiError> {
    let store = flushed(&state).await?;
    if let (Some(pinned), Some(asked)) = (&caller.resource, &query.resource_id)
        && pinned != asked
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this token is pinned to another resource",
        ));
    }
    let (after, before) = match (&query.date_range, &query.started_at) {
        (Some(range), _) => time_range("dateRange", Some(range))?,
        (None, range) => time_range("startedAt", range.as_deref())?,
    };
    let filter = TraceQuery {
        name: query.name,
        entity_name: query.entity_name,
        started_after: after,
        started_before: before,
        page: query.page.unwrap_or(0),
        per_page: query.per_page.unwrap_or(0),
        span_type: query.span_type,
        entity_type: query.entity_type,
        entity_id: query.entity_id,
        run_id: query.run_id,
        thread_id: query.thread_id,
        resource_id: caller.resource.clone().or(query.resource_id),
        user_id: query.user_id,
        status: query.status,
    };
    let page = store.list_traces(&filter).await.map_err(failed)?;
    let per_page = filter.page_size();
    let spans = page
        .traces
        .iter()
        .map(|trace| {
            let mut root = view(&trace.root);
            if let Some(fields) = root.as_object_mut() {
                fields.insert(
                    "status".into(),
                    serde_json::to_value(trace.status).unwrap_or(Value::Null),
                );
                fields.insert("hasChildError".into(), trace.has_child_error.into());
                fields.insert("spanCount".into(), trace.span_count.into());
            }
            root
        })
        .collect();
    Ok(Json(TraceList {
        pagination: Pagination {
            total: page.total,
            page: filter.page,
            per_page,
            has_more: (filter.page as usize + 1) * (per_page as usize) < page.total,
        },
        spans,
    }))
}

/// Trace `trace_id`'s spans, as `caller` may see them.
async fn spans_of(
    state: &AppState,
    caller: &Caller,
    trace_id: &str,
) -> Result<Vec<SpanRecord>, ApiError> {
    let store = flushed(state).await?;
    // An id that cannot be a trace's names none.
    if !TraceContext::is_trace_id(trace_id) {
        return Err(ApiError::not_found(format!(
            "trace {trace_id:?} not found (a trace id is 32 lowercase hex digits)"
        )));
    }
    let spans = store.trace(trace_id).await.map_err(failed)?;
    if spans.is_empty() || !visible(caller, &spans) {
        return Err(ApiError::not_found(format!("trace {trace_id} not found")));
    }
    Ok(spans)
}

async fn get_trace(
    State(state): Shared,
    caller: Caller,
    Path(trace_id): Path<String>,
) -> Result<Json<TraceDetail>, ApiError> {
    let spans = spans_of(&state, &caller, &trace_id).await?;
    Ok(Json(TraceDetail {
        trace_id,
        spans: spans.iter().map(view).collect(),
    }))
}

async fn get_span(
    State(state): Shared,
    caller: Caller,
    Path((trace_id, span_id)): Path<(String, String)>,
) -> Result<Json<SpanView>, ApiError> {
    let spans = spans_of(&state, &caller, &trace_id).await?;
    spans
        .iter()
        .find(|s| s.span_id == span_id)
        .map(|span| Json(SpanView(view(span))))
        .ok_or_else(|| ApiError::not_found(format!("trace {trace_id} has no span {span_id:?}")))
}

async fn delete_traces(
    State(state): Shared,
    caller: Caller,
    Body(body): Body<DeleteBody>,
) -> Result<Json<Deleted>, ApiError> {
    if caller.resource.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a token pinned to a resource cannot delete traces",
        ));
    }
    if body.trace_ids.len() > MAX_DELETE {
        return Err(ApiError::invalid(format!(
            "at most {MAX_DELETE} traces per delete, {} given",
            body.trace_ids.len()
        )));
    }
    // Ids that cannot be traces' name none: nothing of theirs is deleted.
    let ids: Vec<String> = body
        .trace_ids
        .into_iter()
        .filter(|id| TraceContext::is_trace_id(id))
        .collect();
    let deleted = store(&state)?.delete_traces(&ids).await.map_err(failed)?;
    Ok(Json(Deleted { deleted }))
}
