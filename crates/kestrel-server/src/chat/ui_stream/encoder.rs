//! The [`Encoder`]: one assistant message's events turned into UI chunks, in the protocol's
//! order (see the parent module's docs).

use std::collections::{HashMap, HashSet};

use kestrel_core::event::{Event, EventKind};
use serde_json::{Value, json};

use super::{Chunk, DataChunk, PendingCall, Resolution, Version, WaitsFor, finish_reason};

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
            EventKind::Tripwire(tripwire) => {
                // Mastra's part for a blocked run, which `useChat` keeps in the message's
                // parts; `finish` (`other`) follows.
                self.close_step(&mut out);
                out.push(Chunk::Data(DataChunk {
                    kind: "data-tripwire".to_owned(),
                    id: None,
                    data: json!({
                        "reason": tripwire.reason,
                        "retry": tripwire.retry,
                        "metadata": tripwire.metadata,
                        "processorId": tripwire.processor_id,
                    }),
                    transient: None,
                }));
            }
            EventKind::ProcessorDecision(decision) => {
                out.push(Chunk::Data(DataChunk {
                    kind: "data-processor-decision".to_owned(),
                    id: None,
                    data: serde_json::to_value(decision).unwrap_or(Value::Null),
                    transient: Some(true),
                }));
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
