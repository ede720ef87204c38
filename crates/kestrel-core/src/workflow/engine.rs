//! Running a workflow: [`Workflow::create_run`], then [`WorkflowRun::start`] (the result) or
//! [`WorkflowRun::stream`] (the events, then the result). Entries run in order, each on the
//! previous one's output; a parallel entry's steps and a branch's chosen arms run at once.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use futures::{FutureExt, Stream};
use serde_json::{Map, Value, json};

use super::builder::{ConditionContext, Entry, Workflow};
use super::result::{StepResult, WorkflowResult};
use super::step::{RunShared, Step, StepContext, StepError};
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::{
    Event, EventKind, EventSource, StepErrorInfo, StepStatus, WorkflowFinishOutput,
    WorkflowFinishPayload, WorkflowStartPayload, WorkflowStatus, WorkflowStepPayload,
};

/// How many events a streamed run may have ahead of its reader before its steps wait.
const STREAM_BACKLOG: usize = 256;

/// Why a run could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowRunError {
    /// The input does not match the workflow's input schema.
    #[error("invalid input for workflow {workflow:?}: {}", errors.join("; "))]
    InvalidInput {
        /// The workflow.
        workflow: String,
        /// One message per violation, naming its path.
        errors: Vec<String>,
    },
    /// The task driving a streamed run ended before the run did (its runtime shut down).
    #[error("the workflow run was interrupted: {reason}")]
    Interrupted {
        /// Why.
        reason: String,
    },
}

impl Workflow {
    /// A new run of the workflow, with a fresh id (Mastra's `createRun`).
    pub fn create_run(&self) -> WorkflowRun {
        self.create_run_with_id(crate::id::new_id())
    }

    /// A new run with the id `run_id`.
    pub fn create_run_with_id(&self, run_id: impl Into<String>) -> WorkflowRun {
        WorkflowRun {
            workflow: self.clone(),
            run_id: run_id.into().into(),
            request_context: RequestContext::default(),
            abort: AbortSignal::new(),
        }
    }
}

/// One run of a workflow. See [`Workflow::create_run`].
#[derive(Debug, Clone)]
pub struct WorkflowRun {
    workflow: Workflow,
    run_id: Arc<str>,
    request_context: RequestContext,
    abort: AbortSignal,
}

impl WorkflowRun {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Gives the run's steps this request context.
    pub fn request_context(mut self, context: RequestContext) -> Self {
        self.request_context = context;
        self
    }

    /// Cancels the run: steps that watch their abort signal stop, no further step starts,
    /// and the run ends `canceled`.
    pub fn cancel(&self) {
        self.abort.abort();
    }

    /// Runs the workflow on `input` to its end (or its first suspension) and returns the
    /// result.
    pub async fn start(&self, input: Value) -> Result<WorkflowResult, WorkflowRunError> {
        self.check_input(&input)?;
        Ok(self.shared(input, None).run().await)
    }

    /// Runs the workflow on `input` in a task of its own and streams its events; the stream
    /// ends with `workflow-finish`, and [`WorkflowStream::result`] gives the result. Dropping
    /// the stream does not stop the run.
    pub fn stream(&self, input: Value) -> Result<WorkflowStream, WorkflowRunError> {
        self.check_input(&input)?;
        let (sender, receiver) = tokio::sync::mpsc::channel(STREAM_BACKLOG);
        let run = self.shared(input, Some(sender));
        let task = tokio::spawn(async move { run.run().await });
        Ok(WorkflowStream {
            events: receiver,
            task,
        })
    }

    fn check_input(&self, input: &Value) -> Result<(), WorkflowRunError> {
        let errors = crate::schema::schema_errors(self.workflow.input_schema(), input);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(WorkflowRunError::InvalidInput {
                workflow: self.workflow.id().to_owned(),
                errors,
            })
        }
    }

    fn shared(&self, input: Value, events: Option<tokio::sync::mpsc::Sender<Event>>) -> Engine {
        Engine {
            workflow: self.workflow.clone(),
            run: Arc::new(RunShared {
                workflow_id: Arc::clone(&self.workflow.inner.id),
                run_id: Arc::clone(&self.run_id),
                init: input,
                results: RwLock::new(BTreeMap::new()),
                state: Mutex::new(Value::Object(Map::new())),
                request_context: self.request_context.clone(),
                abort: self.abort.clone(),
                events,
            }),
        }
    }
}

/// A streamed run: its events, then its result. See [`WorkflowRun::stream`].
#[derive(Debug)]
pub struct WorkflowStream {
    events: tokio::sync::mpsc::Receiver<Event>,
    task: tokio::task::JoinHandle<WorkflowResult>,
}

impl WorkflowStream {
    /// Waits for the run's end and returns its result (the events not yet read are dropped).
    pub async fn result(mut self) -> Result<WorkflowResult, WorkflowRunError> {
        self.events.close();
        // Step panics are caught; the task ends otherwise only with its runtime.
        self.task
            .await
            .map_err(|error| WorkflowRunError::Interrupted {
                reason: error.to_string(),
            })
    }
}

impl Stream for WorkflowStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.poll_recv(cx)
    }
}

/// How an entry ended.
enum Flow {
    /// With this output, for the next entry.
    Next(Value),
    /// With steps suspended (their paths and payloads are in the results).
    Suspended,
    /// The run ends with this output.
    Bailed(Value),
    /// The run fails.
    Failed(StepErrorInfo),
    /// The run was canceled.
    Canceled,
}

struct Engine {
    workflow: Workflow,
    run: Arc<RunShared>,
}

/// A step that started: its input, when, and its event so far (when streamed).
struct Started {
    input: Value,
    started_at: u64,
    payload: Option<WorkflowStepPayload>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn error_info(message: impl Into<String>) -> StepErrorInfo {
    StepErrorInfo {
        message: message.into(),
        name: "Error".to_owned(),
    }
}

impl Engine {
    async fn run(self) -> WorkflowResult {
        let run = &self.run;
        let workflow_id = run.workflow_id.to_string();
        run.emit(
            EventSource::Workflow,
            EventKind::WorkflowStart(WorkflowStartPayload { workflow_id }),
        )
        .await;
        let mut input = run.init.clone();
        let mut path = Vec::new();
        let mut outcome = Flow::Next(Value::Null);
        for entry in &self.workflow.inner.entries {
            if run.abort.is_aborted() {
                outcome = Flow::Canceled;
                break;
            }
            if let Entry::Step(step) = entry {
                path.push(step.id().to_owned());
            }
            outcome = self.entry(entry, input).await;
            match outcome {
                Flow::Next(ref output) => input = output.clone(),
                _ => break,
            }
        }
        if matches!(outcome, Flow::Next(_)) && run.abort.is_aborted() {
            outcome = Flow::Canceled;
        }
        self.finish(outcome, path).await
    }

    async fn entry(&self, entry: &Entry, input: Value) -> Flow {
        match entry {
            Entry::Step(step) => self.step(step, input).await,
            Entry::Parallel(steps) => {
                let steps: Vec<&Arc<dyn Step>> = steps.iter().collect();
                combine(self.group(&steps, &input).await)
            }
            Entry::Branch(arms) => {
                let context = ConditionContext {
                    input: input.clone(),
                    init: self.run.init.clone(),
                    state: self.state(),
                };
                let decided = futures::future::join_all(arms.iter().map(|(condition, step)| {
                    let context = context.clone();
                    async move { (step, (condition.0)(context).await) }
                }))
                .await;
                let mut chosen = Vec::new();
                for (step, holds) in decided {
                    match holds {
                        Ok(true) => chosen.push(step),
                        Ok(false) => {}
                        Err(error) => {
                            let message = match error {
                                StepError::Failed { message } => message,
                                other => format!("{other:?}"),
                            };
                            return Flow::Failed(error_info(format!(
                                "the condition of branch arm {:?} failed: {message}",
                                step.id()
                            )));
                        }
                    }
                }
                combine(self.group(&chosen, &input).await)
            }
        }
    }

    fn state(&self) -> Value {
        self.run
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn record(&self, id: &str, result: StepResult) {
        let mut results = self.run.results.write().unwrap_or_else(|e| e.into_inner());
        results.insert(id.to_owned(), result);
    }

    /// Runs one step: its start event, its execution (a panic fails it), its result.
    async fn step(&self, step: &Arc<dyn Step>, input: Value) -> Flow {
        let started = self.begin(step, input).await;
        self.execute(step, started).await
    }

    /// A step's start: its time, and its `workflow-step-start` event (when streamed).
    async fn begin(&self, step: &Arc<dyn Step>, input: Value) -> Started {
        let id = step.id();
        let started_at = now_ms();
        let observed = self.run.events.is_some();
        let payload = observed.then(|| WorkflowStepPayload {
            step_name: id.to_owned(),
            id: id.to_owned(),
            step_call_id: Some(crate::id::new_id()),
            status: StepStatus::Running,
            payload: input.clone(),
            started_at,
            output: None,
            ended_at: None,
            error: None,
            suspend_payload: None,
            suspended_at: None,
            resume_payload: None,
            resumed_at: None,
            metadata: None,
        });
        if let Some(start) = &payload {
            self.run
                .emit(
                    EventSource::Workflow,
                    EventKind::WorkflowStepStart(start.clone()),
                )
                .await;
        }
        Started {
            input,
            started_at,
            payload,
        }
    }

    /// Steps that run at once: every start event first, then the results as they come.
    async fn group<'a>(
        &self,
        steps: &[&'a Arc<dyn Step>],
        input: &Value,
    ) -> Vec<(&'a Arc<dyn Step>, Flow)> {
        let mut started = Vec::with_capacity(steps.len());
        for step in steps {
            started.push(self.begin(step, input.clone()).await);
        }
        let flows = futures::future::join_all(
            steps
                .iter()
                .zip(started)
                .map(|(step, started)| self.execute(step, started)),
        )
        .await;
        steps.iter().copied().zip(flows).collect()
    }

    /// A started step's execution and its result.
    async fn execute(&self, step: &Arc<dyn Step>, started: Started) -> Flow {
        let id = step.id();
        let Started {
            input,
            started_at,
            mut payload,
        } = started;
        let ctx = StepContext {
            step_id: id.into(),
            input: input.clone(),
            resume_data: None,
            retry_count: 0,
            run: Arc::clone(&self.run),
        };
        let outcome = AssertUnwindSafe(step.execute(ctx))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(StepError::new(format!("step {id:?} panicked"))));
        let ended_at = now_ms();
        let mut result = StepResult {
            status: StepStatus::Success,
            payload: input,
            output: None,
            suspend_payload: None,
            resume_payload: None,
            error: None,
            started_at,
            ended_at: Some(ended_at),
            suspended_at: None,
            resumed_at: None,
        };
        let (flow, kind): (Flow, fn(WorkflowStepPayload) -> EventKind) = match outcome {
            Ok(output) => {
                result.output = Some(output.clone());
                (Flow::Next(output), EventKind::WorkflowStepResult)
            }
            Err(StepError::Bail { value }) => {
                result.output = Some(value.clone());
                (Flow::Bailed(value), EventKind::WorkflowStepResult)
            }
            Err(StepError::Suspend { payload: suspended }) => {
                result.status = StepStatus::Suspended;
                result.ended_at = None;
                result.suspended_at = Some(ended_at);
                result.suspend_payload = Some(suspended);
                (Flow::Suspended, EventKind::WorkflowStepSuspended)
            }
            Err(StepError::Failed { message }) => {
                result.status = StepStatus::Failed;
                let info = error_info(message);
                result.error = Some(info.clone());
                (Flow::Failed(info), EventKind::WorkflowStepResult)
            }
        };
        if let Some(event) = &mut payload {
            event.status = match flow {
                Flow::Bailed(_) => StepStatus::Bailed,
                _ => result.status,
            };
            event.output.clone_from(&result.output);
            event.error.clone_from(&result.error);
            if result.status == StepStatus::Suspended {
                event.suspend_payload.clone_from(&result.suspend_payload);
                event.suspended_at = result.suspended_at;
            } else {
                event.ended_at = result.ended_at;
            }
        }
        self.record(id, result);
        if let Some(event) = payload {
            self.run.emit(EventSource::Workflow, kind(event)).await;
        }
        flow
    }

    async fn finish(self, outcome: Flow, path: Vec<String>) -> WorkflowResult {
        let run = &self.run;
        let steps = std::mem::take(&mut *run.results.write().unwrap_or_else(|e| e.into_inner()));
        let (status, output, error) = match outcome {
            Flow::Next(output) | Flow::Bailed(output) => {
                (WorkflowStatus::Success, Some(output), None)
            }
            Flow::Suspended => (WorkflowStatus::Suspended, None, None),
            Flow::Failed(error) => (WorkflowStatus::Failed, None, Some(error)),
            Flow::Canceled => (WorkflowStatus::Canceled, None, None),
        };
        let mut suspended = Vec::new();
        let mut suspend_payload = BTreeMap::new();
        for (id, step) in &steps {
            if step.status == StepStatus::Suspended {
                suspended.push(vec![id.clone()]);
                if let Some(payload) = &step.suspend_payload {
                    suspend_payload.insert(id.clone(), payload.clone());
                }
            }
        }
        if run.events.is_some() {
            if status == WorkflowStatus::Canceled {
                run.emit(
                    EventSource::Workflow,
                    EventKind::WorkflowCanceled(Default::default()),
                )
                .await;
            }
            let metadata = match &error {
                Some(error) => json!({"error": error, "errorMessage": error.message}),
                None => json!({}),
            };
            let finish = WorkflowFinishPayload {
                workflow_status: status,
                metadata,
                output: WorkflowFinishOutput::default(),
                final_workflow_result: output.clone().filter(|_| status == WorkflowStatus::Success),
            };
            run.emit(EventSource::Workflow, EventKind::WorkflowFinish(finish))
                .await;
        }
        WorkflowResult {
            status,
            run_id: run.run_id.to_string(),
            input: run.init.clone(),
            steps,
            step_execution_path: path,
            result: output,
            error,
            suspended,
            suspend_payload,
            state: self.state(),
        }
    }
}

/// The flow of a group of steps that ran at once: the first failure, else the first bail,
/// else suspended if any step suspended, else their outputs keyed by step id.
fn combine(flows: Vec<(&Arc<dyn Step>, Flow)>) -> Flow {
    let mut outputs = Map::new();
    let mut suspended = false;
    let mut bailed = None;
    for (step, flow) in flows {
        match flow {
            Flow::Next(output) => {
                outputs.insert(step.id().to_owned(), output);
            }
            Flow::Suspended => suspended = true,
            Flow::Bailed(value) => {
                bailed.get_or_insert(value);
            }
            failed @ (Flow::Failed(_) | Flow::Canceled) => return failed,
        }
    }
    match (bailed, suspended) {
        (Some(value), _) => Flow::Bailed(value),
        (None, true) => Flow::Suspended,
        (None, false) => Flow::Next(Value::Object(outputs)),
    }
}
