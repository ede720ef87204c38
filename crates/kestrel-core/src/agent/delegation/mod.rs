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
//! **Hooks** ([`DelegationOptions`], in the agent's default options or per call):
//! `on_delegation_start` (proceed, reject with a reason, change the prompt or the step limit),
//! `message_filter` (what the sub-agent receives), `on_delegation_complete` (replace the text
//! the parent model sees now, save feedback for the next turn, stop the parent's loop). A
//! failing hook is skipped by default ([`HookErrorStrategy::Continue`]) or fails the delegation
//! ([`HookErrorStrategy::Throw`]); either way it is recorded in the run's request context under
//! [`DELEGATION_HOOK_ERRORS_KEY`]. Hooks are functions: a run continued after a restart has
//! them only if the continuing call passes them again.
//!
//! **Memory isolation.** The parent's conversation reaches the sub-agent as context that is
//! never stored. A sub-agent with memory runs each delegation in a fresh thread of its own
//! (`<agent id>:<uuid>`, or one per parent thread with
//! [`DelegationOptions::stable_sub_agent_threads`]) under the parent's resource, whose metadata
//! holds `agentId`, `delegatedBy` (the parent run), `delegationToolCallId`, `parentThreadId`
//! and the start hook's `thread_metadata`; only the prompt and the sub-agent's own run are
//! stored there. Nothing of the sub-agent's run is written to the parent's thread: only the
//! parent's delegation call and its result are.
//!
//! **People in the loop, at any depth.** A sub-agent's tool that needs approval, or that
//! suspends, stops the sub-agent and then the parent: the parent's stream carries the
//! `tool-call-approval` / `tool-call-suspended` event (with `via`, the delegation path), its
//! result lists the call in `waiting`, and the decision is taken with the parent's run id
//! (`supervisor.approve(ToolCallRef::new(parent_run_id, call_id)).stream()`): it is recorded
//! in each run on the way down, the sub-agent's run continues, then the parent's. Client tools
//! alone do not stop the parent: the sub-agent cannot get their results, so the delegation
//! reports them as pending (with a warning).
//!
//! **Durable delegation** (see [`crate::agent::Agent::resume_run`]). Before a delegation
//! starts, the parent's snapshot is saved as waiting for the sub-agent's run, whose id it
//! names; the sub-agent's run saves a snapshot after every step, in the same store. A new
//! process on that store resumes the parent, which continues the sub-agent from its last
//! finished step, then itself. Pause and abort by id reach the sub-agents.
//!
//! **Background delegations** return at once and report later: see
//! [`crate::agent::background`].
//!
//! A sub-agent is shared by every run that delegates to it and is never changed by them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{Value, json};

use super::background::BackgroundCall;
use super::{Agent, AgentError, AgentRun, GenerateResult, Runtime};
use crate::abort::AbortSignal;
use crate::memory::MemoryScope;
use crate::message::{Message, Part, Role};
use crate::model::ToolDefinition;
use crate::run::{DelegatedBy, SubRun};
use crate::run_store::SharedRunStore;
use crate::tool::{Tool, ToolContext, ToolError};

mod hooks;
mod work;

pub use crate::context::DELEGATION_HOOK_ERRORS_KEY;
pub use hooks::{
    DelegationComplete, DelegationCompleteOutcome, DelegationOptions, DelegationStart,
    DelegationStartOutcome, HookErrorStrategy, MessageFilterContext, SubAgentResult,
};

/// The prefix of delegation tool names (Mastra's `agent-<key>`).
pub const DELEGATION_TOOL_PREFIX: &str = "agent-";

/// The input of a delegation tool naming earlier results (with result references on).
pub const CONTEXT_FROM_REFS: &str = "contextFromRefs";

/// The request context key holding how deep a run is in a chain of delegations.
pub const DELEGATION_DEPTH_KEY: &str = "kestrel.delegationDepth";

/// How deep delegations may nest (a sub-agent delegating to a sub-agent…): agents that
/// delegate to each other in a cycle stop here with a clear error.
pub const MAX_DELEGATION_DEPTH: u64 = 8;

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

/// An agent's tool definitions as models get them, built once in each of the four forms a
/// step may need: with or without the delegation tools' `contextFromRefs` (for runs without
/// result references), and with or without memory's tools (which work only in a run with a
/// thread and a resource, so other runs are not offered them). Memory's tools are marked
/// [`ToolDefinition::auxiliary`], so that no call is ever forced onto them.
#[derive(Debug, Clone)]
pub(crate) struct ToolDefinitions {
    /// Indexed by `[references as usize][memory as usize]`.
    forms: [[Arc<[ToolDefinition]>; 2]; 2],
}

impl ToolDefinitions {
    /// The definitions a step offers the model.
    pub(crate) fn offered(&self, references: bool, memory: bool) -> Arc<[ToolDefinition]> {
        Arc::clone(&self.forms[usize::from(references)][usize::from(memory)])
    }

    pub(crate) fn new(
        tools: &crate::tool::ToolSet,
        sub_agents: &HashMap<String, Agent>,
        memory_tools: &[String],
    ) -> Self {
        let mut with_refs = tools.definitions();
        for tool in &mut with_refs {
            tool.auxiliary = memory_tools.contains(&tool.name);
        }
        let mut without_refs = with_refs.clone();
        for tool in &mut without_refs {
            let delegates = tool
                .name
                .strip_prefix(DELEGATION_TOOL_PREFIX)
                .is_some_and(|id| sub_agents.contains_key(id));
            if delegates
                && let Some(properties) = tool
                    .input_schema
                    .get_mut("properties")
                    .and_then(Value::as_object_mut)
            {
                properties.remove(CONTEXT_FROM_REFS);
            }
        }
        let without_memory = |all: &[ToolDefinition]| -> Arc<[ToolDefinition]> {
            all.iter()
                .filter(|tool| !memory_tools.contains(&tool.name))
                .cloned()
                .collect()
        };
        Self {
            forms: [
                [without_memory(&without_refs), without_refs.into()],
                [without_memory(&with_refs), with_refs.into()],
            ],
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

/// What a delegation call knows of its sub-agent's run: its id (chosen by the parent's driver
/// before it starts), the store it is saved in (the parent's), the parent's pause signal, and
/// the parent's ids.
#[derive(Debug, Clone)]
pub(crate) struct SubRunContext {
    pub sub_run: SubRun,
    /// The id was chosen for this call just now: there is no stored run to look for.
    pub is_new: bool,
    pub store: SharedRunStore,
    pub pause: AbortSignal,
    pub delegated_by: DelegatedBy,
}

/// What a run's delegations share with the driver: the options, and what hooks asked of the
/// parent's loop (stop after this step; feedback for the next turn).
#[derive(Debug, Default)]
pub(crate) struct DelegationRuntime {
    pub options: DelegationOptions,
    pub bail: AtomicBool,
    pub feedback: Mutex<Vec<String>>,
    /// Result references of this run: the next number per agent, and each id's text.
    refs: Mutex<(HashMap<String, u32>, HashMap<String, String>)>,
}

impl DelegationRuntime {
    pub(crate) fn new(options: DelegationOptions) -> Self {
        Self {
            options,
            bail: AtomicBool::new(false),
            feedback: Mutex::new(Vec::new()),
            refs: Mutex::new(Default::default()),
        }
    }

    /// Keeps `text` as the next result of `agent`; returns its id.
    fn add_reference(&self, agent: &str, text: &str) -> String {
        let mut refs = self.refs.lock().unwrap_or_else(|e| e.into_inner());
        let n = refs.0.entry(agent.to_owned()).or_insert(0);
        *n += 1;
        let id = format!("{agent}-{n}");
        refs.1.insert(id.clone(), text.to_owned());
        id
    }

    fn reference(&self, id: &str) -> Option<String> {
        let refs = self.refs.lock().unwrap_or_else(|e| e.into_inner());
        refs.1.get(id).cloned()
    }

    pub(crate) fn bailed(&self) -> bool {
        self.bail.load(Ordering::Acquire)
    }

    pub(crate) fn take_feedback(&self) -> Vec<String> {
        std::mem::take(&mut *self.feedback.lock().unwrap_or_else(|e| e.into_inner()))
    }
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
