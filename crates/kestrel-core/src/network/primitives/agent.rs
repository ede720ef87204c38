//! A sub-agent as a network's primitive: its run's events forwarded whole, its answer the
//! primitive's result; a run that stops for a person stops the network's iteration.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Exec, Outcome, Wait, approved};
use crate::agent::RunOptions;
use crate::event::{
    AgentExecutionEndPayload, AgentExecutionStartPayload, AgentExecutionWaitPayload, EventKind,
    PrimitiveType, RoutingDecision, WorkflowUsage,
};

/// Runs (or, with `continuing`, continues) the sub-agent the decision chose.
pub(super) async fn run(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let prompt = json!(decision.prompt);
    let Some(sub) = exec.network.agent.sub_agent(id) else {
        let known = exec.network.agent.sub_agent_ids().join(", ");
        return exec
            .failed(
                decision,
                prompt,
                format!("there is no agent {id:?} (the agents: {known})"),
            )
            .await;
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Agent, id).await;
    }
    let run_id = match &continuing {
        Some((Wait::Agent { run_id, .. }, _)) => run_id.clone(),
        _ => crate::id::new_id(),
    };
    exec.emit(EventKind::AgentExecutionStart(AgentExecutionStartPayload {
        agent_id: id.clone(),
        args: decision.clone(),
        run_id: run_id.clone(),
    }))
    .await;
    let mut options = RunOptions::new()
        .request_context(exec.ctx.request_context().clone())
        .abort_signal(exec.ctx.abort_signal().child());
    // The sub-agent's run hangs under the iteration's span.
    if let Some(parent) = exec.trace_parent() {
        options = options.trace(parent.context).tracer(parent.tracer);
    }
    let opened = match continuing {
        Some((
            Wait::Agent {
                tool_call_id,
                approval,
                ..
            },
            data,
        )) => {
            let run = sub.run(run_id.clone()).options(options);
            let decided = if approval {
                match approved(&data) {
                    (true, _) => run.approve(tool_call_id),
                    (false, reason) => run.decline(tool_call_id, reason),
                }
            } else {
                run.resume(tool_call_id, data)
            };
            decided.stream().await.map_err(|e| e.to_string())
        }
        _ => sub
            .stream(decision.prompt.clone())
            .options(
                options
                    .run_id(run_id.clone())
                    .context(decision.conversation_context.clone()),
            )
            .await
            .map_err(|e| e.to_string()),
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            let public = format!("agent {id:?} could not run (its run {run_id})");
            return exec.broke(decision, prompt, public, error).await;
        }
    };
    let mut waiting: Option<(String, bool, String, Option<Value>)> = None;
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::ToolCallApproval(p) if waiting.is_none() => {
                waiting = Some((p.tool_call_id.clone(), true, p.resume_schema.clone(), None));
            }
            EventKind::ToolCallSuspended(p) if waiting.is_none() => {
                waiting = Some((
                    p.tool_call_id.clone(),
                    false,
                    p.resume_schema.clone(),
                    Some(p.suspend_payload.clone()),
                ));
            }
            _ => {}
        }
        exec.emit(EventKind::AgentExecutionEvent(Box::new(event)))
            .await;
    }
    let result = match stream.result().await {
        Ok(result) => result,
        Err(_) if exec.aborted() => return exec.abort(PrimitiveType::Agent, id).await,
        Err(crate::definition::AgentError::Tripwire { tripwire, .. }) => {
            return Outcome::Tripwire(tripwire);
        }
        Err(error) => {
            let public = format!("agent {id:?} failed (its run {run_id})");
            return exec
                .broke(decision, prompt, public, error.to_string())
                .await;
        }
    };
    usage.add(&result.usage);
    if exec.aborted() {
        return exec.abort(PrimitiveType::Agent, id).await;
    }
    if let Some(call) = result.waiting.first() {
        let (tool_call_id, approval, resume_schema, suspend_payload) = match waiting {
            Some(seen) if seen.0 == call.tool_call_id => seen,
            _ => {
                let approval = call.waiting == crate::run::Waiting::Approval;
                let schema = if approval {
                    crate::agent::APPROVAL_RESUME_SCHEMA.to_owned()
                } else {
                    String::new()
                };
                (call.tool_call_id.clone(), approval, schema, None)
            }
        };
        let payload = AgentExecutionWaitPayload {
            args: json!({"prompt": decision.prompt}),
            agent_id: id.clone(),
            run_id: run_id.clone(),
            tool_name: id.clone(),
            tool_call_id: id.clone(),
            usage: result.usage,
            selection_reason: decision.selection_reason.clone(),
            resume_schema,
            suspend_payload,
        };
        exec.emit(if approval {
            EventKind::AgentExecutionApproval(payload)
        } else {
            EventKind::AgentExecutionSuspended(payload)
        })
        .await;
        return Outcome::Wait(Wait::Agent {
            run_id,
            tool_call_id,
            approval,
        });
    }
    exec.emit(EventKind::AgentExecutionEnd(AgentExecutionEndPayload {
        task: exec.init.task.clone(),
        agent_id: id.clone(),
        result: result.text.clone(),
        is_complete: false,
        iteration: decision.iteration,
        run_id,
        usage: result.usage,
    }))
    .await;
    exec.record(decision, prompt, json!({"text": result.text}))
        .await;
    Outcome::Done(Value::String(result.text))
}
