//! The engine's side of a run's spans (see [`super::super::spans`]): the run's span started
//! and ended, each entry that groups steps (parallel, conditional, loop, foreach) or waits
//! (sleep) and each step a span, as Mastra's span types. Everything here is synchronous and
//! kept in the run's shared state, so the run's future does not grow.

use serde_json::{Value, json};

use super::super::entry::Entry;
use super::super::spans::{RunTrace, RunTraceParent, lock, run_trace_id};
use super::{Engine, Flow};
use crate::trace::{ActiveSpan, SpanParent, SpanType, TraceContext};
use crate::workflow::step::StepError;

impl Engine {
    /// Starts the run's span when the workflow (or the caller, `parent`) has a tracer.
    pub(crate) fn traced(self, parent: Option<&RunTraceParent>) -> Self {
        let tracer = self
            .workflow
            .inner
            .tracer
            .clone()
            .or_else(|| parent.and_then(|p| p.tracer.clone()));
        let Some(tracer) = tracer else {
            return self;
        };
        let workflow_id = self.run.workflow_id.to_string();
        let context = parent
            .and_then(|p| p.context.clone())
            .unwrap_or_else(|| TraceContext {
                trace_id: run_trace_id(&workflow_id, &self.run.run_id),
                parent_span_id: None,
            });
        let resumed = if self.resume.is_some() {
            " (resumed)"
        } else {
            ""
        };
        let name = format!("workflow run: '{workflow_id}'{resumed}");
        let Some(mut span) = tracer.start(Some(&context), SpanType::WorkflowRun, name) else {
            return self;
        };
        span.entity("workflow", &workflow_id, None);
        span.scope(&self.run.run_id, None, self.resource_id.as_deref());
        match &self.resume {
            Some(resume) => {
                span.attribute("resumedStep", resume.step.clone().unwrap_or_default());
                span.input(resume.data.clone());
            }
            None => span.input(Value::clone(&self.entry_input)),
        }
        let _ = self.run.trace.set(RunTrace::new(tracer, span));
        self
    }

    fn run_trace(&self) -> Option<&RunTrace> {
        self.run.trace.get()
    }

    /// A step's span, started under the running entry's (or the run's).
    fn start_step_span(&self, id: &str, input: &Value) -> Option<ActiveSpan> {
        let trace = self.run_trace()?;
        let mut span = trace
            .entry_parent()
            .start(SpanType::WorkflowStep, format!("workflow step: '{id}'"))?;
        span.attribute("stepId", id);
        span.scope(&self.run.run_id, None, self.resource_id.as_deref());
        span.input(input.clone());
        Some(span)
    }

    /// Starts step `id`'s span, kept with the run until [`Engine::close_step`].
    pub(super) fn open_step(&self, id: &str, input: &Value) {
        if let Some(span) = self.start_step_span(id, input)
            && let Some(trace) = self.run_trace()
        {
            lock(&trace.steps).insert(id.to_owned(), span);
        }
    }

    /// Ends step `id`'s span with its outcome.
    pub(super) fn close_step(&self, id: &str, outcome: &Result<&Value, &StepError>) {
        let span = self
            .run_trace()
            .and_then(|trace| lock(&trace.steps).remove(id));
        end_attempt(span, outcome);
    }

    /// What the work step `id` starts hangs under (its span, or its foreach item's).
    pub(super) fn step_parent(&self, id: &str) -> Option<Box<SpanParent>> {
        self.run_trace()?.step_parent(id).map(Box::new)
    }

    /// A foreach item's span, and the parent it gives the work the item starts.
    pub(super) fn item_span(&self, id: &str, input: &Value) -> Option<(ActiveSpan, SpanParent)> {
        let span = self.start_step_span(id, input)?;
        let parent = SpanParent {
            tracer: self.run_trace()?.run.tracer.clone(),
            context: span.context(),
        };
        Some((span, parent))
    }

    /// Starts the span of an entry that groups steps or waits (none for a lone step): the
    /// entry's steps hang under it until [`Engine::close_entry`].
    pub(super) fn open_entry(&self, entry: &Entry) {
        let Some(trace) = self.run_trace() else {
            return;
        };
        let ids = |steps: Vec<&std::sync::Arc<dyn super::super::step::Step>>| -> Value {
            steps.iter().map(|s| s.id()).collect::<Vec<_>>().into()
        };
        let (span_type, name, attributes) = match entry {
            Entry::Step(_) => return,
            Entry::Parallel(_) => (
                SpanType::WorkflowParallel,
                "workflow parallel".to_owned(),
                json!({"steps": ids(entry.steps())}),
            ),
            Entry::Branch(_) => (
                SpanType::WorkflowConditional,
                "workflow conditional".to_owned(),
                json!({"arms": ids(entry.steps())}),
            ),
            Entry::Loop { step, until, .. } => (
                SpanType::WorkflowLoop,
                format!("workflow loop: '{}'", step.id()),
                json!({"loopType": if *until { "dountil" } else { "dowhile" }}),
            ),
            Entry::Foreach { step, concurrency } => (
                SpanType::WorkflowLoop,
                format!("workflow foreach: '{}'", step.id()),
                json!({"loopType": "foreach", "concurrency": concurrency}),
            ),
            Entry::Sleep { id, .. } => (
                SpanType::WorkflowSleep,
                format!("workflow sleep: '{id}'"),
                json!({"stepId": id}),
            ),
        };
        let Some(mut span) = trace.run.start(span_type, name) else {
            return;
        };
        span.scope(&self.run.run_id, None, self.resource_id.as_deref());
        if let Value::Object(attributes) = attributes {
            for (key, value) in attributes {
                span.attribute(key, value);
            }
        }
        let context = span.context();
        *lock(&trace.entry) = Some((span, context));
    }

    /// Ends the running entry's span with how the entry ended.
    pub(super) fn close_entry(&self, flow: &Flow) {
        let entry = self.run_trace().and_then(|trace| lock(&trace.entry).take());
        if let Some((span, _)) = entry {
            end_with(span, flow);
        }
    }

    /// Ends the run's span with how the run ended.
    pub(super) fn close_run(&self, flow: &Flow) {
        let span = self
            .run_trace()
            .and_then(|trace| lock(&trace.run_span).take());
        if let Some(span) = span {
            end_with(span, flow);
        }
    }
}

/// Ends `span` as `flow` says: an output, a suspension, a failure or a cancellation.
fn end_with(mut span: ActiveSpan, flow: &Flow) {
    match flow {
        Flow::Next(output) => {
            span.output(Value::clone(output));
            span.end();
        }
        Flow::Bailed(output) => {
            span.attribute("bailed", true);
            span.output(Value::clone(output));
            span.end();
        }
        Flow::Suspended => {
            span.attribute("suspended", true);
            span.end();
        }
        Flow::Failed(error) => span.fail(error.message.clone(), Some("workflow")),
        Flow::Canceled => span.fail("the run was canceled", Some("aborted")),
    }
}

/// Ends the span of a step (or a foreach item) with its outcome.
pub(super) fn end_attempt(span: Option<ActiveSpan>, outcome: &Result<&Value, &StepError>) {
    let Some(mut span) = span else {
        return;
    };
    match outcome {
        Ok(output) => {
            span.output(Value::clone(output));
            span.end();
        }
        Err(StepError::Bail { value }) => {
            span.attribute("bailed", true);
            span.output(value.clone());
            span.end();
        }
        Err(StepError::Suspend { payload }) => {
            span.attribute("suspended", true);
            span.attribute("suspendPayload", payload.clone());
            span.end();
        }
        Err(StepError::Failed { message }) => span.fail(message.clone(), Some("step")),
        Err(StepError::Tripwire { tripwire }) => {
            span.attribute(
                "tripwire",
                serde_json::to_value(tripwire).unwrap_or_default(),
            );
            span.fail(tripwire.reason.clone(), Some("tripwire"));
        }
    }
}
