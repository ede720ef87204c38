//! Queued messages over HTTP: `POST /agents/{id}/queue-message` (Mastra's route, which
//! `@mastra/client-js`'s `queueMessage` calls) holds a message for the thread's next run;
//! `threads/queue` lists a thread's queue and `threads/queue/cancel` cancels some or all of it
//! (Kestrel's). Watchers of `threads/subscribe` see the queue's events.

use std::sync::Arc;

use axum::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Caller;
use crate::extract::AgentBody;
use crate::openapi::{Doc, Routes};
use crate::wire::{SendBody, ThreadBody};
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const RUNS: &str = "runs";
    const NO_QUEUE: &str =
        "The agent has no memory to queue messages in, or the thread's queue is full";
    Routes::new()
        .post(
            "/agents/{agent_id}/queue-message",
            queue_message,
            Doc::json(
                RUNS,
                "Queue a message for the thread's next run (after the active one; at once on an idle thread)",
            )
            .body::<QueueMessageDoc>()
            .returns::<QueuedAnswer>()
            .conflict(NO_QUEUE),
        )
        .post(
            "/agents/{agent_id}/threads/queue",
            list_queue,
            Doc::json(RUNS, "List the thread's queued messages, oldest first")
                .body::<ThreadBody>()
                .returns::<ThreadQueue>()
                .conflict(NO_QUEUE),
        )
        .post(
            "/agents/{agent_id}/threads/queue/cancel",
            cancel_queue,
            Doc::json(RUNS, "Cancel queued messages of the thread (these ids, or all)")
                .body::<CancelBody>()
                .returns::<CancelledMessages>()
                .conflict(NO_QUEUE),
        )
}

/// The body of `queue-message` as the document shows it (read as a [`SendBody`]).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // a schema only
struct QueueMessageDoc {
    /// The user's message: a string, or an object with a `content` string.
    #[schemars(schema_with = "crate::wire::sent_text_schema")]
    message: Value,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: String,
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: String,
}

/// The body of `threads/queue/cancel`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: String,
    /// The queued messages to cancel (at most as many as a thread's queue holds); all of
    /// them when left out.
    #[serde(default)]
    #[schemars(
        length(max = kestrel_core::agent::MAX_QUEUED_PER_THREAD),
        inner(length(min = 1, max = crate::wire::MAX_ID_LEN))
    )]
    ids: Option<Vec<String>>,
}

/// A message waiting in a thread's queue.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct QueuedInfo {
    /// Its id; the message keeps it in the thread once a run takes it.
    id: String,
    /// The run that will carry it.
    run_id: String,
    /// The agent that will run it.
    agent_id: String,
    /// The thread.
    thread_id: String,
    /// The thread's resource.
    resource_id: String,
    /// The message's text.
    text: String,
}

impl From<kestrel_core::store::QueuedMessage> for QueuedInfo {
    fn from(message: kestrel_core::store::QueuedMessage) -> Self {
        Self {
            text: message.message.text(),
            id: message.id,
            run_id: message.run_id,
            agent_id: message.agent_id,
            thread_id: message.scope.thread_id,
            resource_id: message.scope.resource_id,
        }
    }
}

/// What `queue-message` did: the message waits for the thread's next run.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct QueuedAnswer {
    /// Always `true` (a message that cannot be queued is a 409).
    #[schemars(extend("const" = true))]
    accepted: bool,
    /// The queued message's id (also its id in the thread once a run takes it).
    id: String,
    /// The run that will carry it.
    run_id: String,
    /// The thread.
    thread_id: String,
    /// Its place in the queue when it was queued (0: next).
    position: usize,
}

/// A thread's queue, as `threads/queue` answers.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ThreadQueue {
    /// The queued messages, oldest first.
    messages: Vec<QueuedInfo>,
    /// What the queue waits for: the thread's run in this process; `null` when there is none.
    active_run_id: Option<String>,
}

/// What `threads/queue/cancel` did.
#[derive(Debug, Serialize, JsonSchema)]
struct CancelledMessages {
    /// The messages it took out of the queue.
    cancelled: Vec<QueuedInfo>,
}

async fn queue_message(
    _run: crate::limits::RunSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<SendBody>,
) -> Result<Json<QueuedAnswer>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let text = body.text("message")?;
    let thread = body.thread(&agent)?;
    if body.forks() {
        return Err(ApiError::invalid(
            "fork does not apply to a queued message; send it with send-message",
        ));
    }
    let queued = thread.queue(text).await?;
    Ok(Json(QueuedAnswer {
        accepted: true,
        id: queued.id,
        run_id: queued.run_id,
        thread_id: queued.thread_id,
        position: queued.position,
    }))
}

async fn list_queue(
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<ThreadBody>,
) -> Result<Json<ThreadQueue>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let thread = agent.thread(&body.resource_id, &body.thread_id);
    let queued = thread.queued().await?;
    Ok(Json(ThreadQueue {
        messages: queued.into_iter().map(QueuedInfo::from).collect(),
        active_run_id: thread.active_run(),
    }))
}

async fn cancel_queue(
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<CancelBody>,
) -> Result<Json<CancelledMessages>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let cancelled = agent
        .thread(&body.resource_id, &body.thread_id)
        .cancel_queued(body.ids)
        .await?;
    Ok(Json(CancelledMessages {
        cancelled: cancelled.into_iter().map(QueuedInfo::from).collect(),
    }))
}
