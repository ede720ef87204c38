//! An agent as a workflow step ([`AgentStep`]): a prompt in, the answer's text (or
//! structured object) out, the agent's events in the workflow's stream. It lives with the
//! agents, a layer above the workflows, so that an agent's definition can hold its
//! workflows typed.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Agent, RunOptions};
use crate::workflow::{Step, StepContext, StepError};

/// An agent as a step (Mastra's `createStep(agent)`): input `{prompt}`, output `{text}`, or
/// with [`AgentStep::structured_output`] the object the agent answers with. Every event of
/// the agent's run reaches the workflow's stream as a `workflow-step-output` whose `output`
/// is the agent's event, and its usage is added to the run's.
#[derive(Debug, Clone)]
pub struct AgentStep {
    agent: Agent,
    input_schema: Value,
    output_schema: Value,
    structured: Option<crate::run::StructuredOutput>,
}

impl AgentStep {
    /// A step running `agent`; its id is the agent's.
    pub fn new(agent: Agent) -> Self {
        Self {
            agent,
            input_schema: json!({
                "type": "object",
                "properties": {"prompt": {"type": "string"}},
                "required": ["prompt"],
            }),
            output_schema: json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            }),
            structured: None,
        }
    }

    /// Asks the agent for structured output: the step's output is the object it answers
    /// with (its schema the step's output schema); no object fails the step.
    pub fn structured_output(mut self, output: crate::run::StructuredOutput) -> Self {
        self.output_schema = output.schema.clone();
        self.structured = Some(output);
        self
    }

    /// [`AgentStep::structured_output`] of the JSON schema of `T`.
    pub fn output_type<T: schemars::JsonSchema>(self) -> Self {
        self.structured_output(crate::run::StructuredOutput::of::<T>())
    }
}

#[async_trait::async_trait]
impl Step for AgentStep {
    fn id(&self) -> &str {
        self.agent.id()
    }

    fn description(&self) -> &str {
        self.agent.description()
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> &Value {
        &self.output_schema
    }

    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError> {
        let Some(prompt) = ctx.input().get("prompt").and_then(Value::as_str) else {
            return Err(StepError::new(format!(
                "agent step {:?} needs a \"prompt\" string",
                self.id()
            )));
        };
        let mut options = RunOptions::new()
            .request_context(ctx.request_context().clone())
            .abort_signal(ctx.abort_signal().child());
        if let Some(structured) = &self.structured {
            options = options.structured_output(structured.clone());
        }
        // The agent's run hangs under the step's span.
        if let Some(parent) = ctx.trace.as_deref() {
            options = options
                .trace(parent.context.clone())
                .tracer(parent.tracer.clone());
        }
        let mut stream = self.agent.stream(prompt).options(options).into_stream();
        while let Some(event) = stream.next().await {
            ctx.write(&event).await;
        }
        let result = stream.result().await.map_err(|error| {
            // A processor's stop ends the workflow run with it.
            if let crate::definition::AgentError::Tripwire { tripwire, .. } = error {
                return StepError::Tripwire { tripwire };
            }
            // The error's text may hold a provider's answer: it is logged, and the step's
            // failure (which clients read) names the run to look up.
            tracing::warn!(agent = %self.id(), %error, "an agent step failed");
            StepError::new(format!(
                "agent {:?} failed (its run {})",
                self.id(),
                error.run_id()
            ))
        })?;
        ctx.run.add_usage(&result.usage);
        match (&self.structured, result.object) {
            (None, _) => Ok(json!({"text": result.text})),
            (Some(_), Some(object)) => Ok(object),
            // Mastra's STRUCTURED_OUTPUT_OBJECT_UNDEFINED.
            (Some(_), None) => Err(StepError::new(format!(
                "agent {:?} gave no structured output",
                self.id()
            ))),
        }
    }
}
