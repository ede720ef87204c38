//! A workflow's runs: [`Workflow::create_run`], then [`WorkflowRun::start`] (the result),
//! [`WorkflowRun::stream`] (the events, then the result), [`WorkflowRun::resume`] and
//! [`WorkflowRun::cancel`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value};

use super::definition::Workflow;
use super::engine::{Engine, Resume, foreach_suspended};
use super::error::WorkflowRunError;
use super::lease::RunLease;
use super::live::LiveGuard;
use super::result::WorkflowResult;
use super::step::RunShared;
use super::stream::WorkflowStream;
use crate::abort::AbortSignal;
use crate::context::RequestContext;
use crate::event::{StepStatus, WorkflowStatus};
use crate::store::WorkflowSnapshot;

impl Workflow {
    /// A new run of the workflow, with a fresh id (Mastra's `createRun`).
    pub fn create_run(&self) -> WorkflowRun {
        let run = self.create_run_with_id(crate::id::new_id());
        // An id made here, now: no store holds a run of it until this handle stores one.
        run.flags.set(RunFlags::UNSTORED);
        run
    }

    /// The run `run_id`: a new one, or (to resume or cancel it) a stored one. A handle on a
    /// run going on in this process shares its abort signal, so its
    /// [`WorkflowRun::cancel`] stops that run.
    pub fn create_run_with_id(&self, run_id: impl Into<String>) -> WorkflowRun {
        let run_id: Arc<str> = run_id.into().into();
        let abort = self.inner.live.signal(&run_id).unwrap_or_default();
        WorkflowRun {
            workflow: self.clone(),
            run_id,
            resource_id: None,
            request_context: RequestContext::default(),
            initial_state: None,
            abort,
            flags: Arc::default(),
            trace: None,
        }
    }
}

/// One run of a workflow. See [`Workflow::create_run`].
#[derive(Debug, Clone)]
pub struct WorkflowRun {
    pub(super) workflow: Workflow,
    pub(super) run_id: Arc<str>,
    resource_id: Option<String>,
    request_context: RequestContext,
    initial_state: Option<Value>,
    pub(super) abort: AbortSignal,
    /// What the handle (and its clones) knows of the run's record: [`RunFlags`].
    flags: Arc<RunFlags>,
    /// The span the run's trace hangs under, and the tracer when the workflow has none of
    /// its own (a run started by a traced tool call or step): see [`WorkflowRun::trace`].
    trace: Option<Box<super::spans::RunTraceParent>>,
}

/// What a run's handles know of its record, one allocation for all of it.
#[derive(Debug, Default)]
struct RunFlags(std::sync::atomic::AtomicU8);

impl RunFlags {
    /// The id is fresh and nothing was stored under it yet: the first start needs not look
    /// for a created run.
    const UNSTORED: u8 = 1;
    /// The handle stored the run as `pending` ([`WorkflowRun::create`]) and no start has
    /// claimed it yet: a start refused before it runs anything deletes it again.
    const CREATED: u8 = 2;

    fn set(&self, flag: u8) {
        self.0.fetch_or(flag, std::sync::atomic::Ordering::AcqRel);
    }

    /// Clears `flag`; whether it was set.
    fn take(&self, flag: u8) -> bool {
        self.0.fetch_and(!flag, std::sync::atomic::Ordering::AcqRel) & flag != 0
    }
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

    /// Puts the run in the caller's trace, under its span `context` (a W3C `traceparent`'s,
    /// say), when the workflow is traced ([`crate::trace`]). Without it a run's trace is its
    /// own, its id made from the run's id, so a run resumed later (on any instance) continues
    /// the same trace.
    pub fn trace(mut self, context: crate::trace::TraceContext) -> Self {
        self.trace.get_or_insert_default().context = Some(context);
        self
    }

    /// Traces the run under `parent` (a traced tool call or step starting it), with the
    /// parent's tracer when the workflow has none of its own.
    pub(crate) fn traced_under(mut self, parent: Option<&crate::trace::SpanParent>) -> Self {
        if let Some(parent) = parent {
            let trace = self.trace.get_or_insert_default();
            trace.context = Some(parent.context.clone());
            trace.tracer = Some(parent.tracer.clone());
        }
        self
    }

    /// Gives the run's steps this request context.
    pub fn request_context(mut self, context: RequestContext) -> Self {
        self.request_context = context;
        self
    }

    /// Stores the run as `pending` (as Mastra's `createRun` does), so that it is listed, and
    /// can be started by its id, before it starts; a run stored already is left as it is.
    /// Returns the run's stored status. Of two starts of a `pending` run, one runs it and
    /// the other gets [`WorkflowRunError::AlreadyStarted`].
    pub async fn create(&self) -> Result<WorkflowStatus, WorkflowRunError> {
        self.flags.take(RunFlags::UNSTORED);
        let store = &self.workflow.inner.store;
        if let Some(stored) = store.load(self.workflow.id(), &self.run_id).await? {
            return Ok(stored.status);
        }
        let snapshot = WorkflowSnapshot {
            workflow_id: self.workflow.id().to_owned(),
            run_id: self.run_id.to_string(),
            resource_id: self.resource_id.clone(),
            status: WorkflowStatus::Pending,
            input: Arc::default(),
            steps: BTreeMap::new(),
            state: Arc::new(Value::Object(Map::new())),
            position: 0,
            entry_input: Arc::default(),
            step_execution_path: Vec::new(),
            result: None,
            error: None,
            request_context: self.request_context.to_map(),
            created_at_ms: 0,
            updated_at_ms: 0,
            lease_token: None,
        };
        store.save(&snapshot).await?;
        self.flags.set(RunFlags::CREATED);
        Ok(WorkflowStatus::Pending)
    }

    /// A start refused before anything ran (its input invalid, the cluster unreachable)
    /// leaves nothing behind: the `pending` run this handle stored for it is deleted.
    async fn forget_created(&self) {
        if !self.flags.take(RunFlags::CREATED) {
            return;
        }
        let store = &self.workflow.inner.store;
        let pending = store
            .load(self.workflow.id(), &self.run_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|s| s.status == WorkflowStatus::Pending);
        if pending && let Err(error) = store.delete(self.workflow.id(), &self.run_id).await {
            tracing::warn!(run_id = %self.run_id, %error, "deleting a refused run's pending record failed");
        }
    }

    /// The workflow state a fresh run starts with (an empty object by default; Mastra's
    /// `initialState`).
    pub fn initial_state(mut self, state: Value) -> Self {
        self.initial_state = Some(state);
        self
    }

    /// Runs the workflow on `input` to its end (or its first suspension) and returns the
    /// result.
    pub async fn start(&self, input: Value) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.fresh(input, None).await?;
        Ok(engine.run().await)
    }

    /// Runs the workflow on `input`, streaming its events: the run goes on as the stream is
    /// read (on the reader's task), the stream ends with `workflow-finish`, and
    /// [`WorkflowStream::result`] gives the result. Dropping the stream does not stop the run:
    /// it goes on in a task of its own.
    pub async fn stream(&self, input: Value) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = super::events::event_channel();
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
        let path: Vec<&str> = step.into_iter().collect();
        self.resume_at(&path, data).await
    }

    /// [`WorkflowRun::resume`], streamed: a new `workflow-start`, the resumed step's events,
    /// then the rest of the run.
    pub async fn resume_stream(
        &self,
        step: Option<&str>,
        data: Value,
    ) -> Result<WorkflowStream, WorkflowRunError> {
        let path: Vec<&str> = step.into_iter().collect();
        self.resume_at_stream(&path, data).await
    }

    /// [`WorkflowRun::resume`] at a path of step ids (Mastra's `step` as an array): a step
    /// of this workflow, then, through nested workflows, the step inside them that waits
    /// (`["nested", "inner"]`, as the result's `suspended` gives it). An empty path is the
    /// run's only suspended step; a path that stops at a nested workflow, its only suspended
    /// step. The data is checked against the innermost step's resume schema.
    pub async fn resume_at(
        &self,
        path: &[&str],
        data: Value,
    ) -> Result<WorkflowResult, WorkflowRunError> {
        let engine = self.resumed(path, None, data, None).await?;
        Ok(engine.run().await)
    }

    /// [`WorkflowRun::resume_at`], streamed.
    pub async fn resume_at_stream(
        &self,
        path: &[&str],
        data: Value,
    ) -> Result<WorkflowStream, WorkflowRunError> {
        let (sender, receiver) = super::events::event_channel();
        let engine = self.resumed(path, None, data, Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    /// Resumes one suspended item of a foreach step (Mastra's `forEachIndex`): item `index`
    /// of `step` (or of the run's only suspended step) runs with `data`; the items that had
    /// ended keep their outputs, and the other suspended items stay suspended (the step ends
    /// when none is left).
    pub async fn resume_item(
        &self,
        step: Option<&str>,
        index: usize,
        data: Value,
    ) -> Result<WorkflowResult, WorkflowRunError> {
        let path: Vec<&str> = step.into_iter().collect();
        let engine = self.resumed(&path, Some(index), data, None).await?;
        Ok(engine.run().await)
    }

    /// [`WorkflowRun::resume_item`], streamed.
    pub async fn resume_item_stream(
        &self,
        step: Option<&str>,
        index: usize,
        data: Value,
    ) -> Result<WorkflowStream, WorkflowRunError> {
        let path: Vec<&str> = step.into_iter().collect();
        let (sender, receiver) = super::events::event_channel();
        let engine = self.resumed(&path, Some(index), data, Some(sender)).await?;
        Ok(WorkflowStream::spawn(engine, receiver))
    }

    /// The same run with this abort signal (a nested workflow's run stops with its outer
    /// run's).
    /// Aborts the run if it goes on in this process: `true` when it did.
    pub(crate) fn abort_if_live(&self) -> bool {
        match self.workflow.inner.live.signal(&self.run_id) {
            Some(signal) => {
                signal.abort();
                true
            }
            None => false,
        }
    }

    pub(crate) fn with_abort(mut self, abort: AbortSignal) -> Self {
        self.abort = abort;
        self
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

    /// Lists the run as going on in this process, unless it is already.
    pub(super) fn go_live(&self) -> Option<LiveGuard> {
        self.workflow
            .inner
            .live
            .register(Arc::clone(&self.run_id), self.abort.clone())
    }

    /// In a cluster: this instance's lease on the run (`Ok(None)` outside one);
    /// `Err(None)` when another instance holds it.
    pub(super) async fn lease(&self) -> Result<Option<RunLease>, Option<WorkflowRunError>> {
        let Some(cluster) = &self.workflow.inner.cluster else {
            return Ok(None);
        };
        match RunLease::take(
            &cluster.config,
            self.workflow.id(),
            &self.run_id,
            &self.abort,
        )
        .await
        {
            Ok(Some(lease)) => {
                // The fence goes up before the run is read: a driver that lost the run (it
                // was paused past its lease) can no longer write it, so what is read now is
                // what this one continues from.
                let fenced = self
                    .workflow
                    .inner
                    .store
                    .fence(self.workflow.id(), &self.run_id, lease.token())
                    .await;
                match fenced {
                    Ok(()) => Ok(Some(lease)),
                    Err(error) if error.is_fenced() => {
                        tracing::warn!(run_id = %self.run_id, %error, "a workflow run's store is fenced above its new lease");
                        Err(None)
                    }
                    Err(error) => Err(Some(WorkflowRunError::Store(error))),
                }
            }
            Ok(None) => Err(None),
            Err(source) => Err(Some(WorkflowRunError::Cluster {
                run_id: self.run_id.to_string(),
                source: source.into(),
            })),
        }
    }

    /// The engine of a fresh run: the input checked, the id not taken. A start refused
    /// before anything ran leaves no `pending` run of this handle's behind.
    pub(super) async fn fresh(
        &self,
        input: Value,
        events: Option<super::events::EventSender>,
    ) -> Result<Engine, WorkflowRunError> {
        let errors = crate::schema::violations(&self.workflow.inner.input_validator, &input);
        if !errors.is_empty() {
            // Boxed: the run's future keeps no room for what a refused start does.
            Box::pin(self.forget_created()).await;
            return Err(WorkflowRunError::InvalidInput {
                workflow: self.workflow.id().to_owned(),
                errors,
            });
        }
        let store = &self.workflow.inner.store;
        let workflow = self.workflow.id();
        let taken = |status| WorkflowRunError::AlreadyStarted {
            workflow: workflow.to_owned(),
            run_id: self.run_id.to_string(),
            status,
        };
        let live = self.go_live().ok_or(taken(WorkflowStatus::Running))?;
        let lease = match self.lease().await {
            Ok(lease) => lease,
            Err(Some(error @ WorkflowRunError::Cluster { .. })) => {
                Box::pin(self.forget_created()).await;
                return Err(error);
            }
            Err(error) => return Err(error.unwrap_or(taken(WorkflowStatus::Running))),
        };
        let mut resource_id = self.resource_id.clone();
        // Only the first start of a fresh id skips the look-up; any later one looks.
        let unstored = self.flags.take(RunFlags::UNSTORED);
        let stored = if unstored {
            None
        } else {
            store.load(workflow, &self.run_id).await?
        };
        let was_stored = stored.is_some();
        if let Some(stored) = stored {
            if stored.status != WorkflowStatus::Pending {
                return Err(taken(stored.status));
            }
            // A created run: whoever moves it out of `pending` runs it.
            let claimed = store
                .claim(
                    workflow,
                    &self.run_id,
                    WorkflowStatus::Pending,
                    WorkflowStatus::Running,
                )
                .await?;
            if !claimed {
                return Err(taken(WorkflowStatus::Running));
            }
            resource_id = resource_id.or(stored.resource_id);
        }
        // Claimed (or never created): no longer this handle's to forget.
        self.flags.take(RunFlags::CREATED);
        let state = self
            .initial_state
            .clone()
            .unwrap_or_else(|| Value::Object(Map::new()));
        let context = self.request_context.clone();
        let input = Arc::new(input);
        let shared = self.shared(
            Arc::clone(&input),
            BTreeMap::new(),
            Arc::new(state),
            context,
            events,
            live,
        );
        Ok(Engine::new(
            self.workflow.clone(),
            shared,
            resource_id,
            0,
            input,
            Vec::new(),
            None,
        )
        .with_stored(was_stored)
        .with_lease(lease)
        .traced(self.trace.as_deref()))
    }

    /// The engine of a resumed run: the snapshot loaded, the step and data checked, the run
    /// claimed.
    async fn resumed(
        &self,
        path: &[&str],
        item: Option<usize>,
        data: Value,
        events: Option<super::events::EventSender>,
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
        let step = path.first().copied();
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
        let inner: Vec<String> = path.iter().skip(1).map(|s| (*s).to_owned()).collect();
        if let Some(found) = self.workflow.step(&chosen) {
            super::nested::check_resume(found, store, &self.run_id, &inner, &data).await?;
        }
        // A foreach step: the item must be one that waits (or, unnamed, the only one).
        let waiting = foreach_suspended(
            stored
                .steps
                .get(&chosen)
                .and_then(|r| r.suspend_payload.as_ref()),
        );
        if item.is_some() || waiting.len() > 1 {
            let ok = match item {
                Some(index) => waiting.contains_key(&index),
                None => false,
            };
            if !ok {
                return Err(WorkflowRunError::NotSuspendedItem {
                    run_id: self.run_id.to_string(),
                    step: chosen,
                    index: item,
                    suspended: waiting.keys().copied().collect(),
                });
            }
        }
        let lost = || WorkflowRunError::AlreadyClaimed {
            run_id: self.run_id.to_string(),
        };
        let live = self.go_live().ok_or_else(lost)?;
        let lease = self.lease().await.map_err(|e| e.unwrap_or_else(lost))?;
        let claimed = store
            .claim(
                workflow,
                &self.run_id,
                WorkflowStatus::Suspended,
                WorkflowStatus::Running,
            )
            .await?;
        if !claimed {
            return Err(lost());
        }
        let resume = Resume {
            step: Some(chosen),
            data,
            path: inner,
            item,
        };
        Ok(self.continued(stored, Some(resume), events, live, lease))
    }

    /// The engine that continues `stored` from `from` at its position (time travel): `None`
    /// when someone else drives the run (here, through its lease, or a status claimed
    /// first). The snapshot is stored first, `running`, so a crash continues from it.
    pub(crate) async fn take_over(
        &self,
        mut stored: WorkflowSnapshot,
        from: WorkflowStatus,
        resume: Option<Resume>,
        events: Option<super::events::EventSender>,
    ) -> Result<Option<Engine>, WorkflowRunError> {
        let Some(live) = self.go_live() else {
            return Ok(None);
        };
        let lease = match self.lease().await {
            Ok(lease) => lease,
            Err(None) => return Ok(None),
            Err(Some(error)) => return Err(error),
        };
        let store = &self.workflow.inner.store;
        if !store
            .claim(
                self.workflow.id(),
                &self.run_id,
                from,
                WorkflowStatus::Running,
            )
            .await?
        {
            return Ok(None);
        }
        stored.status = WorkflowStatus::Running;
        store.save(&stored).await?;
        Ok(Some(self.continued(stored, resume, events, live, lease)))
    }

    /// The run's workflow.
    pub(crate) fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// The engine that continues the stored run at its position.
    pub(super) fn continued(
        &self,
        stored: WorkflowSnapshot,
        resume: Option<Resume>,
        events: Option<super::events::EventSender>,
        live: LiveGuard,
        lease: Option<RunLease>,
    ) -> Engine {
        let context = self.context_over(stored.request_context);
        let shared = self.shared(
            stored.input,
            stored.steps,
            stored.state,
            context,
            events,
            live,
        );
        Engine::new(
            self.workflow.clone(),
            shared,
            stored.resource_id.or_else(|| self.resource_id.clone()),
            stored.position,
            stored.entry_input,
            stored.step_execution_path,
            resume,
        )
        .with_lease(lease)
        .traced(self.trace.as_deref())
    }

    /// The run's stored request context, with this handle's entries over it.
    fn context_over(&self, stored: BTreeMap<String, Value>) -> RequestContext {
        if stored.is_empty() {
            return self.request_context.clone();
        }
        let context = RequestContext::from(stored);
        for (key, value) in self.request_context.to_map() {
            context.set(key, value);
        }
        context
    }

    fn shared(
        &self,
        input: Arc<Value>,
        results: crate::store::StepResults,
        state: Arc<Value>,
        request_context: RequestContext,
        events: Option<super::events::EventSender>,
        live: LiveGuard,
    ) -> Arc<RunShared> {
        Arc::new(RunShared {
            workflow_id: Arc::clone(&self.workflow.inner.id),
            run_id: Arc::clone(&self.run_id),
            init: input,
            results: RwLock::new(results),
            state: Mutex::new(state),
            request_context,
            abort: self.abort.clone(),
            events,
            usage: Mutex::default(),
            store: Arc::clone(&self.workflow.inner.store),
            trace: std::sync::OnceLock::new(),
            _live: live,
        })
    }
}
