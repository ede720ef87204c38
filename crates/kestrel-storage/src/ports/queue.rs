//! The [`MessageQueue`](kestrel_core::store::MessageQueue) port on a [`Storage`] backend's
//! queue table, so messages queued for a thread's next runs survive a restart.

use kestrel_core::memory::MemoryScope;
use kestrel_core::store::{QueueError, QueuedMessage, QueuedThread};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{self, NewQueuedMessage};

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

/// [`MessageQueue::push`](kestrel_core::store::MessageQueue::push) on `storage`.
pub async fn push<S: Storage + ?Sized>(
    storage: &S,
    message: QueuedMessage,
) -> Result<(), QueueError> {
    storage
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

/// [`MessageQueue::list`](kestrel_core::store::MessageQueue::list) on `storage`.
pub async fn list<S: Storage + ?Sized>(
    storage: &S,
    scope: &MemoryScope,
) -> Result<Vec<QueuedMessage>, QueueError> {
    match storage
        .queued_messages(&scope.thread_id, &scope.resource_id)
        .await
    {
        Ok(queued) => Ok(queued.into_iter().map(from_stored).collect()),
        // No thread, no queue.
        Err(StorageError::ThreadNotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(queue_error(e)),
    }
}

/// [`MessageQueue::remove`](kestrel_core::store::MessageQueue::remove) on `storage`.
pub async fn remove<S: Storage + ?Sized>(storage: &S, id: &str) -> Result<bool, QueueError> {
    storage.remove_queued_message(id).await.map_err(queue_error)
}

/// [`MessageQueue::cancel`](kestrel_core::store::MessageQueue::cancel) on `storage`.
pub async fn cancel<S: Storage + ?Sized>(
    storage: &S,
    scope: &MemoryScope,
    ids: Option<Vec<String>>,
) -> Result<Vec<QueuedMessage>, QueueError> {
    match storage
        .cancel_queued_messages(&scope.thread_id, &scope.resource_id, ids)
        .await
    {
        Ok(removed) => Ok(removed.into_iter().map(from_stored).collect()),
        Err(StorageError::ThreadNotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(queue_error(e)),
    }
}

/// [`MessageQueue::threads`](kestrel_core::store::MessageQueue::threads) on `storage`.
pub async fn threads<S: Storage + ?Sized>(storage: &S) -> Result<Vec<QueuedThread>, QueueError> {
    let threads = storage.queued_threads().await.map_err(queue_error)?;
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
