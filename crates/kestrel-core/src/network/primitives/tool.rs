//! A tool as a network's primitive: its input parsed from the router's prompt and checked,
//! its approval asked when it needs one, its output the primitive's result.

use serde_json::{Value, json};

use super::{Exec, NOT_APPROVED, Outcome, Wait, approved, checked_input};
use crate::event::{
    EventKind, PrimitiveType, RoutingDecision, ToolExecutionArgs, ToolExecutionEndPayload,
    ToolExecutionStartPayload, ToolExecutionWaitPayload,
};
use crate::tool::{ApprovalContext, Stop, ToolContext};

/// Runs (or, with `continuing`, continues) the tool the decision chose.
pub(super) async fn run(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let agent = &exec.network.agent;
    let tool = agent
        .own_tool_ids()
        .iter()
        .any(|t| t == id)
        .then(|| agent.tools().get(id).cloned())
        .flatten();
    let Some(tool) = tool else {
        return exec
            .failed(
                decision,
                json!(decision.prompt),
                format!(
                    "there is no tool {id:?} (the tools: {})",
                    agent.own_tool_ids().join(", ")
                ),
            )
            .await;
    };
    let (tool_call_id, input, decided, suspended) = match continuing {
        Some((
            Wait::Tool {
                tool_call_id,
                input,
                approval,
                suspend_payload,
            },
            data,
        )) => (tool_call_id, input, Some((approval, data)), suspend_payload),
        _ => {
            let what = format!("tool {id:?}");
            let check = |input: &Value| match agent.tools().validate(id, input) {
                Err(crate::tool::ToolCallError::InvalidInput { errors, .. }) => errors,
                _ => Vec::new(),
            };
            match checked_input(&decision.prompt, &what, check) {
                Ok(input) => (crate::id::new_id(), input, None, None),
                Err(error) => return exec.failed(decision, json!(decision.prompt), error).await,
            }
        }
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Tool, id).await;
    }
    exec.emit(EventKind::ToolExecutionStart(ToolExecutionStartPayload {
        args: ToolExecutionArgs {
            decision: decision.clone(),
            args: input.clone(),
            tool_name: id.clone(),
            tool_call_id: tool_call_id.clone(),
        },
        run_id: exec.ctx.run_id().to_owned(),
    }))
    .await;
    let end = |result: Value| {
        EventKind::ToolExecutionEnd(ToolExecutionEndPayload {
            task: exec.init.task.clone(),
            primitive_id: id.clone(),
            primitive_type: PrimitiveType::Tool,
            result,
            is_complete: false,
            iteration: decision.iteration,
            tool_call_id: tool_call_id.clone(),
            tool_name: id.clone(),
        })
    };
    let mut resume_data = None;
    match decided {
        None => {
            let ctx = ApprovalContext {
                tool_name: id,
                request_context: exec.ctx.request_context(),
                thread_id: Some(&exec.init.thread_id),
                resource_id: Some(&exec.init.resource_id),
            };
            if agent.requires_approval(&input, &ctx) {
                exec.emit(EventKind::ToolExecutionApproval(ToolExecutionWaitPayload {
                    tool_name: id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    args: input.clone(),
                    selection_reason: decision.selection_reason.clone(),
                    run_id: exec.ctx.run_id().to_owned(),
                    resume_schema: crate::agent::APPROVAL_RESUME_SCHEMA.to_owned(),
                    suspend_payload: None,
                }))
                .await;
                return Outcome::Wait(Wait::Tool {
                    tool_call_id,
                    input,
                    approval: true,
                    suspend_payload: None,
                });
            }
        }
        Some((true, data)) => {
            if let (false, reason) = approved(&data) {
                let text = match reason {
                    Some(reason) => format!("{NOT_APPROVED}: {reason}"),
                    None => NOT_APPROVED.to_owned(),
                };
                exec.emit(end(Value::String(text.clone()))).await;
                exec.record(
                    decision,
                    input,
                    json!({"result": text, "toolCallId": tool_call_id}),
                )
                .await;
                return Outcome::Done(Value::String(text));
            }
        }
        Some((false, data)) => resume_data = Some(data),
    }
    let mut ctx = ToolContext::standalone(id.clone())
        .with_request_context(exec.ctx.request_context().clone())
        .with_abort_signal(exec.ctx.abort_signal().child());
    ctx.run_id = exec.ctx.run_id().into();
    ctx.tool_call_id = tool_call_id.clone();
    ctx.thread_id = Some(exec.init.thread_id.clone());
    ctx.resource_id = Some(exec.init.resource_id.clone());
    if let Some(data) = resume_data {
        ctx = ctx.with_resume_data(data);
        if let Some(payload) = suspended {
            ctx = ctx.with_suspend_payload(payload);
        }
    }
    // The call is a span under the iteration's, and what it starts hangs under it.
    let span = exec.trace_parent().and_then(|parent| {
        let mut span = parent.start(tool.span_type(), format!("tool: '{id}'"))?;
        span.attribute("toolCallId", tool_call_id.clone());
        span.entity("tool", id, None);
        span.input(input.clone());
        ctx.trace = Some(span.context());
        ctx.extensions.insert(parent.tracer);
        Some(span)
    });
    let executed = tool.execute(input.clone(), ctx).await;
    if let Some(mut span) = span {
        match &executed {
            Ok(result) => {
                span.attribute("success", true);
                span.output(result.clone());
                span.end();
            }
            Err(error) if error.is_suspension() => {
                span.attribute("stopped", "suspended");
                span.end();
            }
            Err(error) => span.fail(error.message().to_owned(), Some("tool")),
        }
    }
    match executed {
        Ok(result) => {
            exec.emit(end(result.clone())).await;
            exec.record(
                decision,
                input,
                json!({"result": result, "toolCallId": tool_call_id}),
            )
            .await;
            Outcome::Done(result)
        }
        Err(error) => match error.into_stop() {
            Ok(Stop::Suspend(payload)) => {
                exec.emit(EventKind::ToolExecutionSuspended(
                    ToolExecutionWaitPayload {
                        tool_name: id.clone(),
                        tool_call_id: tool_call_id.clone(),
                        args: input.clone(),
                        selection_reason: decision.selection_reason.clone(),
                        run_id: exec.ctx.run_id().to_owned(),
                        resume_schema: tool
                            .resume_schema()
                            .map(Value::to_string)
                            .unwrap_or_default(),
                        suspend_payload: Some(payload.clone()),
                    },
                ))
                .await;
                Outcome::Wait(Wait::Tool {
                    tool_call_id,
                    input,
                    approval: false,
                    suspend_payload: Some(payload),
                })
            }
            Ok(_) | Err(_) if exec.aborted() => exec.abort(PrimitiveType::Tool, id).await,
            Ok(_) => {
                exec.failed(decision, input, format!("tool {id:?} stopped the run"))
                    .await
            }
            Err(error) => {
                let text = format!("Error: tool {id:?} failed: {}", error.message());
                exec.emit(end(Value::String(text.clone()))).await;
                exec.record(
                    decision,
                    input,
                    json!({"error": text, "toolCallId": tool_call_id}),
                )
                .await;
                Outcome::Done(Value::String(text))
            }
        },
    }
}
