//! Agents defined in the storage, and their versions.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::Metadata;

/// An agent whose definition is kept in the storage, in versions: a stored agent, or the
/// stored overrides of an agent written in code (same id).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAgent {
    /// The agent's id.
    pub id: String,
    /// The published version, if one is.
    pub active_version_id: Option<String>,
    /// Free-form metadata.
    pub metadata: Metadata,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it, its versions or its published version last changed.
    pub updated_at: DateTime<Utc>,
}

/// A stored agent to create, with its first version.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewStoredAgent {
    /// Its id.
    pub id: String,
    /// Metadata.
    pub metadata: Metadata,
    /// The first version.
    pub version: NewAgentVersion,
    /// Publish the first version at once.
    pub publish: bool,
}

/// A version to add to a stored agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewAgentVersion {
    /// The definition (instructions, model, tool and sub-agent ids, options...), as JSON.
    pub config: Value,
    /// The fields that differ from the version it was made from.
    pub changed_fields: Vec<String>,
    /// Why it was made.
    pub change_message: Option<String>,
}

/// One version of a stored agent's definition. Versions never change once written.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentVersion {
    /// Its id.
    pub id: String,
    /// The agent.
    pub agent_id: String,
    /// 1 for the first, then one more for each.
    pub version_number: i64,
    /// The definition, as JSON.
    pub config: Value,
    /// The fields that differ from the version it was made from.
    pub changed_fields: Vec<String>,
    /// Why it was made.
    pub change_message: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}
