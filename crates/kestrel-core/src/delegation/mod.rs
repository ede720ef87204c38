//! The delegation tool: how a parent's call of `agent-<id>` runs the sub-agent, in the
//! parent's runtime, and what the parent's model gets back. What users configure (options,
//! hooks, limits) and how delegation behaves is described in [`crate::definition::delegation`].

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::definition::AgentError;
use crate::definition::delegation::DELEGATION_HOOK_ERRORS_KEY;
use crate::definition::tools::{CONTEXT_FROM_REFS, DELEGATION_TOOL_PREFIX};
use crate::memory::MemoryScope;
use crate::message::{Message, Part, Role};
use crate::run::GenerateResult;
use crate::runtime::background::BackgroundCall;
use crate::runtime::subrun::SubRunContext;
use crate::runtime::{Agent, AgentRun, Runtime};
use crate::tool::{Tool, ToolContext, ToolError};

mod work;

/// The tool through which a parent delegates to one sub-agent. Cheap to clone: a delegation
/// binds a copy to the delegating run's runtime.
#[derive(Clone)]
pub(crate) struct DelegationTool {
    shape: Arc<ToolShape>,
    agent: Agent,
}

/// A delegation tool's name, description and input schema, as models get them.
struct ToolShape {
    name: String,
    description: String,
    input_schema: Value,
}

impl DelegationTool {
    pub(crate) fn new(agent: Agent) -> Self {
        let description = if agent.description().is_empty() {
            format!("Delegates a task to the {:?} agent.", agent.name())
        } else {
            agent.description().to_owned()
        };
        let shape = ToolShape {
            name: format!("{DELEGATION_TOOL_PREFIX}{}", agent.id()),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "The task for the agent, with everything it needs to know."
                    },
                    CONTEXT_FROM_REFS: {
                        "type": "array",
                        "description": "Earlier results to hand to the agent verbatim, by their [ref: ...] ids.",
                        "items": {
                            "anyOf": [
                                {"type": "string"},
                                {
                                    "type": "object",
                                    "properties": {
                                        "ref": {"type": "string"},
                                        "as": {"type": "string"},
                                        "note": {"type": "string"}
                                    },
                                    "required": ["ref"],
                                    "additionalProperties": false
                                }
                            ]
                        }
                    }
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        };
        Self {
            shape: Arc::new(shape),
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

impl DelegationTool {
    /// Where a delegation runs when the sub-agent has memory: under the parent's resource (or
    /// `agent:<id>` for a parent without one), in a fresh thread per delegation, or in one
    /// thread per parent thread when `stable`.
    fn sub_agent_scope(&self, ctx: &ToolContext, stable: bool) -> Option<MemoryScope> {
        self.agent.memory()?;
        let id = self.agent.id();
        let resource_id = ctx
            .resource_id()
            .map_or_else(|| format!("agent:{id}"), str::to_owned);
        let thread_id = match (stable, ctx.thread_id()) {
            (true, Some(parent)) => format!("{parent}:{id}"),
            _ => format!("{id}:{}", crate::id::new_id()),
        };
        Some(MemoryScope {
            thread_id,
            resource_id,
        })
    }
}

#[async_trait::async_trait]
impl Tool for DelegationTool {
    fn id(&self) -> &str {
        &self.shape.name
    }

    fn description(&self) -> &str {
        &self.shape.description
    }

    fn input_schema(&self) -> &Value {
        &self.shape.input_schema
    }

    fn needs_conversation(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        // The sub-agent runs in the runtime of the run that delegates.
        let bound;
        let this = match ctx.extension::<Arc<Runtime>>() {
            Some(runtime) => {
                bound = DelegationTool {
                    shape: Arc::clone(&self.shape),
                    agent: self.agent.in_runtime(runtime),
                };
                &bound
            }
            None => self,
        };
        this.delegate(input, ctx).await
    }
}

impl DelegationTool {
    /// [`Tool::execute`], with the sub-agent in the delegating run's runtime.
    async fn delegate(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let id = self.agent.id();
        let failed = || format!("The {id:?} agent could not complete the task.");
        // A delegation whose sub-agent's run is already stored (it stopped for a decision,
        // was paused, or this process restarted) continues that run: its prompt and start
        // hooks ran when it began.
        let stored = match ctx.extension::<SubRunContext>() {
            Some(link) if link.is_new => None,
            Some(link) => match link.store.load(&link.sub_run.run_id).await {
                Ok(stored) => stored,
                Err(error) => {
                    tracing::warn!(sub_agent = %id, %error, "loading the sub-agent's run failed");
                    return Err(ToolError::new(failed()));
                }
            },
            None => None,
        };
        let (run, scope) = match stored {
            Some(stored) => match self.continue_stored(stored, &ctx) {
                Stored::Continue(run, scope) => (*run, scope),
                Stored::Ended(outcome) => return self.complete(*outcome, None, &ctx).await,
            },
            None => self.start(input, &ctx).await?,
        };
        if let Some(background) = ctx.extension::<BackgroundCall>().cloned() {
            return Ok(self.run_in_background(run, scope, ctx, background).await);
        }
        let outcome = drive(run, &ctx).await;
        self.complete(outcome, scope, &ctx).await
    }
}

/// A delegation's sub-agent run found in the store.
enum Stored {
    /// Not finished: continue it.
    Continue(Box<AgentRun>, Option<MemoryScope>),
    /// It ended before the parent recorded its outcome.
    Ended(Box<Result<GenerateResult, AgentError>>),
}

/// Drives a sub-agent's run; while the parent is streamed, its events go nested under the
/// delegation's tool call.
async fn drive(run: AgentRun, ctx: &ToolContext) -> Result<GenerateResult, AgentError> {
    if !ctx.writer().is_observed() {
        return run.run().await;
    }
    let mut stream = run.into_stream();
    while let Some(event) = stream.next().await {
        if let Err(error) = ctx.writer().write(&event).await {
            tracing::debug!(%error, "a sub-agent's event could not be forwarded");
        }
    }
    stream.result().await
}

/// Records a hook failure in the run's request context.
fn record_hook_error(
    ctx: &ToolContext,
    hook: &str,
    primitive_id: &str,
    error: &dyn std::fmt::Display,
) {
    let entry = json!({
        "hook": hook,
        "primitiveId": primitive_id,
        "toolCallId": ctx.tool_call_id(),
        "runId": ctx.run_id(),
        "name": "DelegationHookError",
        "message": error.to_string(),
    });
    let context = ctx.request_context();
    let mut errors = match context.get(DELEGATION_HOOK_ERRORS_KEY) {
        Some(Value::Array(errors)) => errors,
        _ => Vec::new(),
    };
    errors.push(entry);
    context.set(DELEGATION_HOOK_ERRORS_KEY, Value::Array(errors));
    tracing::warn!(hook, primitive_id, %error, "a delegation hook failed");
}
