//! Finding what a request names: the agent, a stored run the caller may reach, the server's
//! memory; each a 404 when it is not there (or not the caller's).

use std::sync::Arc;

use axum::http::StatusCode;
use kestrel_core::agent::Agent;
use kestrel_memory::Memory;
use kestrel_storage::Storage;

use crate::auth::Caller;
use crate::{ApiError, AppState};

/// The agent with this id, or a 404.
pub(crate) async fn agent(state: &AppState, id: &str) -> Result<Agent, ApiError> {
    state.kestrel.find_agent(id).await.map_err(|e| match e {
        e @ kestrel_core::kestrel::KestrelError::AgentNotFound { .. } => {
            ApiError::not_found(e.to_string())
        }
        e => ApiError::internal(&e),
    })
}

/// The stored run `run_id` of `agent`, if the caller may reach it (404 otherwise, for both:
/// another resource's run is not revealed).
pub(crate) async fn stored_run(
    agent: &Agent,
    caller: &Caller,
    run_id: &str,
) -> Result<kestrel_core::store::StoredRun, ApiError> {
    agent
        .run_store()
        .load(run_id)
        .await
        .map_err(|e| ApiError::internal(&e))?
        .filter(|s| s.state.agent_id == agent.id())
        .filter(|s| caller.resource.is_none() || s.state.settings.resource_id == caller.resource)
        .ok_or_else(|| ApiError::not_found(format!("run {run_id:?} not found")))
}

/// The server's memory, or 404 naming how to configure one.
pub(crate) fn memory(state: &AppState) -> Result<&ServedMemory, ApiError> {
    state.memory.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_memory",
            "this server has no memory: give its instance a storage (Kestrel::builder().storage(..)) \
             or the server a memory with one (Server::memory)",
        )
    })
}

/// The memory the server serves and the store it has, found once when the router is made
/// (a memory that has no store is not served). It reads as the [`Memory`] it wraps.
#[derive(Debug, Clone)]
pub(crate) struct ServedMemory {
    memory: Memory,
    storage: Arc<dyn Storage>,
}

impl ServedMemory {
    /// `memory`, when it has a store.
    pub(crate) fn new(memory: Memory) -> Option<Self> {
        let storage = Arc::clone(memory.storage()?);
        Some(Self { memory, storage })
    }

    /// The memory's store.
    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}

impl std::ops::Deref for ServedMemory {
    type Target = Memory;

    fn deref(&self) -> &Memory {
        &self.memory
    }
}
