//! Agents defined in the storage, and the versions of any agent (stored or defined in code).

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{AgentVersion, NewAgentVersion, NewStoredAgent, StoredAgent};

/// Agents defined in the storage, and the versions of any agent (stored or defined in code).
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Creates a stored agent with its first version (published when `agent.publish`). A
    /// taken id is [`StorageError::AgentExists`](crate::StorageError::AgentExists).
    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)>;

    /// The stored agent with this id, if any.
    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>>;

    /// Every stored agent, by id.
    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>>;

    /// Deletes a stored agent and its versions; `false` when there was none.
    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool>;

    /// Adds a version (numbered one more than the agent's latest) and returns it.
    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion>;

    /// The agent's version with this id; [`StorageError::VersionNotFound`](crate::StorageError::VersionNotFound)
    /// when the agent has none (another agent's version included).
    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion>;

    /// The agent's versions, newest first.
    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>>;

    /// Publishes one of the agent's versions (`None`: none, the agent's code or nothing is
    /// served) and returns the agent.
    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent>;

    /// Deletes one of the agent's versions; the published one is refused with
    /// [`StorageError::VersionPublished`](crate::StorageError::VersionPublished).
    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()>;
}
