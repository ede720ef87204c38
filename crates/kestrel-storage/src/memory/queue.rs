//! The message queues of [`super::InMemoryStorage`]: one ordered list of every queued message.

use crate::storage::QueueStore;
use async_trait::async_trait;

use super::{InMemoryStorage, State};
use crate::codec;
use crate::error::Result;
use crate::types::{NewQueuedMessage, QueuedMessage, QueuedThread};

pub(super) fn enqueue(state: &mut State, message: NewQueuedMessage) -> Result<QueuedMessage> {
    codec::check_queued(&message)?;
    state.owned_thread(&message.thread_id, Some(&message.resource_id))?;
    if state.queue.iter().any(|q| q.id == message.id) {
        return Err(codec::queued_exists(&message.id));
    }
    state.queue_seq += 1;
    let queued = QueuedMessage {
        id: message.id,
        run_id: message.run_id,
        agent_id: message.agent_id,
        thread_id: message.thread_id,
        resource_id: message.resource_id,
        message: message.message,
        seq: state.queue_seq,
        created_at: codec::now(),
    };
    state.queue.push(queued.clone());
    Ok(queued)
}

pub(super) fn list(
    state: &State,
    thread_id: &str,
    resource_id: &str,
) -> Result<Vec<QueuedMessage>> {
    state.owned_thread(thread_id, Some(resource_id))?;
    Ok(state
        .queue
        .iter()
        .filter(|q| q.thread_id == thread_id)
        .cloned()
        .collect())
}

pub(super) fn remove(state: &mut State, id: &str) -> bool {
    let before = state.queue.len();
    state.queue.retain(|q| q.id != id);
    state.queue.len() < before
}

pub(super) fn cancel(
    state: &mut State,
    thread_id: &str,
    resource_id: &str,
    ids: Option<&[String]>,
) -> Result<Vec<QueuedMessage>> {
    state.owned_thread(thread_id, Some(resource_id))?;
    let (removed, kept) = std::mem::take(&mut state.queue)
        .into_iter()
        .partition(|q| q.thread_id == thread_id && ids.is_none_or(|ids| ids.contains(&q.id)));
    state.queue = kept;
    Ok(removed)
}

pub(super) fn threads(state: &State) -> Vec<QueuedThread> {
    let mut seen = std::collections::HashSet::new();
    state
        .queue
        .iter()
        .filter(|q| seen.insert(q.thread_id.clone()))
        .map(|q| QueuedThread {
            agent_id: q.agent_id.clone(),
            thread_id: q.thread_id.clone(),
            resource_id: q.resource_id.clone(),
        })
        .collect()
}

#[async_trait]
impl QueueStore for InMemoryStorage {
    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage> {
        enqueue(&mut self.state(), message)
    }

    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>> {
        list(&self.state(), thread_id, resource_id)
    }

    async fn remove_queued_message(&self, id: &str) -> Result<bool> {
        Ok(remove(&mut self.state(), id))
    }

    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>> {
        cancel(&mut self.state(), thread_id, resource_id, ids.as_deref())
    }

    async fn queued_threads(&self) -> Result<Vec<QueuedThread>> {
        Ok(threads(&self.state()))
    }
}
