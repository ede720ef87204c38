//! A streamed run ([`WorkflowStream`]): its events as they come, driven by the reader, then
//! its result.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::engine::Engine;
use super::error::WorkflowRunError;
use super::events::EventReceiver;
use super::result::WorkflowResult;
use crate::event::Event;

/// A streamed run: its events, then its result. See
/// [`WorkflowRun::stream`](super::WorkflowRun::stream).
///
/// The run is driven by whoever reads the stream, on the reader's own task: each event goes
/// from the step that emits it to the reader without a hand-off between threads. A stream
/// dropped before the run's end hands the run to a task of its own, where it goes on to its
/// end (or its next stop) and is stored as usual.
pub struct WorkflowStream {
    events: EventReceiver,
    engine: Option<futures::future::BoxFuture<'static, WorkflowResult>>,
    result: Option<WorkflowResult>,
}

impl std::fmt::Debug for WorkflowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowStream")
            .field("ended", &self.engine.is_none())
            .finish_non_exhaustive()
    }
}

impl WorkflowStream {
    pub(crate) fn spawn(engine: Engine, events: EventReceiver) -> Self {
        Self {
            events,
            engine: Some(Box::pin(engine.run())),
            result: None,
        }
    }

    /// Waits for the run's end and returns its result (the events not yet read are dropped).
    pub async fn result(mut self) -> Result<WorkflowResult, WorkflowRunError> {
        if let Some(result) = self.result.take() {
            return Ok(result);
        }
        // Events no one reads are not kept: the run's sends fail at once from here on.
        self.events.close();
        match self.engine.take() {
            Some(engine) => Ok(engine.await),
            None => Err(WorkflowRunError::Interrupted {
                reason: "the run's result was already taken".to_owned(),
            }),
        }
    }
}

impl Drop for WorkflowStream {
    fn drop(&mut self) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(engine);
            }
            Err(_) => {
                tracing::warn!(
                    "a workflow stream was dropped outside a tokio runtime: its run stops here"
                );
            }
        }
    }
}

impl Stream for WorkflowStream {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = self.get_mut();
        loop {
            let Some(engine) = this.engine.as_mut() else {
                // The run ended: what it sent before is still to read.
                return Poll::Ready(this.events.try_recv().ok().map(|event| *event));
            };
            if let Poll::Ready(event) = this.events.poll_recv(cx) {
                return Poll::Ready(event.map(|event| *event));
            }
            match engine.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    this.result = Some(result);
                    this.engine = None;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use crate::workflow::events::event_channel;
    use crate::workflow::{Workflow, create_step};

    #[tokio::test]
    async fn a_runs_future_stays_small_enough_for_mallocs_fast_path() {
        // A streamed run's future is boxed whole; at 1 kB or more glibc serves it from its
        // slow path (several thousand instructions per run, measured with callgrind).
        let step = create_step("s").execute(|v: Value, _ctx| async move { Ok(v) });
        let workflow = Workflow::builder("w").then(step).commit().unwrap();
        let (events, _reader) = event_channel();
        let engine = workflow
            .create_run()
            .fresh(json!({}), Some(events))
            .await
            .unwrap();
        let run = engine.run();
        assert!(
            std::mem::size_of_val(&run) < 1024,
            "a run's future takes {} bytes",
            std::mem::size_of_val(&run)
        );
    }
}
