//! A sleep entry (`sleep` / `sleep_until`): a waiting event, the run stored `waiting` with the
//! sleep's start (so a process that takes it over after a crash wakes it when due), the wait,
//! cut short by a cancel, then the input passed on as the output.

use std::sync::Arc;

use serde_json::Value;

use super::{Engine, Flow, now_ms, step_payload};
use crate::event::{EventKind, EventSource, StepStatus, WorkflowStatus};
use crate::store::StepResult;
use crate::workflow::entry::Wait;

impl Engine {
    /// A sleep: a waiting event, the run stored `waiting`, the wait (cut short by a cancel),
    /// then its result. A restarted sleep waits only what is left of it.
    pub(super) async fn sleep(
        &self,
        id: &str,
        wait: Wait,
        input: Arc<Value>,
        restarted: bool,
    ) -> Flow {
        let now = now_ms();
        let started_at = match self.prior(id) {
            Some(prior) if restarted && prior.status == StepStatus::Waiting => prior.started_at,
            _ => now,
        };
        let observed = self.run.events.is_some();
        let mut event = observed.then(|| {
            let mut payload = step_payload(id, None, Arc::clone(&input), started_at);
            payload.status = StepStatus::Waiting;
            payload
        });
        if let Some(waiting) = &event {
            self.run
                .emit(
                    EventSource::Workflow,
                    EventKind::WorkflowStepWaiting(waiting.clone()),
                )
                .await;
        }
        if self.workflow.inner.store.is_durable() {
            // Stored with its start, so that a process that takes the run over after a crash
            // wakes it when it was due.
            self.record(
                id,
                StepResult {
                    status: StepStatus::Waiting,
                    ..StepResult::begun(Arc::clone(&input), started_at)
                },
            );
            self.save(WorkflowStatus::Waiting, None, None).await;
        }
        let duration = match wait {
            Wait::For(duration) => {
                let waited = std::time::Duration::from_millis(now.saturating_sub(started_at));
                duration.saturating_sub(waited)
            }
            Wait::Until(time) => time
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default(),
        };
        tokio::select! {
            () = tokio::time::sleep(duration) => {}
            () = self.run.abort.aborted() => return Flow::Canceled,
        }
        let ended_at = now_ms();
        self.record(
            id,
            StepResult {
                output: Some(Arc::clone(&input)),
                ended_at: Some(ended_at),
                ..StepResult::begun(Arc::clone(&input), started_at)
            },
        );
        if let Some(event) = &mut event {
            event.status = StepStatus::Success;
            event.output = Some(Arc::clone(&input));
            event.ended_at = Some(ended_at);
            let event = event.clone();
            self.run
                .emit(EventSource::Workflow, EventKind::WorkflowStepResult(event))
                .await;
        }
        Flow::Next(input)
    }
}
