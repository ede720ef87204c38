//! A workflow as a step of another (Mastra's nested workflows): `outer.then(inner)`.
//!
//! The inner run has the outer run's id and is kept in the outer run's store, under the inner
//! workflow's id. Its step events reach the outer stream with their ids prefixed by the
//! nesting step's (`nested.inner`); its own `workflow-start` and `workflow-finish` do not. When
//! it suspends, the nesting step suspends with the inner step's payload plus
//! `__workflow_meta: {runId, path}`, and the outer result's `suspended` holds the whole path
//! (`["nested", "inner"]`), which [`super::WorkflowRun::resume_at`] takes to resume it.
//!
//! The nesting step's error names the inner workflow and passes on the inner step's error
//! (which the outer stream has already shown, as the inner step's result); a store that fails
//! is said in generic words, its text logged (`WorkflowRunError::public_text`).

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};

use super::definition::Workflow;
use super::error::WorkflowRunError;
use super::path::{META, path_of};
use super::step::{Step, StepContext, StepError};
use super::stream::WorkflowStream;
use crate::event::{EventKind, StepStatus, WorkflowStatus, WorkflowStepPayload};
use crate::store::{SharedWorkflowStore, WorkflowSnapshot};

#[async_trait::async_trait]
impl Step for Workflow {
    fn id(&self) -> &str {
        Workflow::id(self)
    }

    fn description(&self) -> &str {
        Workflow::description(self)
    }

    fn input_schema(&self) -> &Value {
        Workflow::input_schema(self)
    }

    fn output_schema(&self) -> &Value {
        Workflow::output_schema(self)
    }

    fn nested_workflow(&self) -> Option<&Workflow> {
        Some(self)
    }

    async fn execute(&self, ctx: StepContext) -> Result<Value, StepError> {
        let inner = self.with_store(Arc::clone(&ctx.run.store));
        let run_id = ctx.run_id().to_owned();
        // A copy: the marker stays out of the outer run's context.
        let context = crate::context::RequestContext::from(ctx.request_context().to_map());
        context.set(crate::context::PARENT_WORKFLOW_KEY, ctx.workflow_id());
        let run = inner
            .create_run_with_id(&run_id)
            .request_context(context)
            .with_abort(ctx.abort_signal().child())
            .traced_under(ctx.trace.as_deref());
        let failed = |error: WorkflowRunError| {
            StepError::new(format!(
                "nested workflow {:?}: {}",
                inner.id(),
                error.public_text(inner.id(), &run_id)
            ))
        };
        let stream = if let Some(data) = ctx.resume_data() {
            let path: Vec<&str> = ctx.resume_path.iter().map(String::as_str).collect();
            run.resume_at_stream(&path, data.clone())
                .await
                .map_err(failed)?
        } else {
            // Run again (a retry, or the outer run restarted after a crash): what the inner
            // run left decides.
            match run.snapshot().await.map_err(failed)? {
                None => run.stream(ctx.input().clone()).await.map_err(failed)?,
                Some(stored) => match stored.status {
                    WorkflowStatus::Pending => {
                        run.stream(ctx.input().clone()).await.map_err(failed)?
                    }
                    WorkflowStatus::Running | WorkflowStatus::Waiting => {
                        run.restart_stream().await.map_err(failed)?
                    }
                    WorkflowStatus::Success => {
                        return Ok(stored.result.map(Arc::unwrap_or_clone).unwrap_or_default());
                    }
                    WorkflowStatus::Suspended => {
                        return Err(suspension(&run_id, &suspended_of(&stored)));
                    }
                    WorkflowStatus::Failed
                    | WorkflowStatus::Canceled
                    | WorkflowStatus::Tripwire => {
                        inner
                            .store()
                            .delete(inner.id(), &run_id)
                            .await
                            .map_err(|e| failed(e.into()))?;
                        run.stream(ctx.input().clone()).await.map_err(failed)?
                    }
                },
            }
        };
        let result = forward(ctx.step_id(), &ctx, stream).await.map_err(failed)?;
        match result.status {
            WorkflowStatus::Success => Ok(result.result.unwrap_or(Value::Null)),
            WorkflowStatus::Suspended => {
                let at: Vec<(Vec<String>, Value)> = result
                    .suspended
                    .iter()
                    .map(|path| {
                        let payload = path
                            .first()
                            .and_then(|id| result.suspend_payload.get(id))
                            .cloned()
                            .unwrap_or(Value::Null);
                        (path.clone(), payload)
                    })
                    .collect();
                Err(suspension(&run_id, &at))
            }
            WorkflowStatus::Canceled => Err(StepError::new(format!(
                "nested workflow {:?} was canceled",
                inner.id()
            ))),
            // A processor's stop inside stops the outer run too.
            WorkflowStatus::Tripwire => match result.error.and_then(|e| e.tripwire) {
                Some(tripwire) => Err(StepError::Tripwire { tripwire }),
                None => Err(StepError::new(format!(
                    "nested workflow {:?} was stopped by a processor",
                    inner.id()
                ))),
            },
            _ => Err(StepError::new(format!(
                "nested workflow {:?} failed: {}",
                inner.id(),
                result.error.map_or_else(String::new, |e| e.message)
            ))),
        }
    }
}

/// The suspended steps of a stored run: each one's path and payload.
fn suspended_of(snapshot: &WorkflowSnapshot) -> Vec<(Vec<String>, Value)> {
    snapshot
        .steps
        .iter()
        .filter(|(_, step)| step.status == StepStatus::Suspended)
        .map(|(id, step)| {
            let payload = step.suspend_payload.clone().unwrap_or(Value::Null);
            (path_of(id, &payload), payload)
        })
        .collect()
}

/// The nesting step's suspension: the first suspended inner step's payload, with where it
/// is.
fn suspension(run_id: &str, suspended: &[(Vec<String>, Value)]) -> StepError {
    let (path, payload) = suspended
        .first()
        .cloned()
        .unwrap_or_else(|| (Vec::new(), Value::Null));
    let meta = json!({"runId": run_id, "path": path});
    let payload = match payload {
        Value::Object(mut object) => {
            object.insert(META.to_owned(), meta);
            Value::Object(object)
        }
        Value::Null => json!({ META: meta }),
        other => json!({"value": other, META: meta}),
    };
    StepError::Suspend { payload }
}

/// Passes the inner run's step events to the outer stream, their ids prefixed with the
/// nesting step's; returns the inner result.
async fn forward(
    prefix: &str,
    ctx: &StepContext,
    mut stream: WorkflowStream,
) -> Result<super::WorkflowResult, WorkflowRunError> {
    let streamed = ctx.run.events.is_some();
    while let Some(event) = stream.next().await {
        if !streamed {
            continue;
        }
        if let Some(kind) = prefixed(prefix, event.kind) {
            ctx.run.emit(event.from, kind).await;
        }
    }
    stream.result().await
}

/// `kind` as the outer stream carries it: step ids prefixed, the inner run's own start and
/// finish left out.
fn prefixed(prefix: &str, kind: EventKind) -> Option<EventKind> {
    let name = |id: &str| format!("{prefix}.{id}");
    let step = |mut p: WorkflowStepPayload| {
        p.id = name(&p.id);
        p.step_name.clone_from(&p.id);
        p
    };
    Some(match kind {
        EventKind::WorkflowStart(_)
        | EventKind::WorkflowFinish(_)
        | EventKind::WorkflowCanceled(_) => return None,
        EventKind::WorkflowStepStart(p) => EventKind::WorkflowStepStart(step(p)),
        EventKind::WorkflowStepResult(p) => EventKind::WorkflowStepResult(step(p)),
        EventKind::WorkflowStepSuspended(p) => EventKind::WorkflowStepSuspended(step(p)),
        EventKind::WorkflowStepWaiting(p) => EventKind::WorkflowStepWaiting(step(p)),
        EventKind::WorkflowStepProgress(mut p) => {
            p.id = name(&p.id);
            p.step_name.clone_from(&p.id);
            EventKind::WorkflowStepProgress(p)
        }
        EventKind::WorkflowStepOutput(mut p) => {
            p.step_name = name(&p.step_name);
            EventKind::WorkflowStepOutput(p)
        }
        other => other,
    })
}

/// Checks a resume at `path` below `step` before the outer run is claimed: the step (or,
/// through nested workflows, the innermost step the path names) must be suspended, and
/// `data` must match its resume schema.
pub(crate) async fn check_resume(
    step: &Arc<dyn Step>,
    store: &SharedWorkflowStore,
    run_id: &str,
    path: &[String],
    data: &Value,
) -> Result<(), WorkflowRunError> {
    let mut step = Arc::clone(step);
    let mut rest = path.to_vec();
    loop {
        let Some(inner) = step.nested_workflow().cloned() else {
            if !rest.is_empty() {
                return Err(WorkflowRunError::NotSuspendedStep {
                    run_id: run_id.to_owned(),
                    step: Some(rest.join(".")),
                    suspended: Vec::new(),
                });
            }
            if let Some(schema) = step.resume_schema() {
                let errors = crate::schema::schema_errors(schema, data);
                if !errors.is_empty() {
                    return Err(WorkflowRunError::InvalidResumeData {
                        step: step.id().to_owned(),
                        errors,
                    });
                }
            }
            return Ok(());
        };
        let stored = store.load(inner.id(), run_id).await?;
        let suspended: Vec<String> = stored
            .iter()
            .flat_map(|s| s.steps.iter())
            .filter(|(_, r)| r.status == StepStatus::Suspended)
            .map(|(id, _)| id.clone())
            .collect();
        let wanted = rest.first().cloned();
        let chosen = match &wanted {
            Some(id) => suspended.iter().find(|s| *s == id),
            None if suspended.len() == 1 => suspended.first(),
            None => None,
        };
        let Some(chosen) = chosen.cloned() else {
            return Err(WorkflowRunError::NotSuspendedStep {
                run_id: run_id.to_owned(),
                step: wanted.map(|id| format!("{}.{id}", inner.id())),
                suspended: suspended
                    .iter()
                    .map(|id| format!("{}.{id}", inner.id()))
                    .collect(),
            });
        };
        let Some(next) = inner.step(&chosen).cloned() else {
            return Ok(());
        };
        step = next;
        if !rest.is_empty() {
            rest.remove(0);
        }
    }
}
