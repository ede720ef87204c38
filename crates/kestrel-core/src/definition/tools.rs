//! An agent's tools as models are offered them, and the names of its delegation tools.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::AgentDefinition;
use crate::model::ToolDefinition;

/// The prefix of delegation tool names (Mastra's `agent-<key>`).
pub const DELEGATION_TOOL_PREFIX: &str = "agent-";

/// The input of a delegation tool naming earlier results (with result references on).
pub const CONTEXT_FROM_REFS: &str = "contextFromRefs";

/// An agent's tool definitions as models get them, built once in each of the four forms a
/// step may need: with or without the delegation tools' `contextFromRefs` (for runs without
/// result references), and with or without memory's tools (which work only in a run with a
/// thread and a resource, so other runs are not offered them). Memory's tools are marked
/// [`ToolDefinition::auxiliary`], so that no call is ever forced onto them.
#[derive(Debug, Clone)]
pub(crate) struct ToolDefinitions {
    /// Indexed by `[references as usize][memory as usize]`.
    forms: [[Arc<[ToolDefinition]>; 2]; 2],
}

impl ToolDefinitions {
    /// The definitions a step offers the model.
    pub(crate) fn offered(&self, references: bool, memory: bool) -> Arc<[ToolDefinition]> {
        Arc::clone(&self.forms[usize::from(references)][usize::from(memory)])
    }

    pub(crate) fn new(
        tools: &crate::tool::ToolSet,
        sub_agents: &HashMap<String, Arc<AgentDefinition>>,
        memory_tools: &[String],
    ) -> Self {
        let mut with_refs = tools.definitions();
        for tool in &mut with_refs {
            tool.auxiliary = memory_tools.contains(&tool.name);
        }
        let mut without_refs = with_refs.clone();
        for tool in &mut without_refs {
            let delegates = tool
                .name
                .strip_prefix(DELEGATION_TOOL_PREFIX)
                .is_some_and(|id| sub_agents.contains_key(id));
            if delegates
                && let Some(properties) = tool
                    .input_schema
                    .get_mut("properties")
                    .and_then(Value::as_object_mut)
            {
                properties.remove(CONTEXT_FROM_REFS);
            }
        }
        let without_memory = |all: &[ToolDefinition]| -> Arc<[ToolDefinition]> {
            all.iter()
                .filter(|tool| !memory_tools.contains(&tool.name))
                .cloned()
                .collect()
        };
        Self {
            forms: [
                [without_memory(&without_refs), without_refs.into()],
                [without_memory(&with_refs), with_refs.into()],
            ],
        }
    }
}
