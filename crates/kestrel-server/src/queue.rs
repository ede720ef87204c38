//! Queued messages over HTTP: `POST /agents/{id}/queue-message` (Mastra's route, which
//! `@mastra/client-js`'s `queueMessage` calls) holds a message for the thread's next run;
//! `threads/queue` lists a thread's queue and `threads/queue/cancel` cancels some or all of it
//! (Kestrel's). Watchers of `threads/subscribe` see the queue's events.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::{Extension, Json};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::openapi::{Doc, Routes};
use crate::routes::agent;
use crate::wire::{Body, SendBody, ThreadBody};
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

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
            .conflict(NO_QUEUE),
        )
        .post(
            "/agents/{agent_id}/threads/queue",
            list_queue,
            Doc::json(RUNS, "List the thread's queued messages, oldest first")
                .body::<ThreadBody>()
                .conflict(NO_QUEUE),
        )
        .post(
            "/agents/{agent_id}/threads/queue/cancel",
            cancel_queue,
            Doc::json(RUNS, "Cancel queued messages of the thread (these ids, or all)")
                .body::<CancelBody>()
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

fn queued_json(message: &kestrel_core::store::QueuedMessage) -> Value {
    json!({
        "id": message.id,
        "runId": message.run_id,
        "agentId": message.agent_id,
        "threadId": message.scope.thread_id,
        "resourceId": message.scope.resource_id,
        "text": message.message.text(),
    })
}

async fn queue_message(
    State(state): Shared,
    _run: crate::limits::RunSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<SendBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let text = body.text("message")?;
    let target = body.target()?;
    if target.fork.is_some() {
        return Err(ApiError::invalid(
            "fork does not apply to a queued message; send it with send-message",
        ));
    }
    let queued = agent.queue_message(text, target).await?;
    Ok(Json(json!({
        "accepted": true,
        "id": queued.id,
        "runId": queued.run_id,
        "threadId": queued.thread_id,
        "position": queued.position,
    })))
}

async fn list_queue(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<ThreadBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let queued = agent
        .queued_messages(&body.resource_id, &body.thread_id)
        .await?;
    Ok(Json(json!({
        "messages": queued.iter().map(queued_json).collect::<Vec<_>>(),
        // What the queue waits for: the thread's run in this process, if any.
        "activeRunId": agent.active_run_on(&body.resource_id, &body.thread_id),
    })))
}

async fn cancel_queue(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<CancelBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let cancelled = agent
        .cancel_queued_messages(&body.resource_id, &body.thread_id, body.ids)
        .await?;
    Ok(Json(
        json!({"cancelled": cancelled.iter().map(queued_json).collect::<Vec<_>>()}),
    ))
}
