//! The run as plain data: a serialisable state machine advanced by the driver.
//!
//! A [`RunState`] holds everything needed to continue a run elsewhere: the conversation, the
//! steps so far, usage, the pending tool calls and the options that shape later steps. The
//! async driver ([`crate::agent::AgentRun`]) does the I/O; this module only records results and
//! decides what comes next, so a run can stop after any step, be written to storage, and be
//! continued by a fresh process.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::structured::StructuredOutput;
use crate::message::{Message, Part, Role, Transcript};
use crate::model::{FinishReason, ModelSettings, ToolChoice, Usage};

/// The version of the serialised [`RunState`] this build writes. Version 2 added the per-call
/// progress of a step's tool calls and the `suspended` status; version 3 the delegation links
/// (`delegatedBy`, a call's `subRun`, calls waiting on a sub-agent). Versions 1 and 2 still
/// load.
pub const RUN_STATE_VERSION: u32 = 3;

/// The oldest serialised [`RunState`] version this build reads.
pub const MIN_RUN_STATE_VERSION: u32 = 1;

/// A tool call the model made, with its parsed arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments; the raw text as a string when it was not valid JSON.
    pub args: Value,
    /// The JSON parser's message when the argument text was not valid JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_error: Option<String>,
}

/// The outcome of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultRecord {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments.
    pub args: Value,
    /// The tool's output, or the error text when `is_error`.
    pub result: Value,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether a person declined the call (it never ran; `is_error` is set too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
}

/// One finished step: a model call and the tool calls it made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// The step's assistant message id.
    pub message_id: String,
    /// The text the model produced.
    pub text: String,
    /// The reasoning the model produced.
    pub reasoning: String,
    /// The tool calls the model made.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Their results, in the same order.
    pub tool_results: Vec<ToolResultRecord>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Tokens used by this step.
    pub usage: Usage,
}

/// What a tool call of a stopped run waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Waiting {
    /// A person's approval before the tool runs.
    Approval,
    /// Resume data: the tool suspended itself with this payload.
    Resume {
        /// What the tool passed to `suspend`.
        payload: Value,
    },
    /// The caller's result: a client tool has no `execute`.
    ClientResult,
    /// A delegated sub-agent's run stopped on calls of its own (approvals, suspensions, at any
    /// depth); deciding on one of them through this run continues the sub-agent, then this run.
    SubAgent {
        /// The sub-agent.
        agent_id: String,
        /// Its run.
        run_id: String,
        /// What that run waits for (its own calls and, further down, its sub-agents').
        calls: Vec<WaitingCall>,
    },
}

/// A decision about a waiting tool call, recorded in the state before the run continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum CallDecision {
    /// Run the tool.
    Approved,
    /// Do not run it; the model reads `reason`.
    Declined {
        /// What the model is told.
        reason: String,
    },
    /// Run the suspended tool again with this data.
    Resumed {
        /// The resume data (validated against the tool's resume schema).
        data: Value,
    },
    /// The client tool's result.
    ClientResult {
        /// The result the model reads.
        result: Value,
        /// Whether the client reports a failure.
        is_error: bool,
    },
    /// A decision was recorded on the delegated sub-agent's run: continue it.
    SubAgent,
}

/// The run a delegation call started: where its progress is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubRun {
    /// The sub-agent.
    pub agent_id: String,
    /// Its run (chosen before it starts, so the parent's snapshot can name it).
    pub run_id: String,
}

/// The run that started this one as a background task, and where the task's result goes.
/// The process that starts a task hands the result to its run in memory; one that continues
/// the task after its instance stopped (a takeover) reads this to deliver it to the thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundOrigin {
    /// The agent of the run that started the task.
    pub agent_id: String,
    /// The run that started it.
    pub run_id: String,
    /// The delegation tool.
    pub tool_name: String,
    /// The call it runs for.
    pub tool_call_id: String,
    /// The thread of the run that started it, where a late result goes (none: the run had no
    /// thread, and a late result can only be logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// That thread's resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

/// The run that delegated this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegatedBy {
    /// The parent's agent.
    pub agent_id: String,
    /// The parent's run.
    pub run_id: String,
    /// The parent's delegation call.
    pub tool_call_id: String,
}

/// One tool call of the step whose tools are pending, and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallProgress {
    /// The call.
    pub call: ToolCallRecord,
    /// Whether it needs approval: the tool's and the run's policies, evaluated when the model
    /// made the call and kept, so a continued run cannot lose them.
    pub requires_approval: bool,
    /// Whether a person approved it.
    #[serde(default)]
    pub approved: bool,
    /// What it waits for, while the run is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// The decision recorded for it, not yet acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<CallDecision>,
    /// Its result, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResultRecord>,
    /// For a delegation: the sub-agent's run, once chosen (it may outlive this process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_run: Option<SubRun>,
    /// Identifies this call with these arguments in this step: what a decision names.
    pub fingerprint: String,
    /// A decided call (approved, or resumed with data) whose tool an instance of a cluster
    /// started, recorded before it ran: should that instance stop before the result is
    /// saved, the instance that continues the run does not run the tool a second time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started: bool,
}

impl CallProgress {
    /// A call that has not run yet.
    pub fn new(call: ToolCallRecord, requires_approval: bool, step: usize) -> Self {
        let fingerprint = fingerprint(&call, step);
        Self {
            call,
            requires_approval,
            approved: false,
            waiting: None,
            decision: None,
            result: None,
            sub_run: None,
            fingerprint,
            started: false,
        }
    }
}

/// A tool call a stopped run waits for, as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingCall {
    /// The call id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments.
    pub args: Value,
    /// What it waits for.
    pub waiting: Waiting,
    /// What a decision about it may name to make sure it decides on this call.
    pub fingerprint: String,
    /// For a call of a delegated sub-agent (at any depth): the delegations it sits under, from
    /// the run asked down to the run that makes the call. Empty for the run's own calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<DelegationHop>,
}

/// One delegation on the way from a run to a call of one of its sub-agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationHop {
    /// The delegation's tool call id (in the run above).
    pub tool_call_id: String,
    /// The sub-agent.
    pub agent_id: String,
    /// The sub-agent's run.
    pub run_id: String,
}

impl CallProgress {
    /// The call as a [`WaitingCall`], if it waits on something of its own (a call waiting on
    /// a sub-agent is listed as that sub-agent's calls: see [`RunState::waiting_calls`]).
    pub fn as_waiting(&self) -> Option<WaitingCall> {
        Some(WaitingCall {
            tool_call_id: self.call.tool_call_id.clone(),
            tool_name: self.call.tool_name.clone(),
            args: self.call.args.clone(),
            waiting: self.waiting.clone()?,
            fingerprint: self.fingerprint.clone(),
            via: Vec::new(),
        })
    }

    /// What the call waits for, as callers see it: itself, or the calls of the sub-agent it
    /// delegated to, each with the delegation in its path.
    pub fn waiting_calls(&self) -> Vec<WaitingCall> {
        match &self.waiting {
            None => Vec::new(),
            Some(Waiting::SubAgent {
                agent_id,
                run_id,
                calls,
            }) => calls
                .iter()
                .map(|nested| {
                    let mut nested = nested.clone();
                    nested.via.insert(
                        0,
                        DelegationHop {
                            tool_call_id: self.call.tool_call_id.clone(),
                            agent_id: agent_id.clone(),
                            run_id: run_id.clone(),
                        },
                    );
                    nested
                })
                .collect(),
            Some(_) => self.as_waiting().into_iter().collect(),
        }
    }
}

/// A short stable hash of a call's id, tool, arguments and step: a decision taken on what a
/// person saw is refused if the run now waits on something else under the same call id.
pub fn fingerprint(call: &ToolCallRecord, step: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(step.to_le_bytes());
    for field in [&call.tool_call_id, &call.tool_name] {
        hash.update((field.len() as u64).to_le_bytes());
        hash.update(field.as_bytes());
    }
    // serde_json writes object keys in sorted order (no `preserve_order`), so equal arguments
    // give equal text.
    hash.update(call.args.to_string().as_bytes());
    let digest = hash.finalize();
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(24);
    for b in digest.iter().take(12) {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// The options that shape later steps, kept with the state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSettings {
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// Sampling settings.
    pub model_settings: ModelSettings,
    /// Structured output, if asked for.
    pub structured_output: Option<StructuredOutput>,
    /// Tool calls of one step that run at once.
    pub tool_concurrency: usize,
    /// The thread, when the run uses memory.
    pub thread_id: Option<String>,
    /// The resource, when the run uses memory.
    pub resource_id: Option<String>,
    /// The run-level approval policy, as far as it can be saved.
    #[serde(default)]
    pub tool_approval: SavedApproval,
    /// Which version of each agent the run and its delegations use.
    #[serde(default, skip_serializing_if = "crate::run::state::no_versions")]
    pub versions: crate::version::Versions,
    /// The version of this run's agent it runs, once chosen: a resume uses the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

fn no_versions(versions: &crate::version::Versions) -> bool {
    versions.agents.is_empty()
}

/// The run-level approval policy in a saved state (a function cannot be saved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SavedApproval {
    /// No run-level approval.
    #[default]
    Never,
    /// Every call needs approval.
    Always,
    /// A function decided; a continued run that does not pass one again uses the agent's
    /// default function, or, when it has none, asks for every call.
    Function,
}

/// Where the run stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum RunStatus {
    /// The next step calls the model.
    Ready,
    /// The model called tools; they run next. The step's message and text are recorded.
    ToolsPending {
        /// The step whose tools are pending.
        step: StepResult,
        /// Each call's progress (empty until the tools phase starts).
        #[serde(default)]
        calls: Vec<CallProgress>,
    },
    /// Tool calls wait for a person (approval, resume data) or the caller (a client tool's
    /// result); the run continues once each has a decision.
    Suspended {
        /// The step whose tools are pending.
        step: StepResult,
        /// Each call's progress; those with `waiting` set are what the run waits for.
        calls: Vec<CallProgress>,
    },
    /// The run is over.
    Finished {
        /// Why.
        reason: FinishReason,
        /// The structured output, if any.
        #[serde(default)]
        object: Option<Value>,
    },
}

/// The id of the tool results' message of the step whose assistant message is `message_id`.
pub fn tool_message_id(message_id: &str) -> String {
    format!("{message_id}-tools")
}

/// The serialisable state of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// Format version; see [`RUN_STATE_VERSION`].
    pub version: u32,
    /// The run's id; unchanged when the run is continued.
    pub run_id: String,
    /// The agent running it.
    pub agent_id: String,
    /// The conversation without the system instructions: input first, then each step's
    /// assistant message and tool results.
    pub messages: Transcript,
    /// How many of `messages` were input (the rest are the run's response).
    pub input_len: usize,
    /// Finished steps.
    pub steps: Vec<StepResult>,
    /// Usage of all steps.
    pub usage: Usage,
    /// Upper bound on steps.
    pub max_steps: u32,
    /// Whether the `start` event was emitted.
    pub started: bool,
    /// The id the next assistant message will have.
    pub next_message_id: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Options that shape later steps.
    pub settings: RunSettings,
    /// The request context's entries when the state was taken.
    pub request_context: BTreeMap<String, Value>,
    /// Context memory contributed at the start of the run (extra system text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_system: Vec<String>,
    /// Whether memory was consulted (the history is part of `messages`).
    #[serde(default)]
    pub memory_loaded: bool,
    /// How many of `messages` memory has stored (history and persisted messages).
    #[serde(default)]
    pub persisted: usize,
    /// How many messages at the start of the input are context memory never stores.
    #[serde(default)]
    pub context_len: usize,
    /// When this run is a delegation: the parent run it answers to. Decisions on it go through
    /// the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_by: Option<DelegatedBy>,
    /// When this run is a background task: the run that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_for: Option<BackgroundOrigin>,
    /// The token of the lease under which this snapshot is saved, when runs are shared
    /// between instances (see [`crate::lease`]): a store refuses a save whose token is below
    /// the greatest it has seen for this run, so an owner that lost its lease cannot
    /// overwrite its successor's work. `None`: the save is not fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<u64>,
    /// The trace the run's spans belong to, and the span its own spans hang under (the
    /// delegating call's, for a sub-agent): kept so that a run continued later (a resume, a
    /// takeover) stays in its trace. `None` until the run is traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
    /// What the caller said of the run's trace (a name, tags, metadata, a user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<crate::trace::TracingOptions>,
    /// What stopped the run, when a processor did (its status is then finished with the
    /// reason `tripwire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<super::Tripwire>,
    /// How many answers the agent's processors sent back for another try so far (bounded by
    /// the agent's `max_processor_retries`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processor_retries: u32,
    /// How many messages at the front of `messages` memory recalled (the thread's history).
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub remembered: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunState {
    /// A fresh run of `agent_id` over `messages`.
    pub fn new(
        run_id: String,
        agent_id: String,
        messages: Vec<Message>,
        max_steps: u32,
        settings: RunSettings,
    ) -> Self {
        Self {
            version: RUN_STATE_VERSION,
            run_id,
            agent_id,
            input_len: messages.len(),
            messages: Transcript::new(messages),
            steps: Vec::new(),
            usage: Usage::default(),
            max_steps,
            started: false,
            next_message_id: crate::id::new_id(),
            status: RunStatus::Ready,
            settings,
            request_context: BTreeMap::new(),
            memory_system: Vec::new(),
            memory_loaded: false,
            persisted: 0,
            context_len: 0,
            delegated_by: None,
            background_for: None,
            lease_token: None,
            trace: None,
            tracing: None,
            tripwire: None,
            processor_retries: 0,
            remembered: 0,
        }
    }

    /// Puts recalled history before the input and records the memory's system text;
    /// `input_stored` says whether memory stored the input while it recalled.
    pub fn apply_recalled(
        &mut self,
        system: Vec<String>,
        history: Vec<Message>,
        input_stored: bool,
    ) {
        let history_len = history.len();
        self.remembered = history_len;
        self.messages.prepend(history);
        self.input_len += history_len;
        // The context after the history is the caller's, never stored; the input after it is
        // stored already when recall says so.
        self.persisted = if input_stored {
            self.messages.len()
        } else {
            history_len + self.context_len
        };
        self.memory_system = system;
        self.memory_loaded = true;
    }

    /// Takes the run's input (after its leading context) out, to change it (input
    /// processors do, before memory stores it); [`RunState::set_input`] puts it back.
    pub fn take_input(&mut self) -> Vec<Message> {
        let input = self.messages.split_off(self.context_len);
        self.input_len = self.messages.len();
        input
    }

    /// Puts the (processed) input back after the context: the inverse of
    /// [`RunState::take_input`].
    pub fn set_input(&mut self, input: Vec<Message>) {
        self.messages.extend(input);
        self.input_len = self.messages.len();
    }

    /// The input without its leading context: what memory stores.
    pub fn input_to_store(&self) -> &[Message] {
        self.messages.get(self.context_len..).unwrap_or_default()
    }

    /// The complete messages memory has not stored yet.
    pub fn unpersisted(&self) -> &[Message] {
        self.messages.get(self.persisted..).unwrap_or_default()
    }

    /// Takes the run back from a normal end to answer messages delivered meanwhile.
    pub fn reopen(&mut self) {
        self.next_message_id = crate::id::new_id();
        self.status = RunStatus::Ready;
    }

    /// Whether the run is over.
    pub fn is_finished(&self) -> bool {
        matches!(self.status, RunStatus::Finished { .. })
    }

    /// The messages the run produced (assistant and tool messages).
    pub fn response_messages(&self) -> &[Message] {
        self.messages.get(self.input_len..).unwrap_or_default()
    }

    /// Records a model call's answer. Returns `true` when tool calls are pending.
    pub fn record_model_answer(
        &mut self,
        text: String,
        reasoning: String,
        tool_calls: Vec<ToolCallRecord>,
        finish_reason: FinishReason,
        usage: Usage,
    ) -> bool {
        let message_id = self.next_message_id.clone();
        let mut parts = Vec::with_capacity(2 + tool_calls.len());
        if !reasoning.is_empty() {
            parts.push(Part::Reasoning {
                text: reasoning.clone(),
            });
        }
        if !text.is_empty() {
            parts.push(Part::Text { text: text.clone() });
        }
        for call in &tool_calls {
            parts.push(Part::ToolCall {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                args: call.args.clone(),
            });
        }
        self.messages.push(Message {
            id: message_id.clone(),
            role: Role::Assistant,
            parts,
        });
        self.usage.add(&usage);
        let has_tools = !tool_calls.is_empty();
        let step = StepResult {
            message_id,
            text,
            reasoning,
            tool_calls,
            tool_results: Vec::new(),
            // A model that called tools wants their results, whatever reason it reported.
            finish_reason: if has_tools {
                FinishReason::ToolCalls
            } else {
                finish_reason
            },
            usage,
        };
        if has_tools {
            self.status = RunStatus::ToolsPending {
                step,
                calls: Vec::new(),
            };
        } else {
            self.steps.push(step);
            self.status = RunStatus::Finished {
                reason: finish_reason,
                object: None,
            };
        }
        has_tools
    }

    /// Records the pending tool calls' results and ends the step. Returns whether another
    /// step follows.
    pub fn record_tool_results(&mut self, results: Vec<ToolResultRecord>) -> bool {
        let mut step = match std::mem::replace(&mut self.status, RunStatus::Ready) {
            RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. } => step,
            other => {
                self.status = other;
                return !self.is_finished();
            }
        };
        let parts = results
            .iter()
            .map(|r| Part::ToolResult {
                tool_call_id: r.tool_call_id.clone(),
                tool_name: r.tool_name.clone(),
                result: r.result.clone(),
                is_error: r.is_error,
                denied: r.denied,
            })
            .collect();
        // Named after the step's assistant message: a step run again (continued from the
        // snapshot before it, by another instance) stores the same ids, so never twice.
        self.messages.push(Message {
            id: tool_message_id(&step.message_id),
            role: Role::Tool,
            parts,
        });
        step.tool_results = results;
        self.steps.push(step);
        if self.steps.len() >= self.max_steps as usize {
            self.status = RunStatus::Finished {
                reason: FinishReason::MaxSteps,
                object: None,
            };
            false
        } else {
            self.next_message_id = crate::id::new_id();
            self.status = RunStatus::Ready;
            true
        }
    }

    /// The pending tool calls, if the run waits for them.
    pub fn pending_tool_calls(&self) -> &[ToolCallRecord] {
        match &self.status {
            RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. } => {
                &step.tool_calls
            }
            _ => &[],
        }
    }

    /// Whether the run is stopped, waiting for decisions on tool calls.
    pub fn is_suspended(&self) -> bool {
        matches!(self.status, RunStatus::Suspended { .. })
    }

    /// The calls a stopped run waits for, in the model's order; a call that waits on a
    /// delegated sub-agent is replaced by what that sub-agent waits for (see
    /// [`WaitingCall::via`]).
    pub fn waiting_calls(&self) -> Vec<WaitingCall> {
        match &self.status {
            RunStatus::Suspended { calls, .. } => {
                calls.iter().flat_map(CallProgress::waiting_calls).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The sub-agent runs of the pending step's delegation calls that have no result yet.
    pub fn active_sub_runs(&self) -> Vec<SubRun> {
        match &self.status {
            RunStatus::ToolsPending { calls, .. } | RunStatus::Suspended { calls, .. } => calls
                .iter()
                .filter(|c| c.result.is_none())
                .filter_map(|c| c.sub_run.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The text of the last step.
    pub fn last_text(&self) -> String {
        self.steps
            .last()
            .map(|s| s.text.clone())
            .unwrap_or_default()
    }
}
