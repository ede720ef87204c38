//! Streamed runs driven by the server, not by their client.
//!
//! The library's streams ([`kestrel_core::agent::AgentStream`], `NetworkStream`,
//! `WorkflowStream`) are driven by their reader: no hand-off per event, a fast path kept for
//! library users. Over HTTP the reader is a client, and a client that stops reading would
//! freeze its run mid-step, holding its lease and its places and deaf to a cancel. So every
//! run a route streams is [`relay`]ed: a task of its own drives the run's stream and hands each
//! event's public JSON to the response through a backlog of at most [`BACKLOG`] events and
//! [`BACKLOG_BYTES`] bytes.
//!
//! - A client that leaves a whole backlog unread is let go: what was buffered for it is
//!   dropped, its response ends (without the end a complete stream has) as soon as the server
//!   writes to it again, and the run goes on to its end and is stored as usual, even with
//!   `abort_on_disconnect` (the server ended that stream, not the client).
//! - A client that goes away (its response dropped) is told to the route's `gone`, which may
//!   abort the run ([`crate::Server::abort_on_disconnect`]); otherwise the run goes on.
//! - Nothing waits on a client: a cancel or an abort reaches the run at once, and the run's
//!   place among the server's runs in progress is free when it ends.
//! - The caller's [`StreamSlot`] is held while the stream holds anything of the server's: the
//!   run, or events buffered for its client. It is given back when the run has ended and its
//!   client took what was buffered, was let go, or went away.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use futures::{Stream, StreamExt};
use kestrel_core::event::Event;

use crate::limits::StreamSlot;

/// How many events a client may leave unread before it is let go.
pub(crate) const BACKLOG: usize = 4_096;

/// How many bytes of events a client may leave unread before it is let go (one event larger
/// than this still goes to a client that has read everything before it).
pub(crate) const BACKLOG_BYTES: usize = 8 * 1024 * 1024;

/// What the response of a relayed run reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Relayed {
    /// An event's JSON, as a client may read it ([`crate::redact::public_json`]).
    Event(String),
    /// The run's stream ended and every event of it was relayed (never sent to a client
    /// that was let go, so a stream cut short does not look complete).
    End,
}

/// Drives `stream` in a task of its own and answers with its events, for a response. `gone`
/// is called, with the stream, if the response is dropped (its client went away) before the
/// run's end. `slot` is held as the module doc says.
pub(crate) fn relay<S, F>(stream: S, slot: StreamSlot, gone: F) -> Relay
where
    S: Stream<Item = Event> + Unpin + Send + 'static,
    F: FnOnce(&S) + Send + 'static,
{
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            slot: Some(slot),
            ..State::default()
        }),
    });
    let driver = Driver {
        shared: Arc::clone(&shared),
        complete: false,
    };
    // What the run has ready now is taken here, before the response starts: a run that
    // never waits (a scripted or cached answer) ends without a hand-off between tasks, as it
    // did when its reader drove it, and a run that waits goes on in a task of its own. (The
    // task polls it again at once, so a wake-up meant for this first poll is not lost.)
    let mut drive = Box::pin(driver.drive(stream, gone));
    if drive
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending()
    {
        tokio::spawn(drive);
    }
    Relay {
        shared,
        ended: false,
    }
}

/// What the driver and the response share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Events not yet taken by the response.
    events: VecDeque<String>,
    /// Their length in bytes.
    bytes: usize,
    /// The driver is done: the run ended (or its task did).
    finished: bool,
    /// Every event was relayed: the response ends with [`Relayed::End`].
    complete: bool,
    /// The client fell a backlog behind and was let go: its response ends.
    let_go: bool,
    /// The response was dropped.
    gone: bool,
    /// The response, waiting for an event.
    reader: Option<Waker>,
    /// The driver, waiting for its run (woken when the response is dropped).
    driver: Option<Waker>,
    /// The caller's place among its open streams.
    slot: Option<StreamSlot>,
}

impl State {
    /// The slot, once nothing of the server's is held for the stream any more.
    fn slot_to_free(&mut self) -> Option<StreamSlot> {
        let drained = self.events.is_empty() || self.let_go || self.gone;
        if self.finished && drained {
            self.slot.take()
        } else {
            None
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Only plain data lives behind the lock; a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What became of an event handed to the client.
enum Sent {
    /// It waits in the backlog.
    Queued,
    /// The client was let go (now or before): it reads nothing more.
    LetGo,
    /// The client went away.
    Gone,
}

/// The task that drives a relayed run.
struct Driver {
    shared: Arc<Shared>,
    /// The run's stream ended.
    complete: bool,
}

impl Driver {
    async fn drive<S, F>(mut self, mut stream: S, gone: F)
    where
        S: Stream<Item = Event> + Unpin,
        F: FnOnce(&S),
    {
        let mut gone = Some(gone);
        // Whether a client still reads (neither let go nor gone).
        let mut reading = true;
        loop {
            let next = futures::future::poll_fn(|cx| {
                let next = stream.poll_next_unpin(cx);
                if reading && next.is_pending() && self.client_gone(cx.waker()) {
                    return Poll::Ready(Err(()));
                }
                next.map(Ok)
            })
            .await;
            let sent = match next {
                Ok(Some(event)) if reading => self.send(crate::redact::public_json(&event)),
                // Nobody reads: the event is dropped, the run goes on.
                Ok(Some(_)) => Sent::LetGo,
                Ok(None) => break,
                Err(()) => Sent::Gone,
            };
            match sent {
                Sent::Queued => {}
                Sent::LetGo => reading = false,
                Sent::Gone => {
                    reading = false;
                    if let Some(gone) = gone.take() {
                        gone(&stream);
                    }
                }
            }
            // A run whose events come without a pause yields now and then, as a channel's
            // reader would, so the response (maybe on this thread) takes them in time.
            tokio::task::consume_budget().await;
        }
        self.complete = true;
    }

    /// Whether the response was dropped; if not, the driver is woken when it is.
    fn client_gone(&self, waker: &Waker) -> bool {
        let mut state = self.shared.lock();
        if !state.gone {
            match &mut state.driver {
                Some(known) if known.will_wake(waker) => {}
                driver => *driver = Some(waker.clone()),
            }
        }
        state.gone
    }

    /// Hands an event's JSON to the response, letting a client that is a backlog behind go.
    fn send(&self, json: String) -> Sent {
        let mut state = self.shared.lock();
        if state.gone {
            return Sent::Gone;
        }
        if state.let_go {
            return Sent::LetGo;
        }
        let full = state.events.len() >= BACKLOG
            || (!state.events.is_empty() && state.bytes + json.len() > BACKLOG_BYTES);
        if full {
            tracing::warn!(
                events = state.events.len(),
                bytes = state.bytes,
                "a client stopped reading its run's stream: letting it go (the run goes on)"
            );
            state.let_go = true;
            state.events = VecDeque::new();
            state.bytes = 0;
        } else {
            state.bytes += json.len();
            state.events.push_back(json);
        }
        let reader = state.reader.take();
        drop(state);
        if let Some(reader) = reader {
            reader.wake();
        }
        if full { Sent::LetGo } else { Sent::Queued }
    }
}

impl Drop for Driver {
    /// The run ended (or its task did: then the response ends without [`Relayed::End`]).
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.finished = true;
        state.complete = self.complete && !state.let_go;
        let slot = state.slot_to_free();
        let reader = state.reader.take();
        drop(state);
        drop(slot);
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The response's end of a relayed run: its events, then [`Relayed::End`] if it read them
/// all. Dropping it tells the driver that the client went away.
#[derive(Debug)]
pub(crate) struct Relay {
    shared: Arc<Shared>,
    /// [`Relayed::End`] was read.
    ended: bool,
}

impl Stream for Relay {
    type Item = Relayed;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Relayed>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let mut state = self.shared.lock();
        if state.let_go {
            return Poll::Ready(None);
        }
        if let Some(json) = state.events.pop_front() {
            state.bytes -= json.len();
            let slot = state.slot_to_free();
            drop(state);
            drop(slot);
            return Poll::Ready(Some(Relayed::Event(json)));
        }
        if state.finished {
            let complete = state.complete;
            drop(state);
            self.ended = true;
            return Poll::Ready(complete.then_some(Relayed::End));
        }
        match &mut state.reader {
            Some(known) if known.will_wake(cx.waker()) => {}
            reader => *reader = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.gone = true;
        state.events = VecDeque::new();
        state.bytes = 0;
        let slot = state.slot_to_free();
        let driver = state.driver.take();
        drop(state);
        drop(slot);
        if let Some(driver) = driver {
            driver.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use kestrel_core::event::{EventKind, TextDeltaPayload};

    use super::*;
    use crate::limits::Limits;

    fn delta(text: &str) -> Event {
        let payload = TextDeltaPayload {
            id: "t".into(),
            text: text.into(),
        };
        Event::agent(Arc::from("r"), EventKind::TextDelta(payload))
    }

    /// Limits of one stream, and that stream's slot.
    fn one_slot() -> (Arc<Limits>, StreamSlot) {
        let limits = Arc::new(Limits::new(1, 1, Duration::from_secs(1)));
        let slot = StreamSlot::take(Arc::clone(&limits), Arc::from("token")).unwrap();
        (limits, slot)
    }

    fn slot_free(limits: &Arc<Limits>) -> bool {
        StreamSlot::take(Arc::clone(limits), Arc::from("token")).is_some()
    }

    /// Waits (boundedly) until `done`.
    async fn until(done: impl Fn() -> bool) -> bool {
        for _ in 0..1_000 {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        done()
    }

    #[tokio::test]
    async fn a_reader_gets_every_event_then_the_end_and_the_slot_back() {
        let (limits, slot) = one_slot();
        let events = futures::stream::iter((0..10_000).map(|n| delta(&n.to_string())));
        // The reader is a task, as a response is (the test's own future would be polled only
        // after many turns of the run's).
        let reader = tokio::spawn(relay(events, slot, |_| panic!("not gone")).collect());
        let relayed: Vec<Relayed> = reader.await.unwrap();
        assert_eq!(
            relayed.len(),
            10_001,
            "a reader that keeps up is never let go"
        );
        for (n, item) in relayed.iter().take(10_000).enumerate() {
            let Relayed::Event(json) = item else {
                panic!("{item:?}")
            };
            assert!(json.contains(&format!("\"text\":\"{n}\"")), "{json}");
        }
        assert_eq!(relayed.last(), Some(&Relayed::End));
        assert!(until(|| slot_free(&limits)).await);
    }

    #[tokio::test]
    async fn a_reader_a_backlog_behind_is_let_go_and_the_run_goes_on() {
        let (limits, slot) = one_slot();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&ran);
        let events = futures::stream::iter(0..BACKLOG + 10).map(move |n| {
            counted.fetch_add(1, Ordering::SeqCst);
            delta(&n.to_string())
        });
        let mut response = relay(events, slot, |_| panic!("not gone"));
        // Never read while the run goes: it ends all the same, and gives its slot back.
        assert!(until(|| ran.load(Ordering::SeqCst) == BACKLOG + 10).await);
        assert!(until(|| slot_free(&limits)).await);
        // What was buffered is dropped: the stream ends, without the end of a complete one.
        assert_eq!(response.next().await, None);
    }

    #[tokio::test]
    async fn a_reader_is_let_go_past_the_backlogs_bytes() {
        let (_limits, slot) = one_slot();
        let big = "x".repeat(BACKLOG_BYTES / 2);
        let events = futures::stream::iter((0..3).map(move |_| delta(&big)));
        let mut response = relay(events, slot, |_| panic!("not gone"));
        assert!(until(|| response.shared.lock().finished).await);
        assert!(response.shared.lock().let_go);
        assert_eq!(response.next().await, None);
        // One event past the bound still goes to a reader that read everything before it.
        let (_limits, slot) = one_slot();
        let huge = "x".repeat(BACKLOG_BYTES * 2);
        let events = futures::stream::iter([delta(&huge)]);
        let relayed: Vec<Relayed> = relay(events, slot, |_| panic!("not gone")).collect().await;
        assert_eq!(relayed.len(), 2);
        assert_eq!(relayed[1], Relayed::End);
    }

    #[tokio::test]
    async fn a_client_that_goes_away_is_told_and_the_run_goes_on() {
        let (limits, slot) = one_slot();
        let (sender, receiver) = futures::channel::mpsc::unbounded();
        let told = Arc::new(AtomicBool::new(false));
        let gone = Arc::clone(&told);
        let response = relay(receiver, slot, move |_| gone.store(true, Ordering::SeqCst));
        sender.unbounded_send(delta("a")).unwrap();
        drop(response);
        // Told while the run waits for its next event, not at its end.
        assert!(until(|| told.load(Ordering::SeqCst)).await);
        assert!(!slot_free(&limits), "the run goes on, in its place");
        sender.unbounded_send(delta("b")).unwrap();
        drop(sender);
        assert!(until(|| slot_free(&limits)).await);
    }
}
