//! The chat turns running on this server, so a client can re-attach to one
//! (`GET /chat/{agentId}/{chatId}/stream`).
//!
//! A turn's chunks are produced by one task that reads the run's events (not by the HTTP
//! response), so the run goes on at its own pace whoever listens. Each listener (the POST that
//! started the turn, any re-attached GET) gets the chunks through its own channel; the turn also
//! keeps a replay of the chunks so far, in which consecutive deltas of one part are merged (a
//! replay needs the text, not how it was cut), bounded by [`MAX_REPLAY_BYTES`]. A turn is
//! forgotten when it ends: re-attaching then answers 204 and the client reads the stored history.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::channel::mpsc;
use futures::{Stream, StreamExt};

use super::ui_stream::Chunk;

/// The most a turn's replay may hold (about the size of its text and tool inputs). A longer
/// turn cannot be re-attached to; its own listeners are not affected.
pub(crate) const MAX_REPLAY_BYTES: usize = 8 * 1024 * 1024;

/// The most listeners (the POST that started it, re-attached GETs) one turn has at once:
/// each holds a copy of the replay.
pub(crate) const MAX_LISTENERS: usize = 8;

/// How many chunks a listener may leave unread before it is dropped: a client that stops
/// reading is let go, its chunks not buffered without end.
pub(crate) const LISTENER_BACKLOG: usize = 4_096;

/// The running turns of a server, by agent and chat id.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    running: Mutex<HashMap<TurnKey, Arc<Turn>>>,
}

/// Which chat a turn belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TurnKey {
    /// The agent.
    pub agent_id: String,
    /// The chat (`useChat`'s `id`).
    pub chat_id: String,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain data lives behind these locks; a panic elsewhere leaves it consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Turns {
    /// Starts a turn; with a key it can be re-attached to (a newer turn of the same chat
    /// replaces an older one in the registry, which still runs for its own listeners).
    pub(crate) fn begin(&self, key: Option<TurnKey>, resource: Option<String>) -> Arc<Turn> {
        let turn = Arc::new(Turn {
            key: key.clone(),
            resource,
            state: Mutex::new(TurnState::default()),
        });
        if let Some(key) = key {
            lock(&self.running).insert(key, turn.clone());
        }
        turn
    }

    /// The running turn of a chat.
    pub(crate) fn get(&self, key: &TurnKey) -> Option<Arc<Turn>> {
        lock(&self.running).get(key).cloned()
    }

    /// Forgets an ended turn (unless a newer turn of its chat took its place).
    pub(crate) fn end(&self, turn: &Arc<Turn>) {
        turn.finish();
        if let Some(key) = &turn.key {
            let mut running = lock(&self.running);
            if running.get(key).is_some_and(|t| Arc::ptr_eq(t, turn)) {
                running.remove(key);
            }
        }
    }
}

/// One turn: its listeners and its replay.
#[derive(Debug)]
pub(crate) struct Turn {
    key: Option<TurnKey>,
    /// The resource the turn acts for: a caller pinned to another cannot re-attach.
    pub resource: Option<String>,
    state: Mutex<TurnState>,
}

#[derive(Debug, Default)]
struct TurnState {
    replay: Vec<Chunk>,
    replay_bytes: usize,
    /// The replay outgrew its bound and was dropped.
    overflowed: bool,
    done: bool,
    listeners: Vec<mpsc::Sender<Chunk>>,
}

/// Why a turn cannot be re-attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttachError {
    /// It ended.
    Ended,
    /// Its replay outgrew [`MAX_REPLAY_BYTES`].
    TooLong,
    /// It has [`MAX_LISTENERS`] listeners.
    Crowded,
}

impl Turn {
    /// Sends a chunk to every listener and adds it to the replay.
    pub(crate) fn push(&self, chunk: Chunk) {
        let mut state = lock(&self.state);
        // A listener whose receiver is gone (its client left), or who left a whole backlog
        // unread, is dropped: its stream ends.
        state
            .listeners
            .retain_mut(|listener| match listener.try_send(chunk.clone()) {
                Ok(()) => true,
                Err(error) => {
                    if error.is_full() {
                        tracing::warn!("a chat listener stopped reading: dropping it");
                    }
                    false
                }
            });
        if state.overflowed {
            return;
        }
        let weight = chunk.weight();
        state.replay_bytes += weight;
        if state.replay_bytes > MAX_REPLAY_BYTES {
            tracing::warn!(
                limit = MAX_REPLAY_BYTES,
                "a chat turn outgrew its replay buffer; it can no longer be re-attached to"
            );
            state.overflowed = true;
            state.replay = Vec::new();
            return;
        }
        let leftover = match state.replay.last_mut() {
            Some(last) => last.merge(chunk),
            None => Some(chunk),
        };
        if let Some(chunk) = leftover {
            state.replay.push(chunk);
        }
    }

    /// Ends the turn: listeners read what is left, then their streams end.
    fn finish(&self) {
        let mut state = lock(&self.state);
        state.done = true;
        state.listeners.clear();
    }

    /// Listens from the start: the replay so far, then every chunk as it comes, until the
    /// turn ends.
    pub(crate) fn attach(&self) -> Result<impl Stream<Item = Chunk> + Send + use<>, AttachError> {
        let mut state = lock(&self.state);
        if state.done {
            return Err(AttachError::Ended);
        }
        if state.overflowed {
            return Err(AttachError::TooLong);
        }
        state.listeners.retain(|listener| !listener.is_closed());
        if state.listeners.len() >= MAX_LISTENERS {
            return Err(AttachError::Crowded);
        }
        let (sender, receiver) = mpsc::channel(LISTENER_BACKLOG);
        state.listeners.push(sender);
        // Taken under the lock that `push` holds: no chunk is missed or seen twice.
        let replay = state.replay.clone();
        Ok(futures::stream::iter(replay).chain(receiver))
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use futures::StreamExt;

    use super::*;

    fn delta(text: &str) -> Chunk {
        Chunk::TextDelta {
            id: "t".into(),
            delta: text.into(),
        }
    }

    #[tokio::test]
    async fn a_replay_merges_deltas_and_listeners_get_every_chunk() {
        let turns = Turns::default();
        let key = TurnKey {
            agent_id: "a".into(),
            chat_id: "c".into(),
        };
        let turn = turns.begin(Some(key.clone()), None);
        let Ok(live) = turn.attach() else {
            panic!("a new turn takes listeners");
        };
        turn.push(Chunk::TextStart { id: "t".into() });
        for piece in ["a", "b", "c"] {
            turn.push(delta(piece));
        }
        let Some(Ok(late)) = turns.get(&key).map(|t| t.attach()) else {
            panic!("the turn is running");
        };
        turn.push(delta("d"));
        turns.end(&turn);
        assert!(turns.get(&key).is_none());
        assert_eq!(live.collect::<Vec<_>>().await.len(), 5);
        let replayed: Vec<Chunk> = late.collect().await;
        // The replay merged what streamed before the late listener came; then it was live.
        assert_eq!(
            replayed,
            vec![
                Chunk::TextStart { id: "t".into() },
                delta("abc"),
                delta("d")
            ]
        );
        assert!(matches!(turn.attach(), Err(AttachError::Ended)));
    }

    #[tokio::test]
    async fn a_listener_that_never_reads_is_dropped_and_listeners_are_bounded() {
        let turns = Turns::default();
        let turn = turns.begin(None, None);
        let Ok(idle) = turn.attach() else {
            panic!("a new turn takes listeners");
        };
        let Ok(reader) = turn.attach() else {
            panic!("a second listener is taken");
        };
        let mut reader = Box::pin(reader);
        for n in 0..LISTENER_BACKLOG + 10 {
            turn.push(delta(&n.to_string()));
            // The reader keeps up; the idle listener reads nothing.
            assert!(reader.next().await.is_some());
        }
        assert_eq!(
            lock(&turn.state).listeners.len(),
            1,
            "the idle listener was dropped"
        );
        // What it had queued is still readable, then its stream ends: it was let go.
        let queued = idle.collect::<Vec<_>>().await.len();
        assert!(queued <= LISTENER_BACKLOG + 2, "{queued}");
        let held: Vec<_> = (1..MAX_LISTENERS).map(|_| turn.attach()).collect();
        assert!(held.iter().all(Result::is_ok));
        assert!(matches!(turn.attach(), Err(AttachError::Crowded)));
        drop(held);
        assert!(turn.attach().is_ok(), "closed listeners make room");
    }

    #[test]
    fn a_replay_that_outgrows_its_bound_cannot_be_attached_to() {
        let turns = Turns::default();
        let turn = turns.begin(None, None);
        let big = "x".repeat(1024 * 1024);
        for _ in 0..9 {
            turn.push(delta(&big));
        }
        assert!(matches!(turn.attach(), Err(AttachError::TooLong)));
    }
}
