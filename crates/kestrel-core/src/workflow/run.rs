//! A workflow's runs: [`Workflow::create_run`], then [`WorkflowRun::start`] (the result),
//! [`WorkflowRun::stream`] (the events, then the result), [`WorkflowRun::resume`] and
//! [`WorkflowRun::cancel`].

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use futures::Stream;
use serde_json::{Map, Value};

use super::builder::Workflow;
use super::engine::{Engine, Resume};
use super::result::WorkflowResult;
use super::step::RunShared;
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::{Event, StepStatus, WorkflowStatus};
use crate::workflow_store::{WorkflowSnapshot, WorkflowStoreError};

/// How many events a streamed run may have ahead of its reader before its steps wait.
const STREAM_BACKLOG: usize = 256;

/// Why a run could not be started, resumed or canceled.
#[derive(Debug, thiserror::Error)]
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
    /// No run of that id is stored.
    #[error("workflow {workflow:?} has no run {run_id:?}")]
    UnknownRun {
        /// The workflow.
        workflow: String,
        /// The run.
        run_id: String,
    },
    /// A run of that id exists already (it cannot be started again).
    #[error("run {run_id:?} of workflow {workflow:?} was started already (it is {status:?})")]
    AlreadyStarted {
        /// The workflow.
        workflow: String,
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The run is not suspended, so it cannot be resumed.
    #[error("run {run_id:?} is not suspended (it is {status:?})")]
    NotSuspended {
        /// The run.
        run_id: String,
        /// Where it stands.
        status: WorkflowStatus,
    },
    /// The step named is not one the run waits at (or none was named and several wait).
    #[error("run {run_id:?} has no suspended step {step:?}; it waits at {suspended:?}")]
    NotSuspendedStep {
        /// The run.
        run_id: String,
        /// The step asked for (`None`: none was named).
        step: Option<String>,
        /// The steps it waits at.
        suspended: Vec<String>,
    },
    /// The resume data does not match the step's resume schema.
    #[error("invalid resume data for step {step:?}: {}", errors.join("; "))]
    InvalidResumeData {
        /// The step.
        step: String,
        /// One message per violation, naming its path.
        errors: Vec<String>,
    },
    /// Another resumer claimed the run first.
    #[error("run {run_id:?} was resumed by someone else first")]
    AlreadyClaimed {
        /// The run.
        run_id: String,
    },
    /// The run has ended, so it cannot be canceled.
    #[error("run {run_id:?} has ended ({status:?}); there is nothing to cancel")]
    Ended {
        /// The run.
        run_id: String,
        /// How it ended.
        status: WorkflowStatus,
    },
    /// The workflow store failed.
    #[error(transparent)]
    Store(#[from] WorkflowStoreError),
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

    /// The run `run_id`: a new one, or (to resume or cancel it) a stored one.
    pub fn create_run_with_id(&self, run_id: impl Into<String>) -> WorkflowRun {
        WorkflowRun {
            workflow: self.clone(),
            run_id: run_id.into().into(),
            resource_id: None,
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
    resource_id: Option<String>,
    request_context: RequestContext,
    abort: AbortSignal,
}

impl WorkflowRun {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The resource the run acts for (stored with it, to list a resource's runs).
    pub fn resource(mut self, resource_id: impl Into<String>) -> Self {
        self.resource_id = Some(resource_id.into());
        self
    }

    /// Gives the run's steps this request context.
    pub fn request_context(mut self, context: RequestContext) -> Self {
        self.request_context = context;
        self
    }

    /// Runs the workflow on `input` to its end (or its first suspension) and returns the
    /// result.
    pub async fn start(&self, input: Value) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.fresh(input, None).await?;
        Ok(engine.run().await)
    }

    /// Runs the workflow on `input` in a task of its own and streams its events; the stream
    /// ends with `workflow-finish`, and [`WorkflowStream::result`] gives the result. Dropping
    /// the stream does not stop the run.
    pub async fn stream(&self, input: Value) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = tokio::sync::mpsc::channel(STREAM_BACKLOG);
        let engine = self.fresh(input, Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    /// Resumes the suspended run at `step` (or at its only suspended step, with `None`) with
    /// `data`, checked against the step's resume schema, and runs it on to its end or next
    /// suspension. The run is claimed first: of two resumers one wins, the other gets
    /// [`WorkflowRunError::AlreadyClaimed`].
    pub async fn resume(
        &self,
        step: Option<&str>,
        data: Value,
    ) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.resumed(step, data, None).await?;
        Ok(engine.run().await)
    }

    /// [`WorkflowRun::resume`], streamed: a new `workflow-start`, the resumed step's events,
    /// then the rest of the run.
    pub async fn resume_stream(
        &self,
        step: Option<&str>,
        data: Value,
    ) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = tokio::sync::mpsc::channel(STREAM_BACKLOG);
        let engine = self.resumed(step, data, Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    /// Cancels the run: in this process, its steps' abort signal fires and no further step
    /// starts (it ends `canceled`); a suspended or sleeping run is marked `canceled` in the
    /// store. An ended run is refused.
    pub async fn cancel(&self) -> Result<(), WorkflowRunError> {
        self.abort.abort();
        let store = &self.workflow.inner.store;
        let workflow = self.workflow.id();
        let Some(stored) = store.load(workflow, &self.run_id).await? else {
            return Ok(());
        };
        match stored.status {
            WorkflowStatus::Success | WorkflowStatus::Failed | WorkflowStatus::Canceled => {
                Err(WorkflowRunError::Ended {
                    run_id: self.run_id.to_string(),
                    status: stored.status,
                })
            }
            status @ (WorkflowStatus::Suspended
            | WorkflowStatus::Waiting
            | WorkflowStatus::Pending) => {
                store
                    .claim(workflow, &self.run_id, status, WorkflowStatus::Canceled)
                    .await?;
                Ok(())
            }
            WorkflowStatus::Running => Ok(()),
        }
    }

    /// The run's stored snapshot, if any.
    pub async fn snapshot(&self) -> Result<Option<WorkflowSnapshot>, WorkflowRunError> {
        Ok(self
            .workflow
            .inner
            .store
            .load(self.workflow.id(), &self.run_id)
            .await?)
    }

    /// The engine of a fresh run: the input checked, the id not taken.
    async fn fresh(
        &self,
        input: Value,
        events: Option<tokio::sync::mpsc::Sender<Event>>,
    ) -> Result<Engine, WorkflowRunError> {
        let errors = crate::schema::violations(&self.workflow.inner.input_validator, &input);
        if !errors.is_empty() {
            return Err(WorkflowRunError::InvalidInput {
                workflow: self.workflow.id().to_owned(),
                errors,
            });
        }
        let store = &self.workflow.inner.store;
        if let Some(stored) = store.load(self.workflow.id(), &self.run_id).await? {
            return Err(WorkflowRunError::AlreadyStarted {
                workflow: self.workflow.id().to_owned(),
                run_id: self.run_id.to_string(),
                status: stored.status,
            });
        }
        let shared = self.shared(
            input.clone(),
            BTreeMap::new(),
            Value::Object(Map::new()),
            events,
        );
        Ok(Engine::new(
            self.workflow.clone(),
            shared,
            self.resource_id.clone(),
            0,
            input,
            Vec::new(),
            None,
        ))
    }

    /// The engine of a resumed run: the snapshot loaded, the step and data checked, the run
    /// claimed.
    async fn resumed(
        &self,
        step: Option<&str>,
        data: Value,
        events: Option<tokio::sync::mpsc::Sender<Event>>,
    ) -> Result<Engine, WorkflowRunError> {
        let store = &self.workflow.inner.store;
        let workflow = self.workflow.id();
        let Some(stored) = store.load(workflow, &self.run_id).await? else {
            return Err(WorkflowRunError::UnknownRun {
                workflow: workflow.to_owned(),
                run_id: self.run_id.to_string(),
            });
        };
        if stored.status != WorkflowStatus::Suspended {
            return Err(WorkflowRunError::NotSuspended {
                run_id: self.run_id.to_string(),
                status: stored.status,
            });
        }
        let suspended: Vec<String> = stored
            .steps
            .iter()
            .filter(|(_, r)| r.status == StepStatus::Suspended)
            .map(|(id, _)| id.clone())
            .collect();
        let chosen = match step {
            Some(step) => suspended.iter().find(|s| *s == step),
            None if suspended.len() == 1 => suspended.first(),
            None => None,
        };
        let Some(chosen) = chosen.cloned() else {
            return Err(WorkflowRunError::NotSuspendedStep {
                run_id: self.run_id.to_string(),
                step: step.map(str::to_owned),
                suspended,
            });
        };
        if let Some(schema) = self
            .workflow
            .step(&chosen)
            .and_then(|s| s.resume_schema().cloned())
        {
            let errors = crate::schema::schema_errors(&schema, &data);
            if !errors.is_empty() {
                return Err(WorkflowRunError::InvalidResumeData {
                    step: chosen,
                    errors,
                });
            }
        }
        let claimed = store
            .claim(
                workflow,
                &self.run_id,
                WorkflowStatus::Suspended,
                WorkflowStatus::Running,
            )
            .await?;
        if !claimed {
            return Err(WorkflowRunError::AlreadyClaimed {
                run_id: self.run_id.to_string(),
            });
        }
        let shared = self.shared(stored.input, stored.steps, stored.state, events);
        Ok(Engine::new(
            self.workflow.clone(),
            shared,
            stored.resource_id.or_else(|| self.resource_id.clone()),
            stored.position,
            stored.entry_input,
            stored.step_execution_path,
            Some(Resume { step: chosen, data }),
        ))
    }

    fn shared(
        &self,
        input: Value,
        results: BTreeMap<String, crate::workflow_store::StepResult>,
        state: Value,
        events: Option<tokio::sync::mpsc::Sender<Event>>,
    ) -> Arc<RunShared> {
        Arc::new(RunShared {
            workflow_id: Arc::clone(&self.workflow.inner.id),
            run_id: Arc::clone(&self.run_id),
            init: input,
            results: RwLock::new(results),
            state: Mutex::new(state),
            request_context: self.request_context.clone(),
            abort: self.abort.clone(),
            events,
            usage: Mutex::default(),
        })
    }
}

/// A streamed run: its events, then its result. See [`WorkflowRun::stream`].
#[derive(Debug)]
pub struct WorkflowStream {
    events: tokio::sync::mpsc::Receiver<Event>,
    task: tokio::task::JoinHandle<WorkflowResult>,
}

impl WorkflowStream {
    fn spawn(engine: Engine, events: tokio::sync::mpsc::Receiver<Event>) -> Self {
        let task = tokio::spawn(engine.run());
        Self { events, task }
    }

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
