//! Working memory: notes the agent keeps about the user or the conversation, updated by a tool.
//!
//! The current content goes into the run's system text with instructions; the agent changes it
//! with the `update_working_memory` tool. The content is either Markdown following a template
//! (the tool's input is `{"memory": "..."}`) or a JSON object valid against a schema (the tool's
//! input is that object). Each update replaces the whole content, after validation. It is kept
//! per thread or per resource ([`WorkingMemoryScope`]).

use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::memory::MemoryError;
use kestrel_core::tool::{SharedTool, Tool, ToolContext, ToolError};
use kestrel_storage::{Scope, StorageError};
use serde_json::{Value, json};

use crate::error::{Error, MemoryBuildError};
use crate::processor::{MemoryProcessor, RecallContext};
use crate::slot::StoreSlot;

/// The name of the tool that updates working memory.
pub const UPDATE_WORKING_MEMORY: &str = "update_working_memory";

/// Where working memory is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkingMemoryScope {
    /// One working memory per thread: notes about this conversation.
    Thread,
    /// One working memory per resource, shared by all its threads: notes about the user (the
    /// default, as in Mastra).
    #[default]
    Resource,
}

#[derive(Debug, Clone)]
enum Format {
    Template(String),
    Schema(Value),
}

/// Working memory options: a Markdown template or a JSON schema, and a scope.
///
/// ```
/// use kestrel_memory::{WorkingMemory, WorkingMemoryScope};
///
/// let notes = WorkingMemory::template("# User\n- Name:\n- Favourite city:")
///     .scope(WorkingMemoryScope::Resource);
/// let profile = WorkingMemory::schema(serde_json::json!({
///     "type": "object",
///     "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
///     "additionalProperties": false
/// }));
/// # let _ = (notes, profile);
/// ```
#[derive(Debug, Clone)]
pub struct WorkingMemory {
    format: Format,
    scope: WorkingMemoryScope,
}

impl WorkingMemory {
    /// Markdown following `template`; the tool's input is `{"memory": "<the whole text>"}`.
    pub fn template(template: impl Into<String>) -> Self {
        Self {
            format: Format::Template(template.into()),
            scope: WorkingMemoryScope::default(),
        }
    }

    /// A JSON object valid against `schema` (an object schema); the tool's input is the object.
    pub fn schema(schema: Value) -> Self {
        Self {
            format: Format::Schema(schema),
            scope: WorkingMemoryScope::default(),
        }
    }

    /// Keeps it per thread or per resource (default: resource).
    pub fn scope(mut self, scope: WorkingMemoryScope) -> Self {
        self.scope = scope;
        self
    }

    /// Where it is kept.
    pub fn scope_kind(&self) -> WorkingMemoryScope {
        self.scope
    }

    /// The Markdown template, for the template format.
    pub fn template_text(&self) -> Option<&str> {
        match &self.format {
            Format::Template(template) => Some(template),
            Format::Schema(_) => None,
        }
    }

    /// The JSON schema, for the schema format (its content is then a JSON object).
    pub fn schema_value(&self) -> Option<&Value> {
        match &self.format {
            Format::Template(_) => None,
            Format::Schema(schema) => Some(schema),
        }
    }
}

/// The working memory stage of a [`Memory`](crate::Memory) and its tool.
pub(crate) struct WorkingMemoryProcessor {
    tool: Arc<UpdateWorkingMemory>,
}

impl WorkingMemoryProcessor {
    pub(crate) fn new(
        storage: StoreSlot,
        options: WorkingMemory,
    ) -> Result<Self, MemoryBuildError> {
        let input_schema = match &options.format {
            Format::Template(_) => json!({
                "type": "object",
                "properties": {
                    "memory": {
                        "type": "string",
                        "description": "The complete new working memory, in Markdown, following the template. It replaces the current content."
                    }
                },
                "required": ["memory"],
                "additionalProperties": false
            }),
            Format::Schema(schema) => schema.clone(),
        };
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(MemoryBuildError::WorkingMemorySchema {
                reason: "the schema must describe an object (\"type\": \"object\")".into(),
            });
        }
        let validator = jsonschema::validator_for(&input_schema).map_err(|e| {
            MemoryBuildError::WorkingMemorySchema {
                reason: e.to_string(),
            }
        })?;
        Ok(Self {
            tool: Arc::new(UpdateWorkingMemory {
                storage,
                options,
                input_schema,
                validator,
            }),
        })
    }
}

fn scope_of(scope: WorkingMemoryScope, thread_id: &str, resource_id: &str) -> Scope {
    match scope {
        WorkingMemoryScope::Thread => Scope::thread(thread_id, resource_id),
        WorkingMemoryScope::Resource => Scope::resource(resource_id),
    }
}

#[async_trait]
impl MemoryProcessor for WorkingMemoryProcessor {
    fn name(&self) -> &str {
        "working-memory"
    }

    async fn recall(&self, cx: &mut RecallContext<'_>) -> Result<(), MemoryError> {
        let options = &self.tool.options;
        let (thread_id, resource_id) = (&cx.scope.thread_id, &cx.scope.resource_id);
        let stored = if options.scope == WorkingMemoryScope::Thread && !cx.thread_exists {
            None
        } else {
            let scope = scope_of(options.scope, thread_id, resource_id);
            cx.storage
                .get_working_memory(&scope)
                .await
                .map_err(|e| Error::storage("load working memory", thread_id, resource_id, e))?
        };
        cx.system
            .push(system_text(options, stored.as_deref(), cx.read_only));
        Ok(())
    }

    fn tools(&self) -> Vec<SharedTool> {
        vec![self.tool.clone()]
    }
}

/// The system text presenting the working memory.
fn system_text(options: &WorkingMemory, stored: Option<&str>, read_only: bool) -> String {
    let kept = match options.scope {
        WorkingMemoryScope::Thread => "for the rest of this conversation",
        WorkingMemoryScope::Resource => "across all your conversations with this user",
    };
    let mut text = format!(
        "# Working memory\n\nYou keep a working memory: notes about the user and the conversation \
         that you remember {kept}.\n"
    );
    if read_only {
        text.push_str("You can read it, but you cannot change it in this conversation.\n");
    } else {
        let what = match options.format {
            Format::Template(_) => "the complete text, following the template",
            Format::Schema(_) => "the complete object, valid against the schema",
        };
        text.push_str(&format!(
            "When you learn something worth remembering (a name, a preference, a goal, a decision, \
             a fact about the user), call the `{UPDATE_WORKING_MEMORY}` tool at once, without \
             mentioning it to the user. Each call replaces the whole working memory: send {what}, \
             with the changes made and everything still true kept.\n"
        ));
    }
    match &options.format {
        Format::Template(template) => {
            let data = stored.filter(|s| !s.trim().is_empty()).unwrap_or(template);
            text.push_str(&format!(
                "\n<working_memory_template>\n{template}\n</working_memory_template>\n\n\
                 <working_memory_data>\n{data}\n</working_memory_data>"
            ));
        }
        Format::Schema(schema) => {
            let data = stored.unwrap_or("{}");
            text.push_str(&format!(
                "\n<working_memory_schema>\n{schema}\n</working_memory_schema>\n\n\
                 <working_memory_data>\n{data}\n</working_memory_data>"
            ));
        }
    }
    text
}

/// The `update_working_memory` tool.
struct UpdateWorkingMemory {
    storage: StoreSlot,
    options: WorkingMemory,
    input_schema: Value,
    validator: jsonschema::Validator,
}

#[async_trait]
impl Tool for UpdateWorkingMemory {
    fn id(&self) -> &str {
        UPDATE_WORKING_MEMORY
    }

    fn description(&self) -> &str {
        match self.options.format {
            Format::Template(_) => {
                "Replaces your working memory (notes about the user and the conversation) with \
                 the complete new Markdown text."
            }
            Format::Schema(_) => {
                "Replaces your working memory (notes about the user and the conversation) with \
                 the complete new object."
            }
        }
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let (Some(thread_id), Some(resource_id)) = (ctx.thread_id(), ctx.resource_id()) else {
            return Err(ToolError::new(format!(
                "{UPDATE_WORKING_MEMORY} needs a run with memory (a thread and a resource)"
            )));
        };
        // The agent validates arguments before calling; validating again keeps direct calls safe.
        let problems = kestrel_core::tool::violations(&self.validator, &input);
        if !problems.is_empty() {
            return Err(ToolError::new(format!(
                "invalid working memory, nothing was changed: {}",
                problems.join("; ")
            )));
        }
        let content = match &self.options.format {
            Format::Template(_) => input
                .get("memory")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ToolError::new("`memory` must be a string"))?,
            Format::Schema(_) => input.to_string(),
        };
        let scope = scope_of(self.options.scope, thread_id, resource_id);
        let storage = self
            .storage
            .require()
            .map_err(|error| ToolError::new(error.to_string()))?;
        storage
            .set_working_memory(&scope, &content)
            .await
            .map_err(|e: StorageError| {
                let error = Error::storage("store working memory", thread_id, resource_id, e);
                ToolError::new(error.to_string())
            })?;
        Ok(json!({ "success": true }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::{WorkingMemory, WorkingMemoryScope, system_text};

    #[test]
    fn the_template_stands_in_for_empty_memory() {
        let options = WorkingMemory::template("# User\n- Name:");
        let text = system_text(&options, None, false);
        assert!(text.contains("<working_memory_data>\n# User\n- Name:\n</working_memory_data>"));
        assert!(text.contains("update_working_memory"));
        assert!(text.contains("across all your conversations"));
        let text = system_text(&options, Some("# User\n- Name: Ada"), true);
        assert!(text.contains("- Name: Ada\n</working_memory_data>"));
        assert!(!text.contains("update_working_memory"));
    }

    #[test]
    fn schema_memory_shows_the_schema_and_the_object() {
        let options =
            WorkingMemory::schema(json!({"type": "object"})).scope(WorkingMemoryScope::Thread);
        let text = system_text(&options, Some(r#"{"name":"Ada"}"#), false);
        assert!(text.contains("<working_memory_schema>\n{\"type\":\"object\"}\n"));
        assert!(text.contains("{\"name\":\"Ada\"}\n</working_memory_data>"));
        assert!(text.contains("for the rest of this conversation"));
    }
}
