//! Answers to a stopped run: what a body decides (`{runId, resumeData}`, or v6 approval
//! responses in the last message), on which waiting calls, and the continued run's stream.

use axum::http::StatusCode;
use kestrel_core::abort::AbortSignal;
use kestrel_core::agent::{Agent, AgentStream, RunOptions};
use kestrel_core::message::Part;
use kestrel_core::store::{RunPhase, StoredRun};
use serde_json::Value;

use super::history;
use super::ui_stream::{self, WaitsFor};
use super::{ChatBody, Decided, Decision};
use crate::ApiError;
use crate::auth::Caller;

/// What a body asks to decide on a stopped run.
pub(super) enum Asked {
    /// `{runId, resumeData}`.
    ResumeData {
        data: Value,
        tool_call_id: Option<String>,
        fingerprint: Option<String>,
    },
    /// v6 approval responses: `(toolCallId, approved, reason)`.
    Approvals(Vec<(String, bool, Option<String>)>),
}

/// The run a body decides on and what it decides, if it decides anything: `{runId,
/// resumeData}`, or approval responses in the last message (when it is the assistant's).
pub(super) fn decisions_of(body: &ChatBody) -> Result<Option<(String, Asked)>, ApiError> {
    if let Some(data) = &body.resume_data {
        let Some(run_id) = body.run_id.clone().filter(|id| !id.trim().is_empty()) else {
            return Err(ApiError::invalid(
                "resumeData needs the runId of the stopped run",
            ));
        };
        return Ok(Some((
            run_id,
            Asked::ResumeData {
                data: data.clone(),
                tool_call_id: body.tool_call_id.clone(),
                fingerprint: body.fingerprint.clone(),
            },
        )));
    }
    let Some(last) = body.messages.last() else {
        return Ok(None);
    };
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return Ok(None);
    }
    let parts = last.get("parts").and_then(Value::as_array);
    let mut run: Option<String> = None;
    let mut approvals = Vec::new();
    for part in parts.into_iter().flatten() {
        if part.get("state").and_then(Value::as_str) != Some("approval-responded") {
            continue;
        }
        let tool_call_id = part.get("toolCallId").and_then(Value::as_str);
        let approval = part.get("approval");
        let id = approval.and_then(|a| a.get("id")).and_then(Value::as_str);
        let approved = approval
            .and_then(|a| a.get("approved"))
            .and_then(Value::as_bool);
        let (Some(tool_call_id), Some(id), Some(approved)) = (tool_call_id, id, approved) else {
            return Err(ApiError::invalid(
                "a tool part in state approval-responded needs toolCallId and approval: {id, \
                 approved}",
            ));
        };
        let reason = approval
            .and_then(|a| a.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        // `<runId>::<toolCallId>`: the call id is known, so a run id holding `::` is fine.
        let run_id = id
            .strip_suffix(tool_call_id)
            .and_then(|rest| rest.strip_suffix(ui_stream::APPROVAL_ID_SEPARATOR))
            .filter(|run_id| !run_id.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "approval id {id:?} is not \"<runId>::{tool_call_id}\""
                ))
            })?;
        match &run {
            Some(seen) if seen != run_id => {
                return Err(ApiError::invalid(
                    "approval responses of one message must all be about one run",
                ));
            }
            _ => run = Some(run_id.to_owned()),
        }
        approvals.push((tool_call_id.to_owned(), approved, reason));
    }
    Ok(run.map(|run_id| (run_id, Asked::Approvals(approvals))))
}

/// The stopped run `run_id` of `agent`, if the caller may decide on it.
pub(super) async fn load_stopped_run(
    agent: &Agent,
    caller: &Caller,
    run_id: &str,
) -> Result<StoredRun, ApiError> {
    let stored = crate::lookup::stored_run(agent, caller, run_id).await?;
    if stored.phase != RunPhase::Suspended {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_suspended",
            format!("run {run_id:?} is not waiting for a decision"),
        ));
    }
    Ok(stored)
}

/// The id of the assistant message a run's turn streams into: its first step's.
pub(super) fn turn_message_id(stored: &StoredRun) -> String {
    use kestrel_core::agent::RunStatus;
    if let Some(step) = stored.state.steps.first() {
        return step.message_id.clone();
    }
    match &stored.state.status {
        RunStatus::ToolsPending { step, .. } | RunStatus::Suspended { step, .. } => {
            step.message_id.clone()
        }
        _ => stored.state.next_message_id.clone(),
    }
}

/// The tool calls the run's message already has parts for.
pub(super) fn known_calls(stored: &StoredRun) -> Vec<String> {
    stored
        .state
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| match part {
            Part::ToolCall { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

/// The decision `{runId, resumeData}` makes: on the named call, or the run's only waiting one.
pub(super) fn resume_decision(
    agent: &Agent,
    stored: &StoredRun,
    data: Value,
    tool_call_id: Option<String>,
    fingerprint: Option<String>,
) -> Result<Decided, ApiError> {
    let run_id = &stored.state.run_id;
    let waiting = stored.state.waiting_calls();
    let call = match &tool_call_id {
        Some(id) => waiting
            .into_iter()
            .find(|c| c.tool_call_id == *id)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::CONFLICT,
                    "call_not_waiting",
                    format!("run {run_id:?} does not wait on tool call {id:?}"),
                )
            })?,
        None => {
            let mut waiting = waiting;
            match waiting.len() {
                1 => waiting.remove(0),
                0 => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "not_suspended",
                        format!("run {run_id:?} waits on no tool call"),
                    ));
                }
                _ => {
                    let ids: Vec<&str> = waiting.iter().map(|c| c.tool_call_id.as_str()).collect();
                    return Err(ApiError::invalid(format!(
                        "run {run_id:?} waits on several tool calls ({}): name one in toolCallId",
                        ids.join(", ")
                    )));
                }
            }
        }
    };
    let Some(pending) = history::pending_calls(agent, run_id, vec![call]).pop() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "wrong_decision",
            format!(
                "the waiting call of run {run_id:?} takes a client tool's result, not resumeData"
            ),
        ));
    };
    let decision = match pending.waits_for {
        WaitsFor::Approval => approval_of(&data)?,
        WaitsFor::Resume { .. } => Decision::Resume(data),
    };
    Ok(Decided {
        call: pending,
        decision,
        fingerprint,
    })
}

/// `{approved, reason?}` as the resume data of an approval.
fn approval_of(data: &Value) -> Result<Decision, ApiError> {
    let approved = data
        .get("approved")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_resume_data",
                "the call waits for an approval: resumeData must be {\"approved\": boolean, \
             \"reason\"?: string}",
            )
        })?;
    let reason = data
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(if approved {
        Decision::Approve
    } else {
        Decision::Decline(reason)
    })
}

/// The decisions of v6 approval responses, in the run's order of its waiting calls.
pub(super) fn approval_decisions(
    agent: &Agent,
    stored: &StoredRun,
    approvals: Vec<(String, bool, Option<String>)>,
) -> Result<Vec<Decided>, ApiError> {
    let run_id = &stored.state.run_id;
    let pending = history::pending_calls(agent, run_id, stored.state.waiting_calls());
    approvals
        .into_iter()
        .map(|(tool_call_id, approved, reason)| {
            let call = pending
                .iter()
                .find(|c| c.tool_call_id == tool_call_id && c.waits_for == WaitsFor::Approval)
                .cloned()
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::CONFLICT,
                        "call_not_waiting",
                        format!("run {run_id:?} does not wait for an approval of {tool_call_id:?}"),
                    )
                })?;
            Ok(Decided {
                call,
                decision: if approved {
                    Decision::Approve
                } else {
                    Decision::Decline(reason)
                },
                fingerprint: None,
            })
        })
        .collect()
}

/// Records a decision and returns the continued run's stream.
pub(super) async fn decide(
    agent: &Agent,
    caller: &Caller,
    abort: &AbortSignal,
    decided: Decided,
) -> Result<AgentStream, ApiError> {
    let mut run = agent
        .run(decided.call.run_id)
        .options(RunOptions::new().abort_signal(abort.clone()));
    if let Some(resource) = &caller.resource {
        run = run.resource(resource);
    }
    let tool_call_id = decided.call.tool_call_id;
    let mut decision = match decided.decision {
        Decision::Approve => run.approve(tool_call_id),
        Decision::Decline(reason) => run.decline(tool_call_id, reason),
        Decision::Resume(data) => run.resume(tool_call_id, data),
    };
    if let Some(fingerprint) = decided.fingerprint {
        decision = decision.fingerprint(fingerprint);
    }
    Ok(decision.stream().await?)
}
