//! The event stream of a running agent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{AgentError, GenerateResult};
use crate::abort::AbortSignal;
use crate::event::{Event, EventKind};

/// The events of a run as they happen, and its final result.
///
/// Poll it as a [`Stream`] of [`Event`]s, or call [`AgentStream::text_stream`] for the text
/// alone. [`AgentStream::result`] waits for the run's [`GenerateResult`]; events not yet read
/// are dropped. Dropping the stream does not stop the run; [`AgentStream::abort`] does.
pub struct AgentStream {
    run_id: Arc<str>,
    rx: mpsc::Receiver<Event>,
    abort: AbortSignal,
    task: Option<JoinHandle<Result<GenerateResult, AgentError>>>,
    early: Option<AgentError>,
}

impl std::fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentStream")
            .field("run_id", &self.run_id)
            .finish()
    }
}

impl AgentStream {
    pub(crate) fn spawn(
        run_id: Arc<str>,
        rx: mpsc::Receiver<Event>,
        abort: AbortSignal,
        run: impl Future<Output = Result<GenerateResult, AgentError>> + Send + 'static,
    ) -> Self {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => Self {
                run_id,
                rx,
                abort,
                task: Some(handle.spawn(run)),
                early: None,
            },
            Err(_) => Self {
                early: Some(AgentError::Internal {
                    run_id: run_id.to_string(),
                    message: "Agent::stream must be called inside a tokio runtime".into(),
                }),
                run_id,
                rx,
                abort,
                task: None,
            },
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
        self.rx.recv().await
    }

    /// Waits for the run's result. Unread events are discarded.
    pub async fn result(mut self) -> Result<GenerateResult, AgentError> {
        // Closing the receiver lets the run finish without waiting for a reader.
        self.rx.close();
        if let Some(error) = self.early.take() {
            return Err(error);
        }
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|join_error| {
                Err(AgentError::Internal {
                    run_id: self.run_id.to_string(),
                    message: format!("the run's task failed: {join_error}"),
                })
            }),
            None => Err(AgentError::Internal {
                run_id: self.run_id.to_string(),
                message: "the result was already taken".into(),
            }),
        }
    }

    /// Reads every remaining event into a vector, then returns them with the result.
    pub async fn collect(mut self) -> (Vec<Event>, Result<GenerateResult, AgentError>) {
        let mut events = Vec::new();
        while let Some(event) = self.rx.recv().await {
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
        self.rx.poll_recv(cx)
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
            match self.inner.rx.poll_recv(cx) {
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
