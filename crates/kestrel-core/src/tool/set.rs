//! An agent's validated set of tools.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{SharedTool, ToolCallError};
use crate::model::ToolDefinition;
use crate::schema::violations;

/// Why a tool cannot be added to an agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolDefinitionError {
    /// Two tools share a name.
    #[error("duplicate tool name {name:?}: every tool of an agent needs a unique id")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// The name is empty or has characters providers reject.
    #[error("invalid tool name {name:?}: use 1 to 64 characters from a-z, A-Z, 0-9, '_' and '-'")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// The input schema does not describe a JSON object.
    #[error(
        "the input schema of tool {tool:?} must be an object schema (\"type\": \"object\"), found {found}"
    )]
    SchemaNotObject {
        /// The tool.
        tool: String,
        /// What the schema describes instead.
        found: String,
    },
    /// The input schema is not a valid JSON schema.
    #[error("the input schema of tool {tool:?} is not a valid JSON schema: {error}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// The schema compiler's message.
        error: String,
    },
}

/// A tool with its compiled input validator and its definition for the model.
#[derive(Clone)]
pub(crate) struct RegisteredTool {
    pub(crate) tool: SharedTool,
    pub(crate) validator: Arc<jsonschema::Validator>,
    pub(crate) definition: ToolDefinition,
}

/// An ordered set of tools with unique names and compiled input schemas.
#[derive(Clone, Default)]
pub struct ToolSet {
    tools: Vec<RegisteredTool>,
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool after checking its name and schema.
    pub fn insert(&mut self, tool: SharedTool) -> Result<(), ToolDefinitionError> {
        let name = tool.id().to_string();
        if !valid_name(&name) {
            return Err(ToolDefinitionError::InvalidName { name });
        }
        if self.index.contains_key(&name) {
            return Err(ToolDefinitionError::DuplicateName { name });
        }
        let schema = tool.input_schema().clone();
        check_object_schema(&name, &schema)?;
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| ToolDefinitionError::InvalidSchema {
                tool: name.clone(),
                error: e.to_string(),
            })?;
        let definition = ToolDefinition {
            name: name.clone(),
            description: tool.description().to_string(),
            input_schema: schema,
            auxiliary: false,
        };
        self.index.insert(name, self.tools.len());
        self.tools.push(RegisteredTool {
            tool,
            validator: Arc::new(validator),
            definition,
        });
        Ok(())
    }

    /// The tool names, in insertion order.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| t.definition.name.clone())
            .collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&SharedTool> {
        self.registered(name).map(|t| &t.tool)
    }

    /// The tool `name`, once `args` validate against its input schema: what a caller that
    /// runs a tool outside a model's call (an HTTP route, a test) checks first.
    pub fn checked(&self, name: &str, args: &Value) -> Result<&SharedTool, ToolCallError> {
        self.validate(name, args).map(|registered| &registered.tool)
    }

    /// The definitions the model is offered.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition.clone()).collect()
    }

    pub(crate) fn registered(&self, name: &str) -> Option<&RegisteredTool> {
        self.index.get(name).and_then(|&i| self.tools.get(i))
    }

    /// Looks a tool up and validates `args` against its schema.
    pub(crate) fn validate(
        &self,
        name: &str,
        args: &Value,
    ) -> Result<&RegisteredTool, ToolCallError> {
        let Some(tool) = self.registered(name) else {
            return Err(ToolCallError::UnknownTool {
                name: name.to_string(),
                available: self.names(),
            });
        };
        let errors = violations(&tool.validator, args);
        if errors.is_empty() {
            Ok(tool)
        } else {
            Err(ToolCallError::InvalidInput {
                tool: name.to_string(),
                errors,
            })
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_object_schema(tool: &str, schema: &Value) -> Result<(), ToolDefinitionError> {
    let found = match schema {
        Value::Object(map) => match map.get("type") {
            Some(Value::String(t)) if t == "object" => return Ok(()),
            // A schema listing properties without a type is an object schema in practice.
            None if map.contains_key("properties") => return Ok(()),
            Some(other) => format!("type {other}"),
            None => "a schema without \"type\": \"object\"".to_string(),
        },
        other => format!("{other}"),
    };
    Err(ToolDefinitionError::SchemaNotObject {
        tool: tool.to_string(),
        found,
    })
}
