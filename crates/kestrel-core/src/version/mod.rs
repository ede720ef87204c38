//! Versions of agents: a definition kept in a store as numbered versions — drafts, one
//! published — and the choice of which one a run uses.
//!
//! An [`AgentConfig`] is what a version may set: instructions, model, the tools and
//! sub-agents the agent keeps (by id), tool descriptions, default options. A stored agent is
//! defined by its versions alone; an agent written in code may let versions change only what
//! it opts in ([`Editable`]). A run chooses per agent ([`Versions`]): the published version,
//! the latest draft, or a version by id.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::BoxError;

/// What a version of an agent sets; every field left out keeps the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConfig {
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the agent does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The model, as `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The ids of the tools the agent keeps (of those it has); all of them when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// New descriptions of tools, by tool id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_descriptions: BTreeMap<String, String>,
    /// The ids of the sub-agents the agent keeps (of those it has); all when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
    /// Default options of its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_options: Option<DefaultOptions>,
    /// Whether the agent remembers in its memory (the instance's, for a stored agent):
    /// `false` runs it without one. Left out, it keeps its memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<bool>,
}

/// The default options a version may set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultOptions {
    /// The bound on steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
}

impl AgentConfig {
    /// The names of the fields set, as the JSON spells them.
    pub fn fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        let set = [
            ("name", self.name.is_some()),
            ("description", self.description.is_some()),
            ("instructions", self.instructions.is_some()),
            ("model", self.model.is_some()),
            ("tools", self.tools.is_some()),
            ("toolDescriptions", !self.tool_descriptions.is_empty()),
            ("agents", self.agents.is_some()),
            ("defaultOptions", self.default_options.is_some()),
            ("memory", self.memory.is_some()),
        ];
        for (name, is_set) in set {
            if is_set {
                fields.push(name);
            }
        }
        fields
    }

    /// The fields whose values differ between `self` and `other`.
    pub fn changed_fields(&self, other: &AgentConfig) -> Vec<&'static str> {
        let a = serde_json::to_value(self).unwrap_or_default();
        let b = serde_json::to_value(other).unwrap_or_default();
        let names = [
            "name",
            "description",
            "instructions",
            "model",
            "tools",
            "toolDescriptions",
            "agents",
            "defaultOptions",
            "memory",
        ];
        names
            .into_iter()
            .filter(|name| a.get(name) != b.get(name))
            .collect()
    }
}

/// Which fields of an agent written in code its versions may change (none unless opted in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Editable {
    /// The instructions.
    pub instructions: bool,
    /// The descriptions of its tools (not which tools it has).
    pub tool_descriptions: bool,
    /// Which of its tools and sub-agents it keeps.
    pub tools: bool,
    /// The model.
    pub model: bool,
    /// The default options.
    pub default_options: bool,
    /// The name and description.
    pub profile: bool,
    /// Whether it remembers (Mastra never lets versions change a code agent's memory).
    pub memory: bool,
}

impl Editable {
    /// Everything a version can set (what a stored agent allows).
    pub fn all() -> Self {
        Self {
            instructions: true,
            tool_descriptions: true,
            tools: true,
            model: true,
            default_options: true,
            profile: true,
            memory: true,
        }
    }

    /// Only the instructions.
    pub fn instructions() -> Self {
        Self {
            instructions: true,
            ..Self::default()
        }
    }

    /// Also the tools' descriptions.
    pub fn and_tool_descriptions(mut self) -> Self {
        self.tool_descriptions = true;
        self
    }

    /// Whether nothing is editable.
    pub fn is_none(&self) -> bool {
        *self == Self::default()
    }

    /// The fields of `config` this opt-in does not allow.
    pub fn refused<'a>(&self, config: &'a AgentConfig) -> Vec<&'a str> {
        let allowed = |field: &str| match field {
            "instructions" => self.instructions,
            "toolDescriptions" => self.tool_descriptions,
            "tools" | "agents" => self.tools,
            "model" => self.model,
            "defaultOptions" => self.default_options,
            "name" | "description" => self.profile,
            "memory" => self.memory,
            _ => false,
        };
        config
            .fields()
            .into_iter()
            .filter(|f| !allowed(f))
            .collect()
    }
}

/// Which version of an agent a run uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum VersionChoice {
    /// By status: `{"status": "published"}` or `{"status": "draft"}` (the latest version).
    Status {
        /// The status.
        status: VersionStatus,
    },
    /// By id: `{"versionId": "…"}`.
    Id {
        /// The version's id.
        #[serde(rename = "versionId")]
        #[schemars(
            length(min = 1, max = 256),
            pattern(r"^(?!\s*$)[^\u0000-\u001F\u007F-\u009F]*$")
        )]
        version_id: String,
    },
}

impl VersionChoice {
    /// The published version.
    pub fn published() -> Self {
        Self::Status {
            status: VersionStatus::Published,
        }
    }

    /// The latest version (the draft).
    pub fn draft() -> Self {
        Self::Status {
            status: VersionStatus::Draft,
        }
    }

    /// The version with this id.
    pub fn id(version_id: impl Into<String>) -> Self {
        Self::Id {
            version_id: version_id.into(),
        }
    }
}

/// A version's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VersionStatus {
    /// The published version.
    Published,
    /// The latest version.
    Draft,
}

/// The version each agent of a run uses (Mastra's `versions: {agents: {id: …}}`), carried
/// through every delegation. An agent it does not name uses its published version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Versions {
    /// By agent id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub agents: BTreeMap<String, VersionChoice>,
}

impl Versions {
    /// No choice: published versions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Agent `agent_id` uses `choice`.
    pub fn agent(mut self, agent_id: impl Into<String>, choice: VersionChoice) -> Self {
        self.agents.insert(agent_id.into(), choice);
        self
    }

    /// The choice for `agent_id`: its own, else the published version.
    pub fn choice_for(&self, agent_id: &str) -> VersionChoice {
        self.agents
            .get(agent_id)
            .cloned()
            .unwrap_or_else(VersionChoice::published)
    }

    /// `self`'s choices over `defaults`'.
    pub fn over(&self, defaults: &Versions) -> Versions {
        let mut agents = defaults.agents.clone();
        agents.extend(self.agents.clone());
        Versions { agents }
    }
}

/// A version a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVersion {
    /// Its id.
    pub id: String,
    /// Its number (1 for the first).
    pub number: i64,
    /// What it sets.
    pub config: AgentConfig,
}

/// Why a run could not use the version chosen for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// The agent has no version with this id (another agent's version included).
    #[error("agent {agent_id:?} has no version {version_id:?}")]
    UnknownVersion {
        /// The agent.
        agent_id: String,
        /// The version asked for.
        version_id: String,
    },
    /// The version sets fields the agent does not let versions change.
    #[error("version {version_id:?} of agent {agent_id:?} sets {}, which the agent does not let versions change", .fields.join(", "))]
    NotEditable {
        /// The agent.
        agent_id: String,
        /// The version.
        version_id: String,
        /// The fields refused.
        fields: Vec<String>,
    },
    /// The version names what the agent does not have, or is malformed.
    #[error("version {version_id:?} of agent {agent_id:?} cannot be used: {reason}")]
    Invalid {
        /// The agent.
        agent_id: String,
        /// The version.
        version_id: String,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error("reading the agent's versions failed: {0}")]
    Store(#[source] BoxError),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn choices_read_as_mastra_writes_them() {
        let versions: Versions = serde_json::from_value(json!({"agents": {
            "research-agent": {"status": "published"},
            "writing-agent": {"versionId": "draft-456"},
            "editor": {"status": "draft"},
        }}))
        .unwrap();
        assert_eq!(
            versions.choice_for("research-agent"),
            VersionChoice::published()
        );
        assert_eq!(
            versions.choice_for("writing-agent"),
            VersionChoice::id("draft-456")
        );
        assert_eq!(versions.choice_for("editor"), VersionChoice::draft());
        assert_eq!(versions.choice_for("other"), VersionChoice::published());
        assert!(
            serde_json::from_value::<Versions>(json!({"agents": {"a": {"status": "old"}}}))
                .is_err()
        );
    }

    #[test]
    fn per_run_choices_stand_over_the_defaults() {
        let defaults = Versions::new()
            .agent("a", VersionChoice::draft())
            .agent("b", VersionChoice::draft());
        let run = Versions::new().agent("b", VersionChoice::id("v9"));
        let merged = run.over(&defaults);
        assert_eq!(merged.choice_for("a"), VersionChoice::draft());
        assert_eq!(merged.choice_for("b"), VersionChoice::id("v9"));
    }

    #[test]
    fn editable_fields_refuse_the_others() {
        let config = AgentConfig {
            instructions: Some("x".into()),
            model: Some("openai/gpt-5".into()),
            tool_descriptions: [("t".to_owned(), "d".to_owned())].into(),
            ..AgentConfig::default()
        };
        let editable = Editable::instructions().and_tool_descriptions();
        assert_eq!(editable.refused(&config), ["model"]);
        assert!(Editable::all().refused(&config).is_empty());
        assert_eq!(
            Editable::default().refused(&config),
            ["instructions", "model", "toolDescriptions"]
        );
        let other = AgentConfig {
            instructions: Some("y".into()),
            ..config.clone()
        };
        assert_eq!(config.changed_fields(&other), ["instructions"]);
        assert!(serde_json::from_value::<AgentConfig>(json!({"instructionz": "x"})).is_err());
    }
}
