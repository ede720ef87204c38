//! A workflow the agent holds as a network's primitive: run (or resumed) in the instance's
//! workflow store and cluster, its events forwarded, its output the primitive's result.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Exec, Outcome, Wait, checked_input};
use crate::agent::Agent;
use crate::event::{
    EventKind, PrimitiveType, RoutingDecision, WorkflowExecutionEndPayload,
    WorkflowExecutionStartPayload, WorkflowExecutionSuspendedPayload, WorkflowUsage,
};
use crate::workflow::WorkflowStatus;

/// The agent's workflow `id` as its network runs it: its runs kept in the instance's workflow
/// store unless its builder was given one, and, in a cluster, leased and fenced there as a
/// registered workflow's runs are. Without the lease another instance's sweep would take a
/// run this one drives for one left behind, and run its steps a second time.
fn held_workflow(agent: &Agent, id: &str) -> Option<crate::workflow::Workflow> {
    let workflow = agent.workflow(id)?;
    let workflow = if workflow.has_own_store() {
        workflow
    } else {
        workflow.with_store(Arc::clone(&agent.stores().workflows))
    };
    let workflow = match (&workflow.inner.tracer, &agent.runtime.tracer) {
        (None, Some(tracer)) => workflow.with_tracer(Some(tracer.clone())),
        _ => workflow,
    };
    match &agent.runtime.runs.cluster {
        Some(cluster) if workflow.inner.cluster.is_none() => {
            Some(workflow.with_cluster(Some(Arc::clone(cluster))))
        }
        _ => Some(workflow),
    }
}

/// Runs (or, with `continuing`, continues) the workflow the decision chose.
pub(super) async fn run(
    exec: &Exec<'_>,
    decision: &RoutingDecision,
    usage: &mut WorkflowUsage,
    continuing: Option<(Wait, Value)>,
) -> Outcome {
    let id = &decision.primitive_id;
    let Some(workflow) = held_workflow(&exec.network.agent, id) else {
        let known: Vec<String> = exec
            .network
            .agent
            .workflows()
            .iter()
            .map(|w| w.id().to_owned())
            .collect();
        return exec
            .failed(
                decision,
                json!(decision.prompt),
                format!(
                    "there is no workflow {id:?} (the workflows: {})",
                    known.join(", ")
                ),
            )
            .await;
    };
    let (run_id, input, resume) = match continuing {
        Some((Wait::Workflow { run_id, input }, data)) => (run_id, input, Some(data)),
        _ => {
            let what = format!("workflow {id:?}");
            let check =
                |input: &Value| crate::schema::violations(&workflow.inner.input_validator, input);
            match checked_input(&decision.prompt, &what, check) {
                Ok(input) => (crate::id::new_id(), input, None),
                Err(error) => return exec.failed(decision, json!(decision.prompt), error).await,
            }
        }
    };
    if exec.aborted() {
        return exec.abort(PrimitiveType::Workflow, id).await;
    }
    exec.emit(EventKind::WorkflowExecutionStart(
        WorkflowExecutionStartPayload {
            workflow_id: id.clone(),
            args: decision.clone(),
            run_id: run_id.clone(),
        },
    ))
    .await;
    let run = workflow
        .create_run_with_id(&run_id)
        .resource(exec.init.resource_id.clone())
        .request_context(exec.ctx.request_context().clone())
        .with_abort(exec.ctx.abort_signal().child())
        .traced_under(exec.trace_parent().as_ref());
    let opened = match resume {
        Some(data) => run.resume_stream(None, data).await,
        None => run.stream(input.clone()).await,
    };
    let could_not_run = |error: &crate::workflow::WorkflowRunError| {
        format!(
            "workflow {id:?} could not run (its run {run_id}): {}",
            error.public_text(id, &run_id)
        )
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            return exec
                .broke(decision, input, could_not_run(&error), error.to_string())
                .await;
        }
    };
    let mut run_usage = WorkflowUsage::default();
    while let Some(event) = stream.next().await {
        if let EventKind::WorkflowFinish(finish) = &event.kind {
            run_usage = finish.output.usage;
        }
        exec.emit(EventKind::WorkflowExecutionEvent(Box::new(event)))
            .await;
    }
    let result = match stream.result().await {
        Ok(result) => result,
        Err(error) => {
            return exec
                .broke(decision, input, could_not_run(&error), error.to_string())
                .await;
        }
    };
    usage.add_all(&run_usage);
    if result.status == WorkflowStatus::Canceled && exec.aborted() {
        return exec.abort(PrimitiveType::Workflow, id).await;
    }
    if result.status == WorkflowStatus::Suspended {
        let path = result.suspended.first().cloned().unwrap_or_default();
        let mut suspend_payload = path
            .first()
            .and_then(|step| result.suspend_payload.get(step))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(object) = suspend_payload.as_object_mut() {
            object.remove("__workflow_meta");
        }
        let resume_schema = path
            .first()
            .and_then(|step| workflow.step(step))
            .and_then(|step| step.resume_schema())
            .map(Value::to_string)
            .unwrap_or_default();
        exec.emit(EventKind::WorkflowExecutionSuspended(
            WorkflowExecutionSuspendedPayload {
                args: input.clone(),
                workflow_id: id.clone(),
                suspend_payload,
                resume_schema,
                name: workflow.id().to_owned(),
                run_id: run_id.clone(),
                usage: run_usage,
                selection_reason: decision.selection_reason.clone(),
                tool_name: id.clone(),
                tool_call_id: id.clone(),
            },
        ))
        .await;
        return Outcome::Wait(Wait::Workflow { run_id, input });
    }
    let succeeded = result.status == WorkflowStatus::Success;
    // The step's error stays in the run (its snapshot) and the log.
    let failure = (!succeeded).then(|| {
        format!(
            "workflow {id:?} {} (its run {run_id})",
            result.status.as_str()
        )
    });
    if let (Some(failure), Some(error)) = (&failure, &result.error) {
        tracing::warn!(primitive = %id, error = %error.message, "{failure}");
    }
    let summary = json!({
        "runId": run_id,
        "status": result.status,
        "runResult": result.result,
        "error": failure,
        "runSuccess": succeeded,
    });
    exec.emit(EventKind::WorkflowExecutionEnd(
        WorkflowExecutionEndPayload {
            task: exec.init.task.clone(),
            primitive_id: id.clone(),
            primitive_type: PrimitiveType::Workflow,
            result: serde_json::to_value(&result).unwrap_or(Value::Null),
            is_complete: false,
            iteration: decision.iteration,
            name: workflow.id().to_owned(),
            run_id,
            usage: run_usage,
        },
    ))
    .await;
    exec.record(decision, input, summary).await;
    match failure {
        None => Outcome::Done(result.result.unwrap_or(Value::Null)),
        Some(failure) => Outcome::Done(Value::String(format!("Error: {failure}"))),
    }
}
