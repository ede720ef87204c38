//! Creating and starting runs: `create-run`, `stream`, `start-async` and `start`.

use super::*;

/// The body of `create-run`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CreateRunBody {
    /// The resource the run acts for.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    /// Accepted for Mastra's clients (there are no scorers yet).
    #[serde(default)]
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    disable_scorers: Option<bool>,
}

pub(super) async fn create_run(
    State(state): Shared,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(MaybeBody(body), Query(run)): BodyFirst<MaybeBody<CreateRunBody>, Query<RunIdQuery>>,
) -> Result<Json<WorkflowRunId>, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let resource = run_resource(&caller, body.resource_id)?;
    let run = named_run(workflow, &caller, run_id).await?;
    let run = match resource {
        Some(resource) => run.resource(resource),
        None => run,
    };
    run.create().await?;
    Ok(Json(WorkflowRunId {
        run_id: run.run_id().to_owned(),
    }))
}

/// The body that starts a run (`stream`, `start`, `start-async`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StartBody {
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
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
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

/// The run a start body asks for, and its input.
pub(super) async fn fresh_run(
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
    let run = named_run(workflow, caller, run_id).await?;
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

pub(super) async fn stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<StartBody>, Query<RunIdQuery>>,
) -> Result<Response, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, input) = fresh_run(workflow, &caller, run_id, body).await?;
    Ok(records(run.stream(input).await?, slot))
}

/// `start-async` ([`RESULT`]) and `start` ([`MESSAGE`]).
pub(super) async fn start<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<StartBody>, Query<RunIdQuery>>,
) -> Result<Json<WorkflowRunAnswer>, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, input) = fresh_run(workflow, &caller, run_id, body).await?;
    let stream = run.stream(input).await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run started").await
}

/// The run `run_id` names (a fresh one without it). An id of another resource's run is
/// refused without saying so: it is simply taken.
async fn named_run(
    workflow: &Workflow,
    caller: &Caller,
    run_id: Option<String>,
) -> Result<WorkflowRun, ApiError> {
    let Some(id) = run_id else {
        return Ok(workflow.create_run());
    };
    let exists = workflow
        .store()
        .load(workflow.id(), &id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
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
    Ok(workflow.create_run_with_id(id))
}
