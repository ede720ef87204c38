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
use super::threads::{IfActive, IfIdle, SendMessage, Sent, ThreadError, ThreadSubscription};
use crate::definition::RunOptions;
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

    /// Options of the runs a message starts ([`ThreadHandle::send`] on an idle thread,
    /// [`ThreadHandle::queue`]); their memory is always this thread.
    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    fn to(&self) -> SendMessage {
        SendMessage::to(&self.resource_id, &self.thread_id).options(self.options.clone())
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

    /// Queues the user's words for the thread's next run: after the active run, or at once
    /// on an idle thread, each queued message in a run of its own, in order. Kept in the
    /// stores' message queue, so it survives a restart with a durable storage.
    pub async fn queue(&self, text: impl Into<String>) -> Result<Queued, ThreadError> {
        self.agent.queue_message(text, self.to()).await
    }

    /// The thread's queued messages no run took yet, oldest first.
    pub async fn queued(&self) -> Result<Vec<QueuedMessage>, ThreadError> {
        let (resource, thread) = (&self.resource_id, &self.thread_id);
        self.agent.queued_messages(resource, thread).await
    }

    /// Cancels queued messages: those with these ids, or all with `None`; returns those
    /// cancelled.
    pub async fn cancel_queued(
        &self,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>, ThreadError> {
        let (resource, thread) = (&self.resource_id, &self.thread_id);
        self.agent
            .cancel_queued_messages(resource, thread, ids)
            .await
    }

    /// Every event of every run on the thread from now on, each naming its run (a run active
    /// now is streamed from its start where the pub/sub keeps events).
    pub async fn subscribe(&self) -> Result<ThreadSubscription, ThreadError> {
        let (resource, thread) = (&self.resource_id, &self.thread_id);
        self.agent.subscribe_to_thread(resource, thread).await
    }

    /// The run active on the thread in this process, if any.
    pub fn active_run(&self) -> Option<String> {
        self.agent.active_run_on(&self.resource_id, &self.thread_id)
    }

    /// Aborts every run on the thread, running or waiting for it, here and (in a cluster) on
    /// the instance that drives its active run; returns how many.
    pub async fn abort(&self) -> Result<usize, ThreadError> {
        let (resource, thread) = (&self.resource_id, &self.thread_id);
        self.agent.abort_thread_anywhere(resource, thread).await
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
        self.to = self.to.if_active(behaviour);
        self
    }

    /// What to do when none is (default: start one).
    pub fn if_idle(mut self, behaviour: IfIdle) -> Self {
        self.to = self.to.if_idle(behaviour);
        self
    }

    /// Sends to a copy of the thread instead: its messages so far copied into a new thread
    /// (`thread_id`, or a fresh id; titled `title`, or like the original).
    pub fn fork(mut self, thread_id: Option<String>, title: Option<String>) -> Self {
        self.to = match thread_id {
            Some(id) => self.to.fork_into(id, title),
            None => {
                let mut to = self.to.fork();
                if let Some(fork) = to.fork.as_mut() {
                    fork.title = title;
                }
                to
            }
        };
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
