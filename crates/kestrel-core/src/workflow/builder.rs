//! Composing steps: [`Workflow::builder`] with `then`, `parallel` and `branch`, checked by
//! [`WorkflowBuilder::commit`].

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde_json::Value;

use super::step::{IntoStep, Step, StepError};
use crate::schema::schema_of;
use crate::store::{InMemoryWorkflowStore, SharedWorkflowStore};

/// What a condition sees: for a branch, its input (the previous entry's output); for a loop,
/// the output of the iteration that just ran, and how many have; and the run's input and
/// state. The values are shared with the run, not copied (they read as `&Value`: `&c.input`,
/// `c.input["field"]`).
#[derive(Debug, Clone)]
pub struct ConditionContext {
    /// The branch's input, or the loop step's last output.
    pub input: Arc<Value>,
    /// The run's input.
    pub init: Arc<Value>,
    /// The workflow state.
    pub state: Arc<Value>,
    /// A loop's iterations so far (1 after the first); 0 for a branch.
    pub iteration_count: u32,
}

type ConditionFn =
    dyn Fn(ConditionContext) -> BoxFuture<'static, Result<bool, StepError>> + Send + Sync;

/// A branch arm's condition: whether its step runs.
#[derive(Clone)]
pub struct Condition(pub(crate) Arc<ConditionFn>);

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Condition")
    }
}

/// A condition from an async function of the [`ConditionContext`]; an error fails the run,
/// naming the branch.
pub fn when<F, Fut>(f: F) -> Condition
where
    F: Fn(ConditionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<bool, StepError>> + Send + 'static,
{
    Condition(Arc::new(move |ctx| f(ctx).boxed()))
}

/// One entry of a workflow's graph.
#[derive(Clone)]
pub(crate) enum Entry {
    /// A step.
    Step(Arc<dyn Step>),
    /// Steps that run at once on the same input; the output is keyed by step id.
    Parallel(Vec<Arc<dyn Step>>),
    /// Every arm whose condition holds runs, at once; the output is keyed by step id.
    Branch(Vec<(Condition, Arc<dyn Step>)>),
    /// A step run again on its own output while (`until: false`) or until (`until: true`)
    /// the condition holds on that output.
    Loop {
        step: Arc<dyn Step>,
        condition: Condition,
        until: bool,
    },
    /// A step run on each item of an array input, `concurrency` at a time; the output is
    /// the array of their outputs, in the input's order.
    Foreach {
        step: Arc<dyn Step>,
        concurrency: usize,
    },
    /// A pause that hands its input on.
    Sleep { id: String, wait: Wait },
}

/// How long a sleep lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// This long.
    For(std::time::Duration),
    /// Until this time.
    Until(std::time::SystemTime),
}

impl Entry {
    /// The entry's id in the execution path: its step's, or its steps' ids joined.
    pub(crate) fn path_id(&self) -> String {
        match self {
            Entry::Step(step) | Entry::Loop { step, .. } | Entry::Foreach { step, .. } => {
                step.id().to_owned()
            }
            Entry::Parallel(steps) => ids(steps.iter()),
            Entry::Branch(arms) => ids(arms.iter().map(|(_, s)| s)),
            Entry::Sleep { id, .. } => id.clone(),
        }
    }

    pub(crate) fn steps(&self) -> Vec<&Arc<dyn Step>> {
        match self {
            Entry::Step(step) | Entry::Loop { step, .. } | Entry::Foreach { step, .. } => {
                vec![step]
            }
            Entry::Parallel(steps) => steps.iter().collect(),
            Entry::Branch(arms) => arms.iter().map(|(_, s)| s).collect(),
            Entry::Sleep { .. } => Vec::new(),
        }
    }
}

fn ids<'a>(steps: impl Iterator<Item = &'a Arc<dyn Step>>) -> String {
    steps.map(|s| s.id()).collect::<Vec<_>>().join(",")
}

/// A committed workflow: cheap to clone, shared by its runs.
#[derive(Clone)]
pub struct Workflow {
    pub(crate) inner: Arc<WorkflowInner>,
}

pub(crate) struct WorkflowInner {
    pub id: Arc<str>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub entries: Vec<Entry>,
    pub store: SharedWorkflowStore,
    /// The builder was given the store (a `Kestrel` instance keeps it).
    pub own_store: bool,
    /// How failed steps are retried, unless a step says otherwise.
    pub retry: Retry,
    /// The input schema, compiled once.
    pub input_validator: Arc<jsonschema::Validator>,
    /// The runs going on in this process.
    pub live: Arc<super::live::LiveRuns>,
    /// The cluster of the instance it is registered on, if any: runs hold leases in it, and
    /// requests about them reach the instance driving them through it.
    pub cluster: Option<Arc<crate::runtime::cluster::ClusterRuntime>>,
    /// Which snapshots the store keeps (none: all).
    pub persist: Option<Arc<super::persist::PersistFn>>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("id", &self.inner.id)
            .field("entries", &self.inner.entries.len())
            .finish_non_exhaustive()
    }
}

impl Workflow {
    /// Starts building workflow `id` (Mastra's `createWorkflow`).
    pub fn builder(id: impl Into<String>) -> WorkflowBuilder {
        WorkflowBuilder {
            id: id.into(),
            description: String::new(),
            input_schema: None,
            output_schema: None,
            entries: Vec::new(),
            store: None,
            retry: Retry::default(),
            persist: None,
        }
    }

    /// The same workflow keeping its runs in `store` (a `Kestrel` instance gives its
    /// workflows its store this way, unless their builder was given one).
    pub fn with_store(&self, store: SharedWorkflowStore) -> Workflow {
        self.rebuilt(store, self.inner.cluster.clone())
    }

    /// The same workflow, its runs leased in `cluster` (a `Kestrel` instance in a cluster
    /// gives its workflows its cluster this way).
    pub(crate) fn with_cluster(
        &self,
        cluster: Option<Arc<crate::runtime::cluster::ClusterRuntime>>,
    ) -> Workflow {
        if let Some(cluster) = &cluster {
            // Another instance's cancel of one of its runs reaches it here.
            cluster.register_workflow(&self.inner.id, self.inner.live.clone());
        }
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), cluster);
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
        }
        workflow
    }

    /// The same workflow, its runs going on in this process kept in `live` (shared by several
    /// builds of one workflow: an agent's networks).
    pub(crate) fn with_live(&self, live: Arc<super::live::LiveRuns>) -> Workflow {
        let mut workflow = self.rebuilt(Arc::clone(&self.inner.store), self.inner.cluster.clone());
        if let Some(inner) = Arc::get_mut(&mut workflow.inner) {
            inner.own_store = self.inner.own_store;
            inner.live = live;
        }
        workflow
    }

    fn rebuilt(
        &self,
        store: SharedWorkflowStore,
        cluster: Option<Arc<crate::runtime::cluster::ClusterRuntime>>,
    ) -> Workflow {
        let inner = &self.inner;
        Workflow {
            inner: Arc::new(WorkflowInner {
                id: Arc::clone(&inner.id),
                description: inner.description.clone(),
                input_schema: inner.input_schema.clone(),
                output_schema: inner.output_schema.clone(),
                entries: inner.entries.clone(),
                store,
                own_store: true,
                retry: inner.retry,
                input_validator: Arc::clone(&inner.input_validator),
                live: Arc::clone(&inner.live),
                cluster,
                persist: inner.persist.clone(),
            }),
        }
    }

    /// Where the workflow's runs are kept.
    pub fn store(&self) -> &SharedWorkflowStore {
        &self.inner.store
    }

    /// Whether its builder was given a store ([`WorkflowBuilder::store`]).
    pub fn has_own_store(&self) -> bool {
        self.inner.own_store
    }

    /// The step `id`, wherever it is in the graph.
    pub fn step(&self, id: &str) -> Option<&Arc<dyn Step>> {
        self.inner
            .entries
            .iter()
            .flat_map(Entry::steps)
            .find(|step| step.id() == id)
    }

    /// The workflow's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What it does.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The JSON schema of a run's input.
    pub fn input_schema(&self) -> &Value {
        &self.inner.input_schema
    }

    /// The JSON schema of a run's output.
    pub fn output_schema(&self) -> &Value {
        &self.inner.output_schema
    }
}

/// Why a workflow cannot be committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowBuildError {
    /// The workflow has no steps.
    #[error("workflow {workflow:?} has no steps")]
    Empty {
        /// The workflow.
        workflow: String,
    },
    /// An id is empty, too long, or has characters other than letters, digits, `_`, `-`
    /// and `:`.
    #[error(
        "{what} id {id:?} of workflow {workflow:?} is invalid: use 1 to 128 letters, digits, '_', '-' or ':'"
    )]
    InvalidId {
        /// The workflow.
        workflow: String,
        /// `"workflow"` or `"step"`.
        what: &'static str,
        /// The id.
        id: String,
    },
    /// Two steps share an id.
    #[error("workflow {workflow:?} has two steps with id {step:?}")]
    DuplicateStep {
        /// The workflow.
        workflow: String,
        /// The step.
        step: String,
    },
    /// A parallel or branch entry has no steps.
    #[error("workflow {workflow:?} has an empty {what} after {after:?}")]
    EmptyGroup {
        /// The workflow.
        workflow: String,
        /// `"parallel"` or `"branch"`.
        what: &'static str,
        /// The entry before it (or `"the start"`).
        after: String,
    },
    /// The workflow's input schema is not a valid JSON schema.
    #[error("the input schema of workflow {workflow:?} is invalid: {message}")]
    InvalidSchema {
        /// The workflow.
        workflow: String,
        /// Why.
        message: String,
    },
    /// A step needs an input field that what reaches it never has.
    #[error(
        "step {step:?} of workflow {workflow:?} needs input field {field:?}, which {from} does not give"
    )]
    InputMismatch {
        /// The workflow.
        workflow: String,
        /// The step.
        step: String,
        /// The required field.
        field: String,
        /// What reaches it (`the workflow's input`, `step "a"`, `the parallel a,b`).
        from: String,
    },
}

/// Builder of a [`Workflow`]. See [`Workflow::builder`].
pub struct WorkflowBuilder {
    id: String,
    description: String,
    input_schema: Option<Value>,
    output_schema: Option<Value>,
    entries: Vec<Entry>,
    store: Option<SharedWorkflowStore>,
    retry: Retry,
    persist: Option<Arc<super::persist::PersistFn>>,
}

/// How failed steps are retried: `attempts` more times, `delay` apart.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Retry {
    pub attempts: u32,
    pub delay: std::time::Duration,
}

impl std::fmt::Debug for WorkflowBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowBuilder")
            .field("id", &self.id)
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl WorkflowBuilder {
    /// What the workflow does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The JSON schema of a run's input (default: the first step's input schema).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// The run's input schema from a type.
    pub fn input_type<T: JsonSchema>(self) -> Self {
        self.input_schema(schema_of::<T>())
    }

    /// The JSON schema of a run's output (default: the last entry's output).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The run's output schema from a type.
    pub fn output_type<T: JsonSchema>(self) -> Self {
        self.output_schema(schema_of::<T>())
    }

    /// Keeps the workflow's runs in `store` (default: an [`InMemoryWorkflowStore`] of its
    /// own, so runs can be resumed while the process lives).
    pub fn store(mut self, store: SharedWorkflowStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Which of a run's snapshots the store keeps (Mastra's `shouldPersistSnapshot`;
    /// default: all). `policy` is asked before each save; when it says no, the snapshot is
    /// not written and one of the run stored earlier is deleted.
    ///
    /// A run whose snapshot is not kept cannot be read back, listed, resumed or continued
    /// after a crash, and its id can be started again once it has ended. Keeping only the
    /// runs that stopped to wait for someone (or failed) takes a run's storage off the hot
    /// path and still lets those be resumed:
    ///
    /// ```
    /// # fn build(step: kestrel_core::workflow::FnStep) -> Result<(), Box<dyn std::error::Error>> {
    /// use kestrel_core::workflow::{Workflow, WorkflowStatus};
    ///
    /// let workflow = Workflow::builder("hot")
    ///     .should_persist_snapshot(|check| {
    ///         matches!(check.status, WorkflowStatus::Suspended | WorkflowStatus::Failed)
    ///     })
    ///     .then(step)
    ///     .commit()?;
    /// # Ok(()) }
    /// ```
    pub fn should_persist_snapshot<F>(mut self, policy: F) -> Self
    where
        F: Fn(&super::persist::SnapshotCheck<'_>) -> bool + Send + Sync + 'static,
    {
        self.persist = Some(Arc::new(policy));
        self
    }

    /// Runs `step` on the previous entry's output.
    pub fn then(mut self, step: impl IntoStep) -> Self {
        self.entries.push(Entry::Step(step.into_step()));
        self
    }

    /// Runs `steps` at once, each on the previous entry's output; the output is an object
    /// keyed by step id.
    pub fn parallel<S: IntoStep>(mut self, steps: impl IntoIterator<Item = S>) -> Self {
        let steps = steps.into_iter().map(IntoStep::into_step).collect();
        self.entries.push(Entry::Parallel(steps));
        self
    }

    /// Runs, at once, every arm whose condition holds on the previous entry's output (as
    /// Mastra's code does: not only the first); the output is an object keyed by the ids of
    /// the arms that ran.
    pub fn branch<S: IntoStep>(mut self, arms: impl IntoIterator<Item = (Condition, S)>) -> Self {
        let arms = arms.into_iter().map(|(c, s)| (c, s.into_step())).collect();
        self.entries.push(Entry::Branch(arms));
        self
    }

    /// Runs `step`, then again on its own output while `condition` holds on that output
    /// (Mastra's `dowhile`). Each iteration's `workflow-step-start` carries
    /// `metadata.iterationCount`.
    pub fn dowhile(mut self, step: impl IntoStep, condition: Condition) -> Self {
        self.entries.push(Entry::Loop {
            step: step.into_step(),
            condition,
            until: false,
        });
        self
    }

    /// Runs `step`, then again on its own output until `condition` holds on that output
    /// (Mastra's `dountil`).
    pub fn dountil(mut self, step: impl IntoStep, condition: Condition) -> Self {
        self.entries.push(Entry::Loop {
            step: step.into_step(),
            condition,
            until: true,
        });
        self
    }

    /// Runs `step` on each item of the previous entry's output (an array), `concurrency`
    /// at a time (at least 1); the output is the array of the items' outputs, in order, and a
    /// `workflow-step-progress` event follows each item.
    pub fn foreach(mut self, step: impl IntoStep, concurrency: usize) -> Self {
        self.entries.push(Entry::Foreach {
            step: step.into_step(),
            concurrency: concurrency.max(1),
        });
        self
    }

    /// Turns the previous entry's output into the next one's input with `f` (Mastra's
    /// `map`): a step of its own, `mapping_<workflow>_<n>`.
    pub fn map<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Value, super::step::StepContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, StepError>> + Send + 'static,
    {
        let id = format!("mapping_{}_{}", self.id, self.entries.len());
        let step = super::step::create_step(id)
            .input_schema(Value::Bool(true))
            .output_schema(Value::Bool(true))
            .execute(f);
        self.entries.push(Entry::Step(step.into_step()));
        self
    }

    /// Waits `duration`, handing the previous entry's output on (a `workflow-step-waiting`
    /// event, then a result).
    pub fn sleep(mut self, duration: std::time::Duration) -> Self {
        let id = format!("sleep_{}", self.entries.len());
        self.entries.push(Entry::Sleep {
            id,
            wait: Wait::For(duration),
        });
        self
    }

    /// Waits until `time` (at once if it has passed), handing the previous entry's output on.
    pub fn sleep_until(mut self, time: std::time::SystemTime) -> Self {
        let id = format!("sleep_{}", self.entries.len());
        self.entries.push(Entry::Sleep {
            id,
            wait: Wait::Until(time),
        });
        self
    }

    /// Retries a failed step up to `attempts` more times, `delay` apart, unless the step
    /// says otherwise ([`super::Step::retries`]); default none (Mastra's `retryConfig`).
    pub fn retry(mut self, attempts: u32, delay: std::time::Duration) -> Self {
        self.retry = Retry { attempts, delay };
        self
    }

    /// Checks the graph and finishes the workflow: at least one step, valid and unique ids,
    /// no empty group, and every step's required input fields given by what reaches it
    /// (where both schemas say so).
    pub fn commit(self) -> Result<Workflow, WorkflowBuildError> {
        let workflow = self.id.clone();
        if !valid_id(&self.id) {
            return Err(WorkflowBuildError::InvalidId {
                workflow,
                what: "workflow",
                id: self.id,
            });
        }
        let Some(first) = self.entries.iter().find(|e| !e.steps().is_empty()) else {
            return Err(WorkflowBuildError::Empty { workflow });
        };
        let mut seen = HashSet::new();
        let mut after = "the start".to_owned();
        for entry in &self.entries {
            let steps = entry.steps();
            let group = match entry {
                Entry::Parallel(_) => Some("parallel"),
                Entry::Branch(_) => Some("branch"),
                _ => None,
            };
            if let (true, Some(what)) = (steps.is_empty(), group) {
                return Err(WorkflowBuildError::EmptyGroup {
                    workflow,
                    what,
                    after,
                });
            }
            for step in steps {
                if !valid_id(step.id()) {
                    return Err(WorkflowBuildError::InvalidId {
                        workflow,
                        what: "step",
                        id: step.id().to_owned(),
                    });
                }
                if !seen.insert(step.id().to_owned()) {
                    return Err(WorkflowBuildError::DuplicateStep {
                        workflow,
                        step: step.id().to_owned(),
                    });
                }
            }
            after = entry.path_id();
        }
        let input_schema = match self.input_schema {
            Some(schema) => schema,
            // The first step's input; a foreach takes an array of them.
            None => match first {
                Entry::Foreach { step, .. } => {
                    serde_json::json!({"type": "array", "items": step.input_schema()})
                }
                _ => first
                    .steps()
                    .first()
                    .map_or(Value::Bool(true), |s| s.input_schema().clone()),
            },
        };
        check_inputs(&workflow, &input_schema, &self.entries)?;
        let input_validator = jsonschema::validator_for(&input_schema).map_err(|e| {
            WorkflowBuildError::InvalidSchema {
                workflow: workflow.clone(),
                message: e.to_string(),
            }
        })?;
        let output_schema = self.output_schema.unwrap_or_else(|| {
            self.entries
                .iter()
                .fold(input_schema.clone(), |before, entry| {
                    reaching(entry, &before)
                })
        });
        Ok(Workflow {
            inner: Arc::new(WorkflowInner {
                id: self.id.into(),
                description: self.description,
                input_schema,
                output_schema,
                entries: self.entries,
                own_store: self.store.is_some(),
                retry: self.retry,
                input_validator: Arc::new(input_validator),
                live: Arc::default(),
                cluster: None,
                persist: self.persist,
                store: self
                    .store
                    .unwrap_or_else(|| Arc::new(InMemoryWorkflowStore::new())),
            }),
        })
    }
}

/// Ids as the server's routes take them.
fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'))
}

/// The schema of what an entry hands to the next.
fn reaching(entry: &Entry, before: &Value) -> Value {
    match entry {
        Entry::Step(step) | Entry::Loop { step, .. } => step.output_schema().clone(),
        Entry::Foreach { step, .. } => {
            serde_json::json!({"type": "array", "items": step.output_schema()})
        }
        Entry::Sleep { .. } => before.clone(),
        Entry::Parallel(steps) => keyed(steps.iter(), true),
        // Which arms run is known only at run time: none of their keys is required.
        Entry::Branch(arms) => keyed(arms.iter().map(|(_, s)| s), false),
    }
}

fn keyed<'a>(steps: impl Iterator<Item = &'a Arc<dyn Step>>, required: bool) -> Value {
    let mut properties = serde_json::Map::new();
    let mut names = Vec::new();
    for step in steps {
        properties.insert(step.id().to_owned(), step.output_schema().clone());
        names.push(Value::String(step.id().to_owned()));
    }
    let mut schema = serde_json::json!({"type": "object", "properties": properties});
    if required {
        schema["required"] = Value::Array(names);
    }
    schema
}

/// Every step's required input fields are among the fields of what reaches it, where both
/// are object schemas that list them (anything less precise is checked at run time).
fn check_inputs(
    workflow: &str,
    input_schema: &Value,
    entries: &[Entry],
) -> Result<(), WorkflowBuildError> {
    let mut reaching_schema = input_schema.clone();
    let mut from = "the workflow's input".to_owned();
    for entry in entries {
        // A foreach's step takes the items.
        let reaching_item = match entry {
            Entry::Foreach { .. } => reaching_schema
                .get("items")
                .cloned()
                .unwrap_or(Value::Bool(true)),
            _ => reaching_schema.clone(),
        };
        for step in entry.steps() {
            if let Some(field) = missing_field(step.input_schema(), &reaching_item) {
                return Err(WorkflowBuildError::InputMismatch {
                    workflow: workflow.to_owned(),
                    step: step.id().to_owned(),
                    field,
                    from,
                });
            }
        }
        reaching_schema = reaching(entry, &reaching_schema);
        from = match entry {
            Entry::Step(step) | Entry::Loop { step, .. } | Entry::Foreach { step, .. } => {
                format!("step {:?}", step.id())
            }
            Entry::Parallel(_) => format!("the parallel {}", entry.path_id()),
            Entry::Branch(_) => format!("the branch {}", entry.path_id()),
            Entry::Sleep { .. } => from,
        };
    }
    Ok(())
}

/// A field `needed` requires that `given` (an object schema with its properties listed)
/// does not have.
fn missing_field(needed: &Value, given: &Value) -> Option<String> {
    let required = needed.get("required")?.as_array()?;
    let properties = given.get("properties")?.as_object()?;
    if given
        .get("additionalProperties")
        .is_some_and(|a| a != false)
    {
        return None;
    }
    required
        .iter()
        .filter_map(Value::as_str)
        .find(|field| !properties.contains_key(*field))
        .map(str::to_owned)
}
