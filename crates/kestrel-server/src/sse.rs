//! Agent and network streams as server-sent events: `data: <event JSON>` per event, then
//! `data: [DONE]`; and [`on_disconnect`], which tells when a client went away before a stream
//! ended.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use kestrel_core::agent::AgentStream;

use crate::relay::Relayed;

/// The SSE response of a run, driven by the server ([`crate::relay`]): a client that stops
/// reading is let go and the run goes on. A client that disconnects before the stream ended
/// leaves the run to finish in the background (and be stored), or, with
/// `abort_on_disconnect`, aborts it (the run records its abort: an `abort` event, the snapshot
/// and the partial answer stored as aborted). `data: [DONE]` ends a stream that gave every
/// event of its run, not one cut short.
pub(crate) fn run_events<S: LiveEvents>(
    stream: S,
    abort_on_disconnect: bool,
    slot: crate::limits::StreamSlot,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let relayed = crate::relay::relay(stream, slot, move |stream: &S| {
        if abort_on_disconnect {
            tracing::debug!(run_id = %stream.run_id(), "the client went away: aborting its run");
            stream.abort();
        }
    });
    let events = relayed.map(|relayed| {
        Ok(match relayed {
            Relayed::Event(json) => SseEvent::default().data(json),
            Relayed::End => SseEvent::default().data("[DONE]"),
        })
    });
    Sse::new(FlushFirst::new(events)).keep_alive(KeepAlive::default())
}

/// The live events of a run (an agent's or a network's), which a client that goes away may
/// abort.
pub(crate) trait LiveEvents:
    Stream<Item = kestrel_core::event::Event> + Unpin + Send + 'static
{
    /// The run's id.
    fn run_id(&self) -> &str;
    /// Aborts the run.
    fn abort(&self);
}

impl LiveEvents for AgentStream {
    fn run_id(&self) -> &str {
        AgentStream::run_id(self)
    }

    fn abort(&self) {
        AgentStream::abort(self);
    }
}

impl LiveEvents for kestrel_core::network::NetworkStream {
    fn run_id(&self) -> &str {
        kestrel_core::network::NetworkStream::run_id(self)
    }

    fn abort(&self) {
        kestrel_core::network::NetworkStream::abort(self);
    }
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

/// Passes a stream through, pausing once after its first item so the server writes the
/// response head and that item to the socket before producing the rest: the server sends what
/// it has when the body is not ready, and a run whose model never waits would otherwise be
/// ready until its end. Under a burst of requests, every client then gets its first event
/// before any run takes the rest of its turn.
pub(crate) struct FlushFirst<S> {
    stream: S,
    state: Flush,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Nothing sent yet.
    Waiting,
    /// The first item went out: pause on the next poll.
    Pause,
    /// Paused once; pass everything through.
    Done,
}

impl<S> FlushFirst<S> {
    /// Wraps `stream`.
    pub(crate) fn new(stream: S) -> Self {
        Self {
            stream,
            state: Flush::Waiting,
        }
    }
}

impl<S: Stream + Unpin> Stream for FlushFirst<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.state == Flush::Pause {
            self.state = Flush::Done;
            // Ready again at once: this only lets the server flush, and other tasks run.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let item = Pin::new(&mut self.stream).poll_next(cx);
        if self.state == Flush::Waiting && matches!(item, Poll::Ready(Some(_))) {
            self.state = Flush::Pause;
        }
        item
    }
}
