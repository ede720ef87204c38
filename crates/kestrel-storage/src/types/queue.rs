//! Messages queued for a thread's next runs.

use chrono::{DateTime, Utc};

/// A message to queue for a thread's next run ([`crate::QueueStore::enqueue_message`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewQueuedMessage {
    /// Its id (also the message's id once a run takes it); unique across queues.
    pub id: String,
    /// The id of the run that will carry it.
    pub run_id: String,
    /// The agent that will run it.
    pub agent_id: String,
    /// The thread (it must exist).
    pub thread_id: String,
    /// The thread's owner (checked).
    pub resource_id: String,
    /// The message.
    pub message: kestrel_core::message::Message,
}

/// A message waiting in a thread's queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedMessage {
    /// Its id.
    pub id: String,
    /// The id of the run that will carry it.
    pub run_id: String,
    /// The agent that will run it.
    pub agent_id: String,
    /// The thread.
    pub thread_id: String,
    /// The thread's owner.
    pub resource_id: String,
    /// The message.
    pub message: kestrel_core::message::Message,
    /// Its place among all queued messages (greater is later).
    pub seq: i64,
    /// When it was queued.
    pub created_at: DateTime<Utc>,
}

/// A thread with queued messages, and the agent of its first one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedThread {
    /// The agent.
    pub agent_id: String,
    /// The thread.
    pub thread_id: String,
    /// Its owner.
    pub resource_id: String,
}
