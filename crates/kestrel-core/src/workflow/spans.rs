//! A workflow run's spans ([`crate::trace`]), kept beside the run ([`RunShared`]'s
//! `trace`), not in the engine's futures: a run's future must stay small (see
//! `stream.rs`), and a traced run adds nothing to it.
//!
//! The run's span, the span of the entry running now and those of the steps running now are
//! held here; steps hang under their entry's span, entries under the run's.
//!
//! [`RunShared`]: super::step::RunShared

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::trace::{ActiveSpan, SpanParent, TraceContext};

/// What a run's trace hangs under (see
/// [`WorkflowRun::trace`](crate::workflow::WorkflowRun::trace)).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunTraceParent {
    pub context: Option<TraceContext>,
    pub tracer: Option<crate::trace::Tracer>,
}

tokio::task_local! {
    /// The span of the foreach item being run (items of one step run at once, so their
    /// spans cannot be found by the step's id).
    pub(crate) static ITEM_SPAN: SpanParent;
}

/// A traced run's spans.
pub(crate) struct RunTrace {
    /// The run's span, ended with the run.
    pub run_span: Mutex<Option<ActiveSpan>>,
    /// The tracer, and the run's span as the parent of its entries.
    pub run: SpanParent,
    /// The entry running now, when it has a span: its steps hang under it.
    pub entry: Mutex<Option<(ActiveSpan, TraceContext)>>,
    /// The steps running now, by id.
    pub steps: Mutex<HashMap<String, ActiveSpan>>,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunTrace {
    /// A trace whose run span is `span`, recorded by `tracer`.
    pub(crate) fn new(tracer: crate::trace::Tracer, span: ActiveSpan) -> Self {
        Self {
            run: SpanParent {
                tracer,
                context: span.context(),
            },
            run_span: Mutex::new(Some(span)),
            entry: Mutex::new(None),
            steps: Mutex::new(HashMap::new()),
        }
    }

    /// What new spans of the run hang under: the running entry's span, else the run's.
    pub(crate) fn entry_parent(&self) -> SpanParent {
        let entry = lock(&self.entry)
            .as_ref()
            .map(|(_, context)| context.clone());
        SpanParent {
            tracer: self.run.tracer.clone(),
            context: entry.unwrap_or_else(|| self.run.context.clone()),
        }
    }

    /// What the work step `id` starts hangs under: the foreach item's span, else the step's.
    pub(crate) fn step_parent(&self, id: &str) -> Option<SpanParent> {
        if let Ok(item) = ITEM_SPAN.try_with(SpanParent::clone) {
            return Some(item);
        }
        let context = lock(&self.steps).get(id).map(ActiveSpan::context)?;
        Some(SpanParent {
            tracer: self.run.tracer.clone(),
            context,
        })
    }
}

impl std::fmt::Debug for RunTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTrace")
            .field("run", &self.run.context)
            .finish_non_exhaustive()
    }
}

/// The trace id of a run not given a caller's: made from the workflow's and the run's ids,
/// so every part of the run (a resume days later, on another instance) lands in one trace.
pub(crate) fn run_trace_id(workflow_id: &str, run_id: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"kestrel workflow run\0")
        .chain_update(workflow_id.as_bytes())
        .chain_update(b"\0")
        .chain_update(run_id.as_bytes())
        .finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_trace_id_is_made_from_its_ids() {
        let id = run_trace_id("flow", "run-1");
        assert!(TraceContext::is_trace_id(&id), "{id}");
        assert_eq!(id, run_trace_id("flow", "run-1"));
        assert_ne!(id, run_trace_id("flow", "run-2"));
        assert_ne!(run_trace_id("a", "bc"), run_trace_id("ab", "c"));
    }
}
