//! Where messages wait for a thread's next runs ([`crate::agent::ThreadHandle::queue`]).
//!
//! A [`MessageQueue`] keeps each thread's queued messages in order until a run takes them.
//! `kestrel-storage` implements it on every backend (so a queue survives a restart), and
//! an instance given one ([`crate::kestrel::KestrelBuilder::storage`]) keeps its agents' queues there.

use std::sync::Arc;

use crate::error::BoxError;
use crate::message::Message;
use crate::scope::MemoryScope;

/// A message waiting in a thread's queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedMessage {
    /// Its id; the message keeps it in the thread once a run takes it.
    pub id: String,
    /// The run that will carry it.
    pub run_id: String,
    /// The agent that will run it.
    pub agent_id: String,
    /// The thread and its owner.
    pub scope: MemoryScope,
    /// The message.
    pub message: Message,
}

/// A thread with queued messages, and the agent of its oldest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedThread {
    /// The agent.
    pub agent_id: String,
    /// The thread and its owner.
    pub scope: MemoryScope,
}

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The thread belongs to another resource than the one named.
    #[error("thread {thread_id:?} belongs to another resource than {resource_id:?}")]
    ThreadOfOtherResource {
        /// The thread.
        thread_id: String,
        /// The resource named.
        resource_id: String,
    },
    /// The thread's queue holds as many messages as it may.
    #[error(
        "thread {thread_id:?} has {limit} queued messages already; wait for them to run or cancel some"
    )]
    Full {
        /// The thread.
        thread_id: String,
        /// The bound.
        limit: usize,
    },
    /// The store failed.
    #[error("the message queue failed: {0}")]
    Store(#[source] BoxError),
}

/// Each thread's queued messages, in order. Implementations must keep a thread's messages
/// in the order they were pushed, and refuse a thread of another resource.
#[async_trait::async_trait]
pub trait MessageQueue: Send + Sync {
    /// Adds a message at the end of its thread's queue (the thread exists).
    async fn push(&self, message: QueuedMessage) -> Result<(), QueueError>;

    /// The thread's queue, oldest first.
    async fn list(&self, scope: &MemoryScope) -> Result<Vec<QueuedMessage>, QueueError>;

    /// Removes a message a run took; `false` when it was not queued.
    async fn remove(&self, id: &str) -> Result<bool, QueueError>;

    /// Removes the thread's messages with these ids, or all of them; those removed.
    async fn cancel(
        &self,
        scope: &MemoryScope,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>, QueueError>;

    /// Every thread with queued messages, oldest queue first.
    async fn threads(&self) -> Result<Vec<QueuedThread>, QueueError>;
}

/// A queue shared by the agents of an instance.
pub type SharedMessageQueue = Arc<dyn MessageQueue>;
