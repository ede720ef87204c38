//! The event stream of a running agent.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::future::BoxFuture;

use crate::abort::AbortSignal;
use crate::definition::AgentError;
use crate::event::{Event, EventKind};
use crate::run::GenerateResult;
use crate::sink::EventQueue;

type RunFuture = BoxFuture<'static, Result<GenerateResult, AgentError>>;

/// The events of a run as they happen, and its final result.
///
/// Poll it as a [`Stream`] of [`Event`]s, or call [`AgentStream::text_stream`] for the text
/// alone; [`AgentStream::result`] waits for the run's [`GenerateResult`].
///
/// The stream drives the run while it is polled, so events cost no task switch and a slow
/// reader slows the run instead of piling up events. Dropping the stream before the run ends
/// does not stop the run: the rest of it continues in a background task (inside a tokio
/// runtime). [`AgentStream::abort`] stops it.
pub struct AgentStream {
    run_id: Arc<str>,
    queue: Arc<EventQueue>,
    abort: AbortSignal,
    run: Option<RunFuture>,
    outcome: Option<Result<GenerateResult, AgentError>>,
}

impl std::fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentStream")
            .field("run_id", &self.run_id)
            .field("running", &self.run.is_some())
            .finish()
    }
}

impl AgentStream {
    pub(crate) fn new(
        run_id: Arc<str>,
        queue: Arc<EventQueue>,
        abort: AbortSignal,
        run: RunFuture,
    ) -> Self {
        Self {
            run_id,
            queue,
            abort,
            run: Some(run),
            outcome: None,
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Aborts the run; the stream then ends with an `abort` event.
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// The next event, or `None` when the run is over.
    pub async fn next_event(&mut self) -> Option<Event> {
        futures::StreamExt::next(self).await
    }

    /// Runs to the end and returns the result. Events not yet read are discarded.
    pub async fn result(mut self) -> Result<GenerateResult, AgentError> {
        self.queue.close();
        if let Some(run) = self.run.take() {
            self.outcome = Some(run.await);
        }
        self.outcome.take().unwrap_or_else(|| {
            Err(AgentError::Internal {
                run_id: self.run_id.to_string(),
                message: "the result was already taken".into(),
            })
        })
    }

    /// Reads every remaining event into a vector, then returns them with the result.
    pub async fn collect(mut self) -> (Vec<Event>, Result<GenerateResult, AgentError>) {
        let mut events = Vec::new();
        while let Some(event) = self.next_event().await {
            events.push(event);
        }
        let result = self.result().await;
        (events, result)
    }

    /// The text deltas only; the result stays available through [`TextStream::result`].
    pub fn text_stream(self) -> TextStream {
        TextStream { inner: self }
    }
}

impl Stream for AgentStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        loop {
            if let Some(event) = self.queue.pop() {
                return Poll::Ready(Some(event));
            }
            let Some(run) = self.run.as_mut() else {
                return Poll::Ready(None);
            };
            match run.as_mut().poll(cx) {
                Poll::Ready(outcome) => {
                    self.run = None;
                    self.outcome = Some(outcome);
                }
                Poll::Pending => {
                    return match self.queue.pop_or_register(cx.waker()) {
                        Some(event) => Poll::Ready(Some(event)),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }
}

impl Drop for AgentStream {
    fn drop(&mut self) {
        let Some(run) = self.run.take() else { return };
        self.queue.close();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                // The reader left; the run still finishes (and, with memory, is stored).
                handle.spawn(run);
            }
            Err(_) => tracing::warn!(
                run_id = %self.run_id,
                "an unfinished agent stream was dropped outside a tokio runtime; the run stops"
            ),
        }
    }
}

/// The text of a run as it streams (see [`AgentStream::text_stream`]).
#[derive(Debug)]
pub struct TextStream {
    inner: AgentStream,
}

impl TextStream {
    /// Waits for the run's result.
    pub async fn result(self) -> Result<GenerateResult, AgentError> {
        self.inner.result().await
    }
}

impl Stream for TextStream {
    type Item = String;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        loop {
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(Event {
                    kind: EventKind::TextDelta(p),
                    ..
                })) => return Poll::Ready(Some(p.text)),
                Poll::Ready(Some(_)) => continue,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
