//! Between steps and at the end: the hooks' steering, messages delivered to the thread,
//! background results, snapshots and the wrap-up of a finished run.

use std::sync::Arc;

use serde_json::Value;

use super::{AgentRun, now_ms};
use crate::definition::AgentError;
use crate::event::{BackgroundTaskPayload, EventKind, FinishOutput, FinishPayload, StepResultInfo};
use crate::message::Message;
use crate::model::FinishReason;
use crate::run::{
    IterationContext, RunStatus, Steer, StructuredOutcome, TaskContext, structured_outcome,
};
use crate::runtime::background::{BackgroundDone, BackgroundRuntime};
use crate::runtime::registry::Lease;
use crate::store::{RunPhase, RunStoreError};

impl AgentRun {
    /// `is_task_complete` and `on_iteration_complete` after an iteration: `Some(true)` when
    /// they send the loop on, `None` when the loop goes its own way (a hook may also have ended
    /// it). The hooks are asked here; what their answers do is the machine's
    /// ([`crate::run::RunState::steer_completion`], [`crate::run::RunState::steer_iteration`]).
    pub(super) async fn steer(&mut self) -> Result<Option<bool>, AgentError> {
        if self.iteration_hook.is_none() && self.task_completion.is_none() {
            return Ok(None);
        }
        if self.state.tripwire.is_some() {
            // A processor stopped the run: nothing to steer.
            return Ok(None);
        }
        let Some(step) = self.state.steps.last().cloned() else {
            return Ok(None);
        };
        if self.last_turn {
            return Ok(None);
        }
        let is_final = self.state.ended_with_answer();
        if is_final && let Some(completion) = self.task_completion.clone() {
            let task = TaskContext {
                task: self.state.task_text(),
                answer: step.text.clone(),
                iteration: self.state.iteration(),
            };
            let (complete, scores) = completion.evaluate(&task).await;
            let steer = self.state.steer_completion(complete, &scores);
            if let Some(go_on) = self.apply_steer(steer).await? {
                return Ok(Some(go_on));
            }
        }
        let Some(hook) = self.iteration_hook.clone() else {
            return Ok(None);
        };
        let context = IterationContext {
            iteration: self.state.iteration(),
            max_iterations: self.state.max_steps,
            finish_reason: step.finish_reason,
            text: step.text.clone(),
            is_final,
        };
        match (hook.0)(context).await {
            Ok(decision) => {
                let steer = self.state.steer_iteration(decision);
                self.apply_steer(steer).await
            }
            Err(error) => {
                tracing::warn!(run_id = %self.run_id, %error, "on_iteration_complete failed; the loop goes on");
                Ok(None)
            }
        }
    }

    /// Does what a hook's decision asks: `Some(true)` when the run was reopened.
    pub(super) async fn apply_steer(&mut self, steer: Steer) -> Result<Option<bool>, AgentError> {
        match steer {
            Steer::Proceed => return Ok(None),
            Steer::Feedback(feedback) => self.add_feedback(&feedback).await?,
            Steer::Reopen(feedback) => {
                self.add_feedback(&feedback).await?;
                self.state.reopen();
                return Ok(Some(true));
            }
            Steer::LastTurn(feedback) => {
                // One last turn to answer with the feedback in mind.
                self.add_feedback(&feedback).await?;
                self.last_turn = true;
            }
            Steer::Stop => self.state.end(FinishReason::Stop),
        }
        Ok(None)
    }

    /// Adds feedback to the conversation, as a user message, and stores it.
    pub(super) async fn add_feedback(&mut self, feedback: &str) -> Result<(), AgentError> {
        self.state.add_feedback(feedback);
        self.persist().await
    }

    /// Adds the messages delivered to the thread since the last step to the conversation, and
    /// stores them.
    pub(super) async fn take_delivered(&mut self) -> Result<(), AgentError> {
        let Some(delivered) = self.lease.as_ref().map(Lease::take_delivered) else {
            return Ok(());
        };
        if delivered.is_empty() {
            return Ok(());
        }
        self.state.messages.extend(delivered);
        self.persist().await
    }

    /// At a normal end: messages delivered meanwhile get an answer in another step (within
    /// `max_steps`); otherwise the inbox closes, so later messages find the thread idle.
    pub(super) async fn continue_for_delivered(&mut self) -> Result<bool, AgentError> {
        let Some(lease) = &self.lease else {
            return Ok(false);
        };
        if !self.state.may_reopen() {
            return Ok(false);
        }
        match lease.close_if_empty() {
            Ok(()) => Ok(false),
            Err(delivered) => {
                self.state.messages.extend(delivered);
                self.state.reopen();
                self.persist().await?;
                Ok(true)
            }
        }
    }

    /// With `until_idle`, at a normal end: waits for the next background task to end, adds
    /// its result to the conversation, and answers it in another step (while steps remain).
    pub(super) async fn await_background(&mut self) -> Result<bool, AgentError> {
        let Some(runtime) = self.background.clone() else {
            return Ok(false);
        };
        if !self.until_idle || !self.state.ended_with_answer() {
            return Ok(false);
        }
        while runtime.outstanding() > 0 {
            let abort = self.abort.clone();
            let done = tokio::select! {
                biased;
                _ = abort.aborted() => {
                    let e = self.aborted();
                    return Err(self.fail(e).await);
                }
                done = runtime.next() => done,
            };
            let Some(done) = done else { break };
            self.take_background_result(done).await?;
            if self.state.may_reopen() {
                self.state.reopen();
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Background results that are in, before a model call.
    pub(super) async fn take_background_ready(&mut self) -> Result<(), AgentError> {
        let Some(runtime) = self.background.clone() else {
            return Ok(());
        };
        for done in runtime.ready().await {
            self.take_background_result(done).await?;
        }
        Ok(())
    }

    /// Reports an ended background task on the stream and puts its result in the
    /// conversation (stored with the thread).
    pub(super) async fn take_background_result(
        &mut self,
        done: BackgroundDone,
    ) -> Result<(), AgentError> {
        emit!(self.sink, self.run_id, {
            let payload = BackgroundTaskPayload {
                task_id: done.task_id.clone(),
                tool_name: done.tool_name.clone(),
                tool_call_id: done.tool_call_id.clone(),
                run_id: self.state.run_id.clone(),
                agent_id: self.agent.id().to_owned(),
                result: Value::String(done.text.clone()),
                is_error: done.is_error,
                completed_at: now_ms(),
            };
            if done.is_error {
                EventKind::BackgroundTaskFailed(payload)
            } else {
                EventKind::BackgroundTaskCompleted(payload)
            }
        });
        self.state.messages.push(Message::system(done.message()));
        match self.persist().await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e).await),
        }
    }

    /// The run stops reading its background tasks: results already in and later ones go to
    /// its thread.
    pub(super) async fn close_background(&mut self) {
        let Some(runtime) = self.background.take() else {
            return;
        };
        for done in runtime.close().await {
            crate::runtime::background::deliver_late(&runtime, done).await;
        }
    }

    /// The run's background runtime, created with its first background task.
    pub(super) fn background_runtime(&mut self) -> Arc<BackgroundRuntime> {
        if let Some(runtime) = &self.background {
            return Arc::clone(runtime);
        }
        let fallback = self.memory_scope().map(|scope| (self.agent.clone(), scope));
        let runtime = Arc::new(BackgroundRuntime::new(
            Arc::clone(&self.agent.runtime.runs.background),
            fallback,
        ));
        self.background = Some(Arc::clone(&runtime));
        runtime
    }

    pub(super) async fn finish(&mut self) -> Result<(), AgentError> {
        let RunStatus::Finished { reason, .. } = self.state.status else {
            return Ok(());
        };
        let text = self.state.last_text();
        let spec = self.state.settings.structured_output.as_ref();
        let object = match structured_outcome(spec, reason, &text) {
            StructuredOutcome::None => None,
            StructuredOutcome::Object(value) => Some(value),
            StructuredOutcome::Warned(message) => {
                tracing::warn!(run_id = %self.run_id, %message, "structured output invalid; finishing without an object");
                None
            }
            StructuredOutcome::Failed(message) => {
                let e = AgentError::StructuredOutput {
                    run_id: self.state.run_id.clone(),
                    message,
                    text,
                };
                return Err(self.fail(e).await);
            }
        };
        self.state.status = RunStatus::Finished {
            reason,
            object: object.clone(),
        };
        // Kept pending before the run's end is stored: a restart between the two still
        // scores it. Boxed: only runs of agents with scorers pay for its future.
        let sampled = if self.agent.inner.scorers.is_empty() {
            None
        } else {
            Box::pin(self.sample_live(reason)).await
        };
        self.close_snapshot().await;
        self.save_delegation_feedback().await;
        if reason != FinishReason::Tripwire {
            self.notify_memory_finished();
        }
        if let Some(sampled) = sampled {
            sampled.start();
        }
        emit!(
            self.sink,
            self.run_id,
            EventKind::Finish(FinishPayload {
                step_result: StepResultInfo {
                    reason,
                    is_continued: false,
                },
                output: FinishOutput {
                    text,
                    usage: self.state.usage,
                    object,
                },
                metadata: self.run_metadata(),
            })
        );
        Ok(())
    }
    /// Hands the finished run to the agent's live scorers' sampling (a run that ended
    /// without an answer is not eligible): the scorings chosen, kept pending.
    async fn sample_live(
        &self,
        reason: crate::model::FinishReason,
    ) -> Option<crate::eval::live::Sampled> {
        use crate::eval::{AgentInput, ScorerInput, ScorerOutput, ScorerRun};
        use crate::message::Role;
        use crate::model::FinishReason as R;
        if !matches!(
            reason,
            R::Stop | R::Length | R::MaxSteps | R::ContentFilter | R::Other | R::Unknown
        ) {
            return None;
        }
        let state = &self.state;
        let given = state.messages.get(..state.input_len).unwrap_or_default();
        // The input is the trailing user messages; what comes before them was remembered.
        let split = given
            .iter()
            .rposition(|m| m.role != Role::User)
            .map_or(0, |i| i + 1);
        let mut system: Vec<String> = self.system.clone().flatten().into_iter().collect();
        system.extend(state.memory_system.iter().cloned());
        let mut run = ScorerRun::new(
            ScorerInput::Agent(AgentInput {
                input_messages: given.get(split..).unwrap_or_default().to_vec(),
                remembered_messages: given.get(..split).unwrap_or_default().to_vec(),
                system_messages: system,
            }),
            ScorerOutput::Messages(state.response_messages().to_vec()),
        )
        .run_id(state.run_id.clone());
        if let Some(trace) = &state.trace {
            run = run.trace(
                trace.trace_id.clone(),
                self.span.as_ref().map(|s| s.span_id()),
            );
        }
        let settings = &state.settings;
        crate::eval::live::sample_finished(
            &self.agent.inner.scorers,
            crate::eval::live::FinishedRun {
                entity_type: "AGENT",
                entity_id: self.agent.id().to_owned(),
                run,
                resource_id: settings.resource_id.clone(),
                thread_id: settings.thread_id.clone(),
            },
            std::sync::Arc::clone(&self.agent.runtime.stores.scores),
            std::sync::Arc::clone(&self.agent.runtime.scoring),
        )
        .await
    }

    /// Saves the run's snapshot: created on the first save, then a compare-and-set on the
    /// version this driver last saw.
    pub(super) async fn save_snapshot(&mut self, phase: RunPhase) -> Result<(), AgentError> {
        self.state.request_context = self.request_context.to_map();
        let version = self
            .store
            .save(&self.state, phase, self.snapshot_version)
            .await
            .map_err(|source| match source {
                RunStoreError::Fenced { run_id, .. } => AgentError::RunTakenOver { run_id },
                source => AgentError::RunStore {
                    run_id: self.state.run_id.clone(),
                    source,
                },
            })?;
        self.snapshot_version = Some(version);
        Ok(())
    }

    /// A run continued from a snapshot records its end there, so it is no longer listed as
    /// suspended. A failure to do so is logged: the run's own outcome stands.
    pub(super) async fn close_snapshot(&mut self) {
        if self.snapshot_version.is_none() {
            return;
        }
        let phase = self.state.phase();
        if let Err(error) = self.save_snapshot(phase).await {
            tracing::warn!(run_id = %self.run_id, %error, "could not mark the run's snapshot finished");
        }
    }
}
