//! The delegation tool: how a parent's call of `agent-<id>` runs the sub-agent, in the
//! parent's runtime, and what the parent's model gets back. What users configure (options,
//! hooks, limits) and how delegation behaves is described in [`crate::definition::delegation`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::Either;
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

    // Written out, not `async`: an async body would hold its own copies of the input and the
    // context next to the ones the delegation's future owns, as long as the sub-agent runs.
    fn execute<'tool, 'call>(
        &'tool self,
        input: Value,
        ctx: ToolContext,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'call>>
    where
        'tool: 'call,
    {
        // The sub-agent runs in the runtime of the run that delegates.
        let tool = match ctx.extension::<Arc<Runtime>>() {
            Some(runtime) => DelegationTool {
                shape: Arc::clone(&self.shape),
                agent: self.agent.in_runtime(runtime),
            },
            None => self.clone(),
        };
        Box::pin(tool.delegate(input, ctx))
    }
}

impl DelegationTool {
    /// [`Tool::execute`], with the sub-agent in the delegating run's runtime.
    // Not `async fn`: that would hold the arguments twice (see `execute`).
    #[allow(clippy::manual_async_fn)]
    fn delegate(
        self,
        input: Value,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<Value, ToolError>> + Send {
        async move { self.delegate_in(input, &ctx).await }
    }

    async fn delegate_in(&self, input: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        // Boxed, like the sub-run below: what preparing holds (hooks, the sub-agent's
        // options, a stored run) is gone while the sub-agent runs, instead of taking room
        // in this future as long as it does.
        let (run, scope) = match Box::pin(self.prepare(input, ctx)).await? {
            Stored::Continue(run, scope) => (run, scope),
            Stored::Ended(outcome) => return Box::pin(self.complete(*outcome, None, ctx)).await,
        };
        if let Some(background) = ctx.extension::<BackgroundCall>().cloned() {
            return Ok(Box::pin(self.run_in_background(run, scope, ctx.clone(), background)).await);
        }
        // Boxed: inline, the sub-run's future (kilobytes) would make this one as big, and
        // `execute` copies this one whole into its box before it starts.
        let outcome = Box::pin(drive(*run, ctx)).await;
        Box::pin(self.complete(outcome, scope, ctx)).await
    }

    /// The sub-agent's run to drive: a new one, or the stored one of a delegation that stopped
    /// (for a decision, a pause, or a restart of this process), whose prompt and start hooks
    /// ran when it began. Its own function, so what it holds (a stored run's state) takes no
    /// room in the future that drives the sub-agent.
    async fn prepare(&self, input: Value, ctx: &ToolContext) -> Result<Stored, ToolError> {
        let stored = match ctx.extension::<SubRunContext>() {
            Some(link) if link.is_new => None,
            Some(link) => match link.store.load(&link.sub_run.run_id).await {
                Ok(stored) => stored,
                Err(error) => {
                    let id = self.agent.id();
                    tracing::warn!(sub_agent = %id, %error, "loading the sub-agent's run failed");
                    return Err(ToolError::new(format!(
                        "The {id:?} agent could not complete the task."
                    )));
                }
            },
            None => None,
        };
        match stored {
            Some(stored) => Ok(self.continue_stored(stored, ctx)),
            None => {
                let (run, scope) = self.start(input, ctx).await?;
                // Boxed: the run moves on into the sub-run's future.
                Ok(Stored::Continue(Box::new(run), scope))
            }
        }
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
///
/// Not an `async fn`: its future would keep the run it was given next to the run's own future.
fn drive(
    run: AgentRun,
    ctx: &ToolContext,
) -> impl Future<Output = Result<GenerateResult, AgentError>> + Send + '_ {
    if !ctx.writer().is_observed() {
        return Either::Left(run.run());
    }
    let mut stream = run.into_stream();
    Either::Right(async move {
        while let Some(event) = stream.next().await {
            if let Err(error) = ctx.writer().write(&event).await {
                tracing::debug!(%error, "a sub-agent's event could not be forwarded");
            }
        }
        stream.result().await
    })
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

#[cfg(test)]
mod future_sizes {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::model::ScriptedModel;

    /// A delegation's future lives as long as the sub-agent's run, in every run that waits
    /// for one: it holds the sub-run once, and little next to it.
    #[tokio::test]
    async fn a_delegations_future_holds_the_sub_run_once() {
        let agent = Agent::builder("a")
            .model(Arc::new(ScriptedModel::new()))
            .build()
            .unwrap();
        let tool = DelegationTool::new(agent.clone());
        let ctx = ToolContext::standalone("agent-a");
        let run_size = std::mem::size_of::<AgentRun>();
        let run = agent.start_run(vec![Message::user("x")], Default::default());
        let sub_run = std::mem::size_of_val(&run.run());
        let run = agent.start_run(vec![Message::user("x")], Default::default());
        let driven = std::mem::size_of_val(&drive(run, &ctx));
        assert!(
            driven < sub_run + 64,
            "driving a sub-run takes {driven} bytes, its run's future {sub_run}"
        );
        let delegation = std::mem::size_of_val(&*tool.execute(json!({"prompt": "x"}), ctx));
        // The sub-run's future, and what preparing and completing hold, are boxed apart:
        // `execute` copies the delegation's whole into its box before it starts, and it lives
        // as long as the sub-agent runs.
        assert!(
            delegation < run_size,
            "a delegation's future takes {delegation} bytes: more than a run ({run_size}), or \
             it holds its sub-run's ({sub_run})"
        );
    }
}
