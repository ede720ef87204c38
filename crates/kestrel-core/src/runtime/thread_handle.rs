//! One thread of a resource: [`ThreadHandle`] (from [`Agent::thread`]) holds what can be done
//! to a conversation rather than to one run: send a message or a signal into it, queue one
//! for its next run, watch it, abort what runs on it.
//!
//! | you want to… | call |
//! | --- | --- |
//! | add the user's words to the run that is answering now, or start one | [`ThreadHandle::send`] |
//! | tell the active run something as the system (a reminder, a notification) | [`ThreadHandle::signal`] |
//! | have a message answered after the active run, in a run of its own | [`ThreadHandle::queue`] |
//! | see every event of every run on the thread | [`ThreadHandle::subscribe`] |
//! | stop what runs on it | [`ThreadHandle::abort`] |
//!
//! A stopped run (waiting for an approval, paused) is one run's business: see
//! [`crate::agent::RunHandle`].

use std::future::IntoFuture;

use futures::future::BoxFuture;

use super::Agent;
use super::queue::Queued;
use super::threads::{Fork, IfActive, IfIdle, SendMessage, Sent, ThreadError, ThreadSubscription};
use crate::definition::RunOptions;
use crate::memory::MemoryScope;
use crate::message::Message;
use crate::store::QueuedMessage;

/// A thread of a resource, as one agent sees it. Made by [`Agent::thread`]; cheap to make.
#[derive(Debug, Clone)]
pub struct ThreadHandle {
    agent: Agent,
    resource_id: String,
    thread_id: String,
    options: RunOptions,
}

impl Agent {
    /// Thread `thread_id` of `resource_id` (see [`ThreadHandle`] for what can be done to it).
    pub fn thread(
        &self,
        resource_id: impl Into<String>,
        thread_id: impl Into<String>,
    ) -> ThreadHandle {
        ThreadHandle {
            agent: self.clone(),
            resource_id: resource_id.into(),
            thread_id: thread_id.into(),
            options: RunOptions::default(),
        }
    }
}

impl ThreadHandle {
    /// The thread's id.
    pub fn id(&self) -> &str {
        &self.thread_id
    }

    /// Its resource.
    pub fn resource_id(&self) -> &str {
        &self.resource_id
    }

    /// Options of the runs a message sent to the thread starts ([`ThreadHandle::send`] or
    /// [`ThreadHandle::signal`] on an idle thread); their memory is always this thread. A
    /// queued message's run does not take them: it may wait out a restart in the queue, and
    /// runs with the agent's defaults, acting for the thread's resource.
    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    fn to(&self) -> SendMessage {
        SendMessage {
            options: self.options.clone(),
            ..SendMessage::to(&self.resource_id, &self.thread_id)
        }
    }

    fn scope(&self) -> MemoryScope {
        MemoryScope {
            thread_id: self.thread_id.clone(),
            resource_id: self.resource_id.clone(),
        }
    }

    /// Sends the user's words to the thread: into the active run's next step, else starting a
    /// run (what happens either way can be changed on the returned [`SendRequest`]).
    pub fn send(&self, text: impl Into<String>) -> SendRequest {
        SendRequest {
            agent: self.agent.clone(),
            message: Message::user(text),
            to: self.to(),
        }
    }

    /// Sends a system message (a reminder, a notification) as [`ThreadHandle::send`] does.
    pub fn signal(&self, text: impl Into<String>) -> SendRequest {
        SendRequest {
            agent: self.agent.clone(),
            message: Message::system(text),
            to: self.to(),
        }
    }

    /// Queues the user's words for the thread's next run (Mastra's `queueMessage`): after
    /// the active run ends, or at once on an idle thread, after the messages queued before
    /// it, each in a run of its own, in order. Kept in the agent's stores'
    /// [`crate::store::MessageQueue`], so it survives a restart with a durable storage (the
    /// in-memory default keeps none: [`ThreadError::NoQueue`]). The thread's watchers
    /// ([`ThreadHandle::subscribe`]) see `message-queued`, then `queued-message-started` and
    /// the run's events.
    pub async fn queue(&self, text: impl Into<String>) -> Result<Queued, ThreadError> {
        self.agent.enqueue(text.into(), self.scope()).await
    }

    /// The thread's queued messages no run took yet, oldest first.
    pub async fn queued(&self) -> Result<Vec<QueuedMessage>, ThreadError> {
        self.agent.list_queued(&self.scope()).await
    }

    /// Cancels queued messages no run took yet: those with these ids, or all with `None`;
    /// returns those cancelled. The thread's watchers see `queued-message-cancelled`.
    pub async fn cancel_queued(
        &self,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>, ThreadError> {
        self.agent.cancel_queued(self.scope(), ids).await
    }

    /// Every event of every run on the thread from now on, each naming its run, until the
    /// subscription is dropped. With a pub/sub that keeps events (Redis), a run active on the
    /// thread (here or on another instance) is streamed from its start.
    pub async fn subscribe(&self) -> Result<ThreadSubscription, ThreadError> {
        self.agent
            .watch_thread(&self.resource_id, &self.thread_id)
            .await
    }

    /// The run active on the thread in this process, if any.
    pub fn active_run(&self) -> Option<String> {
        self.agent.active_run_of(&self.resource_id, &self.thread_id)
    }

    /// Aborts every run on the thread, running or waiting for it, here and (in a cluster) on
    /// the instance that drives its active run; returns how many. A run aborted stops at its
    /// next step, or inside a tool that watches its abort signal, and its stream ends with
    /// `abort`.
    pub async fn abort(&self) -> Result<usize, ThreadError> {
        self.agent
            .abort_on_thread(&self.resource_id, &self.thread_id)
            .await
    }
}

/// A message about to be sent to a thread ([`ThreadHandle::send`],
/// [`ThreadHandle::signal`]): await it.
#[must_use = "a message is sent only when this is awaited"]
#[derive(Debug)]
pub struct SendRequest {
    agent: Agent,
    message: Message,
    to: SendMessage,
}

impl SendRequest {
    /// What to do when a run is active (default: deliver into its next step).
    pub fn if_active(mut self, behaviour: IfActive) -> Self {
        self.to.if_active = behaviour;
        self
    }

    /// What to do when none is (default: start one).
    pub fn if_idle(mut self, behaviour: IfIdle) -> Self {
        self.to.if_idle = behaviour;
        self
    }

    /// Sends to a copy of the thread instead: its messages so far copied into a new thread
    /// of the same resource (`thread_id`, or a fresh id; titled `title`, or like the
    /// original), which [`Sent::thread_id`] names; the original and its active run are left
    /// as they are. `if_active` does not apply (the new thread has no run); `if_idle` does.
    /// Needs a memory that can fork (`kestrel-memory`'s does).
    pub fn fork(mut self, thread_id: Option<String>, title: Option<String>) -> Self {
        self.to.fork = Some(Fork { thread_id, title });
        self
    }
}

impl IntoFuture for SendRequest {
    type Output = Result<Sent, ThreadError>;
    type IntoFuture = BoxFuture<'static, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.agent.send(self.message, self.to).await })
    }
}
