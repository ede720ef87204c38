//! Describing the workflows: Mastra's `WorkflowInfo`, and the counts of runs in progress.

use super::*;

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
    Query(list): Query<ListQuery>,
) -> Result<Json<BTreeMap<String, WorkflowDescription>>, ApiError> {
    let partial = list.partial.unwrap_or(false);
    let workflows = state
        .kestrel
        .workflows()
        .map(|w| (w.id().to_owned(), WorkflowDescription::of(w, partial)))
        .collect();
    Ok(Json(workflows))
}

pub(super) async fn get_workflow(
    State(state): Shared,
    Path(workflow_id): Path<String>,
) -> Result<Json<WorkflowDescription>, ApiError> {
    Ok(Json(WorkflowDescription::of(
        workflow(&state, &workflow_id)?,
        false,
    )))
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
    caller: Caller,
) -> Result<Json<BTreeMap<String, WorkflowRunCount>>, ApiError> {
    let mut counts = BTreeMap::new();
    for workflow in state.kestrel.workflows() {
        let running = count(workflow, &caller, WorkflowStatus::Running).await?;
        let suspended = count(workflow, &caller, WorkflowStatus::Suspended).await?;
        counts.insert(
            workflow.id().to_owned(),
            WorkflowRunCount { running, suspended },
        );
    }
    Ok(Json(counts))
}
