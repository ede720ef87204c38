//! Messages queued for a thread's next runs, oldest first.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{NewQueuedMessage, QueuedMessage, QueuedThread};

/// Messages queued for a thread's next runs, oldest first.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Adds a message at the end of the queue of a thread owned by `message.resource_id`. A
    /// queued id that exists is [`StorageError::InvalidArgument`](crate::StorageError::InvalidArgument).
    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage>;

    /// The queue of a thread owned by `resource_id`, oldest first.
    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>>;

    /// Removes a queued message (a run took it); `false` when it was not queued.
    async fn remove_queued_message(&self, id: &str) -> Result<bool>;

    /// Removes the queued messages of a thread owned by `resource_id`: those with these ids,
    /// or all of them; returns those removed, oldest first.
    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>>;

    /// Every thread with queued messages (the agent of its oldest), oldest queue first: what a
    /// process that starts drains.
    async fn queued_threads(&self) -> Result<Vec<QueuedThread>>;
}
