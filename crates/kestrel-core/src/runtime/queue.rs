//! Queued messages: [`super::ThreadHandle::queue`] holds a message for the thread's next run,
//! after the active one (or at once on an idle thread), in order, in the
//! [`crate::store::MessageQueue`] of the agent's stores (durable with a storage), and tells
//! the thread's watchers.
//!
//! One drain per thread and process takes the queue in order: it starts the oldest message's
//! run (which waits for the thread's lease, so it runs after the active run), removes the
//! message from the queue once the run has stored it in the thread (the run's first event),
//! waits for the run to end, and goes on with the next. A message is never lost: it is in the
//! queue until the thread holds it. A process that dies between the two may run a message
//! once more after a restart ([`crate::kestrel::Kestrel::drain_message_queues`]); the message
//! itself is stored once (by its id).

use std::collections::HashSet;
use std::sync::Mutex;

use futures::StreamExt;

use super::Agent;
use super::registry::ThreadKey;
use super::threads::ThreadError;
use crate::event::{Event, EventKind, EventSource, MessageQueuedPayload, QueuedMessagePayload};
use crate::memory::MemoryScope;
use crate::message::Message;
use crate::pubsub::thread_topic;
use crate::store::{QueueError, QueuedMessage, SharedMessageQueue};

/// The most messages one thread's queue holds.
pub const MAX_QUEUED_PER_THREAD: usize = 100;

/// What queuing a message ([`super::ThreadHandle::queue`]) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The queued message's id (also its id in the thread once a run takes it).
    pub id: String,
    /// The run that will carry it.
    pub run_id: String,
    /// The thread.
    pub thread_id: String,
    /// Its place in the queue when it was queued (0: next).
    pub position: usize,
}

/// The threads whose queue a drain of this process is taking.
#[derive(Debug, Default)]
pub(crate) struct Drains {
    threads: Mutex<HashSet<ThreadKey>>,
}

impl Drains {
    /// Claims the thread's drain; `false` when one is running.
    fn claim(&self, thread: &ThreadKey) -> bool {
        self.lock().insert(thread.clone())
    }

    fn release(&self, thread: &ThreadKey) {
        self.lock().remove(thread);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<ThreadKey>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn thread_key(scope: &MemoryScope) -> ThreadKey {
    ThreadKey {
        resource_id: scope.resource_id.clone(),
        thread_id: scope.thread_id.clone(),
    }
}

impl Agent {
    /// The queue of the agent's runtime; a queue belongs to a thread, so the agent needs
    /// memory too.
    fn message_queue(&self) -> Result<SharedMessageQueue, ThreadError> {
        if self.inner.memory.is_none() {
            return Err(ThreadError::NoMemory {
                agent: self.id().to_owned(),
            });
        }
        self.runtime
            .stores
            .queue
            .clone()
            .ok_or_else(|| ThreadError::NoQueue {
                agent: self.id().to_owned(),
            })
    }

    /// Queues a user message for the thread `scope` names (see
    /// [`super::ThreadHandle::queue`]); the thread's watchers see `message-queued`, then
    /// `queued-message-started` and the run's events.
    pub(super) async fn enqueue(
        &self,
        text: String,
        scope: MemoryScope,
    ) -> Result<Queued, ThreadError> {
        let queue = self.message_queue()?;
        // Another resource's thread is refused here; a missing one has no queue yet.
        let waiting = queue.list(&scope).await?;
        // The queue belongs to a thread: make sure it exists.
        if let Some(memory) = &self.inner.memory {
            memory
                .prepare_thread(&scope, serde_json::Map::new())
                .await?;
        }
        if waiting.len() >= MAX_QUEUED_PER_THREAD {
            return Err(QueueError::Full {
                thread_id: scope.thread_id,
                limit: MAX_QUEUED_PER_THREAD,
            }
            .into());
        }
        let message = Message::user(text);
        let id = message.id.clone();
        let run_id = crate::id::new_id();
        let text = message.text();
        queue
            .push(QueuedMessage {
                id: id.clone(),
                run_id: run_id.clone(),
                agent_id: self.id().to_owned(),
                scope: scope.clone(),
                message,
            })
            .await?;
        let position = waiting.len();
        self.tell_watchers(
            &scope,
            &run_id,
            EventSource::User,
            EventKind::MessageQueued(MessageQueuedPayload {
                id: id.clone(),
                thread_id: scope.thread_id.clone(),
                resource_id: scope.resource_id.clone(),
                text,
                position,
            }),
        )
        .await;
        self.drain(queue, scope.clone());
        Ok(Queued {
            id,
            run_id,
            thread_id: scope.thread_id,
            position,
        })
    }

    /// The thread's queued messages, oldest first.
    pub(super) async fn list_queued(
        &self,
        scope: &MemoryScope,
    ) -> Result<Vec<QueuedMessage>, ThreadError> {
        Ok(self.message_queue()?.list(scope).await?)
    }

    /// Cancels the thread's queued messages with these ids (all of them with `None`) that no
    /// run took yet; returns those cancelled. Watchers see `queued-message-cancelled`.
    pub(super) async fn cancel_queued(
        &self,
        scope: MemoryScope,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>, ThreadError> {
        let cancelled = self.message_queue()?.cancel(&scope, ids).await?;
        for message in &cancelled {
            self.tell_watchers(
                &scope,
                &message.run_id,
                EventSource::User,
                EventKind::QueuedMessageCancelled(QueuedMessagePayload {
                    id: message.id.clone(),
                    thread_id: scope.thread_id.clone(),
                    resource_id: scope.resource_id.clone(),
                }),
            )
            .await;
        }
        Ok(cancelled)
    }

    /// Starts the thread's drain in the background, unless this process runs one already.
    pub(crate) fn drain(&self, queue: SharedMessageQueue, scope: MemoryScope) {
        let thread = thread_key(&scope);
        if !self.runtime.drains.claim(&thread) {
            return;
        }
        let agent = self.clone();
        tokio::spawn(async move {
            loop {
                agent.drain_queue(&queue, &scope).await;
                agent.runtime.drains.release(&thread);
                // A message queued as the drain let go: take the drain again for it.
                let more = queue.list(&scope).await.is_ok_and(|q| !q.is_empty());
                if !more || !agent.runtime.drains.claim(&thread) {
                    break;
                }
            }
        });
    }

    /// Runs the thread's queued messages, oldest first, until the queue is empty.
    async fn drain_queue(&self, queue: &SharedMessageQueue, scope: &MemoryScope) {
        loop {
            let next = match queue.list(scope).await {
                Ok(queued) => queued.into_iter().next(),
                Err(e) => {
                    tracing::warn!(thread = %scope.thread_id, error = %e, "reading the message queue failed");
                    return;
                }
            };
            let Some(next) = next else { return };
            // A message of another agent's: that agent drains it.
            if next.agent_id != self.id() {
                return;
            }
            self.run_queued(queue, scope, next).await;
        }
    }

    async fn run_queued(
        &self,
        queue: &SharedMessageQueue,
        scope: &MemoryScope,
        next: QueuedMessage,
    ) {
        let mut options = self
            .inner
            .defaults
            .clone()
            .run_id(&next.run_id)
            .memory(&scope.thread_id, &scope.resource_id)
            .resource(&scope.resource_id);
        // The run acts for the thread's resource (checked when the message was queued), and
        // says so in its request context as a run the caller started does: the message may
        // have waited out a restart in the queue, so nothing of the caller's request is left.
        let context = options
            .request_context
            .as_ref()
            .map(crate::context::RequestContext::snapshot)
            .unwrap_or_default();
        context.set(crate::context::RESOURCE_ID_KEY, scope.resource_id.as_str());
        options = options.request_context(context);
        let mut stream = self
            .stream(next.message.clone())
            .options(options)
            .into_stream();
        // Its first event comes once it holds the thread and stored the message there.
        let first = stream.next().await;
        let started = first
            .as_ref()
            .is_some_and(|e| matches!(e.kind, EventKind::Start(_)));
        if !started {
            // The run failed before it stored the message (or its id is a stored run's,
            // after a restart): the thread keeps the message, stored once by its id.
            if let Some(memory) = &self.inner.memory
                && let Err(e) = memory
                    .persist(
                        scope,
                        std::slice::from_ref(&next.message),
                        crate::memory::Persist::complete(),
                    )
                    .await
            {
                tracing::warn!(thread = %scope.thread_id, error = %e, "a queued message could not be stored; it stays queued");
                return;
            }
        }
        if let Err(e) = queue.remove(&next.id).await {
            tracing::warn!(thread = %scope.thread_id, error = %e, "removing a queued message failed");
        }
        self.tell_watchers(
            scope,
            &next.run_id,
            EventSource::System,
            EventKind::QueuedMessageStarted(QueuedMessagePayload {
                id: next.id.clone(),
                thread_id: scope.thread_id.clone(),
                resource_id: scope.resource_id.clone(),
            }),
        )
        .await;
        if let Err(e) = stream.result().await {
            tracing::warn!(run = %next.run_id, error = %e, "a queued message's run failed");
        }
    }

    async fn tell_watchers(
        &self,
        scope: &MemoryScope,
        run_id: &str,
        from: EventSource,
        kind: EventKind,
    ) {
        let event = Event {
            run_id: run_id.into(),
            from,
            kind,
        };
        let topic = thread_topic(&scope.resource_id, &scope.thread_id);
        if let Err(e) = self.runtime.runs.pubsub.publish(&topic, event).await {
            tracing::warn!(thread = %scope.thread_id, error = %e, "telling the thread's watchers failed");
        }
    }
}
