//! An agent seen through one of its versions: the version's instructions, model, tools,
//! sub-agents and tool descriptions over the agent's own, as far as the agent lets versions
//! change them ([`crate::version::Editable`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::Agent;
use crate::definition::tools::{DELEGATION_TOOL_PREFIX, ToolDefinitions};
use crate::definition::{AgentDefinition, Instructions, ModelSource};
use crate::model::ModelSpec;
use crate::store::SharedAgentVersions;
use crate::tool::{ApprovalContext, SharedTool, Tool, ToolContext, ToolError, ToolSet};
use crate::version::{Editable, ResolvedVersion, VersionChoice, VersionError};

impl Agent {
    /// Where this agent's versions are kept: its runtime's store.
    pub(crate) fn version_store(&self) -> Option<SharedAgentVersions> {
        self.runtime.stores.versions.clone()
    }

    /// The version of this agent that `choice` names in `store`. A stored agent with no
    /// published version runs its latest (it has nothing else to run).
    pub(crate) async fn resolve_version(
        &self,
        store: &SharedAgentVersions,
        choice: &VersionChoice,
    ) -> Result<Option<ResolvedVersion>, VersionError> {
        let resolved = store.resolve(self.id(), choice).await?;
        if resolved.is_none()
            && self.inner.versioning.stored
            && *choice == VersionChoice::published()
        {
            return store.resolve(self.id(), &VersionChoice::draft()).await;
        }
        Ok(resolved)
    }

    /// This agent as a run choosing `choice` would see it: through the stored version the
    /// choice names, or as it is when it has no stored versions (or none published, for the
    /// published choice). What `GET /api/agents/{id}?status=draft` describes.
    pub async fn at_version(&self, choice: &VersionChoice) -> Result<Agent, VersionError> {
        let Some(store) = self.version_store() else {
            return match choice {
                VersionChoice::Id { version_id } => Err(VersionError::UnknownVersion {
                    agent_id: self.id().to_owned(),
                    version_id: version_id.clone(),
                }),
                VersionChoice::Status { .. } => Ok(self.clone()),
            };
        };
        match self.resolve_version(&store, choice).await? {
            Some(version) => self.with_version(&version),
            None => Ok(match &self.inner.versioning.base {
                // Seen through a version already: back to the definition in code.
                Some(base) if !self.inner.versioning.stored => Agent {
                    inner: Arc::clone(base),
                    runtime: Arc::clone(&self.runtime),
                },
                _ => self.clone(),
            }),
        }
    }

    /// What the agent's stored versions may change (everything, for a stored agent).
    pub fn editable(&self) -> Editable {
        self.inner.editable
    }

    /// Whether the agent is defined in the storage alone, with no code
    /// ([`crate::kestrel::Kestrel::find_agent`]).
    pub fn is_stored(&self) -> bool {
        self.inner.versioning.stored
    }

    /// The stored version this agent is seen through, if any.
    pub fn version_id(&self) -> Option<&str> {
        self.inner.versioning.version_id.as_deref()
    }

    /// This agent with `version` over its own definition.
    pub(crate) fn with_version(&self, version: &ResolvedVersion) -> Result<Agent, VersionError> {
        // A version applies to the definition in code (or a stored agent's base), never on
        // top of another version.
        let base = self.inner.versioning.base.as_ref().unwrap_or(&self.inner);
        let inner = &**base;
        let stored_config;
        let config = if inner.versioning.stored {
            // A stored agent has exactly the tools and sub-agents its version names.
            let mut config = version.config.clone();
            config.tools.get_or_insert_with(Vec::new);
            config.agents.get_or_insert_with(Vec::new);
            stored_config = config;
            &stored_config
        } else {
            &version.config
        };
        let refused = inner.editable.refused(config);
        if !refused.is_empty() {
            return Err(VersionError::NotEditable {
                agent_id: inner.id.clone(),
                version_id: version.id.clone(),
                fields: refused.into_iter().map(str::to_owned).collect(),
            });
        }
        let invalid = |reason: String| VersionError::Invalid {
            agent_id: inner.id.clone(),
            version_id: version.id.clone(),
            reason,
        };
        let unknown = |kind: &str, names: Vec<&String>| {
            invalid(format!(
                "it names {kind} the agent does not have: {}",
                names
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        };
        if let Some(tools) = &config.tools {
            let missing: Vec<&String> = tools
                .iter()
                .filter(|t| !inner.own_tools.contains(t))
                .collect();
            if !missing.is_empty() {
                return Err(unknown("tools", missing));
            }
        }
        if let Some(agents) = &config.agents {
            let missing: Vec<&String> = agents
                .iter()
                .filter(|a| !inner.sub_agents.contains_key(*a))
                .collect();
            if !missing.is_empty() {
                return Err(unknown("sub-agents", missing));
            }
        }
        let sub_agents: HashMap<String, Arc<AgentDefinition>> = inner
            .sub_agents
            .iter()
            .filter(|(id, _)| config.agents.as_ref().is_none_or(|keep| keep.contains(id)))
            .map(|(id, agent)| (id.clone(), Arc::clone(agent)))
            .collect();
        let memory = match config.memory {
            Some(false) => None,
            _ => inner.memory.clone(),
        };
        let all_memory_tools: Vec<String> = inner
            .memory
            .iter()
            .flat_map(|m| m.tools())
            .map(|t| t.id().to_owned())
            .collect();
        let mut tools = ToolSet::new();
        for name in inner.tools.names() {
            if memory.is_none() && all_memory_tools.contains(&name) {
                continue;
            }
            let Some(tool) = inner.tools.get(&name) else {
                continue;
            };
            let dropped_own = inner.own_tools.contains(&name)
                && config
                    .tools
                    .as_ref()
                    .is_some_and(|keep| !keep.contains(&name));
            let dropped_sub_agent = name.strip_prefix(DELEGATION_TOOL_PREFIX).is_some_and(|id| {
                inner.sub_agents.contains_key(id) && !sub_agents.contains_key(id)
            });
            if dropped_own || dropped_sub_agent {
                continue;
            }
            let tool = match config.tool_descriptions.get(&name) {
                Some(description) => Arc::new(Described {
                    tool: Arc::clone(tool),
                    description: description.clone(),
                }) as SharedTool,
                None => Arc::clone(tool),
            };
            tools
                .insert(tool)
                .map_err(|e| invalid(format!("its tools do not fit together: {e}")))?;
        }
        let described: Vec<&String> = config
            .tool_descriptions
            .keys()
            .filter(|name| tools.get(name).is_none())
            .collect();
        if !described.is_empty() {
            return Err(unknown("tool descriptions for tools", described));
        }
        // A stored agent's version without a model runs on the default model.
        let default_model;
        let chosen_model = match &config.model {
            None if inner.versioning.stored => {
                default_model =
                    crate::model::default_model(crate::model::process_env).ok_or_else(|| {
                        invalid(
                            "it sets no model, and no default model is configured \
                             (KESTREL_MODEL, an API key, or the local model)"
                                .to_owned(),
                        )
                    })?;
                Some(&default_model)
            }
            other => other.as_ref(),
        };
        let model = match chosen_model {
            Some(model) => {
                let registry = inner.own_registry.as_ref().unwrap_or(&self.runtime.models);
                let resolved = ModelSpec::Id(model.clone())
                    .resolve(registry)
                    .map_err(|e| invalid(format!("its model cannot be used: {e}")))?;
                ModelSource::Fixed(resolved)
            }
            None => inner.model.clone(),
        };
        let memory_tools = if memory.is_some() {
            all_memory_tools
        } else {
            Vec::new()
        };
        let tool_definitions = ToolDefinitions::new(&tools, &sub_agents, &memory_tools);
        let definition = AgentDefinition {
            id: inner.id.clone(),
            name: config.name.clone().unwrap_or_else(|| inner.name.clone()),
            description: config
                .description
                .clone()
                .unwrap_or_else(|| inner.description.clone()),
            instructions: match &config.instructions {
                Some(text) => Instructions::Static(text.as_str().into()),
                None => inner.instructions.clone(),
            },
            model,
            tools,
            max_steps: config
                .default_options
                .as_ref()
                .and_then(|o| o.max_steps)
                .unwrap_or(inner.max_steps)
                .max(1),
            defaults: inner.defaults.clone(),
            own_registry: inner.own_registry.clone(),
            memory,
            own_run_store: inner.own_run_store.clone(),
            sub_agents,
            workflows: inner.workflows.clone(),
            own_tools: inner
                .own_tools
                .iter()
                .filter(|t| config.tools.as_ref().is_none_or(|keep| keep.contains(t)))
                .cloned()
                .collect(),
            background: inner.background.clone(),
            tool_definitions,
            skills: inner.skills.clone(),
            scorers: inner.scorers.clone(),
            processors: inner.processors.clone(),
            editable: inner.editable,
            versioning: crate::definition::Versioning {
                stored: inner.versioning.stored,
                base: Some(Arc::clone(base)),
                version_id: Some(version.id.clone()),
            },
        };
        Ok(Agent {
            inner: Arc::new(definition),
            runtime: Arc::clone(&self.runtime),
        })
    }
}

/// A tool with another description (a version's).
struct Described {
    tool: SharedTool,
    description: String,
}

#[async_trait::async_trait]
impl Tool for Described {
    fn id(&self) -> &str {
        self.tool.id()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        self.tool.input_schema()
    }

    fn output_schema(&self) -> Option<&Value> {
        self.tool.output_schema()
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        self.tool.execute(input, ctx).await
    }

    fn requires_approval(&self, input: &Value, ctx: &ApprovalContext<'_>) -> bool {
        self.tool.requires_approval(input, ctx)
    }

    fn is_client_tool(&self) -> bool {
        self.tool.is_client_tool()
    }

    fn suspend_schema(&self) -> Option<&Value> {
        self.tool.suspend_schema()
    }

    fn resume_schema(&self) -> Option<&Value> {
        self.tool.resume_schema()
    }

    fn needs_conversation(&self) -> bool {
        self.tool.needs_conversation()
    }
}
