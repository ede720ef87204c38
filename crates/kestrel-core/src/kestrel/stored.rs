//! Agents defined in the storage alone: no code, only versions (Mastra's stored agents).
//!
//! A stored agent is built from the version a run chooses: its instructions and model, the
//! instance's tools it names ([`KestrelBuilder::tool`](super::KestrelBuilder::tool)), the
//! instance's code agents it names as sub-agents, the instance's memory. It runs in the
//! instance's runtime like any registered agent.

use std::sync::Arc;

use super::{Kestrel, KestrelError};
use crate::agent::Agent;
use crate::version::{AgentConfig, ResolvedVersion, VersionChoice, VersionError};

impl Kestrel {
    /// The agent with this id: one registered in code, else one defined in the storage of
    /// the instance's memory, seen through its published version (else its latest; a run
    /// still chooses its own version, [`RunOptions::versions`](crate::agent::RunOptions::versions)).
    /// Agents in code never touch the storage here.
    pub async fn find_agent(&self, id: &str) -> Result<Agent, KestrelError> {
        if let Ok(agent) = self.agent(id) {
            return Ok(agent.clone());
        }
        match self.stored_agent(id).await? {
            Some(agent) => Ok(agent),
            None => Err(KestrelError::AgentNotFound {
                id: id.to_owned(),
                known: self.inner.agents.keys().cloned().collect(),
            }),
        }
    }

    /// The agent defined in the storage alone with this id, seen through its published
    /// version (else its latest); `None` when the storage has no versions of it, when the
    /// instance has no memory keeping versions, or when the id is an agent in code (whose
    /// stored versions only change it).
    pub async fn stored_agent(&self, id: &str) -> Result<Option<Agent>, KestrelError> {
        if self.inner.agents.contains_key(id) {
            return Ok(None);
        }
        let Some(store) = self.version_store() else {
            return Ok(None);
        };
        let failed = |e: VersionError| KestrelError::StoredAgent {
            id: id.to_owned(),
            message: e.to_string(),
        };
        let mut version = store
            .resolve(id, &VersionChoice::published())
            .await
            .map_err(failed)?;
        if version.is_none() {
            version = store
                .resolve(id, &VersionChoice::draft())
                .await
                .map_err(failed)?;
        }
        let Some(version) = version else {
            return Ok(None);
        };
        self.build_stored(id, &version).map(Some).map_err(failed)
    }

    /// The ids of the agents defined in the storage alone, sorted.
    pub async fn stored_agent_ids(&self) -> Result<Vec<String>, KestrelError> {
        let Some(store) = self.version_store() else {
            return Ok(Vec::new());
        };
        let mut ids = store
            .agent_ids()
            .await
            .map_err(|e| KestrelError::StoredAgent {
                id: String::new(),
                message: e.to_string(),
            })?;
        ids.retain(|id| !self.inner.agents.contains_key(id));
        ids.sort();
        Ok(ids)
    }

    /// Checks that `config` can be a version of agent `id` before it is stored: for an agent
    /// in code, that it changes only what the agent lets versions change and names only what
    /// the agent has; for a stored agent, that the tools, sub-agents and model it names
    /// exist in this instance.
    pub fn check_agent_config(&self, id: &str, config: &AgentConfig) -> Result<(), VersionError> {
        let version = ResolvedVersion {
            id: "(new)".to_owned(),
            number: 0,
            config: config.clone(),
        };
        match self.agent(id) {
            Ok(agent) => agent.with_version(&version).map(drop),
            Err(_) => self.build_stored(id, &version).map(drop),
        }
    }

    /// The tools agents defined in the storage may name, by id.
    pub fn tools(&self) -> impl Iterator<Item = &crate::tool::SharedTool> {
        self.inner.tools.values()
    }

    fn version_store(&self) -> Option<crate::store::SharedAgentVersions> {
        self.inner.runtime.stores.versions.clone()
    }

    /// The stored agent `id` seen through `version`: a base with every tool and code agent of
    /// the instance, narrowed to what the version names.
    fn build_stored(&self, id: &str, version: &ResolvedVersion) -> Result<Agent, VersionError> {
        let runtime = &self.inner.runtime;
        let invalid = |reason: String| VersionError::Invalid {
            agent_id: id.to_owned(),
            version_id: version.id.clone(),
            reason,
        };
        let mut builder = Agent::builder(id)
            .stored_definition()
            .registry(runtime.models.clone())
            .tools(self.inner.tools.values().cloned())
            .agents(self.inner.agents.values().cloned());
        // The base's model stands only until the version's applies (`with_version`).
        if let Some(model) = &version.config.model {
            builder = builder.model(model.as_str());
        } else if crate::model::default_model(crate::model::process_env).is_none() {
            return Err(invalid(
                "it sets no model, and no default model is configured \
                 (KESTREL_MODEL, an API key, or the local model)"
                    .to_owned(),
            ));
        }
        if let Some(memory) = &runtime.memory {
            builder = builder.memory(Arc::clone(memory));
        }
        let base = builder.build().map_err(|e| invalid(e.to_string()))?;
        base.in_runtime(runtime).with_version(version)
    }
}
