//! A thread's stored messages as AI SDK `UIMessage`s, for `useChat`'s initial messages.
//!
//! One assistant turn (its assistant messages and the tool results between them) becomes one
//! `UIMessage` with the id of its first assistant message, the `messageId` its stream started
//! with. Each step starts with a `step-start` part, as the live stream's `start-step` makes
//! one. The thread's runs that wait for a person add exactly what their live stream added: in
//! v6 the tool part of an approval is `approval-requested` with `approval.id`
//! (`<runId>::<toolCallId>`), and, in both versions, a `data-tool-call-approval` /
//! `data-tool-call-suspended` part follows, built by the same function as the streamed chunk.

use kestrel_core::agent::{Agent, DEFAULT_DECLINE_REASON, RunStatus, Waiting, WaitingCall};
use kestrel_core::message::{Part, Role};
use kestrel_core::store::SuspendedRunsQuery;
use kestrel_memory::kestrel_storage::{Selection, StorageError, StoredMessage};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use super::ui_stream::{PendingCall, Version, WaitsFor};
use crate::{ApiError, AppState};

/// The messages of thread `thread_id` (of resource `resource_id`) as `UIMessage`s
/// (`{id, role, parts}`), oldest first, with the thread's pending approvals and
/// suspensions of `agent`'s runs shown exactly as the chat stream of `version` showed them.
///
/// The caller checks that `resource_id` is one the caller may read. A thread that does not
/// exist yet has no messages; a thread of another resource is 404 `not_found`; a server
/// without memory ([`Server::memory`](crate::Server::memory)) is 404 `no_memory`.
pub(crate) async fn thread_ui_messages(
    state: &AppState,
    agent: &Agent,
    thread_id: &str,
    resource_id: &str,
    version: Version,
) -> Result<Vec<UiMessage>, ApiError> {
    let memory = crate::lookup::memory(state)?;
    let stored = match memory
        .storage()
        .list_messages(thread_id, Some(resource_id), Selection::all())
        .await
    {
        Ok(list) => list.messages,
        Err(StorageError::ThreadNotFound { .. }) => return Ok(Vec::new()),
        Err(StorageError::ThreadOwnedByOtherResource { .. }) => {
            return Err(ApiError::not_found(format!(
                "thread {thread_id:?} not found"
            )));
        }
        Err(error) => return Err(ApiError::internal(&error)),
    };
    let pending = thread_pending_calls(agent, thread_id, resource_id).await?;
    Ok(ui_messages(&stored, &pending, version))
}

/// The calls of `agent`'s runs on the thread that wait for a person, oldest run first, each
/// knowing the step it stopped in (so it finds its message even where models reuse call ids).
pub(crate) async fn thread_pending_calls(
    agent: &Agent,
    thread_id: &str,
    resource_id: &str,
) -> Result<Vec<PendingCall>, ApiError> {
    const PER_PAGE: u32 = 100;
    let mut runs = Vec::new();
    for page in 0.. {
        let listed = agent
            .run_store()
            .list_suspended(&SuspendedRunsQuery {
                agent_id: Some(agent.id().to_owned()),
                thread_id: Some(thread_id.to_owned()),
                resource_id: Some(resource_id.to_owned()),
                page,
                per_page: PER_PAGE,
            })
            .await
            .map_err(|e| ApiError::internal(&e))?;
        let count = listed.runs.len();
        runs.extend(listed.runs);
        if count < PER_PAGE as usize || runs.len() as u64 >= listed.total {
            break;
        }
    }
    // Listed newest first; the parts are added in the order the runs happened.
    runs.reverse();
    Ok(runs
        .into_iter()
        .flat_map(|run| {
            let step = match &run.state.status {
                RunStatus::Suspended { step, .. } => Some(step.message_id.clone()),
                _ => None,
            };
            let mut calls = pending_calls(agent, &run.state.run_id, run.state.waiting_calls());
            for call in &mut calls {
                call.step_message_id = step.clone();
            }
            calls
        })
        .collect())
}

/// A stopped run's waiting calls as the chat shows them (approvals and suspensions; client
/// tools have no part of their own), with each suspended tool's resume schema.
pub(crate) fn pending_calls(
    agent: &Agent,
    run_id: &str,
    waiting: Vec<WaitingCall>,
) -> Vec<PendingCall> {
    waiting
        .into_iter()
        .filter_map(|call| {
            let waits_for = match &call.waiting {
                Waiting::Approval => WaitsFor::Approval,
                Waiting::Resume { payload } => WaitsFor::Resume {
                    resume_schema: resume_schema(agent, &call),
                    payload: payload.clone(),
                },
                _ => return None,
            };
            Some(PendingCall {
                step_message_id: None,
                run_id: run_id.to_owned(),
                tool_call_id: call.tool_call_id,
                tool_name: call.tool_name,
                args: call.args,
                fingerprint: call.fingerprint,
                via: call.via,
                waits_for,
            })
        })
        .collect()
}

/// The resume schema of the tool of a suspended call, in whichever (sub-)agent makes it, as
/// the `tool-call-suspended` event gives it (`""` without one).
fn resume_schema(agent: &Agent, call: &WaitingCall) -> String {
    let mut owner = Some(agent.clone());
    for hop in &call.via {
        owner = owner.and_then(|a| a.sub_agent(&hop.agent_id));
    }
    owner
        .as_ref()
        .and_then(|a| a.tools().get(&call.tool_name))
        .and_then(|tool| tool.resume_schema().map(Value::to_string))
        .unwrap_or_default()
}

/// An AI SDK `UIMessage`, as the history routes answer it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UiMessage {
    /// The message's id (an assistant turn's: its first assistant message's, the `messageId`
    /// its stream started with).
    id: String,
    /// `user`, `assistant` or `system`.
    #[schemars(extend("enum" = ["user", "assistant", "system"]))]
    role: &'static str,
    /// Its parts, in order, as the UI message stream of the asked version built them.
    #[schemars(with = "Vec<UiMessagePart>")]
    parts: Vec<Value>,
}

/// The schema of one part of a `UIMessage` (only documented: parts are built as JSON).
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
struct UiMessagePart {
    /// `text`, `reasoning`, `step-start`, `tool-<name>` or `data-<name>`; the other fields
    /// depend on it (AI SDK `UIMessagePart`).
    #[schemars(rename = "type")]
    kind: String,
}

/// One `UIMessage` being built.
struct Building {
    id: String,
    role: &'static str,
    parts: Vec<Value>,
    /// The stored assistant messages (steps) it was made of.
    steps: Vec<String>,
}

impl Building {
    fn done(self) -> UiMessage {
        UiMessage {
            id: self.id,
            role: self.role,
            parts: self.parts,
        }
    }

    /// The tool part of a call, if this message has it.
    fn tool_part(&mut self, tool_call_id: &str) -> Option<&mut Value> {
        self.parts
            .iter_mut()
            .find(|part| is_tool_part(part, tool_call_id))
    }

    fn has_tool_part(&self, tool_call_id: &str) -> bool {
        self.parts
            .iter()
            .any(|part| is_tool_part(part, tool_call_id))
    }
}

fn is_tool_part(part: &Value, tool_call_id: &str) -> bool {
    part.get("toolCallId").and_then(Value::as_str) == Some(tool_call_id)
        && part
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("tool-"))
}

/// The text of a tool's failed result, as `tool-output-error`'s `errorText` gives it.
fn error_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Builds the `UIMessage`s of stored messages and pending calls.
pub(crate) fn ui_messages(
    stored: &[StoredMessage],
    pending: &[PendingCall],
    version: Version,
) -> Vec<UiMessage> {
    let mut messages: Vec<Building> = Vec::new();
    // Whether the last message is an assistant turn still taking steps and tool results.
    let mut in_turn = false;
    for message in stored {
        match message.role {
            Role::User | Role::System => {
                in_turn = false;
                let parts = message
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        Part::Text { text } => Some(json!({"type": "text", "text": text})),
                        _ => None,
                    })
                    .collect();
                messages.push(Building {
                    id: message.id.clone(),
                    role: if message.role == Role::User {
                        "user"
                    } else {
                        "system"
                    },
                    parts,
                    steps: Vec::new(),
                });
            }
            Role::Assistant => {
                if !in_turn {
                    in_turn = true;
                    messages.push(Building {
                        id: message.id.clone(),
                        role: "assistant",
                        parts: Vec::new(),
                        steps: Vec::new(),
                    });
                }
                let Some(turn) = messages.last_mut() else {
                    continue;
                };
                turn.steps.push(message.id.clone());
                turn.parts.push(json!({"type": "step-start"}));
                for part in &message.parts {
                    turn.parts.push(match part {
                        Part::Text { text } => {
                            json!({"type": "text", "text": text, "state": "done"})
                        }
                        Part::Reasoning { text } => {
                            json!({"type": "reasoning", "text": text, "state": "done"})
                        }
                        Part::ToolCall {
                            tool_call_id,
                            tool_name,
                            args,
                        } => json!({
                            "type": format!("tool-{tool_name}"),
                            "toolCallId": tool_call_id,
                            "state": "input-available",
                            "input": args,
                        }),
                        Part::ToolResult { .. } => continue,
                    });
                }
            }
            Role::Tool => {
                let Some(turn) = messages.last_mut().filter(|_| in_turn) else {
                    continue;
                };
                for part in &message.parts {
                    let Part::ToolResult {
                        tool_call_id,
                        result,
                        is_error,
                        denied,
                        ..
                    } = part
                    else {
                        continue;
                    };
                    let Some(tool) = turn.tool_part(tool_call_id) else {
                        continue;
                    };
                    if *denied && version == Version::V6 {
                        // As the live part ends after `tool-output-denied`. The run id of the
                        // live approval id is not stored with messages: the call id stands in.
                        tool["state"] = json!("output-denied");
                        let mut approval = json!({"id": tool_call_id, "approved": false});
                        let reason = error_text(result);
                        if reason != DEFAULT_DECLINE_REASON {
                            approval["reason"] = json!(reason);
                        }
                        tool["approval"] = approval;
                    } else if *is_error {
                        tool["state"] = json!("output-error");
                        tool["errorText"] = json!(error_text(result));
                    } else {
                        tool["state"] = json!("output-available");
                        tool["output"] = result.clone();
                    }
                }
            }
        }
    }
    for call in pending {
        // The call's own part, or for a sub-agent's call the delegation's.
        let anchor = call
            .via
            .first()
            .map_or(call.tool_call_id.as_str(), |hop| hop.tool_call_id.as_str());
        let in_step = |m: &Building| {
            call.step_message_id
                .as_ref()
                .is_none_or(|step| m.steps.contains(step))
        };
        let Some(turn) = messages
            .iter_mut()
            .rev()
            .find(|m| m.role == "assistant" && in_step(m) && m.has_tool_part(anchor))
        else {
            continue;
        };
        if version == Version::V6
            && call.waits_for == WaitsFor::Approval
            && call.has_own_part()
            && let Some(tool) = turn.tool_part(&call.tool_call_id)
        {
            tool["state"] = json!("approval-requested");
            tool["approval"] = json!({"id": call.approval_id()});
        }
        turn.parts.push(call.data_chunk(None).part());
    }
    messages.into_iter().map(Building::done).collect()
}
