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
//!
//! The chunks and the pending calls are here; the [`Encoder`] is in `encoder`.
//!
//! [`Event`]: kestrel_core::event::Event

mod encoder;

use kestrel_core::agent::DelegationHop;
use kestrel_core::model::FinishReason;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub(crate) use encoder::Encoder;

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
    /// Its name: `"v5"` or `"v6"`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Version::V5 => "v5",
            Version::V6 => "v6",
        }
    }

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
        // Mastra maps its own `tripwire` and `retry` to `other` (the `data-tripwire` part
        // before it says why).
        FinishReason::Abort
        | FinishReason::Paused
        | FinishReason::Tripwire
        | FinishReason::Retry
        | FinishReason::Other
        | FinishReason::Unknown => "other",
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use std::sync::Arc;

    use kestrel_core::event::{
        Event, EventKind, PartIdPayload, TextDeltaPayload, ToolResultPayload,
    };

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
