//! Steps: the [`Step`] trait, what a step's `execute` gets ([`StepContext`]), how it stops
//! ([`StepError`]: a failure, a suspension, a bail), and [`create_step`], which builds a typed
//! step from a closure as [`crate::tool::create_tool`] builds a tool.

use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc::error::TrySendError;

use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::{Event, EventKind, EventSource, WorkflowStepOutputPayload};
use crate::schema::schema_of;

/// One unit of a workflow: JSON in, JSON out, with schemas for both (Mastra's `createStep`).
/// Build one with [`create_step`], or implement it for a type of your own.
#[async_trait::async_trait]
pub trait Step: Send + Sync {
    /// The step's id, unique in its workflow.
    fn id(&self) -> &str;

    /// What the step does.
    fn description(&self) -> &str {
        ""
    }

    /// The JSON schema of its input.
    fn input_schema(&self) -> &Value;

    /// The JSON schema of its output.
    fn output_schema(&self) -> &Value;

    /// The JSON schema of the data it is resumed with, if it suspends.
    fn resume_schema(&self) -> Option<&Value> {
        None
    }

    /// The JSON schema of what it suspends with, if it suspends.
    fn suspend_schema(&self) -> Option<&Value> {
        None
    }

    /// How many more times a failure is retried (`None`: the workflow's
    /// [`super::WorkflowBuilder::retry`]).
    fn retries(&self) -> Option<u32> {
        None
    }

    /// The workflow this step runs, when it is a nested workflow (a [`super::Workflow`] is
    /// a step of another).
    fn nested_workflow(&self) -> Option<&super::Workflow> {
        None
    }

    /// Runs the step on `ctx.input()`.
    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError>;
}

/// Something a workflow takes as a step: any [`Step`], or one already shared.
pub trait IntoStep {
    /// The shared step.
    fn into_step(self) -> Arc<dyn Step>;
}

impl<S: Step + 'static> IntoStep for S {
    fn into_step(self) -> Arc<dyn Step> {
        Arc::new(self)
    }
}

impl IntoStep for Arc<dyn Step> {
    fn into_step(self) -> Arc<dyn Step> {
        self
    }
}

/// How a step stops without an output: it failed, it suspends to wait for resume data, or it
/// ends the whole run early with a value (a bail). `?` converts any error into a failure.
#[derive(Debug, Clone, PartialEq)]
pub enum StepError {
    /// The step failed (retried if the step or its workflow allows it).
    Failed {
        /// What went wrong.
        message: String,
    },
    /// The step waits for resume data ([`StepContext::suspend`]).
    Suspend {
        /// What it tells whoever resumes it.
        payload: Value,
    },
    /// The run ends now with `value` as its output ([`StepContext::bail`]).
    Bail {
        /// The run's output.
        value: Value,
    },
    /// A processor stopped the step (a processor step's, or an agent step's agent's): the run
    /// ends with the status `tripwire`. Never retried.
    Tripwire {
        /// Why, and which processor.
        tripwire: Box<crate::run::Tripwire>,
    },
}

impl StepError {
    /// A failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        StepError::Failed {
            message: message.into(),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for StepError {
    fn from(error: E) -> Self {
        StepError::new(error.to_string())
    }
}

/// The run-wide state a step sees: the run's input, every step's result so far, and the
/// workflow state.
#[derive(Debug)]
pub(crate) struct RunShared {
    pub workflow_id: Arc<str>,
    pub run_id: Arc<str>,
    pub init: Arc<Value>,
    pub results: RwLock<crate::store::StepResults>,
    /// Replaced whole by `set_state`, so a reader takes a reference, not a copy.
    pub state: Mutex<Arc<Value>>,
    pub request_context: RequestContext,
    pub abort: AbortSignal,
    pub events: Option<super::events::EventSender>,
    /// The model usage of the run's agent steps.
    pub usage: Mutex<crate::event::WorkflowUsage>,
    /// Where the run is kept (a nested workflow keeps its runs there too).
    pub store: crate::store::SharedWorkflowStore,
    /// The run's spans, when it is traced (kept here: the run's future stays small).
    pub trace: std::sync::OnceLock<super::spans::RunTrace>,
    /// Lists the run among the workflow's live runs while it goes on.
    pub _live: super::live::LiveGuard,
}

impl RunShared {
    /// Adds an agent step's usage to the run's.
    pub(crate) fn add_usage(&self, usage: &crate::model::Usage) {
        lock(&self.usage).add(usage);
    }

    /// Sends `kind` to the run's stream, when it is streamed.
    ///
    /// Not an `async fn`: the event goes into the channel when this is called, so a pending
    /// emit holds no event (one that did made every step's future that much bigger, and such
    /// futures are moved whole when a group of steps starts). Only a full channel leaves a
    /// send to await, boxed.
    pub(crate) fn emit(
        &self,
        from: EventSource,
        kind: EventKind,
    ) -> impl Future<Output = ()> + Send + '_ {
        let waiting = self.events.as_ref().and_then(|events| {
            let event = Box::new(Event {
                run_id: Arc::clone(&self.run_id),
                from,
                kind,
            });
            match events.try_send(event) {
                // A reader that went away only stops the events, not the run.
                Ok(()) | Err(TrySendError::Closed(_)) => None,
                Err(TrySendError::Full(event)) => Some(Box::pin(events.send(event))),
            }
        });
        async move {
            if let Some(send) = waiting {
                let _ = send.await;
            }
        }
    }
}

/// What a step's `execute` gets: its input and resume data, the run's ids, input, results
/// and state, the request context, the abort signal, a writer, and the retry count.
#[derive(Debug, Clone)]
pub struct StepContext {
    pub(crate) step: StepRef,
    /// Shared with the step's result and the entry before it.
    pub(crate) input: Arc<Value>,
    pub(crate) resume_data: Option<Value>,
    /// What the step suspended with, when it is resumed.
    pub(crate) suspend_data: Option<Value>,
    /// A nested workflow's resume: the path of the suspended step inside it.
    pub(crate) resume_path: Vec<String>,
    pub(crate) retry_count: u32,
    pub(crate) run: Arc<RunShared>,
    /// The step's span, when the run is traced: what the step starts hangs under.
    pub(crate) trace: Option<Box<crate::trace::SpanParent>>,
}

/// The step a context is for: its id is read from it, so an attempt copies no id.
#[derive(Clone)]
pub(crate) struct StepRef(pub(crate) Arc<dyn Step>);

impl std::fmt::Debug for StepRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Step").field(&self.0.id()).finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only plain data lives behind these locks; a panic elsewhere leaves it consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl StepContext {
    /// The step's input.
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// The data the step was resumed with (`None` on its first run).
    pub fn resume_data(&self) -> Option<&Value> {
        self.resume_data.as_ref()
    }

    /// What the step suspended with, when it runs again on a resume (Mastra's
    /// `suspendData`): a step can keep there what it needs to go on where it stopped.
    pub fn suspend_data(&self) -> Option<&Value> {
        self.suspend_data.as_ref()
    }

    /// The step's span, when its run is traced ([`crate::trace`]): a step that starts traced
    /// work (an agent run, a request to a service) puts it under this.
    pub fn trace_context(&self) -> Option<&crate::trace::TraceContext> {
        self.trace.as_deref().map(|parent| &parent.context)
    }

    /// The step's id.
    pub fn step_id(&self) -> &str {
        self.step.0.id()
    }

    /// The workflow's id.
    pub fn workflow_id(&self) -> &str {
        &self.run.workflow_id
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The run's input (Mastra's `getInitData`).
    pub fn init_data(&self) -> &Value {
        &self.run.init
    }

    /// The output of step `id`, if it ran and succeeded (Mastra's `getStepResult`).
    pub fn step_result(&self, id: &str) -> Option<Value> {
        let results = self.run.results.read().unwrap_or_else(|e| e.into_inner());
        results
            .get(id)
            .and_then(|result| result.success_output())
            .cloned()
    }

    /// The workflow state.
    pub fn state(&self) -> Value {
        Value::clone(&lock(&self.run.state))
    }

    /// Replaces the workflow state; later steps see it.
    pub fn set_state(&self, state: Value) {
        *lock(&self.run.state) = Arc::new(state);
    }

    /// The run's request context.
    pub fn request_context(&self) -> &RequestContext {
        &self.run.request_context
    }

    /// Fires when the run is canceled; a long step should watch it.
    pub fn abort_signal(&self) -> &AbortSignal {
        &self.run.abort
    }

    /// How many times this step was retried before this attempt (0 on the first).
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// Writes `output` to the run's stream as a `workflow-step-output` event (`from:
    /// "USER"`). Nothing happens when the run is not streamed.
    pub async fn write(&self, output: impl Serialize) {
        if self.run.events.is_none() {
            return;
        }
        let output = serde_json::to_value(output).unwrap_or(Value::Null);
        let kind = EventKind::WorkflowStepOutput(WorkflowStepOutputPayload {
            step_name: self.step_id().to_owned(),
            output,
            run_id: self.run.run_id.to_string(),
        });
        self.run.emit(EventSource::User, kind).await;
    }

    /// Suspends the step with `payload`: `return Err(ctx.suspend(json!({...})))`. The run
    /// stops until it is resumed with data for this step.
    pub fn suspend(&self, payload: impl Serialize) -> StepError {
        StepError::Suspend {
            payload: serde_json::to_value(payload).unwrap_or(Value::Null),
        }
    }

    /// Ends the run now with `value` as its output: `return Err(ctx.bail(value))`.
    pub fn bail(&self, value: impl Serialize) -> StepError {
        StepError::Bail {
            value: serde_json::to_value(value).unwrap_or(Value::Null),
        }
    }
}

/// Starts building a step named `id` (Mastra's `createStep`).
///
/// ```
/// use kestrel_core::workflow::create_step;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct In { v: i64 }
/// #[derive(Serialize, JsonSchema)]
/// struct Out { v: i64 }
///
/// let double = create_step("double")
///     .description("Doubles v")
///     .execute(|input: In, _ctx| async move { Ok(Out { v: input.v * 2 }) });
/// ```
pub fn create_step(id: impl Into<String>) -> StepBuilder {
    StepBuilder {
        id: id.into(),
        description: String::new(),
        input_schema: None,
        output_schema: None,
        resume_schema: None,
        suspend_schema: None,
        retries: None,
    }
}

/// Builder of a closure-backed step. See [`create_step`].
#[derive(Debug, Clone)]
pub struct StepBuilder {
    id: String,
    description: String,
    input_schema: Option<Value>,
    output_schema: Option<Value>,
    resume_schema: Option<Value>,
    suspend_schema: Option<Value>,
    retries: Option<u32>,
}

impl StepBuilder {
    /// Retries a failure up to `retries` more times (instead of the workflow's setting).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    /// What the step does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Uses this JSON schema for the input instead of the input type's.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// Uses this JSON schema for the output instead of the output type's.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The schema of the data the step is resumed with, from a type.
    pub fn resume_type<R: JsonSchema>(mut self) -> Self {
        self.resume_schema = Some(schema_of::<R>());
        self
    }

    /// The schema of what the step suspends with, from a type.
    pub fn suspend_type<S: JsonSchema>(mut self) -> Self {
        self.suspend_schema = Some(schema_of::<S>());
        self
    }

    /// Finishes the step with its `execute` function: the input `I` is deserialised from
    /// the step's input (a mismatch fails the step, naming it), the output `O` serialised.
    pub fn execute<I, O, F, Fut>(self, f: F) -> FnStep
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
        F: Fn(I, StepContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    {
        let input_schema = self.input_schema.unwrap_or_else(schema_of::<I>);
        let output_schema = self.output_schema.unwrap_or_else(schema_of::<O>);
        let id: Arc<str> = self.id.into();
        let step_id = Arc::clone(&id);
        let f = Arc::new(f);
        let exec: Arc<ExecFn> = Arc::new(move |ctx: StepContext| {
            let f = Arc::clone(&f);
            let step_id = Arc::clone(&step_id);
            async move {
                let input: I = input_as(&ctx.input).map_err(|e| {
                    StepError::new(format!("invalid input for step {step_id:?}: {e}"))
                })?;
                let output = f(input, ctx).await?;
                Ok(serde_json::to_value(output)?)
            }
            .boxed()
        });
        FnStep {
            id,
            description: self.description,
            input_schema,
            output_schema,
            resume_schema: self.resume_schema,
            suspend_schema: self.suspend_schema,
            retries: self.retries,
            exec,
        }
    }
}

/// A step's input as the type its closure takes: a `Value` is cloned (cheaper than
/// deserialising a `Value` from one), any other type deserialised.
fn input_as<I: DeserializeOwned + 'static>(input: &Value) -> Result<I, serde_json::Error> {
    if std::any::TypeId::of::<I>() == std::any::TypeId::of::<Value>() {
        let mut slot = Some(input.clone());
        let any: &mut dyn std::any::Any = &mut slot;
        if let Some(value) = any.downcast_mut::<Option<I>>().and_then(Option::take) {
            return Ok(value);
        }
    }
    I::deserialize(input)
}

type ExecFn = dyn Fn(StepContext) -> BoxFuture<'static, Result<Value, StepError>> + Send + Sync;

/// A step backed by a closure, made by [`StepBuilder::execute`].
#[derive(Clone)]
pub struct FnStep {
    id: Arc<str>,
    description: String,
    input_schema: Value,
    output_schema: Value,
    resume_schema: Option<Value>,
    suspend_schema: Option<Value>,
    retries: Option<u32>,
    exec: Arc<ExecFn>,
}

impl std::fmt::Debug for FnStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnStep")
            .field("id", &self.id)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Step for FnStep {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> &Value {
        &self.output_schema
    }

    fn resume_schema(&self) -> Option<&Value> {
        self.resume_schema.as_ref()
    }

    fn suspend_schema(&self) -> Option<&Value> {
        self.suspend_schema.as_ref()
    }

    fn retries(&self) -> Option<u32> {
        self.retries
    }

    // Written out as `async_trait` expands it: the closure's future is boxed already, and an
    // `async fn` here would box a second future around it for every step run.
    fn execute<'life0, 'async_trait>(
        &'life0 self,
        ctx: StepContext,
    ) -> BoxFuture<'async_trait, Result<Value, StepError>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (self.exec)(ctx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Point {
        x: i64,
    }

    #[test]
    fn an_input_is_cloned_as_a_value_and_deserialised_as_anything_else() {
        let input = json!({"x": 3, "extra": [1, 2]});
        assert_eq!(input_as::<Value>(&input).unwrap(), input);
        assert_eq!(input_as::<Point>(&input).unwrap(), Point { x: 3 });
        let error = input_as::<Point>(&json!({"x": "three"})).unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");
    }
}
