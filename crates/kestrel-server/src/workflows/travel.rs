//! Time travel: a stored run runs again from one of its steps.

use super::*;

/// The body of the time travel routes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct TravelBody {
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
pub(super) enum TravelStep {
    /// A step id.
    Id(
        #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
         String,
    ),
    /// A path of one id (travel to a nested workflow's step through its nesting step).
    Path(
        #[schemars(
            length(min = 1, max = 1),
            inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
        )]
        Vec<String>,
    ),
}

/// The run and the travel a body asks for; the run must be the caller's.
pub(super) async fn travel_of(
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
pub(super) async fn time_travel<const HOW: u8>(
    State(state): Shared,
    _run: RunSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<TravelBody>, Query<StoredRunQuery>>,
) -> Result<Json<WorkflowRunAnswer>, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, travel) = travel_of(workflow, &caller, run_id, body).await?;
    let stream = run.time_travel_stream(travel).await?;
    answer::<HOW>(stream, run.run_id(), "Workflow run time travel started").await
}

pub(super) async fn time_travel_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    Path(workflow_id): Path<String>,
    BodyFirst(Body(body), Query(run)): BodyFirst<Body<TravelBody>, Query<StoredRunQuery>>,
) -> Result<Response, ApiError> {
    let run_id = run.run_id;
    let workflow = workflow(&state, &workflow_id)?;
    let (run, travel) = travel_of(workflow, &caller, run_id, body).await?;
    Ok(records(run.time_travel_stream(travel).await?, slot))
}
