//! What a run reads from and writes to its agent's memory: the recall before the first step,
//! every complete message after, the partial text of an aborted step, late messages.

use super::AgentRun;
use crate::definition::AgentError;
use crate::lease::Fence;
use crate::memory::{AgentMemory, MemoryError, MemoryScope, Persist};
use crate::message::{Message, Part, Role};
use crate::run::{GenerateResult, RunStatus};
use crate::trace::{ActiveSpan, SpanType};

/// Stores `messages` in `scope`, under `fence` when the run has one.
async fn store_messages(
    memory: &dyn AgentMemory,
    scope: &MemoryScope,
    messages: &[Message],
    fence: Option<Fence<'_>>,
) -> Result<(), MemoryError> {
    let how = Persist::complete().fenced(fence);
    memory.persist(scope, messages, how).await
}

impl AgentRun {
    /// What the run's writes carry in a cluster: its run and its lease's token.
    fn fence(&self) -> Option<Fence<'_>> {
        self.state.lease_token.map(|token| Fence {
            run_id: &self.run_id,
            token,
        })
    }

    /// Stores what an aborted step had produced (its text and reasoning so far, no unfinished
    /// tool calls), marked aborted: what the user saw is not lost.
    pub(super) async fn keep_partial(&mut self, message_id: &str, text: &str, reasoning: &str) {
        if text.is_empty() && reasoning.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return;
        };
        if !self.state.memory_loaded {
            return;
        }
        let mut parts = Vec::with_capacity(2);
        if !reasoning.is_empty() {
            parts.push(Part::Reasoning {
                text: reasoning.to_owned(),
            });
        }
        if !text.is_empty() {
            parts.push(Part::Text {
                text: text.to_owned(),
            });
        }
        let partial = Message {
            id: message_id.to_owned(),
            role: Role::Assistant,
            parts,
        };
        let how = Persist::complete().aborted().fenced(self.fence());
        let stored = memory
            .persist(&scope, std::slice::from_ref(&partial), how)
            .await;
        if let Err(error) = stored {
            tracing::warn!(run_id = %self.run_id, %error, "storing the aborted step's partial text failed");
        }
    }

    /// On an abort during the tools: the step's text (its tool calls never got results, so
    /// they are left out), stored marked aborted.
    pub(super) async fn keep_partial_step(&mut self) {
        let (RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. }) =
            &self.state.status
        else {
            return;
        };
        let (id, text, reasoning) = (
            step.message_id.clone(),
            step.text.clone(),
            step.reasoning.clone(),
        );
        self.keep_partial(&id, &text, &reasoning).await;
    }

    /// A `memory_operation` span under the run's (when traced): `recall`, `persist` or
    /// `after run`.
    fn memory_span(&self, operation: &str, scope: &MemoryScope) -> Option<ActiveSpan> {
        let run = self.span.as_ref()?;
        let mut span = run.child(SpanType::MemoryOperation, format!("memory: '{operation}'"))?;
        span.attribute("operation", operation);
        span.scope(
            &self.state.run_id,
            Some(&scope.thread_id),
            Some(&scope.resource_id),
        );
        Some(span)
    }

    pub(super) fn memory_scope(&self) -> Option<MemoryScope> {
        let settings = &self.state.settings;
        Some(MemoryScope {
            thread_id: settings.thread_id.clone()?,
            resource_id: settings.resource_id.clone()?,
        })
    }

    /// Before the first step: loads the thread's context and stores the input.
    pub(super) async fn load_memory(&mut self) -> Result<(), AgentError> {
        if self.state.memory_loaded {
            return Ok(());
        }
        let Some(scope) = self.memory_scope() else {
            return Ok(());
        };
        let Some(memory) = self.agent.inner.memory.clone() else {
            tracing::warn!(
                run_id = %self.run_id,
                agent = %self.agent.id(),
                "the run names a thread but the agent has no memory; nothing is stored"
            );
            self.state.memory_loaded = true;
            return Ok(());
        };
        let span = self.memory_span("recall", &scope);
        let recalled = memory
            .recall(&scope, self.state.input_to_store(), &self.request_context)
            .await;
        let recalled = match (recalled, span) {
            (Ok(recalled), Some(mut span)) => {
                span.attribute("messages", recalled.history.len());
                span.attribute("inputStored", recalled.input_stored);
                span.end();
                recalled
            }
            (Ok(recalled), None) => recalled,
            (Err(source), span) => {
                if let Some(span) = span {
                    span.fail(source.to_string(), Some("memory"));
                }
                return Err(self.memory_error(source));
            }
        };
        self.state
            .apply_recalled(recalled.system, recalled.history, recalled.input_stored);
        self.persist().await
    }

    /// Stores the complete messages memory has not stored yet.
    pub(super) async fn persist(&mut self) -> Result<(), AgentError> {
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return Ok(());
        };
        if !self.state.memory_loaded || self.state.unpersisted().is_empty() {
            return Ok(());
        }
        let span = self.memory_span("persist", &scope);
        let count = self.state.unpersisted().len();
        let stored = store_messages(&*memory, &scope, self.state.unpersisted(), self.fence()).await;
        match (stored, span) {
            (Ok(()), span) => {
                if let Some(mut span) = span {
                    span.attribute("messages", count);
                    span.end();
                }
            }
            (Err(source), span) => {
                if let Some(span) = span {
                    span.fail(source.to_string(), Some("memory"));
                }
                return Err(self.memory_error(source));
            }
        }
        self.state.persisted = self.state.messages.len();
        Ok(())
    }

    pub(super) fn memory_error(&self, source: crate::memory::MemoryError) -> AgentError {
        if source.is_fenced() {
            return AgentError::RunTakenOver {
                run_id: self.state.run_id.clone(),
            };
        }
        AgentError::Memory {
            run_id: self.state.run_id.clone(),
            source,
        }
    }

    pub(super) fn notify_memory_finished(&self) {
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            return;
        };
        if !memory.wants_finished_runs() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let result = GenerateResult::from_state(&self.state);
        // Its spans (an observer's call...) hang under one of the run's.
        let span = self.memory_span("after run", &scope);
        // Background work (titles...) must not delay the response.
        handle.spawn(async move {
            match span {
                Some(span) => {
                    let finished = memory.run_finished(&scope, &result);
                    match span.as_parent() {
                        Some(parent) => parent.scope(finished).await,
                        None => finished.await,
                    }
                    span.end();
                }
                None => memory.run_finished(&scope, &result).await,
            }
        });
    }

    /// Feedback from delegation hooks goes to the thread, for the next turn.
    pub(super) async fn save_delegation_feedback(&mut self) {
        let Some(feedback) = self.delegation.as_ref().map(|d| d.take_feedback()) else {
            return;
        };
        if feedback.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            tracing::warn!(run_id = %self.run_id, "delegation feedback needs a run with memory; it was not saved");
            return;
        };
        let messages: Vec<Message> = feedback.into_iter().map(Message::system).collect();
        if let Err(error) = store_messages(&*memory, &scope, &messages, self.fence()).await {
            tracing::warn!(run_id = %self.run_id, %error, "saving delegation feedback failed");
        }
    }

    /// Lets the next run on the thread go. Messages delivered too late for this run are stored
    /// in the thread, never dropped.
    pub(super) async fn release_thread(&mut self) {
        let Some(mut lease) = self.lease.take() else {
            return;
        };
        let late = lease.close_inbox();
        lease.release_cluster_hold().await;
        if late.is_empty() {
            return;
        }
        let (Some(memory), Some(scope)) = (self.agent.inner.memory.clone(), self.memory_scope())
        else {
            tracing::warn!(run_id = %self.run_id, count = late.len(), "messages delivered to a run without memory could not be stored");
            return;
        };
        if let Err(error) = store_messages(&*memory, &scope, &late, self.fence()).await {
            tracing::warn!(run_id = %self.run_id, %error, "storing messages delivered after the run ended failed");
        }
    }
}
