//! The messages of [`InMemoryStorage`](super::InMemoryStorage).

use crate::storage::MessageStore;
use async_trait::async_trait;
use std::collections::HashSet;

use kestrel_core::lease::Fence;

use super::InMemoryStorage;
use super::listing::select;
use crate::codec;
use crate::error::Result;
use crate::types::{MessageList, MessageSearch, NewMessage, Scope, Selection, StoredMessage};

#[async_trait]
impl MessageStore for InMemoryStorage {
    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        self.state().append(thread_id, resource_id, messages)
    }

    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>> {
        let token = Some(codec::fence_token(fence.token)?);
        let mut state = self.state();
        state.check_fence(fence.run_id, token)?;
        let stored = state.append(thread_id, resource_id, messages)?;
        state.raise_fence(fence.run_id, token);
        Ok(stored)
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        if let Selection::Page(page) = selection {
            codec::check_page(page)?;
        }
        let state = self.state();
        let entry = state.owned_thread(thread_id, resource_id)?;
        Ok(select(&entry.messages, selection))
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        let state = self.state();
        let mut found = Vec::new();
        for id in ids.iter().collect::<HashSet<_>>() {
            let Some((thread_id, seq)) = state.message_homes.get(id) else {
                continue;
            };
            let entry = state.owned_thread(thread_id, resource_id)?;
            if let Some(m) = entry.messages.get(seq) {
                found.push(m.clone());
            }
        }
        found.sort_by(|a, b| a.thread_id.cmp(&b.thread_id).then(a.seq.cmp(&b.seq)));
        Ok(found)
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        let mut state = self.state();
        let entry = state.owned_thread_mut(thread_id, resource_id)?;
        let wanted: HashSet<&String> = ids.iter().collect();
        let before = entry.messages.len();
        entry.messages.retain(|_, m| !wanted.contains(&m.id));
        let deleted = (before - entry.messages.len()) as u64;
        if deleted > 0 {
            entry.thread.updated_at = codec::now();
        }
        let gone: HashSet<String> = ids
            .iter()
            .filter(|id| {
                state
                    .message_homes
                    .get(*id)
                    .is_some_and(|(home, _)| home == thread_id)
            })
            .cloned()
            .collect();
        for id in &gone {
            state.message_homes.remove(id);
        }
        state.remove_vectors_where(|r| {
            codec::meta_str(&r.metadata, "message_id").is_none_or(|m| !gone.contains(&m))
        });
        Ok(deleted)
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        let needle = codec::search_needle(&search.query);
        let state = self.state();
        let mut hits: Vec<&StoredMessage> = match &search.scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                let entry = state.owned_thread(thread_id, Some(resource_id))?;
                entry.messages.values().rev().collect()
            }
            Scope::Resource { resource_id } => {
                let mut all: Vec<&StoredMessage> = state
                    .threads
                    .values()
                    .filter(|e| &e.thread.resource_id == resource_id)
                    .flat_map(|e| e.messages.values())
                    .collect();
                all.sort_by(|a, b| {
                    b.created_at
                        .cmp(&a.created_at)
                        .then_with(|| a.thread_id.cmp(&b.thread_id))
                        .then_with(|| b.seq.cmp(&a.seq))
                });
                all
            }
        };
        hits.retain(|m| codec::search_text(&m.parts).contains(&needle));
        Ok(hits
            .into_iter()
            .take(search.limit as usize)
            .cloned()
            .collect())
    }
}
