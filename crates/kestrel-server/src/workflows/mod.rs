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

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kestrel_core::context::RESOURCE_ID_KEY;
use kestrel_core::workflow::{
    Workflow, WorkflowRun, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStatus, WorkflowStream,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::extract::{BodyFirst, Query};
use crate::limits::{RunSlot, StreamSlot};
use crate::openapi::{Answer, Doc, Routes};
use crate::relay::Relayed;
use crate::wire::{Body, MaybeBody};
use crate::{ApiError, AppState};

mod history;
mod info;
mod responses;
mod resume;
mod start;
mod travel;

use history::*;
use info::*;
use responses::*;
use resume::*;
use start::*;
use travel::*;

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
            Doc::json(WORKFLOWS, "List the workflows, by id")
                .query::<ListQuery>()
                .returns::<BTreeMap<String, WorkflowDescription>>(),
        )
        .get(
            "/workflows/run-counts",
            run_counts,
            Doc::json(
                WORKFLOWS,
                "Count each workflow's running and suspended runs",
            )
            .returns::<BTreeMap<String, WorkflowRunCount>>(),
        )
        .get(
            "/workflows/{workflow_id}",
            get_workflow,
            Doc::json(
                WORKFLOWS,
                "Describe a workflow: its steps, graph and schemas",
            )
            .returns::<WorkflowDescription>(),
        )
        .get(
            "/workflows/{workflow_id}/runs",
            list_runs,
            Doc::json(RUNS, "List a workflow's runs, newest first")
                .query::<RunsQuery>()
                .returns::<WorkflowRunsPage>(),
        )
        .get(
            "/workflows/{workflow_id}/runs/{run_id}",
            get_run,
            Doc::json(RUNS, "Read a run: its status, steps and result")
                .query::<RunQuery>()
                .returns::<WorkflowRunDetails>(),
        )
        .delete(
            "/workflows/{workflow_id}/runs/{run_id}",
            delete_run,
            Doc::json(RUNS, "Delete a run")
                .returns::<WorkflowMessage>()
                .conflict("The run is in progress: cancel it first"),
        )
        .post(
            "/workflows/{workflow_id}/create-run",
            create_run,
            Doc::json(RUNS, "Create a run (stored as pending until it starts)")
                .query::<RunIdQuery>()
                .body::<CreateRunBody>()
                .returns::<WorkflowRunId>()
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
                .returns::<WorkflowRunResult>()
                .conflict(STARTED),
        )
        .post(
            "/workflows/{workflow_id}/start",
            start::<MESSAGE>,
            Doc::json(RUNS, "Start a run in the background")
                .query::<RunIdQuery>()
                .body::<StartBody>()
                .returns::<WorkflowRunStarted>()
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
                .returns::<WorkflowRunResult>()
                .conflict(NOT_SUSPENDED),
        )
        .post(
            "/workflows/{workflow_id}/resume",
            resume::<MESSAGE>,
            Doc::json(RUNS, "Resume a suspended run in the background")
                .query::<StoredRunQuery>()
                .body::<ResumeBody>()
                .returns::<WorkflowRunStarted>()
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
            .returns::<WorkflowRunId>()
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
            .returns::<WorkflowRunStarted>()
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
            .returns::<WorkflowRunResult>()
            .conflict(NOT_ACTIVE),
        )
        .post(
            "/workflows/{workflow_id}/restart-all-active-workflow-runs",
            restart_all,
            Doc::json(
                RUNS,
                "Restart every run of the workflow left running or sleeping by a process that died",
            )
            .returns::<WorkflowRunsRestarted>(),
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
            .returns::<WorkflowRunStarted>()
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
            .returns::<WorkflowRunResult>()
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
            Doc::json(RUNS, "Cancel a run")
                .returns::<WorkflowMessage>()
                .conflict("The run has ended"),
        )
}

fn workflow<'a>(state: &'a AppState, id: &str) -> Result<&'a Workflow, ApiError> {
    state
        .kestrel
        .workflow(id)
        .map_err(|e| ApiError::not_found(e.to_string()))
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

/// The `runId` query parameter.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RunIdQuery {
    /// The run (absent: a new one, with a fresh id).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    run_id: Option<String>,
}

/// The `runId` query parameter of the routes that act on a stored run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct StoredRunQuery {
    /// The run.
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    run_id: String,
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

/// A workflow stream as Mastra writes it: `text/plain`, each event's JSON then `\x1E`. The
/// server drives the run ([`crate::relay`]): it goes on if the client goes away or stops
/// reading (then the client is let go), and a cancel reaches it at once.
fn records(stream: WorkflowStream, slot: StreamSlot) -> Response {
    let body = crate::relay::relay(stream, slot, |_| {}).filter_map(|relayed| {
        let record = match relayed {
            Relayed::Event(mut record) => {
                record.push(RECORD_SEPARATOR);
                Some(Ok::<_, Infallible>(axum::body::Bytes::from(record)))
            }
            // Mastra's format has no end of its own: the stream ends with `workflow-finish`.
            Relayed::End => None,
        };
        futures::future::ready(record)
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

/// How a route that does not stream answers for the run it set going: with its result
/// ([`WorkflowRunResult`]).
const RESULT: u8 = 0;
/// With `{message, runId}` ([`WorkflowRunStarted`]), at once: the run goes on in the
/// background.
const MESSAGE: u8 = 1;
/// With `{runId}` ([`WorkflowRunId`]), at once.
const RUN_ID: u8 = 2;

/// The answer `HOW` ([`RESULT`], [`MESSAGE`] or [`RUN_ID`]) for a run set going as `stream`.
/// The run was started (or resumed) before, so bad input is answered at once; it is waited
/// for in a task of its own, so a request that times out leaves it to finish; a stream
/// dropped leaves the run going on in its task.
async fn answer<const HOW: u8>(
    stream: WorkflowStream,
    run_id: &str,
    message: &'static str,
) -> Result<Json<WorkflowRunAnswer>, ApiError> {
    let run_id = run_id.to_owned();
    Ok(Json(match HOW {
        RESULT => {
            let result = crate::routes::in_task(stream.result()).await??;
            WorkflowRunAnswer::Result(Box::new(result.into()))
        }
        MESSAGE => WorkflowRunAnswer::Started(WorkflowRunStarted { message, run_id }),
        _ => WorkflowRunAnswer::Id(WorkflowRunId { run_id }),
    }))
}
