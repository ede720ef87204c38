//! Kestrel's events as AI SDK UI message stream chunks (what `useChat` reads).
//!
//! The [`Encoder`] translates one run's [`Event`]s, in order, into [`Chunk`]s and keeps the
//! protocol's ordering rules whatever the events are: `start` first; every `text-delta` inside
//! its `text-start` / `text-end`; `start-step` / `finish-step` paired; tool output only for a
//! call the message already has; and one terminal chunk (`finish`, `error` or `abort`) last. The
//! events stay the single source of truth: nothing here is stored, a chunk is only a view of an
//! event.
//!
//! Approvals and suspensions become `data-tool-call-approval` / `data-tool-call-suspended`
//! parts (both versions, keyed by the tool call id, as Mastra's `chatRoute` sends them). In
//! [`Version::V6`] an approval is also a `tool-approval-request` whose `approvalId` is
//! `<runId>::<toolCallId>`, and a declined call ends in `tool-output-denied`. The stored history
//! ([`super::history`]) builds its parts with the same functions, so a pending call looks the
//! same whether it streamed live or was loaded later.

use std::collections::{HashMap, HashSet};

use kestrel_core::agent::DelegationHop;
use kestrel_core::event::{Event, EventKind};
use kestrel_core::model::FinishReason;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The AI SDK UI message stream version a client speaks. They share the framing and most
/// chunks; v6 adds `tool-approval-request`, `tool-output-denied` and `finish.finishReason`,
/// which a v5 client would reject or ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
pub(crate) enum Version {
    /// AI SDK 5 (`ai@5`, `@ai-sdk/react@2`): Mastra's default.
    #[default]
    #[serde(rename = "v5")]
    V5,
    /// AI SDK 6 (`ai@6`, `@ai-sdk/react@3`).
    #[serde(rename = "v6")]
    V6,
}

impl Version {
    /// Parses `v5` / `v6` (as in a query string).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "v5" | "5" => Some(Version::V5),
            "v6" | "6" => Some(Version::V6),
            _ => None,
        }
    }
}

/// What separates the run id from the tool call id in a v6 `approvalId` (Mastra's
/// `APPROVAL_ID_SEPARATOR`).
pub(crate) const APPROVAL_ID_SEPARATOR: &str = "::";

/// The `approvalId` of a v6 approval request: the run and the call, so the answer can be
/// mapped back without any state on the server.
pub(crate) fn approval_id(run_id: &str, tool_call_id: &str) -> String {
    format!("{run_id}{APPROVAL_ID_SEPARATOR}{tool_call_id}")
}

// The resume schema of an approval, as the `tool-call-approval` event carries it (history
// needs it without an event).
use kestrel_core::agent::APPROVAL_RESUME_SCHEMA;

/// One chunk of the UI message stream, with the protocol's field names and order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum Chunk {
    /// Starts (or identifies) the assistant message.
    Start { message_id: String },
    /// A step (one model call) starts.
    StartStep,
    /// A text part opens.
    TextStart { id: String },
    /// Text of an open part.
    TextDelta { id: String, delta: String },
    /// The text part is done.
    TextEnd { id: String },
    /// A reasoning part opens.
    ReasoningStart { id: String },
    /// Reasoning of an open part.
    ReasoningDelta { id: String, delta: String },
    /// The reasoning part is done.
    ReasoningEnd { id: String },
    /// A tool call's input starts streaming.
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
    },
    /// A piece of the input text.
    ToolInputDelta {
        tool_call_id: String,
        input_text_delta: String,
    },
    /// The complete input.
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
    },
    /// v6: the call waits for a person's approval.
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    /// The call's result.
    ToolOutputAvailable { tool_call_id: String, output: Value },
    /// The call failed.
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    /// v6: the call was declined.
    ToolOutputDenied { tool_call_id: String },
    /// The step is over.
    FinishStep,
    /// The message is over (`finishReason` in v6 only).
    Finish {
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<&'static str>,
    },
    /// The run failed.
    Error { error_text: String },
    /// The run was aborted.
    Abort {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A `data-<name>` part.
    #[serde(untagged)]
    Data(DataChunk),
}

impl Chunk {
    /// The chunk's JSON, as one SSE `data:` line carries it.
    pub(crate) fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Roughly how many bytes the chunk takes in a replay buffer.
    pub(crate) fn weight(&self) -> usize {
        let text = match self {
            Chunk::TextDelta { delta, .. } | Chunk::ReasoningDelta { delta, .. } => delta.len(),
            Chunk::ToolInputDelta {
                input_text_delta, ..
            } => input_text_delta.len(),
            _ => return self.to_json().len(),
        };
        text + 64
    }

    /// Appends `next` to this chunk when both are deltas of the same part (a replay needs the
    /// text, not how it was cut). Returns `next` back when they cannot merge.
    pub(crate) fn merge(&mut self, next: Chunk) -> Option<Chunk> {
        match (self, next) {
            (
                Chunk::TextDelta { id, delta },
                Chunk::TextDelta {
                    id: id2,
                    delta: more,
                },
            )
            | (
                Chunk::ReasoningDelta { id, delta },
                Chunk::ReasoningDelta {
                    id: id2,
                    delta: more,
                },
            ) if *id == id2 => {
                delta.push_str(&more);
                None
            }
            (
                Chunk::ToolInputDelta {
                    tool_call_id,
                    input_text_delta,
                },
                Chunk::ToolInputDelta {
                    tool_call_id: id2,
                    input_text_delta: more,
                },
            ) if *tool_call_id == id2 => {
                input_text_delta.push_str(&more);
                None
            }
            (_, next) => Some(next),
        }
    }
}

/// A `data-<name>` chunk: a part of the message keyed by `(type, id)` (a later chunk with the
/// same pair replaces its data), or only an `onData` call when `transient`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DataChunk {
    /// `data-<name>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Makes the part an upsert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The payload.
    pub data: Value,
    /// Not stored in the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transient: Option<bool>,
}

impl DataChunk {
    /// The part the client stores for this chunk (a transient chunk stores none).
    pub(crate) fn part(&self) -> Value {
        let mut part = json!({"type": self.kind, "data": self.data});
        if let Some(id) = &self.id {
            part["id"] = json!(id);
        }
        part
    }
}

/// A call that waits for a person, from a `tool-call-approval` / `tool-call-suspended` event
/// or from a stored run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingCall {
    /// The stored assistant message of the step it stopped in, when known (history only).
    pub step_message_id: Option<String>,
    /// The run that waits (decisions name it).
    pub run_id: String,
    /// The call.
    pub tool_call_id: String,
    /// Its tool.
    pub tool_name: String,
    /// Its arguments.
    pub args: Value,
    /// Names the call in its step; a decision may pass it back.
    pub fingerprint: String,
    /// The delegations it sits under (empty for the run's own calls).
    pub via: Vec<DelegationHop>,
    /// What it waits for.
    pub waits_for: WaitsFor,
}

/// What a [`PendingCall`] waits for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WaitsFor {
    /// `{approved, reason?}`.
    Approval,
    /// Resume data for a suspended tool.
    Resume {
        /// What the tool passed to `suspend`.
        payload: Value,
        /// The tool's resume schema as a string (`""` without one).
        resume_schema: String,
    },
}

/// How a pending call was decided, when the continuation re-sends its data part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolution {
    /// Approved (`true`) or declined.
    Approval(bool),
    /// Resumed with data.
    Resumed,
}

impl PendingCall {
    /// Whether the client's message has a tool part for this call: only the run's own calls
    /// (a sub-agent's call sits inside the delegation's part).
    pub(crate) fn has_own_part(&self) -> bool {
        self.via.is_empty()
    }

    /// The v6 `approvalId`.
    pub(crate) fn approval_id(&self) -> String {
        approval_id(&self.run_id, &self.tool_call_id)
    }

    /// The `data-tool-call-approval` / `data-tool-call-suspended` chunk. A decided call's
    /// chunk (re-sent by the continuation, same id so it replaces the part) says so with
    /// `resumed: true` (and `approved` for an approval), so a UI can hide its buttons.
    pub(crate) fn data_chunk(&self, resolution: Option<&Resolution>) -> DataChunk {
        let (kind, mut data) = match &self.waits_for {
            WaitsFor::Approval => (
                "data-tool-call-approval",
                json!({
                    "state": "data-tool-call-approval",
                    "runId": self.run_id,
                    "toolCallId": self.tool_call_id,
                    "toolName": self.tool_name,
                    "args": self.args,
                    "resumeSchema": APPROVAL_RESUME_SCHEMA,
                    "fingerprint": self.fingerprint,
                }),
            ),
            WaitsFor::Resume {
                payload,
                resume_schema,
            } => (
                "data-tool-call-suspended",
                json!({
                    "state": "data-tool-call-suspended",
                    "runId": self.run_id,
                    "toolCallId": self.tool_call_id,
                    "toolName": self.tool_name,
                    "args": self.args,
                    "suspendPayload": payload,
                    "resumeSchema": resume_schema,
                    "fingerprint": self.fingerprint,
                }),
            ),
        };
        if !self.via.is_empty() {
            data["via"] = json!(self.via);
        }
        match resolution {
            Some(Resolution::Approval(approved)) => {
                data["resumed"] = json!(true);
                data["approved"] = json!(approved);
            }
            Some(Resolution::Resumed) => data["resumed"] = json!(true),
            None => {}
        }
        DataChunk {
            kind: kind.to_owned(),
            id: Some(self.tool_call_id.clone()),
            data,
            transient: None,
        }
    }

    /// The chunks that announce the call: in v6 an approval of the run's own call is first a
    /// `tool-approval-request` (the tool part's state), then, in both versions, the data part.
    pub(crate) fn chunks(&self, version: Version) -> Vec<Chunk> {
        let mut chunks = Vec::with_capacity(2);
        if version == Version::V6 && self.waits_for == WaitsFor::Approval && self.has_own_part() {
            chunks.push(Chunk::ToolApprovalRequest {
                approval_id: self.approval_id(),
                tool_call_id: self.tool_call_id.clone(),
            });
        }
        chunks.push(Chunk::Data(self.data_chunk(None)));
        chunks
    }
}

/// The UI's `finishReason` for a run's reason (the UI knows fewer reasons).
pub(crate) fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content-filter",
        // A stop for a person, or the step limit reached while the model wanted tools: the
        // last step ended on tool calls (AI SDK's own approval pause says `tool-calls`).
        FinishReason::ToolCalls | FinishReason::MaxSteps | FinishReason::Suspended => "tool-calls",
        FinishReason::Error => "error",
        FinishReason::Abort | FinishReason::Other | FinishReason::Unknown => "other",
    }
}

/// What a client may read of a failed run: the kind, never the provider's or the store's text
/// (it may hold keys, prompts or internals; the detail is logged).
fn error_text(kind: &str) -> String {
    match kind {
        "model" => "The model provider failed.".to_owned(),
        "structured-output" => "The answer did not match the requested structure.".to_owned(),
        "thread-busy" => "The conversation is busy with another run.".to_owned(),
        _ => "The run failed.".to_owned(),
    }
}

/// Which streamed part: text or reasoning (the same rules, other chunk names).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Reasoning,
}

/// Translates one assistant message's events into UI chunks (see the module docs).
#[derive(Debug)]
pub(crate) struct Encoder {
    version: Version,
    /// The message id to announce when the events have no `start` (a continuation).
    message_id: Option<String>,
    started: bool,
    step_open: bool,
    open_text: Vec<String>,
    open_reasoning: Vec<String>,
    /// Calls whose input started streaming.
    streaming_inputs: HashSet<String>,
    /// Calls the client's message has a part for.
    known_calls: HashSet<String>,
    /// Calls decided before this stream, and how (their results map accordingly).
    decided: HashMap<String, Resolution>,
    ended: bool,
}

impl Encoder {
    /// An encoder for a new turn: the run's `start` event opens the message.
    pub(crate) fn new(version: Version) -> Self {
        Self {
            version,
            message_id: None,
            started: false,
            step_open: false,
            open_text: Vec::new(),
            open_reasoning: Vec::new(),
            streaming_inputs: HashSet::new(),
            known_calls: HashSet::new(),
            decided: HashMap::new(),
            ended: false,
        }
    }

    /// An encoder for the continuation of a stopped run: the message `message_id` already has
    /// the parts of `known_calls`; `decided` are the calls just decided, whose data parts are
    /// re-sent as resolved.
    pub(crate) fn continuing(
        version: Version,
        message_id: String,
        known_calls: impl IntoIterator<Item = String>,
    ) -> Self {
        let mut encoder = Self::new(version);
        encoder.message_id = Some(message_id);
        encoder.known_calls = known_calls.into_iter().collect();
        encoder
    }

    /// The chunks that open a continuation (`start`, and the decided calls' data parts marked
    /// resolved). Call once, before the first event.
    pub(crate) fn open_continuation(
        &mut self,
        decided: &[(PendingCall, Resolution)],
    ) -> Vec<Chunk> {
        let mut chunks = self.ensure_started();
        for (call, resolution) in decided {
            self.decided
                .insert(call.tool_call_id.clone(), resolution.clone());
            chunks.push(Chunk::Data(call.data_chunk(Some(resolution))));
        }
        chunks
    }

    /// Whether a terminal chunk was sent.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended
    }

    fn ensure_started(&mut self) -> Vec<Chunk> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        let message_id = self.message_id.clone().unwrap_or_default();
        vec![Chunk::Start { message_id }]
    }

    /// Closes the open text and reasoning parts.
    fn close_parts(&mut self, out: &mut Vec<Chunk>) {
        for id in self.open_reasoning.drain(..) {
            out.push(Chunk::ReasoningEnd { id });
        }
        for id in self.open_text.drain(..) {
            out.push(Chunk::TextEnd { id });
        }
    }

    /// Closes the parts and the step.
    fn close_step(&mut self, out: &mut Vec<Chunk>) {
        self.close_parts(out);
        if self.step_open {
            self.step_open = false;
            out.push(Chunk::FinishStep);
        }
    }

    /// Makes sure the client has a part for the call before its output.
    fn ensure_call(&mut self, out: &mut Vec<Chunk>, tool_call_id: &str, name: &str, args: &Value) {
        if !self.known_calls.contains(tool_call_id) {
            self.known_calls.insert(tool_call_id.to_owned());
            out.push(Chunk::ToolInputAvailable {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: name.to_owned(),
                input: args.clone(),
            });
        }
    }

    /// The chunks of one event (none for events the UI has no use for).
    pub(crate) fn event(&mut self, event: &Event) -> Vec<Chunk> {
        if self.ended {
            return Vec::new();
        }
        // A sub-agent's failure inside a `tool-output` keeps its text in the log too.
        let public = crate::redact::public_event(event);
        let event = public.as_ref();
        let mut out = Vec::new();
        if let EventKind::Start(start) = &event.kind {
            if self.message_id.is_none() {
                self.message_id = Some(start.message_id.clone());
            }
            out.extend(self.ensure_started());
            return out;
        }
        out.extend(self.ensure_started());
        match &event.kind {
            EventKind::StepStart(_) => {
                self.close_step(&mut out);
                self.step_open = true;
                out.push(Chunk::StartStep);
            }
            EventKind::TextStart(part) => self.part(&mut out, Kind::Text, &part.id, None),
            EventKind::TextDelta(delta) => {
                self.part(&mut out, Kind::Text, &delta.id, Some(&delta.text));
            }
            EventKind::TextEnd(part) => self.end_part(&mut out, Kind::Text, &part.id),
            EventKind::ReasoningStart(part) => {
                self.part(&mut out, Kind::Reasoning, &part.id, None);
            }
            EventKind::ReasoningDelta(delta) => {
                self.part(&mut out, Kind::Reasoning, &delta.id, Some(&delta.text));
            }
            EventKind::ReasoningEnd(part) => self.end_part(&mut out, Kind::Reasoning, &part.id),
            EventKind::ToolCallInputStreamingStart(start) => {
                self.start_input(&mut out, &start.tool_call_id, &start.tool_name);
            }
            EventKind::ToolCallDelta(delta) => {
                // A delta needs its start; a call announced otherwise gets its input whole.
                self.start_input(&mut out, &delta.tool_call_id, &delta.tool_name);
                if self.streaming_inputs.contains(&delta.tool_call_id) {
                    out.push(Chunk::ToolInputDelta {
                        tool_call_id: delta.tool_call_id.clone(),
                        input_text_delta: delta.args_text_delta.clone(),
                    });
                }
            }
            EventKind::ToolCall(call) => {
                self.known_calls.insert(call.tool_call_id.clone());
                self.streaming_inputs.remove(&call.tool_call_id);
                out.push(Chunk::ToolInputAvailable {
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.args.clone(),
                });
            }
            EventKind::ToolResult(result) => {
                self.ensure_call(
                    &mut out,
                    &result.tool_call_id,
                    &result.tool_name,
                    &result.args,
                );
                out.push(Chunk::ToolOutputAvailable {
                    tool_call_id: result.tool_call_id.clone(),
                    output: result.result.clone(),
                });
            }
            EventKind::ToolError(error) => {
                self.ensure_call(&mut out, &error.tool_call_id, &error.tool_name, &error.args);
                let declined = matches!(
                    self.decided.get(&error.tool_call_id),
                    Some(Resolution::Approval(false))
                );
                if declined && self.version == Version::V6 {
                    out.push(Chunk::ToolOutputDenied {
                        tool_call_id: error.tool_call_id.clone(),
                    });
                } else {
                    // The text the model reads: the tool's own message or the decline reason.
                    out.push(Chunk::ToolOutputError {
                        tool_call_id: error.tool_call_id.clone(),
                        error_text: error.error.clone(),
                    });
                }
            }
            EventKind::ToolOutput(output) => {
                // A sub-agent's or a tool's live output: passed on for `onData`, not stored in
                // the message (the stored history has no such parts either).
                out.push(Chunk::Data(DataChunk {
                    kind: "data-tool-output".to_owned(),
                    id: Some(output.tool_call_id.clone()),
                    data: json!({
                        "toolCallId": output.tool_call_id,
                        "toolName": output.tool_name,
                        "output": output.output,
                    }),
                    transient: Some(true),
                }));
            }
            EventKind::ToolCallApproval(approval) => {
                let call = PendingCall {
                    step_message_id: None,
                    run_id: event.run_id.to_string(),
                    tool_call_id: approval.tool_call_id.clone(),
                    tool_name: approval.tool_name.clone(),
                    args: approval.args.clone(),
                    fingerprint: approval.fingerprint.clone(),
                    via: approval.via.clone(),
                    waits_for: WaitsFor::Approval,
                };
                out.extend(self.pending(&call));
            }
            EventKind::ToolCallSuspended(suspended) => {
                let call = PendingCall {
                    step_message_id: None,
                    run_id: event.run_id.to_string(),
                    tool_call_id: suspended.tool_call_id.clone(),
                    tool_name: suspended.tool_name.clone(),
                    args: suspended.args.clone(),
                    fingerprint: suspended.fingerprint.clone(),
                    via: suspended.via.clone(),
                    waits_for: WaitsFor::Resume {
                        payload: suspended.suspend_payload.clone(),
                        resume_schema: suspended.resume_schema.clone(),
                    },
                };
                out.extend(self.pending(&call));
            }
            EventKind::StepFinish(_) => self.close_step(&mut out),
            EventKind::Finish(finish) => {
                self.close_step(&mut out);
                self.ended = true;
                out.push(Chunk::Finish {
                    finish_reason: (self.version == Version::V6)
                        .then(|| finish_reason(finish.step_result.reason)),
                });
            }
            EventKind::Error(error) => {
                tracing::warn!(run_id = %event.run_id, kind = %error.kind, detail = %error.error, "a chat run failed");
                self.close_step(&mut out);
                self.ended = true;
                out.push(Chunk::Error {
                    error_text: error_text(&error.kind),
                });
            }
            EventKind::Abort(abort) => {
                self.close_step(&mut out);
                self.ended = true;
                out.push(Chunk::Abort {
                    reason: abort.reason.clone(),
                });
            }
            EventKind::BackgroundTaskStarted(task) => {
                out.push(Chunk::Data(DataChunk {
                    kind: "data-background-task-started".to_owned(),
                    id: Some(task.task_id.clone()),
                    data: json!({
                        "state": "started",
                        "runId": &*event.run_id,
                        "taskId": task.task_id,
                        "toolName": task.tool_name,
                        "toolCallId": task.tool_call_id,
                    }),
                    transient: None,
                }));
            }
            EventKind::BackgroundTaskCompleted(task) | EventKind::BackgroundTaskFailed(task) => {
                let (kind, state) = if task.is_error {
                    ("data-background-task-failed", "failed")
                } else {
                    ("data-background-task-completed", "completed")
                };
                let mut data = serde_json::to_value(task).unwrap_or(Value::Null);
                data["state"] = json!(state);
                out.push(Chunk::Data(DataChunk {
                    kind: kind.to_owned(),
                    id: Some(task.task_id.clone()),
                    data,
                    transient: None,
                }));
            }
            // The UI has no use for the end of an input stream (the call itself follows).
            _ => {}
        }
        out
    }

    /// Opens part `id` unless it is open, then adds `delta` to it.
    fn part(&mut self, out: &mut Vec<Chunk>, kind: Kind, id: &str, delta: Option<&str>) {
        let open = match kind {
            Kind::Text => &mut self.open_text,
            Kind::Reasoning => &mut self.open_reasoning,
        };
        if !open.iter().any(|o| o == id) {
            open.push(id.to_owned());
            let id = id.to_owned();
            out.push(match kind {
                Kind::Text => Chunk::TextStart { id },
                Kind::Reasoning => Chunk::ReasoningStart { id },
            });
        }
        if let Some(delta) = delta {
            let (id, delta) = (id.to_owned(), delta.to_owned());
            out.push(match kind {
                Kind::Text => Chunk::TextDelta { id, delta },
                Kind::Reasoning => Chunk::ReasoningDelta { id, delta },
            });
        }
    }

    /// Closes part `id` if it is open.
    fn end_part(&mut self, out: &mut Vec<Chunk>, kind: Kind, id: &str) {
        let open = match kind {
            Kind::Text => &mut self.open_text,
            Kind::Reasoning => &mut self.open_reasoning,
        };
        if let Some(i) = open.iter().position(|o| o == id) {
            open.remove(i);
            let id = id.to_owned();
            out.push(match kind {
                Kind::Text => Chunk::TextEnd { id },
                Kind::Reasoning => Chunk::ReasoningEnd { id },
            });
        }
    }

    /// Opens the input stream of a call the client does not know yet.
    fn start_input(&mut self, out: &mut Vec<Chunk>, tool_call_id: &str, tool_name: &str) {
        if self.known_calls.insert(tool_call_id.to_owned()) {
            self.streaming_inputs.insert(tool_call_id.to_owned());
            out.push(Chunk::ToolInputStart {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: tool_name.to_owned(),
            });
        }
    }

    fn pending(&mut self, call: &PendingCall) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        if call.has_own_part()
            && call.waits_for == WaitsFor::Approval
            && self.version == Version::V6
        {
            self.ensure_call(&mut chunks, &call.tool_call_id, &call.tool_name, &call.args);
        }
        chunks.extend(call.chunks(self.version));
        chunks
    }

    /// The chunks that end the message with an error the server met (not the run's own: a
    /// decision it could not take), its text for the client to read.
    pub(crate) fn fail(&mut self, error_text: String) -> Vec<Chunk> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.ensure_started();
        self.close_step(&mut out);
        self.ended = true;
        out.push(Chunk::Error { error_text });
        out
    }

    /// The chunks that end the message when the events stop without a terminal one (a run
    /// that stopped for a person ends its stream after announcing the calls).
    pub(crate) fn end(&mut self) -> Vec<Chunk> {
        if self.ended {
            return Vec::new();
        }
        let mut out = self.ensure_started();
        self.close_step(&mut out);
        self.ended = true;
        out.push(Chunk::Finish {
            finish_reason: (self.version == Version::V6).then_some("tool-calls"),
        });
        out
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use std::sync::Arc;

    use kestrel_core::event::{PartIdPayload, TextDeltaPayload, ToolResultPayload};

    use super::*;

    fn event(kind: EventKind) -> Event {
        Event::agent(Arc::from("run-1"), kind)
    }

    #[test]
    fn a_continuation_opens_its_message_and_keeps_the_parts_paired() {
        let mut encoder = Encoder::continuing(Version::V6, "m1".into(), ["c1".to_owned()]);
        let mut chunks = encoder.open_continuation(&[]);
        // A result of a call the message has, a delta without its start, and no terminal
        // event: the encoder supplies what the protocol needs.
        chunks.extend(
            encoder.event(&event(EventKind::ToolResult(ToolResultPayload {
                tool_call_id: "c1".into(),
                tool_name: "t".into(),
                args: json!({}),
                result: json!(1),
                is_error: false,
            }))),
        );
        chunks.extend(encoder.event(&event(EventKind::TextDelta(TextDeltaPayload {
            id: "p".into(),
            text: "hi".into(),
        }))));
        chunks.extend(encoder.event(&event(EventKind::TextEnd(PartIdPayload { id: "p".into() }))));
        chunks.extend(encoder.end());
        assert_eq!(
            chunks,
            vec![
                Chunk::Start {
                    message_id: "m1".into()
                },
                Chunk::ToolOutputAvailable {
                    tool_call_id: "c1".into(),
                    output: json!(1)
                },
                Chunk::TextStart { id: "p".into() },
                Chunk::TextDelta {
                    id: "p".into(),
                    delta: "hi".into()
                },
                Chunk::TextEnd { id: "p".into() },
                Chunk::Finish {
                    finish_reason: Some("tool-calls")
                },
            ]
        );
        assert!(encoder.end().is_empty(), "one terminal chunk");
    }

    #[test]
    fn an_output_for_an_unknown_call_announces_the_call_first() {
        let mut encoder = Encoder::continuing(Version::V5, "m1".into(), Vec::new());
        let chunks = encoder.event(&event(EventKind::ToolResult(ToolResultPayload {
            tool_call_id: "c9".into(),
            tool_name: "t".into(),
            args: json!({"a": 1}),
            result: json!("ok"),
            is_error: false,
        })));
        assert_eq!(
            chunks[1],
            Chunk::ToolInputAvailable {
                tool_call_id: "c9".into(),
                tool_name: "t".into(),
                input: json!({"a": 1})
            }
        );
    }
}
