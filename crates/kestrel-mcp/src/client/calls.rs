//! The tool calls in flight on one connection, for what a server sends about them unasked:
//! progress, routed by the progress token each call carries, and, in the `initialize` era,
//! questions (`elicitation/create`). Such a question names no call: it goes to the one call
//! in flight, and a server that asks while several are in flight is told that Kestrel cannot
//! tell which call asked.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kestrel_core::tool::ToolWriter;
use rmcp::model::{ElicitRequestParams, ProgressToken};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The calls in flight on one connection (shared by its handler and its tools).
#[derive(Default)]
pub(crate) struct Calls {
    in_flight: Mutex<BTreeMap<u64, Arc<InFlight>>>,
    next: AtomicU64,
}

/// One call in flight.
pub(crate) struct InFlight {
    /// Its progress token, once its request is sent.
    token: Mutex<Option<ProgressToken>>,
    /// Where its progress goes (the run's stream), when anyone reads it.
    progress: Option<ToolWriter>,
    /// The answers a person gave on earlier rounds, replayed to the server's questions in
    /// order (the call is made again from the start after each answer).
    replay: Mutex<VecDeque<Value>>,
    /// How many answers were replayed.
    replayed: std::sync::atomic::AtomicUsize,
    /// A question no answer was replayed to: the call stops and a person is asked.
    question: Mutex<Option<ElicitRequestParams>>,
    asked: tokio::sync::Notify,
    /// Cancelled when the call ends, which ends a question's wait for it.
    done: CancellationToken,
}

/// What became of a question sent to the call in flight.
pub(crate) enum Routed {
    /// An answer replayed from an earlier round.
    Answer(Value),
    /// A new question: the call stops, and the server's request waits until it has.
    Asked(Arc<InFlight>),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Calls {
    /// Registers a call until the guard is dropped.
    pub(crate) fn register(
        self: &Arc<Self>,
        progress: Option<ToolWriter>,
        replay: Vec<Value>,
    ) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let call = Arc::new(InFlight {
            token: Mutex::new(None),
            progress,
            replay: Mutex::new(replay.into()),
            replayed: std::sync::atomic::AtomicUsize::new(0),
            question: Mutex::new(None),
            asked: tokio::sync::Notify::new(),
            done: CancellationToken::new(),
        });
        lock(&self.in_flight).insert(id, Arc::clone(&call));
        Registered {
            calls: Arc::clone(self),
            id,
            call,
        }
    }

    /// Where the progress of the call with `token` goes.
    pub(crate) fn progress(&self, token: &ProgressToken) -> Option<ToolWriter> {
        lock(&self.in_flight)
            .values()
            .find(|call| lock(&call.token).as_ref() == Some(token))
            .and_then(|call| call.progress.clone())
    }

    /// Hands a server's question to the one call in flight: a replayed answer, or the
    /// question for a person. `Err` says why it cannot be.
    pub(crate) fn route_question(&self, question: ElicitRequestParams) -> Result<Routed, String> {
        let in_flight = lock(&self.in_flight);
        let mut calls = in_flight.values();
        let (Some(call), None) = (calls.next(), calls.next()) else {
            return Err(match in_flight.len() {
                0 => "the server asked a question while no tool call was in progress".to_owned(),
                n => format!(
                    "the server asked a question while {n} tool calls were in progress, and its \
                     question names none of them (in the `initialize` era): Kestrel answers a \
                     server's questions when one call at a time is in progress"
                ),
            });
        };
        if let Some(answer) = lock(&call.replay).pop_front() {
            call.replayed.fetch_add(1, Ordering::Relaxed);
            return Ok(Routed::Answer(answer));
        }
        *lock(&call.question) = Some(question);
        call.asked.notify_one();
        Ok(Routed::Asked(Arc::clone(call)))
    }
}

impl InFlight {
    /// Notes the progress token its request carries.
    pub(crate) fn sent(&self, token: &ProgressToken) {
        *lock(&self.token) = Some(token.clone());
    }

    /// Waits until the server asks a question no replayed answer answers.
    pub(crate) async fn asked(&self) -> ElicitRequestParams {
        loop {
            if let Some(question) = lock(&self.question).take() {
                return question;
            }
            self.asked.notified().await;
        }
    }

    /// How many answers were replayed to the server's questions.
    pub(crate) fn replayed(&self) -> usize {
        self.replayed.load(Ordering::Relaxed)
    }

    /// The question asked, if one was (and not taken yet).
    pub(crate) fn take_question(&self) -> Option<ElicitRequestParams> {
        lock(&self.question).take()
    }

    /// Waits until the call ended.
    pub(crate) async fn ended(&self) {
        self.done.cancelled().await;
    }
}

/// A call registered in [`Calls`]; dropping it ends the call's registration.
pub(crate) struct Registered {
    calls: Arc<Calls>,
    id: u64,
    pub(crate) call: Arc<InFlight>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.call.done.cancel();
        lock(&self.calls.in_flight).remove(&self.id);
    }
}
