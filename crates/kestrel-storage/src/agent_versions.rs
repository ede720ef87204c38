//! [`StorageAgentVersions`]: the agent runtime's [`AgentVersionStore`] on any [`Storage`]
//! backend: which stored version a run of an agent uses.

use std::sync::Arc;

use kestrel_core::version::{
    AgentConfig, AgentVersionStore, ResolvedVersion, VersionChoice, VersionError, VersionStatus,
};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::AgentVersion;

/// An [`AgentVersionStore`] on a [`Storage`]. Cheap to clone.
#[derive(Clone)]
pub struct StorageAgentVersions {
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for StorageAgentVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageAgentVersions")
            .field("backend", &self.storage.backend())
            .finish()
    }
}

impl StorageAgentVersions {
    /// Versions in `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self { storage }
    }
}

fn store_error(error: StorageError) -> VersionError {
    VersionError::Store(Box::new(error))
}

fn resolved(version: AgentVersion) -> Result<ResolvedVersion, VersionError> {
    let config: AgentConfig =
        serde_json::from_value(version.config).map_err(|e| VersionError::Invalid {
            agent_id: version.agent_id.clone(),
            version_id: version.id.clone(),
            reason: format!("its definition does not parse: {e}"),
        })?;
    Ok(ResolvedVersion {
        id: version.id,
        number: version.version_number,
        config,
    })
}

#[async_trait::async_trait]
impl AgentVersionStore for StorageAgentVersions {
    async fn resolve(
        &self,
        agent_id: &str,
        choice: &VersionChoice,
    ) -> Result<Option<ResolvedVersion>, VersionError> {
        let unknown = |version_id: &str| VersionError::UnknownVersion {
            agent_id: agent_id.to_owned(),
            version_id: version_id.to_owned(),
        };
        let Some(agent) = self
            .storage
            .get_stored_agent(agent_id)
            .await
            .map_err(store_error)?
        else {
            return match choice {
                VersionChoice::Id { version_id } => Err(unknown(version_id)),
                VersionChoice::Status { .. } => Ok(None),
            };
        };
        let version = match choice {
            VersionChoice::Id { version_id } => {
                match self.storage.get_agent_version(agent_id, version_id).await {
                    Ok(version) => version,
                    Err(StorageError::VersionNotFound { .. }) => return Err(unknown(version_id)),
                    Err(e) => return Err(store_error(e)),
                }
            }
            VersionChoice::Status {
                status: VersionStatus::Published,
            } => match &agent.active_version_id {
                Some(id) => self
                    .storage
                    .get_agent_version(agent_id, id)
                    .await
                    .map_err(store_error)?,
                None => return Ok(None),
            },
            VersionChoice::Status {
                status: VersionStatus::Draft,
            } => match self
                .storage
                .list_agent_versions(agent_id)
                .await
                .map_err(store_error)?
                .into_iter()
                .next()
            {
                Some(latest) => latest,
                None => return Ok(None),
            },
        };
        resolved(version).map(Some)
    }

    async fn agent_ids(&self) -> Result<Vec<String>, VersionError> {
        let agents = self
            .storage
            .list_stored_agents()
            .await
            .map_err(store_error)?;
        Ok(agents.into_iter().map(|a| a.id).collect())
    }
}
