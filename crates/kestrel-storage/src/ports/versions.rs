//! The [`AgentVersionStore`](kestrel_core::store::AgentVersionStore) port on a [`Storage`]
//! backend's stored agents: which stored version a run of an agent uses.

use kestrel_core::version::{
    AgentConfig, ResolvedVersion, VersionChoice, VersionError, VersionStatus,
};

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::AgentVersion;

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

/// [`AgentVersionStore::resolve`](kestrel_core::store::AgentVersionStore::resolve) on `storage`.
pub async fn resolve<S: Storage + ?Sized>(
    storage: &S,
    agent_id: &str,
    choice: &VersionChoice,
) -> Result<Option<ResolvedVersion>, VersionError> {
    let unknown = |version_id: &str| VersionError::UnknownVersion {
        agent_id: agent_id.to_owned(),
        version_id: version_id.to_owned(),
    };
    let Some(agent) = storage
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
            match storage.get_agent_version(agent_id, version_id).await {
                Ok(version) => version,
                Err(StorageError::VersionNotFound { .. }) => return Err(unknown(version_id)),
                Err(e) => return Err(store_error(e)),
            }
        }
        VersionChoice::Status {
            status: VersionStatus::Published,
        } => match &agent.active_version_id {
            Some(id) => storage
                .get_agent_version(agent_id, id)
                .await
                .map_err(store_error)?,
            None => return Ok(None),
        },
        VersionChoice::Status {
            status: VersionStatus::Draft,
        } => match storage
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

/// [`AgentVersionStore::agent_ids`](kestrel_core::store::AgentVersionStore::agent_ids) on `storage`.
pub async fn agent_ids<S: Storage + ?Sized>(storage: &S) -> Result<Vec<String>, VersionError> {
    let agents = storage.list_stored_agents().await.map_err(store_error)?;
    Ok(agents.into_iter().map(|a| a.id).collect())
}
