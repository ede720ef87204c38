//! The runs of a workflow as stored: listed (paged, filtered), read (with the fields asked
//! for) and deleted.

use super::*;

/// Query of the runs list (Mastra's: `page`/`perPage`, or `limit`/`offset`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunsQuery {
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

pub(super) const MAX_PAGE: u32 = 1_000;

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
pub(super) async fn runs_page(
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

pub(super) async fn list_runs(
    State(state): Shared,
    caller: Caller,
    Path(workflow_id): Path<String>,
    Query(runs): Query<RunsQuery>,
) -> Result<Json<WorkflowRunsPage>, ApiError> {
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
    let runs = listed
        .into_iter()
        .map(|run| WorkflowRunSummary::new(workflow, run))
        .collect();
    Ok(Json(WorkflowRunsPage { runs, total }))
}

/// Query of one run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunQuery {
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

pub(super) async fn get_run(
    State(state): Shared,
    caller: Caller,
    Path((workflow_id, run_id)): Path<(String, String)>,
    Query(run): Query<RunQuery>,
) -> Result<Json<WorkflowRunDetails>, ApiError> {
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
    Ok(Json(WorkflowRunDetails::new(workflow, snapshot, &fields)))
}

pub(super) async fn delete_run(
    State(state): Shared,
    caller: Caller,
    Path((workflow_id, run_id)): Path<(String, String)>,
) -> Result<Json<WorkflowMessage>, ApiError> {
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
    Ok(Json(WorkflowMessage {
        message: "Workflow run deleted",
    }))
}
