//! [`StorageMessageQueue`]: the agent runtime's [`MessageQueue`] on any [`Storage`] backend, so
//! messages queued for a thread's next runs survive a restart.

use std::sync::Arc;

use kestrel_core::memory::MemoryScope;
use kestrel_core::queue::{MessageQueue, QueueError, QueuedMessage, QueuedThread};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{self, NewQueuedMessage};

/// A [`MessageQueue`] on a [`Storage`]. Cheap to clone.
#[derive(Clone)]
pub struct StorageMessageQueue {
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for StorageMessageQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageMessageQueue")
            .field("backend", &self.storage.backend())
            .finish()
    }
}

impl StorageMessageQueue {
    /// Queues in `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self { storage }
    }
}

fn queue_error(error: StorageError) -> QueueError {
    match error {
        StorageError::ThreadOwnedByOtherResource {
            thread_id,
            requested,
            ..
        } => QueueError::ThreadOfOtherResource {
            thread_id,
            resource_id: requested,
        },
        other => QueueError::Store(Box::new(other)),
    }
}

fn from_stored(stored: types::QueuedMessage) -> QueuedMessage {
    QueuedMessage {
        id: stored.id,
        run_id: stored.run_id,
        agent_id: stored.agent_id,
        scope: MemoryScope {
            thread_id: stored.thread_id,
            resource_id: stored.resource_id,
        },
        message: stored.message,
    }
}

#[async_trait::async_trait]
impl MessageQueue for StorageMessageQueue {
    async fn push(&self, message: QueuedMessage) -> Result<(), QueueError> {
        self.storage
            .enqueue_message(NewQueuedMessage {
                id: message.id,
                run_id: message.run_id,
                agent_id: message.agent_id,
                thread_id: message.scope.thread_id,
                resource_id: message.scope.resource_id,
                message: message.message,
            })
            .await
            .map(|_| ())
            .map_err(queue_error)
    }

    async fn list(&self, scope: &MemoryScope) -> Result<Vec<QueuedMessage>, QueueError> {
        match self
            .storage
            .queued_messages(&scope.thread_id, &scope.resource_id)
            .await
        {
            Ok(queued) => Ok(queued.into_iter().map(from_stored).collect()),
            // No thread, no queue.
            Err(StorageError::ThreadNotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(queue_error(e)),
        }
    }

    async fn remove(&self, id: &str) -> Result<bool, QueueError> {
        self.storage
            .remove_queued_message(id)
            .await
            .map_err(queue_error)
    }

    async fn cancel(
        &self,
        scope: &MemoryScope,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>, QueueError> {
        match self
            .storage
            .cancel_queued_messages(&scope.thread_id, &scope.resource_id, ids)
            .await
        {
            Ok(removed) => Ok(removed.into_iter().map(from_stored).collect()),
            Err(StorageError::ThreadNotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(queue_error(e)),
        }
    }

    async fn threads(&self) -> Result<Vec<QueuedThread>, QueueError> {
        let threads = self.storage.queued_threads().await.map_err(queue_error)?;
        Ok(threads
            .into_iter()
            .map(|t| QueuedThread {
                agent_id: t.agent_id,
                scope: MemoryScope {
                    thread_id: t.thread_id,
                    resource_id: t.resource_id,
                },
            })
            .collect())
    }
}
