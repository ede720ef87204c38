//! Re-attaching to a chat turn that another instance of a cluster runs.
//!
//! The turn's chunks live in that instance's process, but its run's events are in the
//! thread's stream (the cluster's pub/sub keeps them: Redis Streams), so this instance reads
//! them from the run's first event and encodes them itself, as the owner does. The thread is
//! the one the chat id names (the chat route's default; a turn posted with another
//! `memory.thread` is re-attached to on its own instance only). The version of the stream is
//! the one the turn was posted with, kept in the run's request context.
//!
//! A run's events end with `finish`, `error` or `abort`, but a run that stops for a person
//! just goes quiet after announcing the calls; the stored run says when that happened (it is
//! suspended, with every waiting call announced), and then the stream ends as the owner's
//! does.

use std::collections::HashSet;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use kestrel_core::agent::{Agent, ThreadSubscription};
use kestrel_core::event::EventKind;
use kestrel_core::store::{RunPhase, SharedRunStore};
use serde_json::Value;

use super::turns::LISTENER_BACKLOG;
use super::ui_stream::{Chunk, Encoder, Version};
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// The request context key under which a chat turn's run keeps the stream version it was
/// posted with (`"v5"` / `"v6"`).
pub(super) const CHAT_VERSION_KEY: &str = "kestrel.chatVersion";

/// How long the stream may stay quiet before the stored run is read to see whether it
/// stopped or ended.
const QUIET_CHECK: Duration = Duration::from_secs(1);

/// The chunks of the chat's turn running on another instance, from its start; `None` when
/// no run of `agent` is active on the chat's thread anywhere (or this instance is not in a
/// cluster).
pub(super) async fn reattach_elsewhere(
    state: &AppState,
    agent: &Agent,
    caller: &Caller,
    chat_id: &str,
) -> Result<Option<impl Stream<Item = Chunk> + Send + use<>>, ApiError> {
    if state.kestrel.instance_id().is_none() {
        return Ok(None);
    }
    let Some(memory) = &state.memory else {
        return Ok(None);
    };
    let thread = memory
        .storage()
        .get_thread(chat_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let Some(thread) = thread else {
        return Ok(None);
    };
    if caller.resource.is_some() && caller.resource.as_ref() != Some(&thread.resource_id) {
        return Err(ApiError::not_found(format!(
            "no turn of chat {chat_id:?} to re-attach to"
        )));
    }
    let subscription = agent
        .thread(&thread.resource_id, chat_id)
        .subscribe()
        .await?;
    let Some(run_id) = subscription.replaying_run_id().map(str::to_owned) else {
        return Ok(None);
    };
    let store = std::sync::Arc::clone(agent.run_store());
    let stored = store
        .load(&run_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let mut version = Version::default();
    if let Some(stored) = &stored {
        if stored.state.agent_id != agent.id() {
            // The thread's active run is another agent's: not this chat's turn.
            return Ok(None);
        }
        if let Some(named) = stored
            .state
            .request_context
            .get(CHAT_VERSION_KEY)
            .and_then(Value::as_str)
        {
            version = Version::parse(named).unwrap_or_default();
        }
    }
    let (sender, receiver) = mpsc::channel(LISTENER_BACKLOG);
    let follow = Follow {
        run_id,
        store,
        encoder: Encoder::new(version),
        announced: HashSet::new(),
        sender,
    };
    tokio::spawn(follow.run(subscription));
    Ok(Some(receiver))
}

/// The task that reads one run's events off its thread and sends their chunks.
struct Follow {
    run_id: String,
    store: SharedRunStore,
    encoder: Encoder,
    /// The calls the run announced as waiting for a person.
    announced: HashSet<String>,
    sender: mpsc::Sender<Chunk>,
}

impl Follow {
    async fn run(mut self, mut subscription: ThreadSubscription) {
        loop {
            let next = tokio::time::timeout(QUIET_CHECK, subscription.next()).await;
            let event = match next {
                // Quiet: the run may have stopped for a person, or ended unseen.
                Err(_) => {
                    if self.settled(true).await {
                        break;
                    }
                    continue;
                }
                // The subscription ended (the pub/sub went away): the turn cannot be followed.
                Ok(None) => break,
                Ok(Some(event)) => event,
            };
            // A sub-agent's events share the thread's stream.
            if *event.run_id != *self.run_id {
                continue;
            }
            let waits = match &event.kind {
                EventKind::ToolCallApproval(asked) => Some(asked.tool_call_id.clone()),
                EventKind::ToolCallSuspended(asked) => Some(asked.tool_call_id.clone()),
                _ => None,
            };
            for chunk in self.encoder.event(&event) {
                if self.sender.send(chunk).await.is_err() {
                    // The client left.
                    return;
                }
            }
            if self.encoder.is_ended() {
                break;
            }
            if let Some(call) = waits {
                self.announced.insert(call);
                if self.settled(false).await {
                    break;
                }
            }
        }
        for chunk in self.encoder.end() {
            if self.sender.send(chunk).await.is_err() {
                return;
            }
        }
    }

    /// Whether the run's stream has nothing more for this turn: it stopped for a person with
    /// every waiting call announced, or (after a quiet spell, `quiet`) it ended or paused.
    async fn settled(&self, quiet: bool) -> bool {
        let stored = match self.store.load(&self.run_id).await {
            Ok(stored) => stored,
            Err(error) => {
                tracing::warn!(run_id = %self.run_id, %error, "reading a re-attached chat run failed");
                return false;
            }
        };
        let Some(stored) = stored else {
            return false;
        };
        match stored.phase {
            RunPhase::Suspended => stored
                .state
                .waiting_calls()
                .iter()
                .all(|call| self.announced.contains(&call.tool_call_id)),
            RunPhase::Completed
            | RunPhase::Failed
            | RunPhase::Aborted
            | RunPhase::Tripwire
            | RunPhase::Paused => quiet,
            RunPhase::Running | RunPhase::WaitingForSubtask => false,
        }
    }
}
