//! The threads of [`InMemoryStorage`](super::InMemoryStorage).

use crate::storage::ThreadStore;
use async_trait::async_trait;
use std::collections::BTreeMap;

use super::listing::{paginate, sort_threads};
use super::{InMemoryStorage, ObservationKey, ThreadEntry};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{
    CloneThread, MetadataUpdate, NewThread, Page, StoredMessage, Thread, ThreadPatch, ThreadQuery,
};

#[async_trait]
impl ThreadStore for InMemoryStorage {
    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let mut state = self.state();
        if state.threads.contains_key(&id) {
            return Err(StorageError::ThreadExists { thread_id: id });
        }
        let record = Thread {
            id: id.clone(),
            resource_id: thread.resource_id,
            title: thread.title,
            metadata: thread.metadata,
            created_at: created,
            updated_at: created,
        };
        state.threads.insert(
            id,
            ThreadEntry {
                thread: record.clone(),
                next_seq: 1,
                working_memory: None,
                observed_seq: None,
                messages: BTreeMap::new(),
            },
        );
        Ok(record)
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        Ok(self
            .state()
            .threads
            .get(thread_id)
            .map(|e| e.thread.clone()))
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        let mut state = self.state();
        let entry = state
            .threads
            .get_mut(thread_id)
            .ok_or_else(|| StorageError::thread_not_found(thread_id))?;
        let thread = &mut entry.thread;
        if let Some(title) = patch.title {
            thread.title = Some(title);
        }
        match patch.metadata {
            Some(MetadataUpdate::Merge(changes)) => {
                thread.metadata.extend(codec::normalize_map(changes))
            }
            Some(MetadataUpdate::Replace(all)) => thread.metadata = codec::normalize_map(all),
            None => {}
        }
        thread.updated_at = codec::now();
        Ok(thread.clone())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        let mut state = self.state();
        let Some(entry) = state.threads.remove(thread_id) else {
            return Ok(false);
        };
        for id in entry.messages.values().map(|m| &m.id) {
            state.message_homes.remove(id);
        }
        state
            .observations
            .remove(&ObservationKey::Thread(thread_id.to_owned()));
        state.queue.retain(|q| q.thread_id != thread_id);
        state.remove_vectors_where(|r| {
            codec::meta_str(&r.metadata, "thread_id").as_deref() != Some(thread_id)
        });
        Ok(true)
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        let mut state = self.state();
        let source = state.owned_thread(source_thread_id, Some(&options.resource_id))?;
        let new_id = options.new_thread_id.unwrap_or_else(codec::new_id);
        codec::check_id("new_thread_id", &new_id)?;
        if state.threads.contains_key(&new_id) {
            return Err(StorageError::ThreadExists { thread_id: new_id });
        }
        let now = codec::now();
        let thread = Thread {
            id: new_id.clone(),
            resource_id: source.thread.resource_id.clone(),
            title: options.title.or_else(|| source.thread.title.clone()),
            metadata: codec::clone_metadata(&source.thread.metadata, source_thread_id, now),
            created_at: now,
            updated_at: now,
        };
        let messages: BTreeMap<i64, StoredMessage> = source
            .messages
            .values()
            .zip(1..)
            .map(|(m, seq)| {
                let copy = StoredMessage {
                    id: codec::new_id(),
                    thread_id: new_id.clone(),
                    seq,
                    ..m.clone()
                };
                (seq, copy)
            })
            .collect();
        for message in messages.values() {
            state
                .message_homes
                .insert(message.id.clone(), (new_id.clone(), message.seq));
        }
        let next_seq = messages.len() as i64 + 1;
        state.threads.insert(
            new_id,
            ThreadEntry {
                thread: thread.clone(),
                next_seq,
                working_memory: None,
                observed_seq: None,
                messages,
            },
        );
        Ok(thread)
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        codec::check_page(query.page)?;
        let filter = codec::parse_filter(query.metadata.as_ref())?;
        let state = self.state();
        let mut threads: Vec<&Thread> = state
            .threads
            .values()
            .map(|e| &e.thread)
            .filter(|t| {
                query
                    .resource_id
                    .as_ref()
                    .is_none_or(|r| &t.resource_id == r)
            })
            .filter(|t| {
                filter
                    .as_ref()
                    .is_none_or(|f| codec::matches_filter(&t.metadata, f))
            })
            .collect();
        sort_threads(&mut threads, query.order.field, query.order.direction);
        let items = paginate(&threads, query.page.offset(), query.page.per_page);
        Ok(Page::new(items, query.page, threads.len() as u64))
    }
}
