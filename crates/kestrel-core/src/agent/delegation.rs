//! Sub-agents as tools: the supervisor pattern.
//!
//! [`AgentBuilder::agents`](super::AgentBuilder::agents) gives an agent one delegation tool per
//! sub-agent, named `agent-<id>` and described by the sub-agent's description, with input
//! `{prompt}`. When the model calls it, the sub-agent runs on:
//!
//! - the parent's conversation so far, as text (user and assistant text; tool calls and results
//!   stay with the parent), then the delegation prompt as the user's message;
//! - a shallow copy of the parent's request context: the sub-agent reads the parent's entries,
//!   and what it sets does not leak back;
//! - a child of the parent's abort signal: aborting the parent stops the sub-agent at its next
//!   step.
//!
//! The parent model sees only the sub-agent's final text. While the parent is streamed, every
//! event of the sub-agent reaches the parent's stream as a `tool-output` event under the
//! delegation's tool call id, so a UI can fill one card per delegation live. A sub-agent that
//! fails gives the parent a failed tool result with a generic message: provider error text is
//! logged, not forwarded to the parent model.
//!
//! A sub-agent is shared by every run that delegates to it and is never changed by them. The
//! sub-agent's own run names no thread, so nothing of it is written to the parent's thread
//! (only the parent's delegation tool call and its result are).

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Agent, AgentError, RunOptions};
use crate::message::{Message, Part, Role};
use crate::tool::{Tool, ToolContext, ToolError};

/// The prefix of delegation tool names (Mastra's `agent-<key>`).
pub const DELEGATION_TOOL_PREFIX: &str = "agent-";

/// The request context key holding how deep a run is in a chain of delegations.
pub const DELEGATION_DEPTH_KEY: &str = "kestrel.delegationDepth";

/// How deep delegations may nest (a sub-agent delegating to a sub-agent…): agents that
/// delegate to each other in a cycle stop here with a clear error.
pub const MAX_DELEGATION_DEPTH: u64 = 8;

/// The tool through which a parent delegates to one sub-agent.
pub(crate) struct DelegationTool {
    name: String,
    description: String,
    input_schema: Value,
    agent: Agent,
}

impl DelegationTool {
    pub(crate) fn new(agent: Agent) -> Self {
        let description = if agent.description().is_empty() {
            format!("Delegates a task to the {:?} agent.", agent.name())
        } else {
            agent.description().to_owned()
        };
        Self {
            name: format!("{DELEGATION_TOOL_PREFIX}{}", agent.id()),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "The task for the agent, with everything it needs to know."
                    }
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
            agent,
        }
    }
}

/// The parent's conversation as the sub-agent sees it: user and assistant text only.
fn conversation_text(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .filter_map(|m| {
            let parts: Vec<Part> = m
                .parts
                .iter()
                .filter(|p| matches!(p, Part::Text { .. }))
                .cloned()
                .collect();
            (!parts.is_empty()).then(|| Message::new(m.role, parts))
        })
        .collect()
}

#[async_trait::async_trait]
impl Tool for DelegationTool {
    fn id(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn needs_conversation(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let prompt = input
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::new("the delegation needs a \"prompt\" string"))?;
        let request_context = ctx.request_context().snapshot();
        let depth = request_context
            .get(DELEGATION_DEPTH_KEY)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
            + 1;
        if depth > MAX_DELEGATION_DEPTH {
            return Err(ToolError::new(format!(
                "delegation to {:?} refused: delegations nest deeper than {MAX_DELEGATION_DEPTH} \
                 levels (do agents delegate to each other in a cycle?)",
                self.agent.id()
            )));
        }
        request_context.set(DELEGATION_DEPTH_KEY, depth);
        let mut messages = conversation_text(ctx.conversation());
        messages.push(Message::user(prompt));
        let options = RunOptions::new()
            .request_context(request_context)
            .abort_signal(ctx.abort_signal().child());
        let outcome = if ctx.writer().is_observed() {
            let mut stream = self.agent.stream(messages, options);
            while let Some(event) = stream.next().await {
                ctx.writer().write(&event).await?;
            }
            stream.result().await
        } else {
            self.agent.generate(messages, options).await
        };
        match outcome {
            Ok(result) => Ok(Value::String(result.text)),
            Err(AgentError::Aborted { .. }) => Err(ToolError::new(format!(
                "The {:?} agent was stopped before it finished.",
                self.agent.id()
            ))),
            Err(error) => {
                tracing::warn!(
                    sub_agent = %self.agent.id(),
                    parent_run_id = %ctx.run_id(),
                    %error,
                    "a delegated sub-agent failed"
                );
                Err(ToolError::new(format!(
                    "The {:?} agent could not complete the task.",
                    self.agent.id()
                )))
            }
        }
    }
}
