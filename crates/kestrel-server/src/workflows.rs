//! The `/api/workflows` routes, with Mastra's paths and bodies: list and describe the
//! workflows, create a run, start it (and wait, or not, or stream it), resume it, cancel it,
//! and list, read and delete runs.
//!
//! Workflow streams are in Mastra's own format, not SSE: `text/plain`, each event's JSON
//! followed by the record separator `\x1E`, and no `[DONE]` (agents' streams stay SSE).
//! A run belongs to the resource it was started for: a caller pinned to a resource reaches
//! only its own runs (another's are not found).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kestrel_core::context::RESOURCE_ID_KEY;
use kestrel_core::workflow::{
    StepStatus, Workflow, WorkflowRun, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStatus,
    WorkflowStream,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::limits::{RunSlot, StreamSlot};
use crate::openapi::{Answer, Doc, Routes};
use crate::wire::{Body, MaybeBody};
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

/// The record separator that ends each event of a workflow stream.
const RECORD_SEPARATOR: char = '\u{1e}';

/// The workflow routes, documented for the OpenAPI document.
pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const WORKFLOWS: &str = "workflows";
    const RUNS: &str = "workflow runs";
    const STARTED: &str = "The run was started already (or its id is another resource's run)";
    const TRAVEL: &str = "The run is in progress (or only created)";
    const NOT_ACTIVE: &str = "The run is not running or sleeping, or something drives it";
    const NOT_SUSPENDED: &str =
        "The run is not suspended at that step, or another resumer claimed it first";
    Routes::new()
        .get(
            "/workflows",
            list_workflows,
            Doc::json(WORKFLOWS, "List the workflows, by id").query::<ListQuery>(),
        )
        .get(
            "/workflows/run-counts",
            run_counts,
            Doc::json(
                WORKFLOWS,
                "Count each workflow's running and suspended runs",
            ),
        )
        .get(
            "/workflows/{workflow_id}",
            get_workflow,
            Doc::json(
                WORKFLOWS,
                "Describe a workflow: its steps, graph and schemas",
            ),
        )
        .get(
            "/workflows/{workflow_id}/runs",
            list_runs,
            Doc::json(RUNS, "List a workflow's runs, newest first").query::<RunsQuery>(),
        )
        .get(
            "/workflows/{workflow_id}/runs/{run_id}",
            get_run,
            Doc::json(RUNS, "Read a run: its status, steps and result").query::<RunQuery>(),
        )
        .delete(
            "/workflows/{workflow_id}/runs/{run_id}",
            delete_run,
            Doc::json(RUNS, "Delete a run").conflict("The run is in progress: cancel it first"),
        )
        .post(
            "/workflows/{workflow_id}/create-run",
            create_run,
            Doc::json(RUNS, "Create a run (stored as pending until it starts)")
                .query::<RunIdQuery>()
                .body::<CreateRunBody>()
                .conflict("The run id is another resource's run"),
        )
        .post(
            "/workflows/{workflow_id}/stream",
            stream,
            Doc::json(RUNS, "Start a run, streaming its events")
                .query::<RunIdQuery>()
                .body::<StartBody>()
                .conflict(STARTED)
                .answering(Answer::Records),
        )
        .post(
            "/workflows/{workflow_id}/start-async",
            start::<RESULT>,
            Doc::json(RUNS, "Start a run and answer with its result")
                .query::<RunIdQuery>()
                .body::<StartBody>()
                .conflict(STARTED),
        )
        .post(
            "/workflows/{workflow_id}/start",
            start::<MESSAGE>,
            Doc::json(RUNS, "Start a run in the background")
                .query::<RunIdQuery>()
                .body::<StartBody>()
                .conflict(STARTED),
        )
        .post(
            "/workflows/{workflow_id}/resume-stream",
            resume_stream,
            Doc::json(RUNS, "Resume a suspended run, streaming its events")
                .query::<StoredRunQuery>()
                .body::<ResumeBody>()
                .conflict(NOT_SUSPENDED)
                .answering(Answer::Records),
        )
        .post(
            "/workflows/{workflow_id}/resume-async",
            resume::<RESULT>,
            Doc::json(RUNS, "Resume a suspended run and answer with its result")
                .query::<StoredRunQuery>()
                .body::<ResumeBody>()
                .conflict(NOT_SUSPENDED),
        )
        .post(
            "/workflows/{workflow_id}/resume",
            resume::<MESSAGE>,
            Doc::json(RUNS, "Resume a suspended run in the background")
                .query::<StoredRunQuery>()
                .body::<ResumeBody>()
                .conflict(NOT_SUSPENDED),
        )
        .post(
            "/workflows/{workflow_id}/resume-no-wait",
            resume::<RUN_ID>,
            Doc::json(
                RUNS,
                "Resume a suspended run in the background, answering with its id",
            )
            .query::<StoredRunQuery>()
            .body::<ResumeBody>()
            .conflict(NOT_SUSPENDED),
        )
        .post(
            "/workflows/{workflow_id}/restart",
            restart::<MESSAGE>,
            Doc::json(
                RUNS,
                "Restart a run left running by a process that died, in the background",
            )
            .query::<StoredRunQuery>()
            .body::<RestartBody>()
            .conflict(NOT_ACTIVE),
        )
        .post(
            "/workflows/{workflow_id}/restart-async",
            restart::<RESULT>,
            Doc::json(
                RUNS,
                "Restart a run left running by a process that died, answering with its result",
            )
            .query::<StoredRunQuery>()
            .body::<RestartBody>()
            .conflict(NOT_ACTIVE),
        )
        .post(
            "/workflows/{workflow_id}/restart-all-active-workflow-runs",
            restart_all,
            Doc::json(
                RUNS,
                "Restart every run of the workflow left running or sleeping by a process that died",
            ),
        )
        .post(
            "/workflows/{workflow_id}/time-travel",
            time_travel::<MESSAGE>,
            Doc::json(
                RUNS,
                "Run a stored run again from a step, in the background",
            )
            .query::<StoredRunQuery>()
            .body::<TravelBody>()
            .conflict(TRAVEL),
        )
        .post(
            "/workflows/{workflow_id}/time-travel-async",
            time_travel::<RESULT>,
            Doc::json(
                RUNS,
                "Run a stored run again from a step, answering with its result",
            )
            .query::<StoredRunQuery>()
            .body::<TravelBody>()
            .conflict(TRAVEL),
        )
        .post(
            "/workflows/{workflow_id}/time-travel-stream",
            time_travel_stream,
            Doc::json(
                RUNS,
                "Run a stored run again from a step, streaming its events",
            )
            .query::<StoredRunQuery>()
            .body::<TravelBody>()
            .conflict(TRAVEL)
            .answering(Answer::Records),
        )
        .post(
            "/workflows/{workflow_id}/runs/{run_id}/cancel",
            cancel,
            Doc::json(RUNS, "Cancel a run").conflict("The run has ended"),
        )
}

fn workflow<'a>(state: &'a AppState, id: &str) -> Result<&'a Workflow, ApiError> {
    state
        .kestrel
        .workflow(id)
        .map_err(|e| ApiError::not_found(e.to_string()))
}

/// A schema as Mastra's routes give it: a JSON string of `{"json": schema}` (superjson's
/// form, which `@mastra/client-js` unwraps).
fn schema_string(schema: &Value) -> Value {
    Value::String(json!({ "json": schema }).to_string())
}

fn step_json(step: &Arc<dyn kestrel_core::workflow::Step>) -> Value {
    let mut object = json!({
        "id": step.id(),
        "description": step.description(),
        "inputSchema": schema_string(step.input_schema()),
        "outputSchema": schema_string(step.output_schema()),
    });
    if let Some(schema) = step.resume_schema() {
        object["resumeSchema"] = schema_string(schema);
    }
    if let Some(schema) = step.suspend_schema() {
        object["suspendSchema"] = schema_string(schema);
    }
    object
}

/// Every step of `workflow`, nested workflows' too, by their prefixed ids (`nested.inner`),
/// as Mastra's `allSteps`.
fn every_step(workflow: &Workflow, prefix: &str, into: &mut Map<String, Value>) {
    for step in workflow.steps() {
        let id = format!("{prefix}{}", step.id());
        into.insert(id.clone(), step_json(step));
        if let Some(inner) = step.nested_workflow() {
            every_step(inner, &format!("{id}."), into);
        }
    }
}

/// A workflow as Mastra's `WorkflowInfo`; `partial` leaves the steps out (and counts them).
fn workflow_json(workflow: &Workflow, partial: bool) -> Value {
    let steps: Map<String, Value> = if partial {
        Map::new()
    } else {
        workflow
            .steps()
            .into_iter()
            .map(|step| (step.id().to_owned(), step_json(step)))
            .collect()
    };
    let mut all_steps = Map::new();
    if !partial {
        every_step(workflow, "", &mut all_steps);
    }
    let mut info = json!({
        "name": workflow.id(),
        "description": workflow.description(),
        "metadata": {},
        "origin": "code",
        "steps": steps,
        "allSteps": all_steps,
        "stepGraph": workflow.serialized_step_graph(),
        "inputSchema": schema_string(workflow.input_schema()),
        "outputSchema": schema_string(workflow.output_schema()),
        "stateSchema": Value::Null,
        "requestContextSchema": Value::Null,
        "options": {"validateInputs": true},
        "isProcessorWorkflow": false,
    });
    if partial {
        info["stepCount"] = json!(workflow.steps().len());
    }
    info
}

/// Query of the workflow list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    /// Leave each workflow's steps out (and give `stepCount`).
    #[serde(default)]
    partial: Option<bool>,
}

fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::invalid_query(e.body_text()))
}

async fn list_workflows(
    State(state): Shared,
    list: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let partial = query(list)?.partial.unwrap_or(false);
    let workflows: BTreeMap<String, Value> = state
        .kestrel
        .workflows()
        .map(|w| (w.id().to_owned(), workflow_json(w, partial)))
        .collect();
    Ok(Json(json!(workflows)))
}

async fn get_workflow(
    State(state): Shared,
    Path(workflow_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(workflow_json(workflow(&state, &workflow_id)?, false)))
}

/// How many runs of `workflow` are in `status` (the caller's own, for a pinned caller).
async fn count(
    workflow: &Workflow,
    caller: &Caller,
    status: WorkflowStatus,
) -> Result<u64, ApiError> {
    let listed = workflow
        .store()
        .list(&WorkflowRunsQuery {
            workflow_id: Some(workflow.id().to_owned()),
            resource_id: caller.resource.clone(),
            status: Some(status),
            page: 0,
            per_page: 1,
        })
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(listed.total)
}

async fn run_counts(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    let mut counts = Map::new();
    for workflow in state.kestrel.workflows() {
        let running = count(workflow, &caller, WorkflowStatus::Running).await?;
        let suspended = count(workflow, &caller, WorkflowStatus::Suspended).await?;
        counts.insert(
            workflow.id().to_owned(),
            json!({"running": running, "suspended": suspended}),
        );
    }
    Ok(Json(Value::Object(counts)))
}

/// A time in milliseconds since the Unix epoch, as the ISO 8601 text Mastra's dates give.
fn iso_time(ms: i64) -> Value {
    chrono::DateTime::from_timestamp_millis(ms).map_or(Value::Null, |time| {
        Value::String(time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    })
}

/// The steps of `snapshot` in `status`, as Mastra's paths: `{stepId: [entry index]}`.
fn paths_in(snapshot: &WorkflowSnapshot, status: StepStatus) -> Value {
    let paths: Map<String, Value> = snapshot
        .steps
        .iter()
        .filter(|(_, step)| step.status == status)
        .map(|(id, _)| (id.clone(), json!([snapshot.position])))
        .collect();
    Value::Object(paths)
}

/// A stored run's snapshot in the shape of Mastra's `WorkflowRunState`.
fn snapshot_json(workflow: &Workflow, snapshot: &WorkflowSnapshot) -> Value {
    let mut context = Map::new();
    context.insert("input".to_owned(), snapshot.input.clone());
    for (id, step) in &snapshot.steps {
        context.insert(id.clone(), json!(step));
    }
    let mut state = json!({
        "runId": snapshot.run_id,
        "status": snapshot.status,
        "value": snapshot.state,
        "context": context,
        "activePaths": [],
        "activeStepsPath": paths_in(snapshot, StepStatus::Running),
        "stepExecutionPath": snapshot.step_execution_path,
        "suspendedPaths": paths_in(snapshot, StepStatus::Suspended),
        "waitingPaths": paths_in(snapshot, StepStatus::Waiting),
        "serializedStepGraph": workflow.serialized_step_graph(),
        "requestContext": snapshot.request_context,
        "timestamp": snapshot.updated_at_ms,
    });
    if let Some(result) = &snapshot.result {
        state["result"] = result.clone();
    }
    if let Some(error) = &snapshot.error {
        state["error"] = json!(error);
    }
    state
}

/// Query of the runs list (Mastra's: `page`/`perPage`, or `limit`/`offset`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RunsQuery {
    /// The page, from 0.
    #[serde(default)]
    page: Option<u32>,
    /// Runs per page: 1 to 1,000; absent: 50.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    per_page: Option<u32>,
    /// Runs per page, as `limit`/`offset` clients page: 1 to 1,000, or `false` for as many
    /// as a page holds (1,000). Over `perPage`.
    #[serde(default)]
    #[schemars(regex(pattern = r"^(false|[1-9][0-9]{0,2}|1000)$"))]
    limit: Option<String>,
    /// How many runs to skip, besides the pages before `page`.
    #[serde(default)]
    offset: Option<u32>,
    /// Only this resource's runs.
    #[serde(default)]
    resource_id: Option<String>,
    /// Only runs in this status.
    #[serde(default)]
    #[schemars(extend("enum" = ["pending", "running", "suspended", "waiting", "success", "failed", "canceled"]))]
    status: Option<String>,
    /// Not supported: refused rather than ignored (so not in the document).
    #[serde(default)]
    #[schemars(skip)]
    from_date: Option<String>,
    /// Not supported: refused rather than ignored (so not in the document).
    #[serde(default)]
    #[schemars(skip)]
    to_date: Option<String>,
}

const MAX_PAGE: u32 = 1_000;

impl RunsQuery {
    /// The page size, and how many runs to skip.
    fn paging(&self) -> Result<(u32, u64), ApiError> {
        let size = match self.limit.as_deref() {
            Some("false") => MAX_PAGE,
            Some(text) => match text.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
                _ => {
                    return Err(ApiError::invalid_query(format!(
                        "limit must be a number from 1 to {MAX_PAGE} or false, not {text:?}"
                    )));
                }
            },
            None => match self.per_page {
                None => 50,
                Some(n) if (1..=MAX_PAGE).contains(&n) => n,
                Some(n) => {
                    return Err(ApiError::invalid_query(format!(
                        "perPage must be from 1 to {MAX_PAGE}, not {n}"
                    )));
                }
            },
        };
        let skip = u64::from(self.page.unwrap_or(0)) * u64::from(size)
            + u64::from(self.offset.unwrap_or(0));
        Ok((size, skip))
    }
}

/// `size` runs matching `query` after the first `skip` of them, and how many match.
async fn runs_page(
    workflow: &Workflow,
    mut query: WorkflowRunsQuery,
    size: u32,
    skip: u64,
) -> Result<(Vec<WorkflowSnapshot>, u64), ApiError> {
    let store_error = |e: kestrel_core::workflow::WorkflowStoreError| ApiError::internal(&e);
    let Ok(page) = u32::try_from(skip / u64::from(size)) else {
        // Past any store's end: nothing, but the count.
        query.per_page = 1;
        let counted = workflow.store().list(&query).await.map_err(store_error)?;
        return Ok((Vec::new(), counted.total));
    };
    query.page = page;
    query.per_page = size;
    let first = workflow.store().list(&query).await.map_err(store_error)?;
    let within = usize::try_from(skip % u64::from(size)).unwrap_or_default();
    if within == 0 {
        return Ok((first.runs, first.total));
    }
    // An offset inside a page: the rest of that page, and the start of the next.
    let mut runs: Vec<WorkflowSnapshot> = first.runs.into_iter().skip(within).collect();
    if let Some(next) = page.checked_add(1) {
        query.page = next;
        let second = workflow.store().list(&query).await.map_err(store_error)?;
        runs.extend(second.runs.into_iter().take(within));
    }
    Ok((runs, first.total))
}

async fn list_runs(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    runs: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let runs = query(runs)?;
    let workflow = workflow(&state, &workflow_id)?;
    if runs.from_date.is_some() || runs.to_date.is_some() {
        return Err(ApiError::invalid_query(
            "fromDate and toDate are not supported: page through the runs (newest first)",
        ));
    }
    let (size, skip) = runs.paging()?;
    let status = match runs.status.as_deref() {
        None => None,
        Some(text) => Some(WorkflowStatus::parse(text).ok_or_else(|| {
            ApiError::invalid_query(format!(
                "status must be pending, running, suspended, waiting, success, failed or \
                 canceled, not {text:?}"
            ))
        })?),
    };
    let mut resource_id = runs.resource_id;
    if let Some(own) = &caller.resource {
        if let Some(asked) = &resource_id {
            caller.check_resource(asked)?;
        }
        resource_id = Some(own.clone());
    }
    let query = WorkflowRunsQuery {
        workflow_id: Some(workflow_id),
        resource_id,
        status,
        page: 0,
        per_page: size,
    };
    let (listed, total) = runs_page(workflow, query, size, skip).await?;
    let runs: Vec<Value> = listed
        .iter()
        .map(|run| {
            json!({
                "workflowName": run.workflow_id,
                "runId": run.run_id,
                "resourceId": run.resource_id,
                "snapshot": snapshot_json(workflow, run),
                "createdAt": iso_time(run.created_at_ms),
                "updatedAt": iso_time(run.updated_at_ms),
            })
        })
        .collect();
    Ok(Json(json!({"runs": runs, "total": total})))
}

/// The stored run `run_id` of `workflow`, if the caller may reach it (another resource's run
/// is not revealed).
async fn stored(
    workflow: &Workflow,
    caller: &Caller,
    run_id: &str,
) -> Result<Option<WorkflowSnapshot>, ApiError> {
    let snapshot = workflow
        .store()
        .load(workflow.id(), run_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    Ok(snapshot.filter(|s| caller.resource.is_none() || s.resource_id == caller.resource))
}

fn run_not_found(workflow: &Workflow, run_id: &str) -> ApiError {
    ApiError::not_found(format!(
        "workflow {:?} has no run {run_id:?}",
        workflow.id()
    ))
}

/// [`stored`], or 404.
async fn visible(
    workflow: &Workflow,
    caller: &Caller,
    run_id: &str,
) -> Result<WorkflowSnapshot, ApiError> {
    stored(workflow, caller, run_id)
        .await?
        .ok_or_else(|| run_not_found(workflow, run_id))
}

/// Query of one run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RunQuery {
    /// A comma-separated list of `result`, `error`, `payload`, `steps`, `activeStepsPath`,
    /// `serializedStepGraph` (absent: all of them). The ids, times and status always come.
    #[serde(default)]
    #[schemars(regex(
        pattern = r"^[\s,]*((result|error|payload|steps|activeStepsPath|serializedStepGraph)([\s,]+|$))*$"
    ))]
    fields: Option<String>,
    /// Accepted for Mastra's clients (nested workflows' steps are always included).
    #[serde(default)]
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    with_nested_workflows: Option<bool>,
}

const RUN_FIELDS: [&str; 6] = [
    "result",
    "error",
    "payload",
    "steps",
    "activeStepsPath",
    "serializedStepGraph",
];

async fn get_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path((workflow_id, run_id)): Path<(String, String)>,
    run: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let run = query(run)?;
    let fields: Vec<&str> = match &run.fields {
        None => RUN_FIELDS.to_vec(),
        Some(list) => {
            let asked: Vec<&str> = list
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            if let Some(unknown) = asked.iter().find(|f| !RUN_FIELDS.contains(f)) {
                return Err(ApiError::invalid_query(format!(
                    "fields: {unknown:?} is not one of {}",
                    RUN_FIELDS.join(", ")
                )));
            }
            asked
        }
    };
    let workflow = workflow(&state, &workflow_id)?;
    let snapshot = visible(workflow, &caller, &run_id).await?;
    let mut body = json!({
        "runId": snapshot.run_id,
        "workflowName": snapshot.workflow_id,
        "resourceId": snapshot.resource_id,
        "createdAt": iso_time(snapshot.created_at_ms),
        "updatedAt": iso_time(snapshot.updated_at_ms),
        "status": snapshot.status,
    });
    for field in fields {
        let value = match field {
            "result" => snapshot.result.clone().unwrap_or(Value::Null),
            "error" => snapshot.error.as_ref().map_or(Value::Null, |e| json!(e)),
            "payload" => snapshot.input.clone(),
            "steps" => json!(snapshot.steps),
            "activeStepsPath" => paths_in(&snapshot, StepStatus::Running),
            _ => workflow.serialized_step_graph(),
        };
        body[field] = value;
    }
    Ok(Json(body))
}

async fn delete_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path((workflow_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let workflow = workflow(&state, &workflow_id)?;
    let snapshot = visible(workflow, &caller, &run_id).await?;
    // An ended run's last snapshot is written: only one still going on here is refused.
    if !snapshot.status.is_ended() && workflow.is_run_in_progress(&run_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "run_in_progress",
            format!("run {run_id:?} is in progress: cancel it first"),
        ));
    }
    let deleted = workflow
        .store()
        .delete(workflow.id(), &run_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    if !deleted {
        return Err(run_not_found(workflow, &run_id));
    }
    Ok(Json(json!({"message": "Workflow run deleted"})))
}

/// The `runId` query parameter.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RunIdQuery {
    /// The run (absent: a new one, with a fresh id).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = 256), pattern(crate::wire::ID_PATTERN))]
    run_id: Option<String>,
}

/// The `runId` query parameter of the routes that act on a stored run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct StoredRunQuery {
    /// The run.
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = 256), pattern(crate::wire::ID_PATTERN))]
    run_id: String,
}

/// The body of `create-run`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CreateRunBody {
    /// The resource the run acts for.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = 256), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    /// Accepted for Mastra's clients (there are no scorers yet).
    #[serde(default)]
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    disable_scorers: Option<bool>,
}

/// The resource a new run of `caller` acts for: the pinned one (a body naming another is
/// refused), or the body's.
fn run_resource(caller: &Caller, asked: Option<String>) -> Result<Option<String>, ApiError> {
    match (&caller.resource, asked) {
        (Some(own), Some(asked)) => {
            caller.check_resource(&asked)?;
            Ok(Some(own.clone()))
        }
        (Some(own), None) => Ok(Some(own.clone())),
        (None, asked) => Ok(asked),
    }
}

async fn create_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<RunIdQuery>, QueryRejection>,
    MaybeBody(body): MaybeBody<CreateRunBody>,
) -> Result<Json<Value>, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let resource = run_resource(&caller, body.resource_id)?;
    let run = match run_id {
        Some(id) => {
            // An id taken by another resource's run is refused without saying so.
            let exists = workflow
                .store()
                .load(workflow.id(), &id)
                .await
                .map_err(|e| ApiError::internal(&e))?;
            if exists.is_some_and(|s| caller.resource.is_some() && s.resource_id != caller.resource)
            {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "run_id_taken",
                    format!("run id {id:?} cannot be used: leave runId out for a fresh one"),
                ));
            }
            workflow.create_run_with_id(id)
        }
        None => workflow.create_run(),
    };
    let run = match resource {
        Some(resource) => run.resource(resource),
        None => run,
    };
    run.create().await?;
    Ok(Json(json!({"runId": run.run_id()})))
}

/// The body that starts a run (`stream`, `start`, `start-async`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct StartBody {
    /// The run's input, checked against the workflow's input schema.
    #[serde(default)]
    input_data: Value,
    /// The workflow state the run starts with (absent: `{}`).
    #[serde(default)]
    initial_state: Option<Map<String, Value>>,
    /// Values the steps read from their request context.
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    /// The resource the run acts for.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = 256), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    /// Only `true` (the default): a stream ends when its run suspends, and `resume-stream`
    /// streams the rest.
    #[serde(default)]
    #[schemars(extend("const" = true))]
    close_on_suspend: Option<bool>,
    /// Only `false` (the default): a run goes on to its end or its first suspension.
    #[serde(default)]
    #[schemars(extend("const" = false))]
    per_step: Option<bool>,
    /// Accepted for Mastra's clients; not used yet.
    #[serde(default)]
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    tracing_options: Option<Value>,
}

/// The request context of a run `caller` starts or resumes.
fn run_context(
    caller: &Caller,
    entries: Option<Map<String, Value>>,
) -> kestrel_core::context::RequestContext {
    let context = crate::wire::client_context(entries);
    if let Some(resource) = &caller.resource {
        context.set(RESOURCE_ID_KEY, resource.as_str());
    }
    context
}

fn unsupported_per_step(per_step: Option<bool>) -> Result<(), ApiError> {
    if per_step == Some(true) {
        return Err(ApiError::invalid(
            "perStep is not supported: a run goes on to its end or its first suspension",
        ));
    }
    Ok(())
}

/// The run a start body asks for, and its input.
async fn fresh_run(
    workflow: &Workflow,
    caller: &Caller,
    run_id: Option<String>,
    body: StartBody,
) -> Result<(WorkflowRun, Value), ApiError> {
    unsupported_per_step(body.per_step)?;
    if body.close_on_suspend == Some(false) {
        return Err(ApiError::invalid(
            "closeOnSuspend: false is not supported: the stream ends when the run suspends, \
             and resume-stream streams the rest",
        ));
    }
    let resource = run_resource(caller, body.resource_id)?;
    let run = match run_id {
        Some(id) => {
            let exists = workflow
                .store()
                .load(workflow.id(), &id)
                .await
                .map_err(|e| ApiError::internal(&e))?;
            // Another resource's run is not revealed: its id is simply taken.
            if let Some(snapshot) = exists
                && caller.resource.is_some()
                && snapshot.resource_id != caller.resource
            {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "run_id_taken",
                    format!("run id {id:?} cannot be used: leave runId out for a fresh one"),
                ));
            }
            workflow.create_run_with_id(id)
        }
        None => workflow.create_run(),
    };
    let mut run = run.request_context(run_context(caller, body.request_context));
    if let Some(resource) = resource {
        run = run.resource(resource);
    }
    if let Some(state) = body.initial_state {
        run = run.initial_state(Value::Object(state));
    }
    // Stored `pending` first (unless it was created already), so the run is listed from its
    // start on whatever store, and of two starts of one id only one claims it.
    run.create().await?;
    Ok((run, body.input_data))
}

/// A workflow stream as Mastra writes it: `text/plain`, each event's JSON then `\x1E`. The
/// run goes on if the client goes away.
fn records(stream: WorkflowStream, slot: StreamSlot) -> Response {
    let body = stream.map(move |event| {
        let _held = &slot;
        let mut record = crate::sse::public_json(&event);
        record.push(RECORD_SEPARATOR);
        Ok::<_, Infallible>(axum::body::Bytes::from(record))
    });
    let mut response =
        axum::body::Body::from_stream(crate::sse::FlushFirst::new(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<RunIdQuery>, QueryRejection>,
    Body(body): Body<StartBody>,
) -> Result<Response, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, input) = fresh_run(workflow, &caller, run_id, body).await?;
    Ok(records(run.stream(input).await?, slot))
}

/// How a route that does not stream answers for the run it set going.
const RESULT: u8 = 0;
/// With `{message}`, at once: the run goes on in the background.
const MESSAGE: u8 = 1;
/// With `{runId}`, at once.
const RUN_ID: u8 = 2;

/// The answer `HOW` ([`RESULT`], [`MESSAGE`] or [`RUN_ID`]) for a run set going as `stream`.
/// The run was started (or resumed) before, so bad input is answered at once; it is waited
/// for in a task of its own, so a request that times out leaves it to finish; a stream
/// dropped leaves the run going on in its task.
async fn answer<const HOW: u8>(
    stream: WorkflowStream,
    run_id: &str,
    message: &str,
) -> Result<Json<Value>, ApiError> {
    match HOW {
        RESULT => {
            let result = crate::routes::in_task(stream.result()).await??;
            Ok(Json(json!(result)))
        }
        MESSAGE => Ok(Json(json!({"message": message, "runId": run_id}))),
        _ => Ok(Json(json!({"runId": run_id}))),
    }
}

/// `start-async` ([`RESULT`]) and `start` ([`MESSAGE`]).
async fn start<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<RunIdQuery>, QueryRejection>,
    Body(body): Body<StartBody>,
) -> Result<Json<Value>, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, input) = fresh_run(workflow, &caller, run_id, body).await?;
    let stream = run.stream(input).await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run started").await
}

/// The step a resume names: an id, or a path of ids (a nested workflow's step).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum StepPath {
    /// A step id.
    Id(String),
    /// The path of ids to a step inside nested workflows (`["nested", "inner"]`).
    Path(#[schemars(length(min = 1, max = 32))] Vec<String>),
}

/// The body of the resume routes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ResumeBody {
    /// The suspended step (absent: the run's only suspended step).
    #[serde(default)]
    step: Option<StepPath>,
    /// The data the step resumes with, checked against its resume schema.
    #[serde(default)]
    resume_data: Value,
    /// Values the steps read from their request context (over the run's own).
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    /// A foreach step's suspended item to resume (absent: its only suspended item).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(with = "Option<u32>")]
    for_each_index: Option<u32>,
    /// Only `false` (the default): a run goes on to its end or its next suspension.
    #[serde(default)]
    #[schemars(extend("const" = false))]
    per_step: Option<bool>,
    /// Accepted for Mastra's clients; not used yet.
    #[serde(default)]
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    tracing_options: Option<Value>,
}

fn as_strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

/// The run a resume body names, the step's path and the data; the run must be the caller's.
async fn resumed_run(
    workflow: &Workflow,
    caller: &Caller,
    run_id: String,
    body: ResumeBody,
) -> Result<(Resumed, Value), ApiError> {
    unsupported_per_step(body.per_step)?;
    visible(workflow, caller, &run_id).await?;
    let path = match body.step {
        None => Vec::new(),
        Some(StepPath::Id(id)) => vec![id],
        Some(StepPath::Path(path)) => path,
    };
    if let Some(problem) = path.iter().find_map(|id| crate::wire::id_problem(id)) {
        return Err(ApiError::invalid(format!("step: {problem}")));
    }
    let run = workflow
        .create_run_with_id(run_id)
        .request_context(run_context(caller, body.request_context));
    let item = body.for_each_index.map(|i| i as usize);
    if item.is_some() && path.len() > 1 {
        return Err(ApiError::invalid(
            "forEachIndex names an item of a foreach step of this workflow: give step as its id",
        ));
    }
    Ok((Resumed { run, path, item }, body.resume_data))
}

/// A run to resume, at a step path (and a foreach item).
struct Resumed {
    run: WorkflowRun,
    path: Vec<String>,
    item: Option<usize>,
}

impl Resumed {
    async fn stream(&self, data: Value) -> Result<WorkflowStream, ApiError> {
        let path = as_strs(&self.path);
        Ok(match self.item {
            Some(index) => {
                self.run
                    .resume_item_stream(path.first().copied(), index, data)
                    .await?
            }
            None => self.run.resume_at_stream(&path, data).await?,
        })
    }
}

async fn resume_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<StoredRunQuery>, QueryRejection>,
    Body(body): Body<ResumeBody>,
) -> Result<Response, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (resumed, data) = resumed_run(workflow, &caller, run_id, body).await?;
    Ok(records(resumed.stream(data).await?, slot))
}

/// `resume-async` ([`RESULT`]), `resume` ([`MESSAGE`]) and `resume-no-wait` ([`RUN_ID`]).
async fn resume<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<StoredRunQuery>, QueryRejection>,
    Body(body): Body<ResumeBody>,
) -> Result<Json<Value>, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (resumed, data) = resumed_run(workflow, &caller, run_id, body).await?;
    let stream = resumed.stream(data).await?;
    answer::<HOW>(stream, resumed.run.run_id(), "Workflow run resumed").await
}

/// The body of the restart routes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RestartBody {
    /// Values the steps read from their request context (over the run's own).
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    /// Accepted for Mastra's clients; not used yet.
    #[serde(default)]
    tracing_options: Option<Value>,
}

/// `restart-async` ([`RESULT`]) and `restart` ([`MESSAGE`]).
async fn restart<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<StoredRunQuery>, QueryRejection>,
    MaybeBody(body): MaybeBody<RestartBody>,
) -> Result<Json<Value>, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    visible(workflow, &caller, &run_id).await?;
    let run = workflow
        .create_run_with_id(run_id)
        .request_context(run_context(&caller, body.request_context));
    let stream = run.restart_stream().await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run restarted").await
}

async fn restart_all(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    // Other resources' runs are theirs to restart.
    if caller.resource.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a token pinned to a resource restarts its runs one by one",
        ));
    }
    let workflow = workflow(&state, &workflow_id)?;
    let restarted = workflow.restart_active_runs().await?;
    Ok(Json(json!({
        "message": "Restarted all active workflow runs",
        "runIds": restarted,
    })))
}

/// The body of the time travel routes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TravelBody {
    /// The step to run again from (a step of the workflow, not of a nested one).
    step: TravelStep,
    /// The input the step runs on (absent: the input it had).
    #[serde(default)]
    input_data: Option<Value>,
    /// Data the step is resumed with, for a step that suspends.
    #[serde(default)]
    resume_data: Option<Value>,
    /// The workflow state to run on (absent: the run's).
    #[serde(default)]
    initial_state: Option<Map<String, Value>>,
    /// Values the steps read from their request context (over the run's own).
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    /// Only `false` (the default).
    #[serde(default)]
    #[schemars(extend("const" = false))]
    per_step: Option<bool>,
    /// Not supported (step results to travel with): refused rather than ignored, so not in
    /// the document.
    #[serde(default)]
    #[schemars(skip)]
    context: Option<Value>,
    /// Not supported: refused rather than ignored, so not in the document.
    #[serde(default)]
    #[schemars(skip)]
    nested_steps_context: Option<Value>,
    #[allow(dead_code)] // Taken, so a Mastra client's body parses.
    /// Accepted for Mastra's clients; not used yet.
    #[serde(default)]
    tracing_options: Option<Value>,
}

/// The step a time travel goes to: an id, or a path of one id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum TravelStep {
    /// A step id.
    Id(#[schemars(length(min = 1, max = 256), pattern(crate::wire::ID_PATTERN))] String),
    /// A path of one id (travel to a nested workflow's step through its nesting step).
    Path(#[schemars(length(min = 1, max = 1))] Vec<String>),
}

/// The run and the travel a body asks for; the run must be the caller's.
async fn travel_of(
    workflow: &Workflow,
    caller: &Caller,
    run_id: String,
    body: TravelBody,
) -> Result<(WorkflowRun, kestrel_core::workflow::TimeTravel), ApiError> {
    unsupported_per_step(body.per_step)?;
    if body.context.is_some() || body.nested_steps_context.is_some() {
        return Err(ApiError::invalid(
            "context and nestedStepsContext are not supported: a travel keeps the results \
             of the steps before its step",
        ));
    }
    let step = match body.step {
        TravelStep::Id(id) => id,
        TravelStep::Path(path) => match <[String; 1]>::try_from(path) {
            Ok([id]) => id,
            Err(_) => {
                return Err(ApiError::invalid(
                    "time travel goes to a step of this workflow: name the nesting step",
                ));
            }
        },
    };
    if let Some(problem) = crate::wire::id_problem(&step) {
        return Err(ApiError::invalid(format!("step: {problem}")));
    }
    visible(workflow, caller, &run_id).await?;
    let mut travel = kestrel_core::workflow::TimeTravel::to(step);
    if let Some(input) = body.input_data {
        travel = travel.input(input);
    }
    if let Some(data) = body.resume_data {
        travel = travel.resume_data(data);
    }
    if let Some(state) = body.initial_state {
        travel = travel.state(Value::Object(state));
    }
    let run = workflow
        .create_run_with_id(run_id)
        .request_context(run_context(caller, body.request_context));
    Ok((run, travel))
}

/// `time-travel-async` ([`RESULT`]) and `time-travel` ([`MESSAGE`]).
async fn time_travel<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<StoredRunQuery>, QueryRejection>,
    Body(body): Body<TravelBody>,
) -> Result<Json<Value>, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, travel) = travel_of(workflow, &caller, run_id, body).await?;
    let stream = run.time_travel_stream(travel).await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run time travel started").await
}

async fn time_travel_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(workflow_id): Path<String>,
    run: Result<Query<StoredRunQuery>, QueryRejection>,
    Body(body): Body<TravelBody>,
) -> Result<Response, ApiError> {
    let run_id = query(run)?.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, travel) = travel_of(workflow, &caller, run_id, body).await?;
    Ok(records(run.time_travel_stream(travel).await?, slot))
}

async fn cancel(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path((workflow_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let workflow = workflow(&state, &workflow_id)?;
    visible(workflow, &caller, &run_id).await?;
    workflow.create_run_with_id(run_id).cancel().await?;
    Ok(Json(json!({"message": "Workflow run cancelled"})))
}
