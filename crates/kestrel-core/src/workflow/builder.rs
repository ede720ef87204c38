//! Composing steps: [`Workflow::builder`] with `then`, `parallel` and `branch`, checked by
//! [`WorkflowBuilder::commit`].

use std::collections::HashSet;
use std::sync::Arc;

use schemars::JsonSchema;
use serde_json::Value;

use super::condition::Condition;
use super::definition::{Retry, Workflow, WorkflowInner};
use super::entry::{Entry, Wait};
use super::step::{IntoStep, Step, StepError};
use crate::schema::schema_of;
use crate::store::{InMemoryWorkflowStore, SharedWorkflowStore};

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
    scorers: Vec<crate::eval::LiveScorer>,
}

impl std::fmt::Debug for WorkflowBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowBuilder")
            .field("id", &self.id)
            .field("entries", &self.entries.len())
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
            scorers: Vec::new(),
        }
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

    /// Scores the workflow's successful runs with `scorer`, those `sampling` chooses, after
    /// each run and off its path: input the run's input, output its result (entity type
    /// `WORKFLOW`). The scores go to the score store of the instance the workflow is
    /// registered on (an unregistered workflow scores nothing).
    pub fn scorer(
        mut self,
        scorer: impl crate::eval::IntoScorer,
        sampling: crate::eval::ScoreSampling,
    ) -> Self {
        self.scorers
            .push(crate::eval::LiveScorer::new(scorer, sampling));
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
                tracer: None,
                scorers: self.scorers,
                scoring: None,
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
