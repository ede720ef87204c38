//! The stored agents of [`super::InMemoryStorage`] and their versions.

use crate::storage::AgentStore;
use async_trait::async_trait;

use super::{InMemoryStorage, State};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{AgentVersion, NewAgentVersion, NewStoredAgent, StoredAgent};

fn not_found(agent_id: &str) -> StorageError {
    StorageError::AgentNotFound {
        agent_id: agent_id.to_owned(),
    }
}

fn version_not_found(agent_id: &str, version_id: &str) -> StorageError {
    StorageError::VersionNotFound {
        agent_id: agent_id.to_owned(),
        version_id: version_id.to_owned(),
    }
}

pub(super) fn create(
    state: &mut State,
    agent: NewStoredAgent,
) -> Result<(StoredAgent, AgentVersion)> {
    codec::check_id("id", &agent.id)?;
    if state.stored_agents.contains_key(&agent.id) {
        return Err(StorageError::AgentExists { agent_id: agent.id });
    }
    let now = codec::now();
    state.stored_agents.insert(
        agent.id.clone(),
        StoredAgent {
            id: agent.id.clone(),
            active_version_id: None,
            metadata: agent.metadata,
            created_at: now,
            updated_at: now,
        },
    );
    let version = add_version(state, &agent.id, agent.version)?;
    let stored = if agent.publish {
        activate(state, &agent.id, Some(&version.id))?
    } else {
        get(state, &agent.id).ok_or_else(|| not_found(&agent.id))?
    };
    Ok((stored, version))
}

pub(super) fn get(state: &State, agent_id: &str) -> Option<StoredAgent> {
    state.stored_agents.get(agent_id).cloned()
}

pub(super) fn list(state: &State) -> Vec<StoredAgent> {
    state.stored_agents.values().cloned().collect()
}

pub(super) fn delete(state: &mut State, agent_id: &str) -> bool {
    state.agent_versions.remove(agent_id);
    state.stored_agents.remove(agent_id).is_some()
}

pub(super) fn add_version(
    state: &mut State,
    agent_id: &str,
    version: NewAgentVersion,
) -> Result<AgentVersion> {
    let now = codec::now();
    let agent = state
        .stored_agents
        .get_mut(agent_id)
        .ok_or_else(|| not_found(agent_id))?;
    agent.updated_at = now;
    let versions = state.agent_versions.entry(agent_id.to_owned()).or_default();
    let number = versions.iter().map(|v| v.version_number).max().unwrap_or(0) + 1;
    let added = AgentVersion {
        id: codec::new_id(),
        agent_id: agent_id.to_owned(),
        version_number: number,
        config: version.config,
        changed_fields: version.changed_fields,
        change_message: version.change_message,
        created_at: now,
    };
    versions.push(added.clone());
    Ok(added)
}

pub(super) fn get_version(state: &State, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
    state
        .agent_versions
        .get(agent_id)
        .and_then(|versions| versions.iter().find(|v| v.id == version_id))
        .cloned()
        .ok_or_else(|| version_not_found(agent_id, version_id))
}

pub(super) fn list_versions(state: &State, agent_id: &str) -> Result<Vec<AgentVersion>> {
    if !state.stored_agents.contains_key(agent_id) {
        return Err(not_found(agent_id));
    }
    let mut versions = state
        .agent_versions
        .get(agent_id)
        .cloned()
        .unwrap_or_default();
    versions.sort_by_key(|v| std::cmp::Reverse(v.version_number));
    Ok(versions)
}

pub(super) fn activate(
    state: &mut State,
    agent_id: &str,
    version_id: Option<&str>,
) -> Result<StoredAgent> {
    if !state.stored_agents.contains_key(agent_id) {
        return Err(not_found(agent_id));
    }
    if let Some(version_id) = version_id {
        get_version(state, agent_id, version_id)?;
    }
    let agent = state
        .stored_agents
        .get_mut(agent_id)
        .ok_or_else(|| not_found(agent_id))?;
    agent.active_version_id = version_id.map(str::to_owned);
    agent.updated_at = codec::now();
    Ok(agent.clone())
}

pub(super) fn delete_version(state: &mut State, agent_id: &str, version_id: &str) -> Result<()> {
    get_version(state, agent_id, version_id)?;
    let published = state
        .stored_agents
        .get(agent_id)
        .is_some_and(|a| a.active_version_id.as_deref() == Some(version_id));
    if published {
        return Err(StorageError::VersionPublished {
            agent_id: agent_id.to_owned(),
            version_id: version_id.to_owned(),
        });
    }
    if let Some(versions) = state.agent_versions.get_mut(agent_id) {
        versions.retain(|v| v.id != version_id);
    }
    Ok(())
}

#[async_trait]
impl AgentStore for InMemoryStorage {
    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)> {
        create(&mut self.state(), agent)
    }

    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>> {
        Ok(get(&self.state(), agent_id))
    }

    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>> {
        Ok(list(&self.state()))
    }

    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool> {
        Ok(delete(&mut self.state(), agent_id))
    }

    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion> {
        add_version(&mut self.state(), agent_id, version)
    }

    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
        get_version(&self.state(), agent_id, version_id)
    }

    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>> {
        list_versions(&self.state(), agent_id)
    }

    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent> {
        activate(&mut self.state(), agent_id, version_id)
    }

    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()> {
        delete_version(&mut self.state(), agent_id, version_id)
    }
}
