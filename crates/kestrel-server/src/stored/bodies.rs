//! The bodies and queries of the stored-agent routes, and how a body's fields go over a
//! version's.

use std::collections::BTreeMap;

use kestrel_core::version::{AgentConfig, DefaultOptions};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::ApiError;

/// At most this many tools, sub-agents or tool descriptions in one version (the schemas say
/// so, and `wire::Body` enforces what they say).
const MAX_NAMES: usize = 256;

/// A model: `provider/model`, or Mastra's `{provider, name}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum ModelBody {
    /// `provider/model`.
    Id(#[schemars(length(min = 1, max = crate::wire::MAX_NAME_LEN))] String),
    /// Mastra's form.
    Parts {
        /// The provider.
        #[schemars(length(min = 1, max = 128))]
        provider: String,
        /// The model's name.
        #[schemars(length(min = 1, max = crate::wire::MAX_NAME_LEN))]
        name: String,
    },
}

/// The fields of an agent's definition a version sets (those left out keep the version it
/// is made from).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ConfigBody {
    /// A display name.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    pub(super) name: Option<String>,
    /// What the agent does.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_TEXT_LEN))]
    pub(super) description: Option<String>,
    /// The system prompt.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_PROMPT_LEN))]
    pub(super) instructions: Option<String>,
    /// The model.
    #[serde(default)]
    pub(super) model: Option<ModelBody>,
    /// The ids of the tools it has (of the instance's, for a stored agent; of its own, for a
    /// code agent).
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) tools: Option<Vec<String>>,
    /// New descriptions of tools, by tool id.
    #[serde(default)]
    #[schemars(extend(
        "maxProperties" = MAX_NAMES,
        "propertyNames" = {"maxLength": crate::wire::MAX_ID_LEN},
        "additionalProperties" = {"type": "string", "maxLength": crate::wire::MAX_TEXT_LEN},
    ))]
    pub(super) tool_descriptions: Option<BTreeMap<String, String>>,
    /// The ids of its sub-agents.
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) agents: Option<Vec<String>>,
    /// Default options of its runs.
    #[serde(default)]
    pub(super) default_options: Option<DefaultOptionsBody>,
    /// Whether it remembers in the instance's memory (default true; a code agent keeps its own).
    #[serde(default)]
    pub(super) memory: Option<bool>,
}

/// Default options a version sets.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DefaultOptionsBody {
    /// The bound on steps.
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(min = 1, max = 1000))]
    pub(super) max_steps: Option<u32>,
}

/// `POST /stored/agents`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CreateBody {
    /// Its id (from its name when left out).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub(super) id: Option<String>,
    /// A display name.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    pub(super) name: Option<String>,
    /// What the agent does.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_TEXT_LEN))]
    pub(super) description: Option<String>,
    /// The system prompt.
    #[schemars(length(max = crate::wire::MAX_PROMPT_LEN))]
    pub(super) instructions: String,
    /// The model (the instance's default when left out).
    #[serde(default)]
    pub(super) model: Option<ModelBody>,
    /// The ids of the instance's tools it has.
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) tools: Option<Vec<String>>,
    /// New descriptions of tools, by tool id.
    #[serde(default)]
    #[schemars(extend(
        "maxProperties" = MAX_NAMES,
        "propertyNames" = {"maxLength": crate::wire::MAX_ID_LEN},
        "additionalProperties" = {"type": "string", "maxLength": crate::wire::MAX_TEXT_LEN},
    ))]
    pub(super) tool_descriptions: Option<BTreeMap<String, String>>,
    /// The ids of the instance's agents it delegates to.
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) agents: Option<Vec<String>>,
    /// Default options of its runs.
    #[serde(default)]
    pub(super) default_options: Option<DefaultOptionsBody>,
    /// Whether it remembers in the instance's memory (default true; a code agent keeps its own).
    #[serde(default)]
    pub(super) memory: Option<bool>,
    /// Free-form metadata.
    #[serde(default)]
    pub(super) metadata: Option<Map<String, Value>>,
    /// Why the first version was made.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_TEXT_LEN))]
    pub(super) change_message: Option<String>,
    /// Publish the first version (default true).
    #[serde(default)]
    pub(super) publish_on_save: Option<bool>,
}

/// `PATCH /stored/agents/{id}` and `POST …/versions`: fields over the latest version.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct UpdateBody {
    /// A display name.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    pub(super) name: Option<String>,
    /// What the agent does.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_TEXT_LEN))]
    pub(super) description: Option<String>,
    /// The system prompt.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_PROMPT_LEN))]
    pub(super) instructions: Option<String>,
    /// The model.
    #[serde(default)]
    pub(super) model: Option<ModelBody>,
    /// The ids of the tools it has.
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) tools: Option<Vec<String>>,
    /// New descriptions of tools, by tool id.
    #[serde(default)]
    #[schemars(extend(
        "maxProperties" = MAX_NAMES,
        "propertyNames" = {"maxLength": crate::wire::MAX_ID_LEN},
        "additionalProperties" = {"type": "string", "maxLength": crate::wire::MAX_TEXT_LEN},
    ))]
    pub(super) tool_descriptions: Option<BTreeMap<String, String>>,
    /// The ids of its sub-agents.
    #[serde(default)]
    #[schemars(
        length(max = MAX_NAMES),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))
    )]
    pub(super) agents: Option<Vec<String>>,
    /// Default options of its runs.
    #[serde(default)]
    pub(super) default_options: Option<DefaultOptionsBody>,
    /// Whether it remembers in the instance's memory (default true; a code agent keeps its own).
    #[serde(default)]
    pub(super) memory: Option<bool>,
    /// Why the version was made.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_TEXT_LEN))]
    pub(super) change_message: Option<String>,
    /// Publish the new version (`PATCH`: default true; `POST …/versions`: default false, a
    /// draft).
    #[serde(default)]
    pub(super) publish_on_save: Option<bool>,
}

impl UpdateBody {
    /// The fields, the change message and `publishOnSave`.
    pub(super) fn into_parts(self) -> (ConfigBody, Option<String>, Option<bool>) {
        let config = ConfigBody {
            name: self.name,
            description: self.description,
            instructions: self.instructions,
            model: self.model,
            tools: self.tools,
            tool_descriptions: self.tool_descriptions,
            agents: self.agents,
            default_options: self.default_options,
            memory: self.memory,
        };
        (config, self.change_message, self.publish_on_save)
    }
}

impl ConfigBody {
    /// `base` with the fields given over it; refuses names that cannot be ids (the schema's
    /// bounds on lengths and counts were enforced when the body was read).
    pub(super) fn over(self, base: &AgentConfig) -> Result<AgentConfig, ApiError> {
        for (field, list) in [("tools", &self.tools), ("agents", &self.agents)] {
            if let Some(list) = list {
                check_names(field, list)?;
            }
        }
        // Their keys need no check here: a key that names no tool of the agent is refused
        // by the instance's check of the version.
        let mut config = base.clone();
        if let Some(name) = self.name {
            config.name = Some(name);
        }
        if let Some(description) = self.description {
            config.description = Some(description);
        }
        if let Some(instructions) = self.instructions {
            config.instructions = Some(instructions);
        }
        if let Some(model) = self.model {
            config.model = Some(match model {
                ModelBody::Id(id) => id,
                ModelBody::Parts { provider, name } => format!("{provider}/{name}"),
            });
        }
        if let Some(tools) = self.tools {
            config.tools = Some(tools);
        }
        if let Some(descriptions) = self.tool_descriptions {
            config.tool_descriptions = descriptions;
        }
        if let Some(agents) = self.agents {
            config.agents = Some(agents);
        }
        if let Some(memory) = self.memory {
            config.memory = Some(memory);
        }
        if let Some(options) = self.default_options {
            if options.max_steps == Some(0) {
                return Err(ApiError::invalid(
                    "defaultOptions.maxSteps must be at least 1",
                ));
            }
            config.default_options = Some(DefaultOptions {
                max_steps: options.max_steps,
            });
        }
        Ok(config)
    }
}

/// Refuses a list of `field` (`tools`, `agents`) with an entry that cannot be an id.
fn check_names(field: &str, names: &[String]) -> Result<(), ApiError> {
    for name in names {
        if let Some(problem) = crate::wire::id_problem(name) {
            return Err(ApiError::invalid(format!("{field}: {problem}")));
        }
    }
    Ok(())
}

/// Which version describes an agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StatusQuery {
    /// `published` (the default: the published version, else the latest for a stored
    /// agent) or `draft` (the latest version).
    #[serde(default)]
    pub(super) status: Option<kestrel_core::version::VersionStatus>,
}

/// Pages of a list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListQuery {
    /// The page, from 0.
    #[serde(default)]
    pub(super) page: Option<u32>,
    /// Entries per page: 1 to 1,000 (default 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub(super) per_page: Option<u32>,
    /// `ASC` or `DESC` (the default: newest first).
    #[serde(default, rename = "orderBy[direction]")]
    #[schemars(extend("enum" = ["DESC", "ASC", "desc", "asc"]))]
    pub(super) direction: Option<String>,
    /// Only agents with this status (`published`: one version is published; `draft`:
    /// none is).
    #[serde(default)]
    pub(super) status: Option<kestrel_core::version::VersionStatus>,
}

/// The two versions to compare.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct CompareQuery {
    /// The older version's id.
    #[schemars(length(min = 1, max = 256))]
    pub(super) from: String,
    /// The newer version's id.
    #[schemars(length(min = 1, max = 256))]
    pub(super) to: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn fields_go_over_the_base() {
        let base = AgentConfig {
            instructions: Some("old".into()),
            model: Some("openai/gpt-5".into()),
            ..AgentConfig::default()
        };
        let body: ConfigBody = serde_json::from_value(json!({
            "instructions": "new",
            "model": {"provider": "anthropic", "name": "claude"},
        }))
        .unwrap();
        let config = body.over(&base).unwrap();
        assert_eq!(config.instructions.as_deref(), Some("new"));
        assert_eq!(config.model.as_deref(), Some("anthropic/claude"));
        assert_eq!(base.changed_fields(&config), ["instructions", "model"]);
        let zero: ConfigBody =
            serde_json::from_value(json!({"defaultOptions": {"maxSteps": 0}})).unwrap();
        assert!(zero.over(&base).is_err());
        let unknown = serde_json::from_value::<ConfigBody>(json!({"instructionz": "x"}));
        assert!(unknown.is_err());
    }
}
