//! Tools: what an agent can call.
//!
//! A [`Tool`] has an id, a description, a JSON schema for its input and an `execute` function.
//! Build typed tools with [`create_tool`] from a `serde` + `schemars` input type, or dynamic
//! tools from a JSON schema with [`ToolBuilder::input_schema`]. The agent validates the model's
//! arguments against the schema before `execute`; invalid input, an unknown tool or an `execute`
//! error becomes a `tool-error` event and a failed result the model reads on its next step.
//!
//! **People in the loop.** A tool may need approval before it runs
//! ([`ToolBuilder::require_approval`]), may stop the run to ask for data
//! ([`ToolContext::suspend`], with [`ToolContext::resume_data`] when it runs again), or may
//! run on the client ([`ToolBuilder::client`]: no `execute`, the caller submits the result).
//! Each stops the run; the agent's run-control methods continue it.

mod approval;
mod builder;
mod context;
mod error;
mod extensions;
pub(crate) mod set;
mod typed;

pub use crate::schema::violations;
pub use approval::ApprovalPolicy;
pub use builder::{FnTool, ToolBuilder, create_tool};
pub use context::{ToolContext, ToolWriter};
pub(crate) use error::Stop;
pub use error::{ToolCallError, ToolError};
pub use extensions::Extensions;
pub use set::{ToolDefinitionError, ToolSet};
pub use typed::TypedTool;

use std::sync::Arc;

use serde_json::Value;

/// Something an agent can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by. Unique within an agent.
    fn id(&self) -> &str;
    /// What it does; the model decides from this when to call it.
    fn description(&self) -> &str;
    /// JSON schema of the input; must be an object schema.
    fn input_schema(&self) -> &Value;
    /// JSON schema of the output, if declared.
    fn output_schema(&self) -> Option<&Value> {
        None
    }
    /// Runs the tool on validated input. A tool that needs a person's input returns
    /// `Err(ctx.suspend(payload))`; it runs again, with [`ToolContext::resume_data`], once the
    /// run is resumed.
    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError>;

    /// Whether this call needs a person's approval before `execute` runs (default: never).
    /// Evaluated once, when the model makes the call; the answer is kept with the run.
    fn requires_approval(&self, _input: &Value, _ctx: &ApprovalContext<'_>) -> bool {
        false
    }

    /// Whether the tool runs on the client (it has no `execute` here): the run stops with
    /// finish reason `tool-calls` and the caller submits the result.
    fn is_client_tool(&self) -> bool {
        false
    }

    /// JSON schema of the payload `execute` passes to [`ToolContext::suspend`], if declared.
    fn suspend_schema(&self) -> Option<&Value> {
        None
    }

    /// JSON schema of the data a resume hands back to `execute`, if declared.
    fn resume_schema(&self) -> Option<&Value> {
        None
    }

    /// Whether `execute` reads the run's conversation ([`ToolContext::conversation`]); only
    /// then is it handed over (a delegation to a sub-agent does).
    fn needs_conversation(&self) -> bool {
        false
    }

    /// The type of its calls' spans ([`crate::trace`]): `tool_call`, or `mcp_tool_call` for
    /// an MCP server's tool.
    fn span_type(&self) -> crate::trace::SpanType {
        crate::trace::SpanType::ToolCall
    }
}

/// What an approval policy sees besides the call's input.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalContext<'a> {
    /// The tool's name.
    pub tool_name: &'a str,
    /// The run's request context.
    pub request_context: &'a crate::context::RequestContext,
    /// The run's thread, when it uses memory.
    pub thread_id: Option<&'a str>,
    /// The run's resource, when it uses memory.
    pub resource_id: Option<&'a str>,
}

/// A shared tool handle.
pub type SharedTool = Arc<dyn Tool>;

impl std::fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("id", &self.id()).finish()
    }
}
