//! The working memory of [`InMemoryStorage`](super::InMemoryStorage).

use super::InMemoryStorage;
use crate::error::Result;
use crate::storage::WorkingMemoryStore;
use crate::types::Scope;
use async_trait::async_trait;

#[async_trait]
impl WorkingMemoryStore for InMemoryStorage {
    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        let state = self.state();
        match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => Ok(state
                .owned_thread(thread_id, Some(resource_id))?
                .working_memory
                .clone()),
            Scope::Resource { resource_id } => Ok(state.resource_memory.get(resource_id).cloned()),
        }
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        let mut state = self.state();
        match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                state
                    .owned_thread_mut(thread_id, resource_id)?
                    .working_memory = Some(content.to_owned());
            }
            Scope::Resource { resource_id } => {
                state
                    .resource_memory
                    .insert(resource_id.clone(), content.to_owned());
            }
        }
        Ok(())
    }
}
