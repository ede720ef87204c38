//! Continuing runs: resume (at a step path or a foreach item), restart, and cancel.

use super::*;

/// The step a resume names: an id, or a path of ids (a nested workflow's step).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum StepPath {
    /// A step id.
    Id(
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
         String,
    ),
    /// The path of ids to a step inside nested workflows (`["nested", "inner"]`).
    Path(
        #[schemars(
            length(min = 1, max = 32),
            inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
        )]
        Vec<String>,
    ),
}

/// The body of the resume routes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResumeBody {
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

pub(super) fn as_strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

/// The run a resume body names, the step's path and the data; the run must be the caller's.
pub(super) async fn resumed_run(
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
    if let Some(index) = item
        && path.len() > 1
    {
        // Items are resumed in this workflow's foreach steps, not through a nested one.
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_suspended_item",
            format!(
                "no item {index} waits at {}: forEachIndex names an item of a foreach step of \
                 this workflow (give step as its id)",
                path.join(".")
            ),
        ));
    }
    Ok((Resumed { run, path, item }, body.resume_data))
}

/// A run to resume, at a step path (and a foreach item).
pub(super) struct Resumed {
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

pub(super) async fn resume_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<ResumeBody>, Query<StoredRunQuery>>,
) -> Result<Response, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (resumed, data) = resumed_run(workflow, &caller, run_id, body).await?;
    Ok(records(resumed.stream(data).await?, slot))
}

/// `resume-async` ([`RESULT`]), `resume` ([`MESSAGE`]) and `resume-no-wait` ([`RUN_ID`]).
pub(super) async fn resume<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<ResumeBody>, Query<StoredRunQuery>>,
) -> Result<Json<WorkflowRunAnswer>, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (resumed, data) = resumed_run(workflow, &caller, run_id, body).await?;
    let stream = resumed.stream(data).await?;
    answer::<HOW>(stream, resumed.run.run_id(), "Workflow run resumed").await
}

/// The body of the restart routes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RestartBody {
    /// Values the steps read from their request context (over the run's own).
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    #[allow(dead_code)] // Taken, so a Mastra client's body or query parses.
    /// Accepted for Mastra's clients; not used yet.
    #[serde(default)]
    tracing_options: Option<Value>,
}

/// `restart-async` ([`RESULT`]) and `restart` ([`MESSAGE`]).
pub(super) async fn restart<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(MaybeBody(body), Query(run)): BodyFirst<
        MaybeBody<RestartBody>,
        Query<StoredRunQuery>,
    >,
) -> Result<Json<WorkflowRunAnswer>, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    visible(workflow, &caller, &run_id).await?;
    let run = workflow
        .create_run_with_id(run_id)
        .request_context(run_context(&caller, body.request_context));
    let stream = run.restart_stream().await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run restarted").await
}

pub(super) async fn restart_all(
    State(state): Shared,
    caller: Caller,
    Path(workflow_id): Path<String>,
) -> Result<Json<WorkflowRunsRestarted>, ApiError> {
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
    Ok(Json(WorkflowRunsRestarted {
        message: "Restarted all active workflow runs",
        run_ids: restarted,
    }))
}

pub(super) async fn cancel(
    State(state): Shared,
    caller: Caller,
    Path((workflow_id, run_id)): Path<(String, String)>,
) -> Result<Json<WorkflowMessage>, ApiError> {
    let workflow = workflow(&state, &workflow_id)?;
    visible(workflow, &caller, &run_id).await?;
    workflow.create_run_with_id(run_id).cancel().await?;
    Ok(Json(WorkflowMessage {
        message: "Workflow run cancelled",
    }))
}
