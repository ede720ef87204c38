//! A run's life around its steps: registered as in progress, its chosen id checked, owned in
//! a cluster, its thread taken before the first step; the thread and the leases given up
//! after the last.

use std::sync::Arc;

use super::AgentRun;
use crate::definition::{AgentError, BusyThread};
use crate::event::{ErrorPayload, EventKind};
use crate::model::FinishReason;
use crate::pubsub::thread_topic;
use crate::run::GenerateResult;
use crate::runtime::registry::{Registered, ThreadKey};
use crate::sink::Tap;
use crate::store::RunPhase;
use crate::trace::SpanType;

/// A finish reason as its wire name (`stop`, `tool-calls`...).
pub(super) fn finish_reason(reason: FinishReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl AgentRun {
    /// Runs to the end and returns the result.
    ///
    /// A run on a thread first takes the thread's lease: runs on one thread go one at a time,
    /// in the order they asked (or fail at once, with [`BusyThread::Fail`]). While it holds the
    /// lease, the run takes the messages delivered to the thread and publishes its events to
    /// the thread's subscribers.
    pub fn run(mut self) -> impl Future<Output = Result<GenerateResult, AgentError>> + Send {
        // Not an `async fn` taking `self`: its future would hold the run twice (the argument
        // and the local it is moved into) for as long as the run lasts. The block owns the
        // run once and lends it.
        let registered = self.register();
        async move {
            match registered {
                Ok(registered) => self.run_registered(registered).await,
                Err(e) => Err(self.refuse(e).await),
            }
        }
    }

    /// Records the run as in progress (so an abort of the run or of its thread reaches it)
    /// from now until the guard is dropped; refused when a run of the same id is in
    /// progress.
    pub(super) fn register(&self) -> Result<Registered, AgentError> {
        self.agent
            .runtime
            .runs
            .register(
                &self.run_id,
                self.abort.clone(),
                self.pause.clone(),
                self.thread_key(),
                self.state.settings.resource_id.clone(),
            )
            .map_err(|owner| AgentError::RunIdTaken {
                run_id: self.state.run_id.clone(),
                live: true,
                owner,
            })
    }

    /// A new run whose caller chose its id must not take a stored run's: it would overwrite
    /// that run's snapshot.
    pub(super) async fn check_chosen_id(&mut self) -> Result<(), AgentError> {
        if !self.chosen_id {
            return Ok(());
        }
        let stored =
            self.store
                .load(&self.run_id)
                .await
                .map_err(|source| AgentError::RunStore {
                    run_id: self.state.run_id.clone(),
                    source,
                })?;
        if let Some(stored) = stored {
            return Err(AgentError::RunIdTaken {
                run_id: self.state.run_id.clone(),
                live: false,
                owner: stored.state.settings.resource_id,
            });
        }
        self.chosen_id = false;
        Ok(())
    }

    /// Ends a run that never started (its id is taken): an `error` event, and nothing
    /// stored, so the run that holds the id keeps its snapshot and its messages.
    async fn refuse(&mut self, error: AgentError) -> AgentError {
        self.emit_error(&error).await;
        error
    }

    /// The `error` event of `error`.
    pub(super) async fn emit_error(&self, error: &AgentError) {
        emit!(
            self.sink,
            self.run_id,
            EventKind::Error(ErrorPayload {
                error: error.detail(),
                kind: error.kind().into(),
            })
        );
    }

    // Each phase is a future of its own, awaited once: what one holds (an error, the
    // outcome) then shares its room in the run's future with the steps', instead of taking
    // room of its own beside them in every run's future.
    pub(super) async fn run_registered(
        &mut self,
        _registered: Registered,
    ) -> Result<GenerateResult, AgentError> {
        self.start_span();
        if let Err(e) = self.begin().await {
            self.end_span(Err(&e));
            return Err(e);
        }
        // Boxed: the outcome (264 bytes) waits across `end`, and a value held across two
        // awaits takes room of its own in the run's future.
        let outcome = Box::new(self.drive().await);
        self.end().await;
        self.end_span(outcome.as_ref().as_ref());
        *outcome
    }

    /// Starts the span of this drive of the run, when the instance traces: in the run's trace
    /// (a continued run stays in the one it started in), named `agent run: '<id>'`
    /// (`(resumed)` when the run had started before).
    /// What `start` and `finish` say beside their payload: the run's trace.
    pub(super) fn run_metadata(&self) -> Option<crate::event::RunMetadata> {
        // Only a traced drive of the run has a span (a sampled-out trace has none).
        let trace_id = self.span.as_ref()?.trace_id();
        Some(crate::event::RunMetadata { trace_id })
    }

    fn start_span(&mut self) {
        let Some(tracer) = &self.tracer else {
            return;
        };
        let resumed = if self.state.started { " (resumed)" } else { "" };
        let named = self
            .state
            .tracing
            .as_ref()
            .and_then(|t| t.root_span_name.clone());
        let name = match named {
            Some(name) => format!("{name}{resumed}"),
            None => format!("agent run: '{}'{resumed}", self.agent.id()),
        };
        let parent = self.state.trace.clone();
        let Some(mut span) = tracer.start(parent.as_ref(), SpanType::AgentRun, name) else {
            return;
        };
        span.entity("agent", self.agent.id(), Some(self.agent.name()));
        if let Some(options) = &self.state.tracing {
            span.caller(options.user_id.as_deref(), &options.metadata, &options.tags);
        }
        let settings = &self.state.settings;
        span.scope(
            &self.state.run_id,
            settings.thread_id.as_deref(),
            settings.resource_id.as_deref(),
        );
        if let Some(input) = self
            .state
            .messages
            .get(self.state.input_len.saturating_sub(1))
        {
            span.input(input.text());
        }
        span.attribute("maxSteps", self.state.max_steps);
        if resumed.is_empty() {
            span.attribute_json("availableTools", &self.agent.inner.tools.names());
        }
        // A run without a parent is its trace's root: its later drives (a resume, a takeover)
        // hang under this first one.
        if self
            .state
            .trace
            .as_ref()
            .is_none_or(|t| t.parent_span_id.is_none())
        {
            self.state.trace = Some(crate::trace::TraceContext {
                trace_id: span.trace_id(),
                parent_span_id: Some(span.span_id()),
            });
        }
        self.span = Some(span);
    }

    /// Ends the drive's span with the run's outcome.
    fn end_span(&mut self, outcome: Result<&GenerateResult, &AgentError>) {
        let Some(mut span) = self.span.take() else {
            return;
        };
        match outcome {
            Ok(result) => {
                span.output(result.text.clone());
                span.attribute("finishReason", finish_reason(result.finish_reason));
                span.attribute("steps", result.steps.len());
                span.end();
            }
            Err(error) => {
                if let Some(tripwire) = error.tripwire() {
                    span.attribute(
                        "tripwire",
                        serde_json::to_value(tripwire).unwrap_or_default(),
                    );
                }
                span.fail(error.to_string(), Some(error.kind()))
            }
        }
    }

    /// Before the first step: the chosen id checked, the run owned (in a cluster), the thread
    /// taken. An error is reported (and the run failed) before it is returned.
    async fn begin(&mut self) -> Result<(), AgentError> {
        if let Err(e) = self.check_chosen_id().await {
            return Err(self.refuse(e).await);
        }
        if self.agent.runtime.runs.cluster.is_some() {
            // Boxed: single-process runs never await it.
            if let Err(e) = Box::pin(self.own_run()).await {
                return Err(self.refuse(e).await);
            }
        }
        if let Err(e) = self.take_thread().await {
            let error = self.fail(e).await;
            self.disown_run().await;
            return Err(error);
        }
        Ok(())
    }

    /// After the last step: background tasks closed, the thread and the run's lease given up.
    async fn end(&mut self) {
        if self.background.is_some() {
            // Boxed: inline, what it awaits would take room in every run's future.
            Box::pin(self.close_background()).await;
        }
        self.release_thread().await;
        self.disown_run().await;
    }

    /// A run on a thread publishes its events to the thread's subscribers, and waits for the
    /// thread's lease (or fails at once when the thread is busy and it may not wait).
    async fn take_thread(&mut self) -> Result<(), AgentError> {
        let Some(thread) = self.thread_key() else {
            return Ok(());
        };
        let runs = Arc::clone(&self.agent.runtime.runs);
        self.sink = self.sink.clone().with_tap(Tap {
            pubsub: Arc::clone(&runs.pubsub),
            topic: thread_topic(&thread.resource_id, &thread.thread_id).into(),
        });
        if self.busy == BusyThread::Fail {
            let active = runs
                .active_run_anywhere(&thread)
                .await
                .map_err(|source| self.cluster_error(source))?;
            if let Some(active_run_id) = active {
                return Err(AgentError::ThreadBusy {
                    run_id: self.state.run_id.clone(),
                    thread_id: thread.thread_id.clone(),
                    active_run_id,
                });
            }
        }
        if runs.cluster.is_some()
            && self.store.is_durable()
            && let Some(recovery) = runs.thread_recovery.get()
        {
            // A run a dead instance left on the thread goes first, as it would have.
            recovery.recover(&thread, &self.run_id).await;
        }
        let abort = self.abort.clone();
        let lease = tokio::select! {
            biased;
            () = abort.aborted() => None,
            lease = runs.lease(thread, &self.run_id) => Some(lease),
        };
        let lease = lease.ok_or_else(|| self.aborted())?;
        self.lease = Some(lease.map_err(|source| self.cluster_error(source))?);
        Ok(())
    }

    fn cluster_error(&self, source: crate::cluster::ClusterError) -> AgentError {
        AgentError::Cluster {
            run_id: self.state.run_id.clone(),
            source,
        }
    }

    /// In a cluster, takes the run's lease (unless a decision or a resume took it already):
    /// refused when another live instance drives the run. Every snapshot and message the run
    /// writes from now on carries the lease's token, and a snapshot is saved after every step
    /// so another instance can continue the run should this one die.
    async fn own_run(&mut self) -> Result<(), AgentError> {
        let Some(cluster) = self.agent.runtime.runs.cluster.clone() else {
            return Ok(());
        };
        if self.hold.is_none() {
            let key = crate::cluster::run_lease_key(&self.run_id);
            let hold = cluster
                .acquire(key.clone(), cluster.instance())
                .await
                .map_err(|source| self.cluster_error(source))?;
            let Some(hold) = hold else {
                let instance = match cluster.config.leases.holder(&key).await {
                    Ok(Some(lease)) => lease.holder,
                    _ => "unknown".to_owned(),
                };
                return Err(AgentError::RunDrivenElsewhere {
                    run_id: self.state.run_id.clone(),
                    instance,
                });
            };
            self.hold = Some(hold);
        }
        self.state.lease_token = self.hold.as_ref().map(|h| h.token());
        self.durable_steps = self.store.is_durable();
        Ok(())
    }

    /// Gives the run's lease up (the run ended, stopped or paused).
    async fn disown_run(&mut self) {
        if let Some(hold) = self.hold.take() {
            hold.release().await;
        }
    }

    pub(super) async fn drive(&mut self) -> Result<GenerateResult, AgentError> {
        if self.durable_steps && self.snapshot_version.is_none() {
            // A delegated run exists in the store from its start, so the parent's snapshot
            // can always be followed to it.
            or_fail!(self, self.save_snapshot(RunPhase::Running));
        }
        while self.step().await? {}
        if let Some(tripwire) = &self.state.tripwire
            && self.state.is_finished()
        {
            // A processor stopped the run: a refusal, never a result to mistake for an answer.
            return Err(AgentError::Tripwire {
                run_id: self.state.run_id.clone(),
                tripwire: Box::new(tripwire.clone()),
            });
        }
        // The run is over: its steps and messages move into the result.
        let mut result = GenerateResult::take_from_state(&mut self.state);
        if self.paused {
            result.finish_reason = FinishReason::Paused;
        }
        Ok(result)
    }

    fn thread_key(&self) -> Option<ThreadKey> {
        let settings = &self.state.settings;
        Some(ThreadKey {
            resource_id: settings.resource_id.clone()?,
            thread_id: settings.thread_id.clone()?,
        })
    }
}
