//! What the workflow routes answer, in Mastra's shapes (`WorkflowInfo`, `WorkflowRunState`,
//! a run's result…): each body a type, so the OpenAPI document gives its schema and the
//! fuzzer checks every answer against it.
//!
//! Kestrel-core's records (a step's result, a step's error, a run's status) are serialized as
//! they are; the `…Fields` types here only document their JSON.

use std::collections::BTreeMap;
use std::sync::Arc;

use kestrel_core::event::{StepErrorInfo, StepStatus, WorkflowStatus};
use kestrel_core::store::{StepResult, StepResults};
use kestrel_core::workflow::{Step, Workflow, WorkflowResult, WorkflowSnapshot};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// A schema as Mastra's routes give it: a JSON string of `{"json": schema}` (superjson's
/// form, which `@mastra/client-js` unwraps).
fn schema_string(schema: &Value) -> String {
    json!({ "json": schema }).to_string()
}

/// A time in milliseconds since the Unix epoch, as the ISO 8601 text Mastra's dates give
/// (none when out of range).
fn iso_time(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|time| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The steps of `snapshot` in `status`, as Mastra's paths: `{stepId: [entry index]}`.
fn paths_in(snapshot: &WorkflowSnapshot, status: StepStatus) -> BTreeMap<String, Vec<usize>> {
    snapshot
        .steps
        .iter()
        .filter(|(_, step)| step.status == status)
        .map(|(id, _)| (id.clone(), vec![snapshot.position]))
        .collect()
}

// --- documentation of kestrel-core's records ----------------------------------------------

/// One entry of a workflow's graph (Mastra's `serializedStepGraph`).
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
struct WorkflowGraphEntry {
    /// `step`, `parallel`, `conditional`, `loop`, `foreach`, `sleep` or `sleepUntil`; the
    /// other fields depend on it (`step`, `steps`, `serializedConditions`, `loopType`,
    /// `opts`, `id`, `duration`, `date`).
    #[schemars(rename = "type")]
    kind: String,
}

/// A step's error.
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
struct WorkflowStepError {
    /// What went wrong.
    message: String,
    /// The kind of error (`Error` for a step's own).
    name: String,
}

/// One step's result in a run.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Only its schema is used.
struct WorkflowStepResult {
    /// Where it stands (a bailed step is stored as `success`).
    #[schemars(extend("enum" = ["running", "success", "failed", "suspended", "waiting", "bailed", "skipped", "canceled"]))]
    status: String,
    /// Its input.
    payload: Value,
    /// Its output.
    #[serde(default)]
    output: Option<Value>,
    /// What it suspended with.
    #[serde(default)]
    suspend_payload: Option<Value>,
    /// The data it was resumed with.
    #[serde(default)]
    resume_payload: Option<Value>,
    /// Why it failed.
    #[serde(default)]
    error: Option<WorkflowStepError>,
    /// When it first started (milliseconds since the Unix epoch).
    started_at: u64,
    /// When it ended.
    #[serde(default)]
    ended_at: Option<u64>,
    /// When it suspended.
    #[serde(default)]
    suspended_at: Option<u64>,
    /// When it was resumed.
    #[serde(default)]
    resumed_at: Option<u64>,
}

/// The schema of a run's status: one of [`WorkflowStatus::ALL`], by name.
fn run_status(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = WorkflowStatus::ALL.iter().map(|s| s.as_str()).collect();
    json_schema!({"type": "string", "enum": names})
}

// --- describing workflows -----------------------------------------------------------------

/// A step, as Mastra's `WorkflowInfo` lists it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowStepInfo {
    /// The step's id.
    id: String,
    /// What it does.
    description: String,
    /// Its input's JSON schema, as the JSON text of `{"json": schema}`.
    input_schema: String,
    /// Its output's JSON schema, in the same form.
    output_schema: String,
    /// The JSON schema of the data it resumes with, for a step that suspends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resume_schema: Option<String>,
    /// The JSON schema of what it suspends with, for a step that says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    suspend_schema: Option<String>,
}

impl WorkflowStepInfo {
    fn of(step: &Arc<dyn Step>) -> Self {
        Self {
            id: step.id().to_owned(),
            description: step.description().to_owned(),
            input_schema: schema_string(step.input_schema()),
            output_schema: schema_string(step.output_schema()),
            resume_schema: step.resume_schema().map(schema_string),
            suspend_schema: step.suspend_schema().map(schema_string),
        }
    }
}

/// Every step of `workflow`, nested workflows' too, by their prefixed ids (`nested.inner`),
/// as Mastra's `allSteps`.
fn every_step(workflow: &Workflow, prefix: &str, into: &mut BTreeMap<String, WorkflowStepInfo>) {
    for step in workflow.steps() {
        let id = format!("{prefix}{}", step.id());
        into.insert(id.clone(), WorkflowStepInfo::of(step));
        if let Some(inner) = step.nested_workflow() {
            every_step(inner, &format!("{id}."), into);
        }
    }
}

/// A workflow as Mastra's `WorkflowInfo`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowDescription {
    /// The workflow's id.
    name: String,
    /// What it does.
    description: String,
    /// Always empty.
    metadata: Map<String, Value>,
    /// Always `code`: the workflows are defined in code.
    #[schemars(extend("const" = "code"))]
    origin: &'static str,
    /// Its steps by id (empty in a partial list).
    steps: BTreeMap<String, WorkflowStepInfo>,
    /// Its steps and its nested workflows' by their prefixed ids (`nested.inner`; empty in a
    /// partial list).
    all_steps: BTreeMap<String, WorkflowStepInfo>,
    /// Its graph (Mastra's `serializedStepGraph`).
    #[schemars(with = "Vec<WorkflowGraphEntry>")]
    step_graph: Value,
    /// Its input's JSON schema, as the JSON text of `{"json": schema}`.
    input_schema: String,
    /// Its output's JSON schema, in the same form.
    output_schema: String,
    /// Always null: the state has no schema.
    state_schema: Option<String>,
    /// Always null: the request context has no schema.
    request_context_schema: Option<String>,
    /// Its options.
    options: WorkflowOptions,
    /// Always false.
    is_processor_workflow: bool,
    /// How many steps it has (a partial list, which leaves the steps out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step_count: Option<usize>,
}

/// A workflow's options.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WorkflowOptions {
    /// Always true: inputs are checked against the schemas.
    validate_inputs: bool,
}

impl WorkflowDescription {
    /// `workflow` described; `partial` leaves the steps out (and counts them).
    pub(super) fn of(workflow: &Workflow, partial: bool) -> Self {
        let mut steps = BTreeMap::new();
        let mut all_steps = BTreeMap::new();
        if !partial {
            for step in workflow.steps() {
                steps.insert(step.id().to_owned(), WorkflowStepInfo::of(step));
            }
            every_step(workflow, "", &mut all_steps);
        }
        Self {
            name: workflow.id().to_owned(),
            description: workflow.description().to_owned(),
            metadata: Map::new(),
            origin: "code",
            steps,
            all_steps,
            step_graph: workflow.serialized_step_graph(),
            input_schema: schema_string(workflow.input_schema()),
            output_schema: schema_string(workflow.output_schema()),
            state_schema: None,
            request_context_schema: None,
            options: WorkflowOptions {
                validate_inputs: true,
            },
            is_processor_workflow: false,
            step_count: partial.then(|| workflow.steps().len()),
        }
    }
}

/// A workflow's runs in progress.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct WorkflowRunCount {
    /// How many are running.
    pub(super) running: u64,
    /// How many wait for resume data.
    pub(super) suspended: u64,
}

// --- stored runs --------------------------------------------------------------------------

/// A page of a workflow's runs.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct WorkflowRunsPage {
    /// The page's runs, newest first.
    pub(super) runs: Vec<WorkflowRunSummary>,
    /// How many runs match.
    pub(super) total: u64,
}

/// A run in a list.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunSummary {
    /// The workflow's id.
    workflow_name: String,
    /// The run's id.
    run_id: String,
    /// The resource it acts for (null without one).
    resource_id: Option<String>,
    /// Where it stands.
    snapshot: WorkflowRunState,
    /// When it was created (null when out of range).
    #[schemars(extend("format" = "date-time"))]
    created_at: Option<String>,
    /// When it was last saved (null when out of range).
    #[schemars(extend("format" = "date-time"))]
    updated_at: Option<String>,
}

impl WorkflowRunSummary {
    /// The stored run `snapshot` of `workflow`.
    pub(super) fn new(workflow: &Workflow, snapshot: WorkflowSnapshot) -> Self {
        Self {
            workflow_name: snapshot.workflow_id.clone(),
            run_id: snapshot.run_id.clone(),
            resource_id: snapshot.resource_id.clone(),
            created_at: iso_time(snapshot.created_at_ms),
            updated_at: iso_time(snapshot.updated_at_ms),
            snapshot: WorkflowRunState::new(workflow, snapshot),
        }
    }
}

/// An entry of a run's context: its input, or a step's result.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ContextEntry {
    /// The run's input.
    Input(Arc<Value>),
    /// A step's result.
    Step(Box<StepResult>),
}

/// A stored run's snapshot in the shape of Mastra's `WorkflowRunState`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunState {
    /// The run's id.
    run_id: String,
    /// Where it stands.
    #[schemars(schema_with = "run_status")]
    status: WorkflowStatus,
    /// The workflow state.
    value: Arc<Value>,
    /// The run's input (`input`) and each step's result, by step id.
    #[schemars(with = "Map<String, Value>")]
    context: BTreeMap<String, ContextEntry>,
    /// Always empty.
    active_paths: Vec<Value>,
    /// The running steps: `{stepId: [entry index]}`.
    active_steps_path: BTreeMap<String, Vec<usize>>,
    /// The top-level steps that ran, in order.
    step_execution_path: Vec<String>,
    /// The suspended steps: `{stepId: [entry index]}`.
    suspended_paths: BTreeMap<String, Vec<usize>>,
    /// The sleeping steps: `{stepId: [entry index]}`.
    waiting_paths: BTreeMap<String, Vec<usize>>,
    /// The workflow's graph.
    #[schemars(with = "Vec<WorkflowGraphEntry>")]
    serialized_step_graph: Value,
    /// The request context's entries.
    request_context: BTreeMap<String, Value>,
    /// When it was last saved (milliseconds since the Unix epoch).
    timestamp: i64,
    /// The output, once it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Arc<Value>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<WorkflowStepError>")]
    error: Option<StepErrorInfo>,
}

impl WorkflowRunState {
    fn new(workflow: &Workflow, snapshot: WorkflowSnapshot) -> Self {
        let active_steps_path = paths_in(&snapshot, StepStatus::Running);
        let suspended_paths = paths_in(&snapshot, StepStatus::Suspended);
        let waiting_paths = paths_in(&snapshot, StepStatus::Waiting);
        let mut context = BTreeMap::new();
        // A step named `input` comes over the input, as it always did.
        context.insert("input".to_owned(), ContextEntry::Input(snapshot.input));
        for (id, step) in snapshot.steps {
            context.insert(id, ContextEntry::Step(step));
        }
        Self {
            run_id: snapshot.run_id,
            status: snapshot.status,
            value: snapshot.state,
            context,
            active_paths: Vec::new(),
            active_steps_path,
            step_execution_path: snapshot.step_execution_path,
            suspended_paths,
            waiting_paths,
            serialized_step_graph: workflow.serialized_step_graph(),
            request_context: snapshot.request_context,
            timestamp: snapshot.updated_at_ms,
            result: snapshot.result,
            error: snapshot.error,
        }
    }
}

/// The fields of a run that `GET …/runs/{runId}` gives when asked (`fields`).
pub(super) const RUN_FIELDS: [&str; 6] = [
    "result",
    "error",
    "payload",
    "steps",
    "activeStepsPath",
    "serializedStepGraph",
];

/// One run: its ids, times and status, and the fields asked for (a field asked for that
/// the run does not have is null).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunDetails {
    /// The run's id.
    run_id: String,
    /// The workflow's id.
    workflow_name: String,
    /// The resource it acts for (null without one).
    resource_id: Option<String>,
    /// When it was created (null when out of range).
    #[schemars(extend("format" = "date-time"))]
    created_at: Option<String>,
    /// When it was last saved (null when out of range).
    #[schemars(extend("format" = "date-time"))]
    updated_at: Option<String>,
    /// Where it stands.
    #[schemars(schema_with = "run_status")]
    status: WorkflowStatus,
    /// Its output (null until it succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// Why it failed (null unless it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<WorkflowStepError>")]
    error: Option<Option<StepErrorInfo>>,
    /// Its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    payload: Option<Arc<Value>>,
    /// Each step's result, by step id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<String, WorkflowStepResult>>")]
    steps: Option<StepResults>,
    /// The running steps: `{stepId: [entry index]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    active_steps_path: Option<BTreeMap<String, Vec<usize>>>,
    /// The workflow's graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<WorkflowGraphEntry>>")]
    serialized_step_graph: Option<Value>,
}

impl WorkflowRunDetails {
    /// The stored run `snapshot` of `workflow`, with `fields` (of [`RUN_FIELDS`]).
    pub(super) fn new(workflow: &Workflow, snapshot: WorkflowSnapshot, fields: &[&str]) -> Self {
        let asked = |field: &str| fields.contains(&field);
        Self {
            active_steps_path: asked("activeStepsPath")
                .then(|| paths_in(&snapshot, StepStatus::Running)),
            serialized_step_graph: asked("serializedStepGraph")
                .then(|| workflow.serialized_step_graph()),
            result: asked("result")
                .then(|| snapshot.result.as_deref().cloned().unwrap_or(Value::Null)),
            error: asked("error").then(|| snapshot.error.clone()),
            payload: asked("payload").then(|| Arc::clone(&snapshot.input)),
            created_at: iso_time(snapshot.created_at_ms),
            updated_at: iso_time(snapshot.updated_at_ms),
            steps: asked("steps").then_some(snapshot.steps),
            run_id: snapshot.run_id,
            workflow_name: snapshot.workflow_id,
            resource_id: snapshot.resource_id,
            status: snapshot.status,
        }
    }
}

// --- runs set going -----------------------------------------------------------------------

/// How a run ended, or where it stopped (`start-async`, `resume-async`, `restart-async`,
/// `time-travel-async`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunResult {
    /// The run's status.
    #[schemars(schema_with = "run_status")]
    status: WorkflowStatus,
    /// The run's id.
    run_id: String,
    /// The run's input.
    input: Value,
    /// Each step's result, by step id.
    #[schemars(with = "BTreeMap<String, WorkflowStepResult>")]
    steps: StepResults,
    /// The top-level steps that ran, in order (parallel arms and branches are not listed).
    step_execution_path: Vec<String>,
    /// The output (a successful run: the last step's, or a bail's value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<WorkflowStepError>")]
    error: Option<StepErrorInfo>,
    /// The steps waiting for resume data, each as its path of ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    suspended: Vec<Vec<String>>,
    /// What each suspended step suspended with, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    suspend_payload: BTreeMap<String, Value>,
    /// The workflow state at the end.
    state: Value,
}

impl From<WorkflowResult> for WorkflowRunResult {
    fn from(result: WorkflowResult) -> Self {
        // Every field named: a new one in kestrel-core's result must be answered too.
        let WorkflowResult {
            status,
            run_id,
            input,
            steps,
            step_execution_path,
            result,
            error,
            suspended,
            suspend_payload,
            state,
        } = result;
        Self {
            status,
            run_id,
            input,
            steps,
            step_execution_path,
            result,
            error,
            suspended,
            suspend_payload,
            state,
        }
    }
}

/// A run set going in the background.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunStarted {
    /// What was done (`Workflow run started`, `… resumed`, `… restarted`, `… time travel
    /// started`).
    pub(super) message: &'static str,
    /// The run's id.
    pub(super) run_id: String,
}

/// A run, by id (`create-run`, `resume-no-wait`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunId {
    /// The run's id.
    pub(super) run_id: String,
}

/// What a route that does not stream answers for the run it set going: one of the three,
/// by route (each route's document names its own).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum WorkflowRunAnswer {
    /// How it ended or stopped.
    Result(Box<WorkflowRunResult>),
    /// That it goes on in the background.
    Started(WorkflowRunStarted),
    /// Its id.
    Id(WorkflowRunId),
}

/// A change done, said in words (`Workflow run deleted`, `Workflow run cancelled`).
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct WorkflowMessage {
    /// What was done.
    pub(super) message: &'static str,
}

/// `restart-all-active-workflow-runs`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkflowRunsRestarted {
    /// `Restarted all active workflow runs`.
    pub(super) message: &'static str,
    /// The runs restarted.
    pub(super) run_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeSet;

    use super::*;

    /// The properties of `T`'s schema, and the required ones.
    fn documented<T: JsonSchema>() -> (BTreeSet<String>, BTreeSet<String>) {
        let schema = schemars::schema_for!(T).to_value();
        let properties = schema["properties"].as_object().unwrap().keys().cloned();
        let required = schema["required"].as_array().into_iter().flatten();
        (
            properties.collect(),
            required.map(|r| r.as_str().unwrap().to_owned()).collect(),
        )
    }

    fn keys(value: &impl Serialize) -> BTreeSet<String> {
        let json = serde_json::to_value(value).unwrap();
        json.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn the_documented_step_result_is_kestrel_cores() {
        let (properties, required) = documented::<WorkflowStepResult>();
        let begun = StepResult::begun(json!({"n": 1}), 1);
        assert!(required.is_subset(&keys(&begun)), "{required:?}");
        let full = StepResult {
            status: StepStatus::Failed,
            output: Some(Arc::new(json!(1))),
            suspend_payload: Some(json!(2)),
            resume_payload: Some(json!(3)),
            error: Some(StepErrorInfo {
                message: "boom".into(),
                name: "Error".into(),
                tripwire: None,
            }),
            ended_at: Some(2),
            suspended_at: Some(3),
            resumed_at: Some(4),
            ..begun
        };
        assert_eq!(keys(&full), properties);
        let (properties, required) = documented::<WorkflowStepError>();
        assert_eq!(keys(full.error.as_ref().unwrap()), properties);
        assert_eq!(required, properties);
    }

    #[test]
    fn the_documented_step_statuses_are_kestrel_cores() {
        use StepStatus::*;
        let all = [
            Running, Success, Failed, Suspended, Waiting, Bailed, Skipped, Canceled,
        ];
        // A new status fails to compile here, to be added to the schema.
        for status in all {
            match status {
                Running | Success | Failed | Suspended | Waiting | Bailed | Skipped | Canceled => {}
            }
        }
        let schema = schemars::schema_for!(WorkflowStepResult).to_value();
        let named: Vec<Value> = all
            .iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        assert_eq!(schema["properties"]["status"]["enum"], json!(named));
    }
}
