//! Agent streams as server-sent events: `data: <event JSON>` per event, then `data: [DONE]`;
//! and [`on_disconnect`], which tells when a client went away before a stream ended.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use kestrel_core::agent::AgentStream;

/// The SSE response of a run. Dropping it (a client that goes away) leaves the run to finish
/// in the background.
pub(crate) fn run_events(
    stream: AgentStream,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let events = stream.map(|event| Ok(SseEvent::default().data(event.to_json())));
    let done = futures::stream::once(async { Ok(SseEvent::default().data("[DONE]")) });
    Sse::new(events.chain(done)).keep_alive(KeepAlive::default())
}

/// [`run_events`], where a client that disconnects before the run's stream ended aborts the
/// run when `abort_on_disconnect` is set (the run records its abort: an `abort` event, the
/// snapshot and the partial answer stored as aborted). Unset, the run goes on in the
/// background as with [`run_events`].
#[allow(dead_code)] // for the /api stream routes
pub(crate) fn run_events_until_disconnect(
    stream: AgentStream,
    abort_on_disconnect: bool,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let stream = on_disconnect(stream, move |stream: &mut AgentStream| {
        if abort_on_disconnect {
            tracing::debug!(run_id = %stream.run_id(), "the client went away: aborting its run");
            stream.abort();
        }
    });
    let events = stream.map(|event| Ok(SseEvent::default().data(event.to_json())));
    let done = futures::stream::once(async { Ok(SseEvent::default().data("[DONE]")) });
    Sse::new(events.chain(done)).keep_alive(KeepAlive::default())
}

/// Wraps `stream` so that `disconnected` runs, with the stream, if the wrapper is dropped
/// before the stream ended. A response body is dropped when its client goes away (the server
/// stops polling it), so around a response's stream this detects a disconnect; a stream read
/// to its end never calls it.
pub(crate) fn on_disconnect<S, F>(stream: S, disconnected: F) -> OnDisconnect<S, F>
where
    S: Stream + Unpin,
    F: FnOnce(&mut S),
{
    OnDisconnect {
        stream,
        disconnected: Some(disconnected),
    }
}

/// See [`on_disconnect`].
pub(crate) struct OnDisconnect<S, F>
where
    F: FnOnce(&mut S),
{
    stream: S,
    /// Taken when the stream ends, so a complete stream never calls it.
    disconnected: Option<F>,
}

impl<S, F> Stream for OnDisconnect<S, F>
where
    S: Stream + Unpin,
    F: FnOnce(&mut S) + Unpin,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let item = Pin::new(&mut self.stream).poll_next(cx);
        if let Poll::Ready(None) = item {
            self.disconnected = None;
        }
        item
    }
}

impl<S, F> Drop for OnDisconnect<S, F>
where
    F: FnOnce(&mut S),
{
    fn drop(&mut self) {
        if let Some(disconnected) = self.disconnected.take() {
            disconnected(&mut self.stream);
        }
    }
}
