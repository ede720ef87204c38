//! The tool-call filter: remembered tool calls (and their results) left out of what the
//! model is sent, so a long thread's old tool traffic does not fill the context. Mastra's
//! `ToolCallFilter`; give it to an agent as an input processor.

use async_trait::async_trait;
use kestrel_core::message::Part;
use kestrel_core::processor::{InputStepArgs, Phases, Processor, ProcessorError, ProcessorPhase};
use serde_json::json;

/// Leaves out the tool calls and results of the messages recalled from memory: of every
/// tool, or of the named ones. The run's own calls are never touched (the model needs their
/// results to go on).
#[derive(Debug, Clone, Default)]
pub struct ToolCallFilter {
    /// `None`: every tool.
    tools: Option<Vec<String>>,
}

impl ToolCallFilter {
    /// Filters the calls of every tool.
    pub fn all() -> Self {
        Self { tools: None }
    }

    /// Filters the calls of the named tools only.
    pub fn tools<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            tools: Some(names.into_iter().map(Into::into).collect()),
        }
    }

    fn filters(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool))
    }
}

#[async_trait]
impl Processor for ToolCallFilter {
    fn id(&self) -> &str {
        "tool-call-filter"
    }

    fn name(&self) -> Option<&str> {
        Some("Tool-call filter")
    }

    fn description(&self) -> Option<&str> {
        Some("Leaves remembered tool calls and results out of what the model is sent")
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::InputStep.into()
    }

    async fn process_input_step(&self, args: &mut InputStepArgs<'_>) -> Result<(), ProcessorError> {
        let remembered = args.remembered.min(args.messages.len());
        let mut removed_parts = 0;
        let mut kept = Vec::with_capacity(args.messages.len());
        for (index, mut message) in std::mem::take(args.messages).into_iter().enumerate() {
            if index < remembered {
                let before = message.parts.len();
                message.parts.retain(|part| match part {
                    Part::ToolCall { tool_name, .. } | Part::ToolResult { tool_name, .. } => {
                        !self.filters(tool_name)
                    }
                    _ => true,
                });
                removed_parts += before - message.parts.len();
                if message.parts.is_empty() {
                    continue;
                }
            }
            kept.push(message);
        }
        *args.messages = kept;
        if removed_parts > 0 {
            args.cx
                .decide("filter", Some(json!({"removedParts": removed_parts})));
        }
        Ok(())
    }
}
