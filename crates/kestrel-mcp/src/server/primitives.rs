//! Agents and workflows as the tools an MCP server lists: `ask_<agent>` (input `{message}`,
//! answered by a run of the agent) and `run_<workflow>` (the workflow's input, answered by a
//! run of it), as Mastra's `MCPServer` names them.
//!
//! An agent's run that stops for a person (an approval, a suspended tool) suspends the
//! `ask_<agent>` call with an [`AgentRunWaits`] payload: the server asks its client's user (see
//! [`super::ask`]), and the resume decides the run's call and continues the run. Where nobody
//! can be asked, the answer says so and names the run, which stays stored and can be decided
//! where the instance's runs are (the Studio, the HTTP API). A workflow run that suspends
//! ends the call the same way.

use async_trait::async_trait;
use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::model::FinishReason;
use kestrel_core::run::Waiting;
use kestrel_core::tool::{Tool, ToolContext, ToolError};
use kestrel_core::workflow::{Workflow, WorkflowStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What `ask_<agent>` suspends with when the agent's run stops on a call that waits for a
/// person. Resume it with `{"approved": bool, "reason"?}` for an approval, else with the
/// waiting tool's resume data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentRunWaits {
    /// Always [`AgentRunWaits::TYPE`].
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) agent: String,
    pub(crate) run_id: String,
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) args: Value,
    /// Whether the call waits for an approval (else for resume data).
    pub(crate) approval: bool,
    /// What the waiting tool suspended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) suspend_payload: Option<Value>,
    /// The waiting tool's resume schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resume_schema: Option<Value>,
}

impl AgentRunWaits {
    pub(crate) const TYPE: &'static str = "kestrel-agent-run";
}

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
        let options = RunOptions::new()
            .request_context(ctx.request_context().clone())
            .abort_signal(ctx.abort_signal().child());
        let waited = ctx
            .suspend_payload()
            .and_then(|p| serde_json::from_value::<AgentRunWaits>(p.clone()).ok())
            .filter(|w| w.kind == AgentRunWaits::TYPE && w.agent == self.agent.id());
        let result = match (waited, ctx.resume_data()) {
            // The person decided on the call the run waits on: the run goes on.
            (Some(waited), Some(data)) => {
                let run = self.agent.run(&waited.run_id).options(options);
                let decided = if waited.approval {
                    if data.get("approved").and_then(Value::as_bool) == Some(true) {
                        run.approve(&waited.tool_call_id).await
                    } else {
                        let reason = data
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        run.decline(&waited.tool_call_id, reason).await
                    }
                } else {
                    run.resume(&waited.tool_call_id, data.clone()).await
                };
                decided.map_err(|error| {
                    tracing::warn!(agent = %self.agent.id(), %error, "continuing an agent's run over MCP failed");
                    ToolError::new(format!(
                        "agent {:?} could not go on (its run {}): {}",
                        self.agent.id(),
                        waited.run_id,
                        public(&error)
                    ))
                })?
            }
            _ => {
                let message = input
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.agent
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
                    })?
            }
        };
        if let Some(call) = result.waiting.first() {
            let tool = self.agent.tools().get(&call.tool_name).cloned();
            let (approval, suspend_payload) = match &call.waiting {
                Waiting::Resume { payload } => (false, Some(payload.clone())),
                _ => (true, None),
            };
            return Err(ctx.suspend(AgentRunWaits {
                kind: AgentRunWaits::TYPE.to_owned(),
                agent: self.agent.id().to_owned(),
                run_id: result.run_id.clone(),
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                args: call.args.clone(),
                approval,
                suspend_payload,
                resume_schema: tool.and_then(|t| t.resume_schema().cloned()),
            }));
        }
        if result.finish_reason == FinishReason::Suspended {
            return Err(ToolError::new(format!(
                "agent {:?} stopped (its run {}) without a call to decide",
                self.agent.id(),
                result.run_id,
            )));
        }
        Ok(Value::String(result.text))
    }
}

/// What a caller may read of a decision's failure: what was wrong with the decision, not what
/// a store or a provider said (that is logged).
fn public(error: &kestrel_core::agent::RunControlError) -> String {
    use kestrel_core::agent::RunControlError as E;
    match error {
        E::InvalidResumeData { errors, .. } => {
            format!("the answer does not fit: {}", errors.join("; "))
        }
        E::RunNotFound { .. }
        | E::NotSuspended { .. }
        | E::CallNotWaiting { .. }
        | E::WrongDecision { .. }
        | E::Conflict { .. } => error.to_string(),
        _ => "the server's log says why".to_owned(),
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
