//! Agent versions as runs read them: which stored version of an agent a run uses.
//!
//! The server's version routes write versions through the storage itself; runs only read.

use std::sync::Arc;

use crate::version::{ResolvedVersion, VersionChoice, VersionError};

/// Where agents' versions are kept, as runs read them. `kestrel-storage` implements it on
/// every backend; an instance given a storage ([`crate::kestrel::KestrelBuilder::storage`]) reads its agents'
/// versions there.
#[async_trait::async_trait]
pub trait AgentVersionStore: Send + Sync {
    /// The version of `agent_id` that `choice` names: `None` when the agent has no stored
    /// versions, or none is published and the choice is the published one (the agent's own
    /// definition is used then). A version id the agent does not have is an error.
    async fn resolve(
        &self,
        agent_id: &str,
        choice: &VersionChoice,
    ) -> Result<Option<ResolvedVersion>, VersionError>;

    /// The ids of every agent with stored versions (agents in code with versions included).
    async fn agent_ids(&self) -> Result<Vec<String>, VersionError>;
}

/// A version store shared by an instance's agents.
pub type SharedAgentVersions = Arc<dyn AgentVersionStore>;
