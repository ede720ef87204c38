//! Describing the workflows: Mastra's `WorkflowInfo`, and the counts of runs in progress.

use super::*;

/// A schema as Mastra's routes give it: a JSON string of `{"json": schema}` (superjson's
/// form, which `@mastra/client-js` unwraps).
pub(super) fn schema_string(schema: &Value) -> Value {
    Value::String(json!({ "json": schema }).to_string())
}

pub(super) fn step_json(step: &Arc<dyn kestrel_core::workflow::Step>) -> Value {
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
pub(super) fn every_step(workflow: &Workflow, prefix: &str, into: &mut Map<String, Value>) {
    for step in workflow.steps() {
        let id = format!("{prefix}{}", step.id());
        into.insert(id.clone(), step_json(step));
        if let Some(inner) = step.nested_workflow() {
            every_step(inner, &format!("{id}."), into);
        }
    }
}

/// A workflow as Mastra's `WorkflowInfo`; `partial` leaves the steps out (and counts them).
pub(super) fn workflow_json(workflow: &Workflow, partial: bool) -> Value {
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
pub(super) struct ListQuery {
    /// Leave each workflow's steps out (and give `stepCount`).
    #[serde(default)]
    partial: Option<bool>,
}

pub(super) async fn list_workflows(
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

pub(super) async fn get_workflow(
    State(state): Shared,
    Path(workflow_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(workflow_json(workflow(&state, &workflow_id)?, false)))
}

/// How many runs of `workflow` are in `status` (the caller's own, for a pinned caller).
pub(super) async fn count(
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

pub(super) async fn run_counts(
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
