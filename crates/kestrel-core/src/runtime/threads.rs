//! Live threads, the workings of [`super::ThreadHandle`]: abort every run of a thread, send a
//! message to a thread (into its active run's next step, or waking a new run), and watch
//! every run on a thread.
//!
//! Runs on one thread take the thread's lease in turn (see [`super::AgentRun::run`]), so at
//! most one is active; it takes the messages delivered to the thread before each model call,
//! and answers those that arrive as it ends in another step. The state lives in this process
//! (the agent's, or its `Kestrel` instance's, run registry); events reach subscribers through
//! the [`crate::pubsub::PubSub`], which a shared backend can carry across instances.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;

use super::registry::{RunRegistry, ThreadKey};
use super::{Agent, AgentStream};
use crate::cluster::{ClusterError, Command, Outcome};
use crate::context::RequestContext;
use crate::definition::RunOptions;
use crate::event::Event;
use crate::memory::{ForkError, MemoryError, MemoryScope};
use crate::message::Message;
use crate::pubsub::{PubSubError, Subscription, thread_topic};

/// What a message sent to a thread ([`super::ThreadHandle::send`]) does when a run is active
/// on the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IfActive {
    /// Put the message into the active run's next step (default).
    #[default]
    Deliver,
    /// Only store it in the thread.
    Persist,
    /// Drop it.
    Discard,
}

/// What a message sent to a thread ([`super::ThreadHandle::send`]) does when no run is active
/// on the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IfIdle {
    /// Start a new run with the message (default).
    #[default]
    Wake,
    /// Only store it in the thread.
    Persist,
    /// Drop it.
    Discard,
}

/// Where a message goes and what happens to it (what a [`super::SendRequest`] carries).
#[derive(Debug, Clone, Default)]
pub(crate) struct SendMessage {
    /// The thread's owner.
    pub(crate) resource_id: String,
    /// The thread.
    pub(crate) thread_id: String,
    /// When a run is active.
    pub(crate) if_active: IfActive,
    /// When none is.
    pub(crate) if_idle: IfIdle,
    /// Options of a woken run (its memory is set to the thread).
    pub(crate) options: RunOptions,
    /// Send the message to a copy of the thread instead: the thread copied up to now into a
    /// new thread of the same resource, where the message goes; the original is left
    /// untouched (its active run, if any, too). `if_active` does not apply then (the new
    /// thread has no run); `if_idle` does. Needs a memory that can fork.
    pub(crate) fork: Option<Fork>,
}

/// A fork: the new thread's id (a fresh one when `None`) and title (the original's when
/// `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fork {
    /// The new thread's id; a fresh one when `None`.
    pub(crate) thread_id: Option<String>,
    /// The new thread's title; the original's when `None`.
    pub(crate) title: Option<String>,
}

impl SendMessage {
    /// To thread `thread_id` of `resource_id`: delivered to the active run, else waking one.
    pub(crate) fn to(resource_id: impl Into<String>, thread_id: impl Into<String>) -> Self {
        Self {
            resource_id: resource_id.into(),
            thread_id: thread_id.into(),
            ..Self::default()
        }
    }
}

/// What became of a sent message.
#[derive(Debug)]
pub struct Sent {
    /// Whether the message was delivered, stored or started a run (`false`: discarded).
    pub accepted: bool,
    /// The thread the message went to: the one it was sent to, or the fork.
    pub thread_id: String,
    /// The thread's active run, or the run the message woke.
    pub run_id: Option<String>,
    /// The woken run's events (dropping it does not stop the run).
    pub stream: Option<AgentStream>,
}

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// Storing the message needs memory, and the agent has none.
    #[error("agent {agent:?} has no memory, so it cannot store messages in a thread")]
    NoMemory {
        /// The agent.
        agent: String,
    },
    /// Queuing a message needs a message queue, and the agent's stores have none (the
    /// in-memory default keeps no queue).
    #[error(
        "agent {agent:?} has no message queue: give its instance a storage that keeps queues (KestrelBuilder::storage with SQLite, PostgreSQL or InMemoryStorage)"
    )]
    NoQueue {
        /// The agent.
        agent: String,
    },
    /// Memory failed to store the message.
    #[error("storing the message failed: {0}")]
    Memory(#[from] MemoryError),
    /// The pub/sub failed.
    #[error(transparent)]
    PubSub(#[from] PubSubError),
    /// The instance whose run is active on the thread could not be reached.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The thread could not be forked.
    #[error(transparent)]
    Fork(#[from] ForkError),
    /// The message queue refused or failed.
    #[error(transparent)]
    Queue(#[from] crate::store::QueueError),
}

/// Every event of every run on a thread, from now until dropped. Each event names its run.
pub struct ThreadSubscription {
    events: Subscription,
    runs: Arc<RunRegistry>,
    thread: ThreadKey,
    /// The run active on the thread when the subscription was made.
    replaying: Option<String>,
}

impl std::fmt::Debug for ThreadSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadSubscription")
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

impl ThreadSubscription {
    /// The run active on the thread right now, if any.
    pub fn active_run_id(&self) -> Option<String> {
        self.runs.active_run(&self.thread)
    }

    /// The run that was active on the thread (here or on another instance) when the
    /// subscription was made: with a pub/sub that keeps events, the subscription starts with
    /// that run's first event.
    pub fn replaying_run_id(&self) -> Option<&str> {
        self.replaying.as_deref()
    }

    /// Stops the subscription (dropping it does the same).
    pub fn unsubscribe(self) {}
}

impl Stream for ThreadSubscription {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        Pin::new(&mut self.events).poll_next(cx)
    }
}

fn key(resource_id: &str, thread_id: &str) -> ThreadKey {
    ThreadKey {
        resource_id: resource_id.to_owned(),
        thread_id: thread_id.to_owned(),
    }
}

impl Agent {
    /// Aborts every run on a thread, running or waiting for it, here and (in a cluster) the
    /// thread's active run on another instance (which stops it and answers); how many.
    pub(super) async fn abort_on_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
    ) -> Result<usize, ThreadError> {
        let runs = &self.runtime.runs;
        let thread = key(resource_id, thread_id);
        let mut aborted = runs.abort_thread(&thread);
        if let Some((instance, _)) = runs.remote_thread_holder(&thread).await?
            && let Some(cluster) = &runs.cluster
        {
            let command = Command::AbortThread {
                resource_id: resource_id.to_owned(),
                thread_id: thread_id.to_owned(),
            };
            if let Outcome::Done { count } = cluster.request(&instance, command).await? {
                aborted += count;
            }
        }
        Ok(aborted)
    }

    /// The run active on a thread in this process, if any.
    pub(super) fn active_run_of(&self, resource_id: &str, thread_id: &str) -> Option<String> {
        self.runtime.runs.active_run(&key(resource_id, thread_id))
    }

    /// Every event of every run on the thread from now on, each naming its run, until the
    /// subscription is dropped. With a pub/sub that keeps events (Redis), a run active on the
    /// thread (here or on another instance) is streamed from its start.
    pub(super) async fn watch_thread(
        &self,
        resource_id: &str,
        thread_id: &str,
    ) -> Result<ThreadSubscription, ThreadError> {
        let runs = &self.runtime.runs;
        let topic = thread_topic(resource_id, thread_id);
        let active = runs
            .active_run_anywhere(&key(resource_id, thread_id))
            .await?;
        let events = match &active {
            Some(run_id) => runs.pubsub.subscribe_replaying(&topic, run_id).await?,
            None => runs.pubsub.subscribe(&topic).await?,
        };
        Ok(ThreadSubscription {
            events,
            runs: Arc::clone(&self.runtime.runs),
            thread: key(resource_id, thread_id),
            replaying: active,
        })
    }

    /// Sends a message to a thread: into the active run's next step, or waking a new run
    /// (see [`SendMessage`] for the other behaviours).
    pub(super) async fn send(
        &self,
        message: Message,
        mut to: SendMessage,
    ) -> Result<Sent, ThreadError> {
        if let Some(fork) = to.fork.take() {
            to.thread_id = self.fork_thread(&to, &fork).await?;
        }
        let thread = key(&to.resource_id, &to.thread_id);
        let runs = &self.runtime.runs;
        let mut message = Some(message);
        if runs.active_run(&thread).is_none()
            && let Some((instance, active)) = runs.remote_thread_holder(&thread).await?
        {
            // The thread's active run is on another instance: it takes the message there.
            match self.send_elsewhere(&to, &instance, active, message).await? {
                Ok(sent) => return Ok(sent),
                Err(back) => message = Some(back),
            }
        } else if let Some(active) = runs.active_run(&thread) {
            match to.if_active {
                IfActive::Deliver => {
                    if let Some(m) = message.take() {
                        match runs.deliver(&thread, m) {
                            Ok(run_id) => {
                                return Ok(Sent {
                                    thread_id: to.thread_id.clone(),
                                    accepted: true,
                                    run_id: Some(run_id),
                                    stream: None,
                                });
                            }
                            // The run ended meanwhile: the thread is idle.
                            Err(back) => message = Some(back),
                        }
                    }
                }
                IfActive::Persist => {
                    if let Some(m) = message.take() {
                        self.store_in_thread(&to, m).await?;
                    }
                    return Ok(Sent {
                        thread_id: to.thread_id.clone(),
                        accepted: true,
                        run_id: Some(active),
                        stream: None,
                    });
                }
                IfActive::Discard => {
                    return Ok(Sent {
                        thread_id: to.thread_id.clone(),
                        accepted: false,
                        run_id: Some(active),
                        stream: None,
                    });
                }
            }
        }
        let Some(message) = message else {
            return Ok(Sent {
                thread_id: to.thread_id.clone(),
                accepted: false,
                run_id: None,
                stream: None,
            });
        };
        match to.if_idle {
            IfIdle::Wake => {
                let options = to.options.clone().memory(&to.thread_id, &to.resource_id);
                let stream = self.stream(message).options(options).into_stream();
                Ok(Sent {
                    thread_id: to.thread_id.clone(),
                    accepted: true,
                    run_id: Some(stream.run_id().to_owned()),
                    stream: Some(stream),
                })
            }
            IfIdle::Persist => {
                self.store_in_thread(&to, message).await?;
                Ok(Sent {
                    thread_id: to.thread_id.clone(),
                    accepted: true,
                    run_id: None,
                    stream: None,
                })
            }
            IfIdle::Discard => Ok(Sent {
                thread_id: to.thread_id.clone(),
                accepted: false,
                run_id: None,
                stream: None,
            }),
        }
    }

    /// [`Agent::send`] when the thread's active run is `active` on `instance`: what became of
    /// the message, or the message back when that run ended meanwhile (the thread is idle).
    async fn send_elsewhere(
        &self,
        to: &SendMessage,
        instance: &str,
        active: Option<String>,
        message: Option<Message>,
    ) -> Result<Result<Sent, Message>, ThreadError> {
        let Some(message) = message else {
            return Ok(Ok(Sent {
                thread_id: to.thread_id.clone(),
                accepted: false,
                run_id: active,
                stream: None,
            }));
        };
        let answered = |accepted, run_id| {
            Ok(Ok(Sent {
                thread_id: to.thread_id.clone(),
                accepted,
                run_id,
                stream: None,
            }))
        };
        match to.if_active {
            IfActive::Deliver => {
                let Some(cluster) = &self.runtime.runs.cluster else {
                    return Ok(Err(message));
                };
                let command = Command::Deliver {
                    resource_id: to.resource_id.clone(),
                    thread_id: to.thread_id.clone(),
                    message: message.clone(),
                };
                match cluster.request(instance, command).await? {
                    Outcome::Delivered { run_id } => answered(true, Some(run_id)),
                    _ => Ok(Err(message)),
                }
            }
            IfActive::Persist => {
                self.store_in_thread(to, message).await?;
                answered(true, active)
            }
            IfActive::Discard => answered(false, active),
        }
    }

    /// The memory that stores threads' messages, or why there is none.
    fn thread_memory(&self) -> Result<Arc<dyn crate::memory::AgentMemory>, ThreadError> {
        self.inner
            .memory
            .clone()
            .ok_or_else(|| ThreadError::NoMemory {
                agent: self.id().to_owned(),
            })
    }

    /// Copies `to`'s thread as `fork` says; the new thread's id.
    async fn fork_thread(&self, to: &SendMessage, fork: &Fork) -> Result<String, ThreadError> {
        let memory = self.thread_memory()?;
        let source = MemoryScope {
            thread_id: to.thread_id.clone(),
            resource_id: to.resource_id.clone(),
        };
        Ok(memory
            .fork_thread(&source, fork.thread_id.as_deref(), fork.title.as_deref())
            .await?)
    }

    /// Stores a message in the thread without a run: memory loads the thread (creating it if
    /// needed) with the message as input, then stores it.
    async fn store_in_thread(&self, to: &SendMessage, message: Message) -> Result<(), ThreadError> {
        let memory = self.thread_memory()?;
        let scope = MemoryScope {
            thread_id: to.thread_id.clone(),
            resource_id: to.resource_id.clone(),
        };
        let input = [message];
        memory
            .recall(&scope, &input, &RequestContext::new())
            .await?;
        memory
            .persist(&scope, &input, crate::memory::Persist::complete())
            .await?;
        Ok(())
    }
}
