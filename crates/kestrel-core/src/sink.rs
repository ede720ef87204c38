//! Where a run's events go while it runs: the queue its reader takes them from, and the
//! pub/sub topic of its thread while someone watches it. Above both [`crate::event`] (what an
//! event is) and [`crate::pubsub`] (how watchers get them), which name neither this nor each
//! other back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use crate::event::Event;
use crate::pubsub::SharedPubSub;

/// Where a run sends its events: a queue its [`AgentStream`] or step-by-step driver reads
/// (none under `generate`), and the topic of its thread while someone watches the thread.
///
/// [`AgentStream`]: crate::agent::AgentStream
#[derive(Debug, Clone, Default)]
pub(crate) struct EventSink {
    queue: Option<Arc<EventQueue>>,
    tap: Option<Tap>,
    listener: Option<Listener>,
}

/// A function each event is handed to as it is sent: for a tool run on its own, whose caller
/// forwards what it writes (see [`crate::tool::ToolContext::with_output_listener`]).
#[derive(Clone)]
pub(crate) struct Listener(pub(crate) Arc<dyn Fn(&Event) + Send + Sync>);

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listener")
    }
}

/// A thread's topic on the pub/sub.
#[derive(Debug, Clone)]
pub(crate) struct Tap {
    pub pubsub: SharedPubSub,
    pub topic: Arc<str>,
}

impl EventSink {
    /// Events are not observed (unless a tap is added).
    pub(crate) fn discard() -> Self {
        Self::default()
    }

    /// Events are queued for a reader.
    pub(crate) fn queue(queue: Arc<EventQueue>) -> Self {
        Self {
            queue: Some(queue),
            tap: None,
            listener: None,
        }
    }

    /// Events are handed to `listener`.
    pub(crate) fn listen(listener: Listener) -> Self {
        Self {
            queue: None,
            tap: None,
            listener: Some(listener),
        }
    }

    /// Also publishes the events on a thread's topic while it has subscribers.
    pub(crate) fn with_tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }

    /// The reader's queue, if any.
    pub(crate) fn queued(&self) -> Option<&Arc<EventQueue>> {
        self.queue.as_ref()
    }

    /// Whether anyone observes the events (lets the hot path skip building them).
    pub(crate) fn is_observed(&self) -> bool {
        self.listener.is_some()
            || self.queue.as_ref().is_some_and(|q| !q.lock().closed)
            || self
                .tap
                .as_ref()
                .is_some_and(|t| t.pubsub.has_subscribers(&t.topic))
    }

    /// Sends an event. Async so that sinks with backpressure (pub/sub) fit the same call.
    pub(crate) fn emit(&self, event: Event) -> impl Future<Output = ()> + Send + '_ {
        // Not an `async fn`, and the event is queued before the future is: a future that held
        // the event (376 bytes) would make every run's future as big, for the one moment an
        // emit is pending. What is left to await is the pub/sub's boxed publish.
        let publish = self
            .tap
            .as_ref()
            .filter(|tap| tap.pubsub.has_subscribers(&tap.topic))
            .map(|tap| tap.pubsub.publish(&tap.topic, event.clone()));
        if let Some(listener) = &self.listener {
            (listener.0)(&event);
        }
        if let Some(q) = &self.queue {
            q.push(event);
        }
        async move {
            if let Some(publish) = publish
                && let Err(error) = publish.await
            {
                tracing::warn!(%error, "publishing a run event to its thread's subscribers failed");
            }
        }
    }
}

/// A queue of events between a run and its reader.
///
/// The reader usually polls the run itself (see `AgentStream`), so events are produced during
/// its own poll; the stored waker covers events pushed from elsewhere (a tool's own task).
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    events: VecDeque<Event>,
    closed: bool,
    waker: Option<Waker>,
}

impl EventQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Only plain data lives behind the lock; a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push(&self, event: Event) {
        let waker = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            state.events.push_back(event);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub(crate) fn pop(&self) -> Option<Event> {
        self.lock().events.pop_front()
    }

    pub(crate) fn drain(&self) -> Vec<Event> {
        self.lock().events.drain(..).collect()
    }

    /// Stores the reader's waker unless an event is already waiting (then returns it).
    pub(crate) fn pop_or_register(&self, waker: &Waker) -> Option<Event> {
        let mut state = self.lock();
        match state.events.pop_front() {
            Some(event) => Some(event),
            None => {
                state.waker = Some(waker.clone());
                None
            }
        }
    }

    /// Stops accepting events and drops the queued ones: nobody will read them.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.events.clear();
        state.waker = None;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::event::{EventKind, TextDeltaPayload};

    fn delta(text: &str) -> Event {
        Event::agent(
            Arc::from("run"),
            EventKind::TextDelta(TextDeltaPayload {
                id: "m".into(),
                text: text.into(),
            }),
        )
    }

    /// Every run's future has room for its biggest pending emit: the emit queues its event
    /// before it is awaited, so what is pending is a small future, not the event.
    #[tokio::test]
    async fn an_emit_queues_its_event_at_once_and_its_future_holds_no_event() {
        let queue = Arc::new(EventQueue::default());
        let sink = EventSink::queue(Arc::clone(&queue));
        let emitting = sink.emit(delta("a"));
        assert!(
            std::mem::size_of_val(&emitting) < std::mem::size_of::<Event>() / 4,
            "an emit's future takes {} bytes, an event {}",
            std::mem::size_of_val(&emitting),
            std::mem::size_of::<Event>()
        );
        assert_eq!(
            queue.drain().len(),
            1,
            "queued before the future is awaited"
        );
        emitting.await;
        assert!(queue.pop().is_none());
    }
}
