//! Tools as workflow steps ([`ToolStep`]: the tool's input in, its output out) and a
//! workflow as an agent's tool ([`WorkflowTool`]). An agent as a step is
//! [`crate::agent::AgentStep`], in the agent layer above the workflows.
//!
//! What these write when the agent, the workflow or its store fails is read by a model and
//! kept in threads and snapshots that clients read: they name what failed and the run to look
//! up, and the failure's own text (a provider's answer, a database's error) goes to the log
//! (`WorkflowRunError::public_text`, which nested workflows and networks use too).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::WorkflowRunError;
use super::step::{Step, StepContext, StepError};
use crate::tool::{Tool, ToolContext};

// Here, beside the tool and the step that need it (the network's workflows too).
impl WorkflowRunError {
    /// The words of this error that a model, a thread or a client may read. The library
    /// writes the text of most run errors itself, from the caller's input or the run's state
    /// (an invalid input, a run that is not suspended): those are kept. A store's error may
    /// hold a connection string, a password or a database's answer: it is logged, and the
    /// words are `the workflow store failed`.
    pub(crate) fn public_text(&self, workflow: &str, run_id: &str) -> String {
        match self {
            WorkflowRunError::Store(error) => {
                tracing::warn!(%workflow, %run_id, %error, "a workflow's store failed");
                "the workflow store failed".to_owned()
            }
            own => own.to_string(),
        }
    }
}

/// A tool as a step (Mastra's `createStep(tool)`): the tool's input in (checked against its
/// schema), its output out.
#[derive(Clone)]
pub struct ToolStep {
    tool: Arc<dyn Tool>,
    output_schema: Value,
}

impl std::fmt::Debug for ToolStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolStep")
            .field("tool", &self.tool.id())
            .finish()
    }
}

impl ToolStep {
    /// A step running `tool`; its id is the tool's.
    pub fn new(tool: impl Tool + 'static) -> Self {
        Self::shared(Arc::new(tool))
    }

    /// A step running a shared tool.
    pub fn shared(tool: Arc<dyn Tool>) -> Self {
        let output_schema = tool.output_schema().cloned().unwrap_or(Value::Bool(true));
        Self {
            tool,
            output_schema,
        }
    }
}

#[async_trait::async_trait]
impl Step for ToolStep {
    fn id(&self) -> &str {
        self.tool.id()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn input_schema(&self) -> &Value {
        self.tool.input_schema()
    }

    fn output_schema(&self) -> &Value {
        &self.output_schema
    }

    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError> {
        let errors = crate::schema::schema_errors(self.tool.input_schema(), ctx.input());
        if !errors.is_empty() {
            return Err(StepError::new(format!(
                "invalid input for tool step {:?}: {}",
                self.id(),
                errors.join("; ")
            )));
        }
        let mut tool_ctx = ToolContext::standalone(self.tool.id())
            .with_request_context(ctx.request_context().clone())
            .with_abort_signal(ctx.abort_signal().child());
        tool_ctx.run_id = Arc::clone(&ctx.run.run_id);
        if let Some(data) = ctx.resume_data() {
            tool_ctx = tool_ctx.with_resume_data(data.clone());
        }
        if let Some(payload) = ctx.suspend_data() {
            tool_ctx = tool_ctx.with_suspend_payload(payload.clone());
        }
        match self.tool.execute(ctx.input().clone(), tool_ctx).await {
            Ok(output) => Ok(output),
            // The tool's suspension is the step's: resuming the run resumes the tool.
            Err(error) => match error.into_suspension() {
                Ok(payload) => Err(ctx.suspend(payload)),
                Err(error) => Err(StepError::new(format!(
                    "tool {:?} failed: {}",
                    self.id(),
                    error.message()
                ))),
            },
        }
    }

    fn resume_schema(&self) -> Option<&Value> {
        self.tool.resume_schema()
    }

    fn suspend_schema(&self) -> Option<&Value> {
        self.tool.suspend_schema()
    }
}

/// A workflow as an agent's tool (`.tool(WorkflowTool::new(workflow))`): the model calls it
/// with the workflow's input, and reads the workflow's output.
///
/// A run that fails gives the model `workflow "<id>" failed (its run <run>)`: the step's
/// error is in the run's snapshot and the log, not in the model's context or the thread (it
/// may quote a provider or a store). A store that fails gives `the workflow store failed`;
/// an input the workflow refuses is said as it is.
///
/// Each call is one run of the workflow, named by the agent's run and the call
/// (`<run>-<call>`), so a call that runs again (after a takeover) finds its run instead of
/// starting another. A run that suspends suspends the call with
/// `{workflowId, runId, suspended, suspendPayload}`; resuming the call
/// ([`crate::agent::RunHandle::resume`]) resumes the workflow with the resume data.
#[derive(Debug, Clone)]
pub struct WorkflowTool {
    workflow: super::Workflow,
    name: String,
}

impl WorkflowTool {
    /// The tool of `workflow`, called `workflow-<id>`.
    pub fn new(workflow: super::Workflow) -> Self {
        let name = format!("workflow-{}", workflow.id());
        Self { workflow, name }
    }
}

#[async_trait::async_trait]
impl Tool for WorkflowTool {
    fn id(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        self.workflow.description()
    }

    fn input_schema(&self) -> &Value {
        self.workflow.input_schema()
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(self.workflow.output_schema())
    }

    async fn execute(
        &self,
        input: Value,
        ctx: ToolContext,
    ) -> Result<Value, crate::tool::ToolError> {
        use super::WorkflowStatus;
        use crate::tool::ToolError;
        let run_id = format!("{}-{}", ctx.run_id(), ctx.tool_call_id());
        let run = self
            .workflow
            .create_run_with_id(&run_id)
            .request_context(ctx.request_context().clone());
        let run = match ctx.resource_id() {
            Some(resource) => run.resource(resource),
            None => run,
        };
        // The run hangs under the tool call's span, traced by the calling run's tracer.
        let parent = ctx
            .extension::<crate::trace::Tracer>()
            .zip(ctx.trace_context())
            .map(|(tracer, context)| crate::trace::SpanParent {
                tracer: tracer.clone(),
                context: context.clone(),
            });
        let run = run.traced_under(parent.as_ref());
        let outcome = match ctx.resume_data() {
            Some(data) => run.resume(None, data.clone()).await,
            None => match run.start(input).await {
                // The call ran before (its run was taken over): read what its run did.
                Err(WorkflowRunError::AlreadyStarted { .. }) => match run.snapshot().await {
                    Ok(Some(stored)) if stored.status == WorkflowStatus::Success => {
                        return Ok(stored.result.map(Arc::unwrap_or_clone).unwrap_or_default());
                    }
                    _ => {
                        return Err(ToolError::new(format!(
                            "workflow {:?} run {run_id:?} was started before and has not succeeded",
                            self.workflow.id()
                        )));
                    }
                },
                other => other,
            },
        };
        let id = self.workflow.id();
        let result = outcome.map_err(|error| {
            ToolError::new(format!(
                "workflow {id:?} could not run (its run {run_id}): {}",
                error.public_text(id, &run_id)
            ))
        })?;
        match result.status {
            WorkflowStatus::Success => Ok(result.result.unwrap_or(Value::Null)),
            WorkflowStatus::Suspended => Err(ctx.suspend(json!({
                "workflowId": id,
                "runId": run_id,
                "suspended": result.suspended,
                "suspendPayload": result.suspend_payload,
            }))),
            status => {
                let failure = format!("workflow {id:?} {} (its run {run_id})", status.as_str());
                if let Some(error) = &result.error {
                    tracing::warn!(error = %error.message, "{failure}");
                }
                Err(ToolError::new(failure))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stores_text_is_logged_and_the_librarys_own_kept() {
        let down = WorkflowRunError::Store(crate::store::WorkflowStoreError(Box::new(
            std::io::Error::other("password authentication failed: hunter2"),
        )));
        assert_eq!(down.public_text("w", "r"), "the workflow store failed");
        let own = WorkflowRunError::UnknownRun {
            workflow: "w".into(),
            run_id: "r".into(),
        };
        assert_eq!(own.public_text("w", "r"), own.to_string());
    }
}
