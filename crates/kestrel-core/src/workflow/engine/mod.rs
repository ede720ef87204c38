//! Executing a run: entries in order from the run's position, each on the previous one's
//! output; a parallel entry's steps and a branch's chosen arms at once. A resumed run starts
//! at the entry it was suspended in: the steps of that entry that had succeeded keep their
//! outputs, the resumed step runs with its resume data, and the others stay suspended.
//! Snapshots are saved when the run stops or ends, and (with a durable store) at every entry
//! boundary ([`snapshot`]).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Map, Value, json};

use super::Workflow;
use super::condition::ConditionContext;
use super::entry::Entry;
use super::result::WorkflowResult;
use super::step::{RunShared, Step, StepContext, StepError, StepRef};
use crate::event::{
    EventKind, EventSource, StepErrorInfo, StepStatus, WorkflowFinishOutput, WorkflowFinishPayload,
    WorkflowStartPayload, WorkflowStatus, WorkflowStepPayload,
};
use crate::store::StepResult;

mod foreach;
mod repeat;
mod sleep;
mod snapshot;

pub(crate) use foreach::foreach_suspended;
mod traced;
use snapshot::HandOver;

/// How a run continues at its position: a resume (the step given its data) or a restart
/// (`step: None`: the entry runs again, but for its steps that had succeeded).
#[derive(Debug, Clone)]
pub(crate) struct Resume {
    pub step: Option<String>,
    pub data: Value,
    /// Below `step`, when it is a nested workflow: the path of its suspended step.
    pub path: Vec<String>,
    /// When `step` is a foreach: the suspended item resumed (`None`: the only one).
    pub item: Option<usize>,
}

impl Resume {
    /// Whether `id` is the step resumed with data.
    fn is(&self, id: &str) -> bool {
        self.step.as_deref() == Some(id)
    }
}

/// How an entry ended. Outputs are shared: the step's result holds the same value.
enum Flow {
    /// With this output, for the next entry.
    Next(Arc<Value>),
    /// With steps suspended (their payloads are in the results).
    Suspended,
    /// The run ends with this output.
    Bailed(Arc<Value>),
    /// The run fails. (Boxed: a flow is held across the awaits of every run's future.)
    Failed(Box<StepErrorInfo>),
    /// The run was canceled.
    Canceled,
}

impl Engine {
    /// Hands the successful run to the workflow's live scorers' sampling (input the run's
    /// input, output its result): the scorings chosen, kept pending.
    async fn sample_live(&self, output: Option<&Value>) -> Option<crate::eval::live::Sampled> {
        use crate::eval::{ScorerInput, ScorerOutput, ScorerRun};
        let scoring = self.workflow.inner.scoring.as_ref()?;
        let run = &self.run;
        let mut scored = ScorerRun::new(
            ScorerInput::Value(Value::clone(&run.init)),
            ScorerOutput::Value(output.cloned().unwrap_or(Value::Null)),
        )
        .run_id(run.run_id.to_string());
        if let Some(trace) = run.trace.get() {
            let context = &trace.run.context;
            scored = scored.trace(context.trace_id.clone(), context.parent_span_id.clone());
        }
        crate::eval::live::sample_finished(
            &self.workflow.inner.scorers,
            crate::eval::live::FinishedRun {
                entity_type: "WORKFLOW",
                entity_id: run.workflow_id.to_string(),
                run: scored,
                resource_id: None,
                thread_id: None,
            },
            Arc::clone(&scoring.store),
            Arc::clone(&scoring.stats),
        )
        .await
    }
}

impl Flow {
    /// The run fails with `error`.
    fn failed(error: StepErrorInfo) -> Self {
        Flow::Failed(Box::new(error))
    }
}

/// One run being executed.
pub(crate) struct Engine {
    workflow: Workflow,
    run: Arc<RunShared>,
    resource_id: Option<String>,
    /// The entry to start at.
    position: usize,
    /// Its input.
    entry_input: Arc<Value>,
    /// The top-level steps that ran before.
    path: Vec<String>,
    /// The step resumed at `position`, if this is a resume (or a restart). Boxed, as the
    /// lease is: the engine is part of every run's future, and both are rare.
    resume: Option<Box<Resume>>,
    /// In a cluster: this instance's lease on the run.
    lease: Option<Box<super::lease::RunLease>>,
    /// Whether the store may hold a snapshot of the run (deleted when the workflow's
    /// snapshot policy refuses a later one).
    stored: std::sync::atomic::AtomicBool,
    /// Set when this driver stopped driving the run before its end, and why
    /// ([`HandOver`] as a byte, 0 while it drives the run: one byte of the run's future).
    handed_over: std::sync::atomic::AtomicU8,
}

/// A step that started: its input, when, and its event so far (when streamed).
struct Started {
    input: Arc<Value>,
    started_at: u64,
    /// Boxed, as resumes are rare: a step's future holds its `Started` twice.
    resumed: Option<Box<(Given, u64)>>,
    /// Boxed: a step's future holds its `Started` twice (the argument and its fields), and
    /// only a streamed run has an event.
    payload: Option<Box<WorkflowStepPayload>>,
}

/// What a resumed step is given: the data, and (a nested workflow) the path below it.
#[derive(Debug, Clone)]
pub(crate) struct Given {
    pub data: Value,
    pub path: Vec<String>,
    /// What the step suspended with (Mastra's `suspendData`).
    pub suspended: Option<Value>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A step event's payload with the start's fields.
fn step_payload(
    id: &str,
    step_call_id: Option<String>,
    input: Arc<Value>,
    started_at: u64,
) -> WorkflowStepPayload {
    WorkflowStepPayload {
        step_name: id.to_owned(),
        id: id.to_owned(),
        step_call_id,
        status: StepStatus::Running,
        payload: input,
        started_at,
        output: None,
        ended_at: None,
        error: None,
        suspend_payload: None,
        suspended_at: None,
        resume_payload: None,
        resumed_at: None,
        metadata: None,
    }
}

/// The message of a condition's error.
fn error_message(error: StepError) -> String {
    match error {
        StepError::Failed { message } => message,
        other => format!("{other:?}"),
    }
}

/// What kind of JSON value this is, for messages.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn error_info(message: impl Into<String>) -> StepErrorInfo {
    StepErrorInfo {
        message: message.into(),
        name: "Error".to_owned(),
        tripwire: None,
    }
}

/// A processor's stop, as a step's error (Mastra's error name `TripWire`).
fn tripwire_info(tripwire: crate::run::Tripwire) -> StepErrorInfo {
    StepErrorInfo {
        message: tripwire.reason.clone(),
        name: "TripWire".to_owned(),
        tripwire: Some(Box::new(tripwire)),
    }
}

impl Engine {
    pub(crate) fn new(
        workflow: Workflow,
        run: Arc<RunShared>,
        resource_id: Option<String>,
        position: usize,
        entry_input: Arc<Value>,
        path: Vec<String>,
        resume: Option<Resume>,
    ) -> Self {
        Self {
            workflow,
            run,
            resource_id,
            position,
            entry_input,
            path,
            resume: resume.map(Box::new),
            lease: None,
            stored: std::sync::atomic::AtomicBool::new(true),
            handed_over: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Says whether the store holds a snapshot of the run already (a fresh run's id may be
    /// new to it).
    pub(crate) fn with_stored(self, stored: bool) -> Self {
        self.stored
            .store(stored, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Drives the run holding `lease` (in a cluster).
    pub(crate) fn with_lease(mut self, lease: Option<super::lease::RunLease>) -> Self {
        self.lease = lease.map(Box::new);
        self
    }

    /// Runs the engine to the run's end or stop. Not an `async fn`: one of those keeps its
    /// argument twice in its future (the argument, and the local it is moved to), and a
    /// streamed run's future is boxed whole; the block holds the engine once.
    pub(crate) fn run(self) -> impl Future<Output = WorkflowResult> + Send + 'static {
        let mut engine = self;
        async move { engine.drive().await }
    }

    async fn drive(&mut self) -> WorkflowResult {
        let workflow_id = self.run.workflow_id.to_string();
        self.run
            .emit(
                EventSource::Workflow,
                EventKind::WorkflowStart(WorkflowStartPayload { workflow_id }),
            )
            .await;
        let durable = self.workflow.inner.store.is_durable();
        if durable && self.resume.is_none() {
            self.save(WorkflowStatus::Running, None, None).await;
        }
        let workflow = self.workflow.clone();
        // How the run stopped early; running through every entry ends with the last output.
        let mut stopped = None;
        for (index, entry) in workflow
            .inner
            .entries
            .iter()
            .enumerate()
            .skip(self.position)
        {
            if self.run.abort.is_aborted() {
                stopped = Some(Flow::Canceled);
                break;
            }
            self.position = index;
            if let Entry::Step(step) = entry
                && self.path.last().is_none_or(|last| last != step.id())
            {
                self.path.push(step.id().to_owned());
            }
            let resume = self.resume.take();
            // The entry's span (when traced) is kept with the run, not in this future.
            self.open_entry(entry);
            // The run keeps the entry's input (snapshots name it) until the entry's output
            // takes its place; the entry shares it.
            let flow = self
                .entry(entry, Arc::clone(&self.entry_input), resume.as_deref())
                .await;
            self.close_entry(&flow);
            match flow {
                Flow::Next(output) => {
                    self.entry_input = output;
                    self.position = index + 1;
                    if durable && index + 1 < workflow.inner.entries.len() {
                        self.save(WorkflowStatus::Running, None, None).await;
                    }
                }
                flow => {
                    stopped = Some(flow);
                    break;
                }
            }
        }
        let outcome = match stopped {
            Some(flow) => flow,
            None if self.run.abort.is_aborted() => Flow::Canceled,
            None => Flow::Next(Arc::clone(&self.entry_input)),
        };
        self.finish(outcome).await
    }

    async fn entry(&self, entry: &Entry, input: Arc<Value>, resume: Option<&Resume>) -> Flow {
        match entry {
            Entry::Step(step) => self.step(step, input, resume).await,
            Entry::Parallel(steps) => {
                let steps: Vec<&Arc<dyn Step>> = steps.iter().collect();
                combine(self.group(&steps, &input, resume).await)
            }
            Entry::Branch(arms) => {
                // A resumed branch runs the arms that ran before; their conditions are not
                // asked again. (A restarted one asks them again: conditions decide, steps
                // act.)
                if resume.is_some_and(|r| r.step.is_some()) {
                    let chosen: Vec<&Arc<dyn Step>> = arms
                        .iter()
                        .map(|(_, step)| step)
                        .filter(|step| self.prior(step.id()).is_some())
                        .collect();
                    return combine(self.group(&chosen, &input, resume).await);
                }
                let context = ConditionContext {
                    input: Arc::clone(&input),
                    init: Arc::clone(&self.run.init),
                    state: self.state(),
                    iteration_count: 0,
                };
                // Each condition owns a context; the last arm's is the original (`repeat_n`
                // moves it in last).
                let contexts = std::iter::repeat_n(context, arms.len());
                let decided =
                    futures::future::join_all(arms.iter().zip(contexts).map(
                        |((condition, step), context)| async move {
                            (step, (condition.0)(context).await)
                        },
                    ))
                    .await;
                let mut chosen = Vec::new();
                for (step, holds) in decided {
                    match holds {
                        Ok(true) => chosen.push(step),
                        Ok(false) => {}
                        Err(error) => {
                            return Flow::failed(error_info(format!(
                                "the condition of branch arm {:?} failed: {}",
                                step.id(),
                                error_message(error)
                            )));
                        }
                    }
                }
                combine(self.group(&chosen, &input, resume).await)
            }
            Entry::Loop {
                step,
                condition,
                until,
            } => self.repeat(step, condition, *until, input, resume).await,
            // Boxed: these two are the biggest futures an entry awaits, and the rarest.
            Entry::Foreach { step, concurrency } => {
                Box::pin(self.each(step, *concurrency, input, resume)).await
            }
            Entry::Sleep { id, wait } => {
                Box::pin(self.sleep(id, *wait, input, resume.is_some())).await
            }
        }
    }

    fn state(&self) -> Arc<Value> {
        Arc::clone(&self.run.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn prior(&self, id: &str) -> Option<StepResult> {
        let results = self.run.results.read().unwrap_or_else(|e| e.into_inner());
        results.get(id).map(|result| StepResult::clone(result))
    }

    fn record(&self, id: &str, result: StepResult) {
        let mut results = self.run.results.write().unwrap_or_else(|e| e.into_inner());
        results.insert(id.to_owned(), Box::new(result));
    }

    /// Runs one step: its start event, its execution (a panic fails it), its result. In a
    /// resumed entry, a step that succeeded before keeps its output and one suspended and not
    /// resumed stays suspended, without events.
    async fn step(&self, step: &Arc<dyn Step>, input: Arc<Value>, resume: Option<&Resume>) -> Flow {
        match self.settled(step, resume) {
            Some(flow) => flow,
            None => {
                let started = self.begin(step, input, resume).await;
                self.execute(step, started).await
            }
        }
    }

    /// What a step of a resumed entry gives without running (see [`Engine::step`]).
    fn settled(&self, step: &Arc<dyn Step>, resume: Option<&Resume>) -> Option<Flow> {
        let resume = resume?;
        let prior = self.prior(step.id())?;
        match prior.status {
            StepStatus::Success => Some(Flow::Next(prior.output.unwrap_or_default())),
            StepStatus::Suspended if !resume.is(step.id()) => Some(Flow::Suspended),
            _ => None,
        }
    }

    /// A step's start: its time, and its `workflow-step-start` event (when streamed). A
    /// resumed step keeps its first start time and adds its resume data.
    async fn begin(
        &self,
        step: &Arc<dyn Step>,
        input: Arc<Value>,
        resume: Option<&Resume>,
    ) -> Started {
        self.begin_with(step, input, resume, None).await
    }

    /// [`Engine::begin`], with the start event's `metadata` (a loop's iteration count).
    async fn begin_with(
        &self,
        step: &Arc<dyn Step>,
        input: Arc<Value>,
        resume: Option<&Resume>,
        metadata: Option<Value>,
    ) -> Started {
        let id = step.id();
        let now = now_ms();
        let resumed = resume.filter(|r| r.is(id)).map(|r| {
            let given = Given {
                data: r.data.clone(),
                path: r.path.clone(),
                suspended: self.prior(id).and_then(|prior| prior.suspend_payload),
            };
            Box::new((given, now))
        });
        let started_at = match resumed {
            Some(_) => self.prior(id).map_or(now, |p| p.started_at),
            None => now,
        };
        let payload = self.run.events.is_some().then(|| {
            let mut payload = step_payload(
                id,
                Some(crate::id::new_id()),
                Arc::clone(&input),
                started_at,
            );
            payload.resume_payload = resumed.as_ref().map(|r| r.0.data.clone());
            payload.resumed_at = resumed.as_ref().map(|r| r.1);
            payload.metadata = metadata;
            Box::new(payload)
        });
        if let Some(start) = &payload {
            self.run
                .emit(
                    EventSource::Workflow,
                    EventKind::WorkflowStepStart(WorkflowStepPayload::clone(start)),
                )
                .await;
        }
        Started {
            input,
            started_at,
            resumed,
            payload,
        }
    }

    /// Steps that run at once: every start event first, then the results as they come.
    async fn group<'a>(
        &self,
        steps: &[&'a Arc<dyn Step>],
        input: &Arc<Value>,
        resume: Option<&Resume>,
    ) -> Vec<(&'a Arc<dyn Step>, Flow)> {
        if let [step] = steps {
            // One step (a branch with one arm chosen) needs no join. Boxed: the group's
            // future would otherwise hold a step's beside the join's.
            let flow = Box::pin(self.step(step, Arc::clone(input), resume)).await;
            return vec![(*step, flow)];
        }
        let mut started = Vec::with_capacity(steps.len());
        for step in steps {
            started.push(match self.settled(step, resume) {
                Some(flow) => Err(flow),
                None => Ok(self.begin(step, Arc::clone(input), resume).await),
            });
        }
        // Each arm that ends is a step boundary: stored, so a crash re-runs only the others.
        // The last arm to end is stored with the whole group (the entry's boundary, or the
        // suspension or failure that ends the run), so it needs no commit of its own.
        let boundaries = steps.len() > 1 && self.workflow.inner.store.is_durable();
        let running = std::sync::atomic::AtomicUsize::new(
            started.iter().filter(|started| started.is_ok()).count(),
        );
        let running = &running;
        // Each arm boxed: the join's own list then stays small. Unboxed, two arms' futures
        // make one allocation over a kilobyte, which glibc serves off its slow path.
        let flows = futures::future::join_all(steps.iter().zip(started).map(|(step, started)| {
            Box::pin(async move {
                match started {
                    Ok(started) => {
                        let flow = self.execute(step, started).await;
                        let others = running.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) > 1;
                        if boundaries && others && matches!(flow, Flow::Next(_)) {
                            self.save(WorkflowStatus::Running, None, None).await;
                        }
                        flow
                    }
                    Err(flow) => flow,
                }
            })
        }))
        .await;
        steps.iter().copied().zip(flows).collect()
    }

    /// A started step's execution and its result.
    async fn execute(&self, step: &Arc<dyn Step>, started: Started) -> Flow {
        let id = step.id();
        let Started {
            input,
            started_at,
            resumed,
            mut payload,
        } = started;
        self.open_step(id, &input);
        let outcome = self
            .attempt(
                step,
                Arc::clone(&input),
                resumed.as_ref().map(|r| Box::new(r.0.clone())),
            )
            .await;
        self.close_step(id, &outcome.as_ref());
        let ended_at = now_ms();
        let (resume_payload, resumed_at) = match resumed.map(|r| *r) {
            Some((given, at)) => (Some(given.data), Some(at)),
            None => (None, None),
        };
        let mut result = StepResult {
            resume_payload,
            ended_at: Some(ended_at),
            resumed_at,
            ..StepResult::begun(input, started_at)
        };
        let (flow, kind): (Flow, fn(WorkflowStepPayload) -> EventKind) = match outcome {
            Ok(output) => {
                let output = Arc::new(output);
                result.output = Some(Arc::clone(&output));
                (Flow::Next(output), EventKind::WorkflowStepResult)
            }
            Err(StepError::Bail { value }) => {
                let value = Arc::new(value);
                result.output = Some(Arc::clone(&value));
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
                (Flow::failed(info), EventKind::WorkflowStepResult)
            }
            Err(StepError::Tripwire { tripwire }) => {
                result.status = StepStatus::Failed;
                let info = tripwire_info(*tripwire);
                result.error = Some(info.clone());
                (Flow::failed(info), EventKind::WorkflowStepResult)
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
            self.run.emit(EventSource::Workflow, kind(*event)).await;
        }
        flow
    }

    /// Executes a step until it succeeds, stops, or fails more often than its retries allow
    /// (a panic fails it).
    async fn attempt(
        &self,
        step: &Arc<dyn Step>,
        input: Arc<Value>,
        given: Option<Box<Given>>,
    ) -> Result<Value, StepError> {
        // `given` stays boxed and whole (its fields are copied into each attempt's context):
        // every step's future holds this one, and resumes are rare.
        let id = step.id();
        let retry = self.workflow.inner.retry;
        let attempts = step.retries().unwrap_or(retry.attempts);
        let mut retry_count = 0;
        loop {
            let ctx = StepContext {
                step: StepRef(Arc::clone(step)),
                input: Arc::clone(&input),
                resume_data: given.as_ref().map(|g| g.data.clone()),
                suspend_data: given.as_ref().and_then(|g| g.suspended.clone()),
                resume_path: given.as_ref().map(|g| g.path.clone()).unwrap_or_default(),
                retry_count,
                run: Arc::clone(&self.run),
                trace: self.step_parent(id),
            };
            let outcome = AssertUnwindSafe(step.execute(ctx))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(StepError::new(format!("step {id:?} panicked"))));
            match outcome {
                Err(StepError::Failed { .. })
                    if retry_count < attempts && !self.run.abort.is_aborted() =>
                {
                    retry_count += 1;
                    // Boxed: only a retry waits, and the timer is the biggest thing a step's
                    // future would otherwise hold.
                    Box::pin(tokio::time::sleep(retry.delay)).await;
                }
                outcome => return outcome,
            }
        }
    }

    async fn finish(&mut self, outcome: Flow) -> WorkflowResult {
        self.close_run(&outcome);
        let (status, output, error) = match outcome {
            Flow::Next(output) | Flow::Bailed(output) => {
                (WorkflowStatus::Success, Some(output), None)
            }
            Flow::Suspended => (WorkflowStatus::Suspended, None, None),
            Flow::Failed(error) if error.tripwire.is_some() => {
                (WorkflowStatus::Tripwire, None, Some(*error))
            }
            Flow::Failed(error) => (WorkflowStatus::Failed, None, Some(*error)),
            Flow::Canceled => (WorkflowStatus::Canceled, None, None),
        };
        // A driver that lost the run (or could not store it) writes nothing more.
        if self.lease_lost() {
            self.hand_over(HandOver::TakenOver);
        }
        // The steps have ended: their results go into the last snapshot and then into the
        // result, without a copy.
        let steps =
            std::mem::take(&mut *self.run.results.write().unwrap_or_else(|e| e.into_inner()));
        // Kept pending before the run's end is stored: a restart between the two still
        // scores it. Boxed: only runs of workflows with scorers pay for its future.
        let sampled = if status == WorkflowStatus::Success
            && self.handed_over().is_none()
            && !self.workflow.inner.scorers.is_empty()
        {
            Box::pin(self.sample_live(output.as_deref())).await
        } else {
            None
        };
        let steps = if self.handed_over().is_some() {
            steps
        } else if !self.keeps(status, &steps) {
            self.forget().await;
            steps
        } else {
            // Boxed: the run's future would otherwise keep room for it.
            let snapshot = Box::new(self.snapshot(status, output.as_ref(), error.as_ref(), steps));
            // A failed store hands the run over (the end was not stored). Boxed: its retries
            // would otherwise take room in every run's future.
            Box::pin(self.store(&snapshot)).await;
            snapshot.steps
        };
        // A run handed over is not over where it counts: its caller is told it goes on
        // elsewhere, never an outcome that was not stored.
        let (status, output, error) = match self.handed_over() {
            Some(why) => (
                WorkflowStatus::Running,
                None,
                Some(StepErrorInfo {
                    message: why.message().to_owned(),
                    name: "RunHandedOver".to_owned(),
                    tripwire: None,
                }),
            ),
            None => (status, output, error),
        };
        if let Some(lease) = self.lease.take() {
            Box::pin(lease.release()).await;
        }
        let run = &self.run;
        let mut suspended = Vec::new();
        let mut suspend_payload = BTreeMap::new();
        for (id, step) in &steps {
            if step.status == StepStatus::Suspended {
                let payload = step.suspend_payload.as_ref().unwrap_or(&Value::Null);
                suspended.push(super::path::path_of(id, payload));
                if let Some(payload) = &step.suspend_payload {
                    suspend_payload.insert(id.clone(), payload.clone());
                }
            }
        }
        if run.events.is_some() {
            if status == WorkflowStatus::Canceled && self.handed_over().is_none() {
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
                output: WorkflowFinishOutput {
                    usage: *run.usage.lock().unwrap_or_else(|e| e.into_inner()),
                },
                final_workflow_result: output
                    .as_deref()
                    .filter(|_| status == WorkflowStatus::Success)
                    .cloned(),
            };
            run.emit(EventSource::Workflow, EventKind::WorkflowFinish(finish))
                .await;
        }
        // A run handed over is scored where it ends; its scorings stay pending meanwhile.
        if let Some(sampled) = sampled
            && self.handed_over().is_none()
        {
            sampled.start();
        }
        WorkflowResult {
            status,
            run_id: run.run_id.to_string(),
            input: Value::clone(&run.init),
            steps,
            // The snapshot has its copy already.
            step_execution_path: std::mem::take(&mut self.path),
            // The last step's result holds the output too: the caller gets a copy.
            result: output.map(Arc::unwrap_or_clone),
            error,
            suspended,
            suspend_payload,
            state: Value::clone(&self.state()),
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
                // Each step's result holds its output too: the group's output is a copy.
                outputs.insert(step.id().to_owned(), Arc::unwrap_or_clone(output));
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
        (None, false) => Flow::Next(Arc::new(Value::Object(outputs))),
    }
}
