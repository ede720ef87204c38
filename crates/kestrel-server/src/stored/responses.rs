//! What the stored-agent routes answer, in Mastra's shapes: a version is its record with the
//! fields of the definition it sets at the top level; a stored agent is its record seen
//! through one of its versions ("resolved"). Each body is a type, so the OpenAPI document
//! gives its schema.

use std::collections::BTreeMap;

use kestrel_storage::{AgentVersion, Metadata, StoredAgent};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::AppState;

/// The fields of an agent's definition a version sets, as stored (`AgentConfig`'s JSON);
/// those it leaves alone are left out. Only documented: the fields are copied from the
/// stored JSON as they are.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Only its schema is used.
struct AgentDefinitionFields {
    /// A display name.
    #[serde(default)]
    name: Option<String>,
    /// What the agent does.
    #[serde(default)]
    description: Option<String>,
    /// The system prompt.
    #[serde(default)]
    instructions: Option<String>,
    /// The model, as `provider/model`.
    #[serde(default)]
    model: Option<String>,
    /// The ids of the tools the agent keeps.
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// New descriptions of tools, by tool id.
    #[serde(default)]
    tool_descriptions: Option<BTreeMap<String, String>>,
    /// The ids of the sub-agents the agent keeps.
    #[serde(default)]
    agents: Option<Vec<String>>,
    /// Default options of its runs.
    #[serde(default)]
    default_options: Option<DefinitionDefaultOptions>,
    /// Whether the agent remembers in its memory.
    #[serde(default)]
    memory: Option<bool>,
}

/// The default options a version sets.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Only its schema is used.
struct DefinitionDefaultOptions {
    /// The bound on steps.
    #[serde(default)]
    max_steps: Option<u32>,
}

/// The definition a version stores, as a JSON object: the fields named in `taken` (which
/// the answer sets itself) are left out, so that no key comes twice.
fn definition(config: Option<&Value>, taken: &[&str]) -> Map<String, Value> {
    let mut fields = match config {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    for key in taken {
        fields.remove(*key);
    }
    fields
}

/// A version of an agent (Mastra's `StoredAgentVersion`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VersionBody {
    /// The version's id.
    id: String,
    /// The agent's id.
    agent_id: String,
    /// 1 for the first version, then one more for each.
    version_number: i64,
    /// The fields that differ from the version it was made from.
    changed_fields: Vec<String>,
    /// Why it was made (null without a message).
    change_message: Option<String>,
    /// When it was made (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    /// The fields of the definition it sets.
    #[serde(flatten)]
    #[schemars(with = "AgentDefinitionFields")]
    definition: Map<String, Value>,
}

impl VersionBody {
    const TAKEN: [&str; 6] = [
        "id",
        "agentId",
        "versionNumber",
        "changedFields",
        "changeMessage",
        "createdAt",
    ];
}

impl From<&AgentVersion> for VersionBody {
    fn from(version: &AgentVersion) -> Self {
        Self {
            id: version.id.clone(),
            agent_id: version.agent_id.clone(),
            version_number: version.version_number,
            changed_fields: version.changed_fields.clone(),
            change_message: version.change_message.clone(),
            created_at: version.created_at.to_rfc3339(),
            definition: definition(Some(&version.config), &Self::TAKEN),
        }
    }
}

/// A stored agent seen through one of its versions (Mastra's resolved `StoredAgent`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredAgentBody {
    /// The agent's id.
    id: String,
    /// `published` when one of its versions is, else `draft`.
    #[schemars(extend("enum" = ["published", "draft"]))]
    status: &'static str,
    /// The published version (null when none is).
    active_version_id: Option<String>,
    /// The version it is seen through (null for a code agent with no published version).
    resolved_version_id: Option<String>,
    /// That version's number (null with it).
    version_number: Option<i64>,
    /// `code` for an agent the instance defines in code (its versions are stored), else
    /// `stored`.
    #[schemars(extend("enum" = ["code", "stored"]))]
    source: &'static str,
    /// Free-form metadata.
    metadata: Metadata,
    /// When it was created (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    /// When it, its versions or its published version last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    updated_at: String,
    /// The fields of the definition the version sets.
    #[serde(flatten)]
    #[schemars(with = "AgentDefinitionFields")]
    definition: Map<String, Value>,
}

impl StoredAgentBody {
    const TAKEN: [&str; 9] = [
        "id",
        "status",
        "activeVersionId",
        "resolvedVersionId",
        "versionNumber",
        "source",
        "metadata",
        "createdAt",
        "updatedAt",
    ];

    /// `agent` seen through `version`.
    pub(super) fn new(
        state: &AppState,
        agent: &StoredAgent,
        version: Option<&AgentVersion>,
    ) -> Self {
        Self {
            id: agent.id.clone(),
            status: if agent.active_version_id.is_some() {
                "published"
            } else {
                "draft"
            },
            active_version_id: agent.active_version_id.clone(),
            resolved_version_id: version.map(|v| v.id.clone()),
            version_number: version.map(|v| v.version_number),
            source: if state.kestrel.agent(&agent.id).is_ok() {
                "code"
            } else {
                "stored"
            },
            metadata: agent.metadata.clone(),
            created_at: agent.created_at.to_rfc3339(),
            updated_at: agent.updated_at.to_rfc3339(),
            definition: definition(version.map(|v| &v.config), &Self::TAKEN),
        }
    }
}

/// A page of stored agents.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredAgentsPage {
    /// The page's agents, each seen through its published version (or its latest).
    pub(super) agents: Vec<StoredAgentBody>,
    /// How many agents the listing has.
    pub(super) total: usize,
    /// The page, from 0.
    pub(super) page: usize,
    /// Agents per page.
    pub(super) per_page: usize,
    /// Whether a later page has more.
    pub(super) has_more: bool,
}

/// A page of an agent's versions.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VersionsPage {
    /// The page's versions.
    pub(super) versions: Vec<VersionBody>,
    /// How many versions the agent has.
    pub(super) total: usize,
    /// The page, from 0.
    pub(super) page: usize,
    /// Versions per page.
    pub(super) per_page: usize,
    /// Whether a later page has more.
    pub(super) has_more: bool,
}

/// A deletion (or another change) done, said in words.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct StoredDeleted {
    /// Always true.
    pub(super) success: bool,
    /// What was done.
    pub(super) message: String,
}

/// `POST …/versions/{versionId}/activate`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VersionActivated {
    /// Always true.
    pub(super) success: bool,
    /// What was done.
    pub(super) message: String,
    /// The published version.
    pub(super) active_version_id: Option<String>,
}

/// `GET …/versions/compare`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VersionComparison {
    /// The fields the two versions set differently.
    pub(super) diffs: Vec<VersionFieldDiff>,
    /// The older version.
    pub(super) from_version: VersionBody,
    /// The newer version.
    pub(super) to_version: VersionBody,
}

/// A field two versions set differently.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VersionFieldDiff {
    /// The field, as the JSON names it.
    pub(super) field: String,
    /// Its value in the older version (null when it is not set).
    pub(super) previous_value: Value,
    /// Its value in the newer version (null when it is not set).
    pub(super) current_value: Value,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kestrel_core::version::{AgentConfig, DefaultOptions};
    use serde_json::json;

    use super::*;

    #[test]
    fn the_documented_definition_is_kestrel_cores() {
        let config = AgentConfig {
            name: Some("n".into()),
            description: Some("d".into()),
            instructions: Some("i".into()),
            model: Some("p/m".into()),
            tools: Some(vec!["t".into()]),
            tool_descriptions: [("t".to_owned(), "x".to_owned())].into(),
            agents: Some(vec!["a".into()]),
            default_options: Some(DefaultOptions { max_steps: Some(2) }),
            memory: Some(false),
        };
        let json = serde_json::to_value(&config).unwrap();
        let schema = schemars::schema_for!(AgentDefinitionFields).to_value();
        let documented: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        let set: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(set, documented);
        let options = schemars::schema_for!(DefinitionDefaultOptions).to_value();
        assert_eq!(
            options["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            json["defaultOptions"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_definition_never_repeats_a_field_the_answer_sets() {
        let config = json!({"id": "x", "createdAt": "then", "instructions": "i"});
        let fields = definition(Some(&config), &VersionBody::TAKEN);
        assert_eq!(Value::Object(fields), json!({"instructions": "i"}));
        assert!(definition(Some(&json!("not an object")), &[]).is_empty());
        assert!(definition(None, &[]).is_empty());
    }
}
