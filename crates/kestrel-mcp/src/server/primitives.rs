//! Agents and workflows as the tools an MCP server lists: `ask_<agent>` (input `{message}`,
//! answered by a run of the agent) and `run_<workflow>` (the workflow's input, answered by a
//! run of it), as Mastra's `MCPServer` names them.
//!
//! A run that stops for a person (an approval, a suspended tool or step) cannot be finished
//! through this call: the answer says so and names the run, which stays stored and can be
//! answered where the instance's runs are (the Studio, the HTTP API).

use async_trait::async_trait;
use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::model::FinishReason;
use kestrel_core::tool::{Tool, ToolContext, ToolError};
use kestrel_core::workflow::{Workflow, WorkflowStatus};
use serde_json::{Value, json};

/// An agent as the tool `ask_<agent>`.
pub(crate) struct AskAgent {
    id: String,
    agent: Agent,
    description: String,
    input_schema: Value,
}

impl AskAgent {
    pub(crate) fn new(agent: Agent) -> Self {
        let description = format!(
            "Ask agent {:?}: {}",
            agent.name(),
            agent.description().trim()
        );
        Self {
            id: format!("ask_{}", agent.id()),
            agent,
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "message": {
                        "type": "string",
                        "description": "What to ask the agent.",
                    },
                },
                "required": ["message"],
                "additionalProperties": false,
            }),
        }
    }
}

#[async_trait]
impl Tool for AskAgent {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let message = input
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let options = RunOptions::new()
            .request_context(ctx.request_context().clone())
            .abort_signal(ctx.abort_signal().child());
        let result = self
            .agent
            .generate(message)
            .options(options)
            .await
            .map_err(|error| {
                // The error may quote a provider: logged, and the answer names the run.
                tracing::warn!(agent = %self.agent.id(), %error, "an agent asked over MCP failed");
                ToolError::new(format!(
                    "agent {:?} failed (its run {})",
                    self.agent.id(),
                    error.run_id()
                ))
            })?;
        if !result.waiting.is_empty() || result.finish_reason == FinishReason::Suspended {
            let calls: Vec<&str> = result
                .waiting
                .iter()
                .map(|w| w.tool_name.as_str())
                .collect();
            return Err(ToolError::new(format!(
                "agent {:?} stopped for a person (its run {} waits on {}); answer it where the \
                 instance's runs are decided (the Studio or the HTTP API)",
                self.agent.id(),
                result.run_id,
                calls.join(", ")
            )));
        }
        Ok(Value::String(result.text))
    }
}

/// A workflow as the tool `run_<workflow>`.
pub(crate) struct RunWorkflow {
    id: String,
    workflow: Workflow,
    description: String,
}

impl RunWorkflow {
    pub(crate) fn new(workflow: Workflow) -> Self {
        let description = match workflow.description().trim() {
            "" => format!("Run workflow {:?}.", workflow.id()),
            text => format!("Run workflow {:?}: {text}", workflow.id()),
        };
        Self {
            id: format!("run_{}", workflow.id()),
            workflow,
            description,
        }
    }
}

#[async_trait]
impl Tool for RunWorkflow {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        self.workflow.input_schema()
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(self.workflow.output_schema())
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let run = self.workflow.create_run();
        let run_id = run.run_id().to_owned();
        let abort = ctx.abort_signal().clone();
        let result = tokio::select! {
            result = run.start(input) => result,
            () = abort.aborted() => {
                return Err(ToolError::new(format!(
                    "the call was cancelled; workflow {:?} run {run_id} was left as it stood",
                    self.workflow.id()
                )));
            }
        };
        let result = result.map_err(|error| {
            // A store's error may quote a connection string: logged, not answered.
            tracing::warn!(workflow = %self.workflow.id(), %run_id, %error, "a workflow run over MCP failed");
            ToolError::new(format!(
                "workflow {:?} failed (its run {run_id})",
                self.workflow.id()
            ))
        })?;
        match result.status {
            WorkflowStatus::Success => Ok(result.result.unwrap_or(Value::Null)),
            WorkflowStatus::Suspended => Err(ToolError::new(format!(
                "workflow {:?} suspended (its run {}) at {}; resume it where the instance's runs \
                 are (the Studio or the HTTP API)",
                self.workflow.id(),
                result.run_id,
                result
                    .suspended
                    .iter()
                    .map(|path| path.join("."))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            status => Err(ToolError::new(format!(
                "workflow {:?} ended {} (its run {})",
                self.workflow.id(),
                serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                result.run_id
            ))),
        }
    }
}
