//! The AI SDK chat route: `POST /chat/{agentId}` speaking the UI message stream protocol, so a
//! React app using `useChat` (`@ai-sdk/react`, `DefaultChatTransport`) talks to an agent
//! unchanged.
//!
//! - **`POST /chat/{agentId}`** takes `useChat`'s body (`id`, `messages`, `trigger`,
//!   `messageId`) plus Mastra's extras: `memory: {thread, resource}` (else the chat `id` is the
//!   thread, of the pinned resource, `resourceId`, or the chat id), `requestContext`, `maxSteps`,
//!   `runId` (the new run's id), and `{runId, resumeData}` (optionally `toolCallId`,
//!   `fingerprint`) to answer a stopped run: resume data for a suspended tool, or
//!   `{approved, reason?}` for an approval (seed 001's `handleResume`). A v6 approval answered
//!   in the last assistant message (a tool part in state `approval-responded` with
//!   `approval: {id: "<runId>::<toolCallId>", approved, reason?}`) is decided the same way.
//!   The answer is SSE: `data: <chunk JSON>` per chunk, then `data: [DONE]`, with the header
//!   `x-vercel-ai-ui-message-stream: v1`.
//! - **Regenerating or editing** (`messageId`) drops that message and all later ones from the
//!   stored thread before the new turn, as `useChat` dropped them: the stored history stays
//!   what the client shows.
//! - **The protocol version** is the body's `version`: `"v5"` (the default, as Mastra's
//!   `chatRoute`) or `"v6"`; with `useChat`, `new DefaultChatTransport({ api, body: { version:
//!   'v6' } })`. A body field, not a query, because `useChat` derives the re-attach URL from
//!   `api`. v6 adds `tool-approval-request` and `tool-output-denied` (see [`ui_stream`]).
//! - **`GET /chat/{agentId}/{chatId}/stream`** re-attaches to the chat's running turn: its
//!   chunks so far, then live; 204 when none runs. In a cluster it reaches a turn running on
//!   another instance too (the thread the chat id names), from its run's events.
//! - **`GET /chat/{agentId}/{chatId}/messages?version=v6`** is the chat's stored history as
//!   `{uiMessages}` (the thread named by the chat id), pending approvals and suspensions
//!   included exactly as they streamed ([`history::thread_ui_messages`]).
//!
//! A turn runs in a task of its own, so a client that disconnects loses nothing: the run goes
//! on to its end (or its next stop for a person), is stored, and the client can re-attach.
//! With [`crate::Server::abort_on_disconnect`], the POST's client going away aborts the run
//! instead (stored as aborted). A caller pinned to a resource reaches only that resource's
//! threads, runs and turns.

mod decisions;
mod elsewhere;
pub(crate) mod history;
mod new_turn;
mod turns;
pub(crate) mod ui_stream;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use kestrel_core::abort::AbortSignal;
use kestrel_core::agent::{Agent, AgentStream};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use decisions::{
    Asked, approval_decisions, decide, decisions_of, known_calls, load_stopped_run,
    resume_decision, turn_message_id,
};
use new_turn::{new_turn, replaced_after};
use turns::{AttachError, Turn, TurnKey};
use ui_stream::{Chunk, Encoder, PendingCall, Resolution};

use crate::auth::Caller;
use crate::extract::{AgentAccess, AgentBody, Query};
use crate::lookup::agent;
use crate::openapi::{Answer, Doc, Routes};
use crate::wire::MemoryBody;
use crate::{ApiError, AppState};

pub(crate) use history::thread_ui_messages;
pub(crate) use turns::Turns;
pub(crate) use ui_stream::Version;

type Shared = State<Arc<AppState>>;

/// The chat routes (outside `/api`, as Mastra's `chatRoute`), documented for the OpenAPI
/// document.
pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const CHAT: &str = "chat";
    Routes::new()
        .post(
            "/chat/{agent_id}",
            chat,
            Doc::json(
                CHAT,
                "Chat with the agent as useChat does (AI SDK UI message stream)",
            )
            .body::<ChatBody>()
            .answering(Answer::UiStream),
        )
        .get(
            "/chat/{agent_id}/{chat_id}/stream",
            reattach,
            Doc::json(
                CHAT,
                "Re-attach to the chat's running turn (204 when none runs)",
            )
            .answering(Answer::UiStream),
        )
        .get(
            "/chat/{agent_id}/{chat_id}/messages",
            messages,
            Doc::json(CHAT, "The chat's stored history as AI SDK UIMessages")
                .query::<HistoryQuery>()
                .returns::<ChatHistory>(),
        )
}

/// The body `useChat` posts, with Mastra's extras.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ChatBody {
    /// The chat id (`useChat`'s `id`).
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    id: Option<String>,
    #[serde(default)]
    messages: Vec<Value>,
    /// Checked; what it changes comes with `messageId`.
    #[serde(default)]
    #[allow(dead_code)]
    trigger: Option<Trigger>,
    /// The message a regeneration replaces, or the user message an edit replaces: the client
    /// dropped it and everything after it, and so does the stored thread.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    message_id: Option<String>,
    #[serde(default)]
    memory: Option<MemoryBody>,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    #[serde(default)]
    request_context: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    run_id: Option<String>,
    #[serde(default)]
    resume_data: Option<Value>,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    tool_call_id: Option<String>,
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    fingerprint: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    #[schemars(range(min = 1))]
    max_steps: Option<u32>,
    #[serde(default)]
    version: Option<Version>,
}

/// `useChat`'s `trigger`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum Trigger {
    SubmitMessage,
    RegenerateMessage,
}

/// A decision on a waiting call.
#[derive(Debug, Clone)]
enum Decision {
    Approve,
    Decline(Option<String>),
    Resume(Value),
}

impl Decision {
    fn resolution(&self) -> Resolution {
        match self {
            Decision::Approve => Resolution::Approval(true),
            Decision::Decline(_) => Resolution::Approval(false),
            Decision::Resume(_) => Resolution::Resumed,
        }
    }
}

/// A decision, with the call it is about.
#[derive(Debug, Clone)]
struct Decided {
    call: PendingCall,
    decision: Decision,
    fingerprint: Option<String>,
}

/// `POST /chat/{agentId}`: a new turn, or the continuation of a stopped run (see the module
/// docs). Errors before the stream starts are JSON; after, an `error` chunk.
async fn chat(
    State(state): Shared,
    _run: crate::limits::RunSlot,
    slot: crate::limits::StreamSlot,
    caller: Caller,
    AgentBody {
        agent,
        id: agent_id,
        body,
    }: AgentBody<ChatBody>,
) -> Result<Response, ApiError> {
    let version = body.version.unwrap_or_default();
    let chat_id = body.id.clone().filter(|id| !id.trim().is_empty());
    let key = chat_id.clone().map(|chat_id| TurnKey {
        agent_id: agent_id.clone(),
        chat_id,
    });
    let abort = AbortSignal::new();

    let decisions = decisions_of(&body)?;
    let mut replaced_messages = None;
    // Either a decision continues a stopped run, or the messages start a new one.
    let (stream, launch) = match decisions {
        Some((run_id, asked)) => {
            let stored = load_stopped_run(&agent, &caller, &run_id).await?;
            let decided = match asked {
                Asked::ResumeData {
                    data,
                    tool_call_id,
                    fingerprint,
                } => vec![resume_decision(
                    &agent,
                    &stored,
                    data,
                    tool_call_id,
                    fingerprint,
                )?],
                Asked::Approvals(approvals) => approval_decisions(&agent, &stored, approvals)?,
            };
            let mut encoder =
                Encoder::continuing(version, turn_message_id(&stored), known_calls(&stored));
            let resolved: Vec<(PendingCall, Resolution)> = decided
                .iter()
                .map(|d| (d.call.clone(), d.decision.resolution()))
                .collect();
            let opening = encoder.open_continuation(&resolved);
            let mut queue: VecDeque<Decided> = decided.into();
            let Some(first) = queue.pop_front() else {
                return Err(ApiError::invalid("nothing to decide"));
            };
            let stream = decide(&agent, &caller, &abort, first).await?;
            let resource = stored.state.settings.resource_id.clone();
            let launch = Launch {
                resource,
                encoder,
                opening,
                queue,
            };
            (stream, launch)
        }
        None => {
            let replaced = body.message_id.clone();
            let rules = crate::wire::BodyRules::of(&agent, &state);
            let (input, mut options) = new_turn(&agent, &caller, rules, body, chat_id.as_deref())?;
            // What a regenerate or an edit replaces stays stored until the new answer is:
            // hidden from the new run's history now, deleted once the run succeeded.
            if let (Some(memory), Some(message_id)) = (&options.memory, replaced) {
                replaced_messages = replaced_after(
                    &state,
                    &memory.thread,
                    &memory.resource,
                    &message_id,
                    &input,
                )
                .await?;
            }
            let context = options.request_context.clone().unwrap_or_default();
            if let Some(replaced) = &replaced_messages {
                context.set(
                    kestrel_core::context::HIDDEN_MESSAGES_KEY,
                    serde_json::json!(replaced.ids),
                );
            }
            // So that another instance re-attaching to the turn speaks the same version.
            context.set(elsewhere::CHAT_VERSION_KEY, json!(version.name()));
            options = options.request_context(context);
            let resource = options
                .memory
                .as_ref()
                .map(|m| m.resource.clone())
                .or_else(|| options.resource.clone());
            let stream = agent
                .stream(input)
                .options(options.abort_signal(abort.clone()))
                .await
                .map_err(|e| ApiError::of_run(e, &caller))?;
            let launch = Launch {
                resource,
                encoder: Encoder::new(version),
                opening: Vec::new(),
                queue: VecDeque::new(),
            };
            (stream, launch)
        }
    };
    let resource = launch.resource.or_else(|| caller.resource.clone());
    let turn = state.chat_turns.begin(key, resource);
    // Attached before anything is pushed, so the POST's client misses nothing.
    let listener = turn
        .attach()
        .map_err(|_| ApiError::internal(&"a new chat turn refused its first listener"))?;
    for chunk in launch.opening {
        turn.push(chunk);
    }
    let job = TurnJob {
        replaced: replaced_messages,
        state: state.clone(),
        agent,
        caller,
        abort: abort.clone(),
        turn,
        encoder: launch.encoder,
        queue: launch.queue,
    };
    tokio::spawn(job.run(stream));
    let abort_on_disconnect = state.abort_on_disconnect;
    let listener = crate::sse::on_disconnect(Box::pin(listener), move |_| {
        if abort_on_disconnect {
            tracing::debug!("a chat client went away: aborting its turn");
            abort.abort();
        }
    });
    Ok(ui_response(listener, slot))
}

/// How a turn starts: who it acts for, its encoder, the chunks before the run's, and the
/// decisions still to take.
struct Launch {
    resource: Option<String>,
    encoder: Encoder,
    opening: Vec<Chunk>,
    queue: VecDeque<Decided>,
}

/// The UI message stream response of a stream of chunks.
fn ui_response(
    chunks: impl Stream<Item = Chunk> + Send + 'static,
    slot: crate::limits::StreamSlot,
) -> Response {
    // The slot is the caller's place among its open streams, held until the response ends.
    let events = chunks.map(move |chunk| {
        let _held = &slot;
        Ok::<_, Infallible>(SseEvent::default().data(chunk.to_json()))
    });
    let done = futures::stream::once(async { Ok(SseEvent::default().data("[DONE]")) });
    let sse = Sse::new(events.chain(done)).keep_alive(KeepAlive::new().text("keep-alive"));
    (
        [
            (
                HeaderName::from_static("x-vercel-ai-ui-message-stream"),
                HeaderValue::from_static("v1"),
            ),
            (
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        sse,
    )
        .into_response()
}

/// Messages a regenerating turn replaces, deleted once it succeeded.
#[derive(Debug, Clone)]
struct Replaced {
    thread_id: String,
    resource_id: String,
    ids: Vec<String>,
}

impl Replaced {
    /// Deletes the replaced messages: the new answer is stored.
    async fn delete(&self, state: &AppState) {
        let Some(memory) = &state.memory else {
            return;
        };
        if let Err(error) = memory
            .storage()
            .delete_messages(&self.thread_id, &self.resource_id, &self.ids)
            .await
        {
            tracing::warn!(thread_id = %self.thread_id, %error, "deleting the messages a regenerated answer replaces failed; they stay in the thread");
        }
    }
}

/// The task that reads a turn's runs and pushes their chunks to the turn.
struct TurnJob {
    state: Arc<AppState>,
    agent: Agent,
    caller: Caller,
    abort: AbortSignal,
    turn: Arc<Turn>,
    encoder: Encoder,
    /// Decisions taken once the run stopped again (several approvals answered at once).
    queue: VecDeque<Decided>,
    /// What a regenerate replaces: deleted once the new run succeeded.
    replaced: Option<Replaced>,
}

impl TurnJob {
    async fn run(mut self, mut stream: AgentStream) {
        loop {
            while let Some(event) = stream.next().await {
                for chunk in self.encoder.event(&event) {
                    self.turn.push(chunk);
                }
            }
            let outcome = stream.result().await;
            if let Some(replaced) = self.replaced.take() {
                // A failed or aborted regenerate leaves the history as it was.
                let succeeded = outcome.as_ref().is_ok_and(|result| {
                    !matches!(
                        result.finish_reason,
                        kestrel_core::model::FinishReason::Error
                            | kestrel_core::model::FinishReason::Abort
                    )
                });
                if succeeded {
                    replaced.delete(&self.state).await;
                }
            }
            if self.encoder.is_ended() {
                break;
            }
            let Some(next) = self.queue.pop_front() else {
                break;
            };
            match decide(&self.agent, &self.caller, &self.abort, next).await {
                Ok(continued) => stream = continued,
                Err(error) => {
                    for chunk in self.encoder.fail(error.message) {
                        self.turn.push(chunk);
                    }
                    break;
                }
            }
        }
        for chunk in self.encoder.end() {
            self.turn.push(chunk);
        }
        self.state.chat_turns.end(&self.turn);
    }
}

/// `GET /chat/{agentId}/{chatId}/stream`: the chat's running turn from its start, then live;
/// 204 when none runs. Leaving it never aborts the turn. In a cluster, a turn another
/// instance runs is re-attached to through its run's events ([`elsewhere`]).
async fn reattach(
    State(state): Shared,
    slot: crate::limits::StreamSlot,
    caller: Caller,
    AgentAccess {
        agent,
        id: agent_id,
    }: AgentAccess,
    Path((_, chat_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let key = TurnKey { agent_id, chat_id };
    let Some(turn) = state.chat_turns.get(&key) else {
        return match elsewhere::reattach_elsewhere(&state, &agent, &caller, &key.chat_id).await? {
            Some(chunks) => Ok(ui_response(chunks, slot)),
            None => Ok(StatusCode::NO_CONTENT.into_response()),
        };
    };
    if caller.resource.is_some() && turn.resource != caller.resource {
        return Err(ApiError::not_found(format!(
            "no turn of chat {:?} to re-attach to",
            key.chat_id
        )));
    }
    match turn.attach() {
        Ok(listener) => Ok(ui_response(listener, slot)),
        Err(AttachError::Ended) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(AttachError::TooLong) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "replay_unavailable",
            "this turn is too long to replay; its messages are stored when it ends",
        )),
        Err(AttachError::Crowded) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_listeners",
            format!(
                "this turn has {} listeners already; its messages are stored when it ends",
                turns::MAX_LISTENERS
            ),
        )),
    }
}

/// Query of the chat history route.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct HistoryQuery {
    /// The AI SDK version of the messages: `v5` (the default) or `v6`.
    #[serde(default)]
    #[schemars(extend("enum" = ["v5", "v6"]))]
    version: Option<String>,
}

/// A chat's stored history.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ChatHistory {
    /// The thread's messages as AI SDK `UIMessage`s, oldest first, pending approvals and
    /// suspensions included (none for a chat that has no thread yet).
    ui_messages: Vec<history::UiMessage>,
}

/// `GET /chat/{agentId}/{chatId}/messages?version=v5|v6`: the chat's thread as `{uiMessages}`
/// for `useChat`'s initial messages.
async fn messages(
    State(state): Shared,
    caller: Caller,
    Path((agent_id, chat_id)): Path<(String, String)>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<ChatHistory>, ApiError> {
    let version = match query.version.as_deref() {
        None => Version::default(),
        Some(text) => Version::parse(text)
            .ok_or_else(|| ApiError::invalid_query(format!("version {text:?} is not v5 or v6")))?,
    };
    // Looked up after the query is checked: a bad query answers 400 even for an unknown agent.
    let agent = agent(&state, &agent_id).await?;
    let Some(memory) = &state.memory else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_memory",
            "this server has no memory: give it one with Server::memory",
        ));
    };
    let thread = memory
        .storage()
        .get_thread(&chat_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let Some(thread) = thread else {
        return Ok(Json(ChatHistory {
            ui_messages: Vec::new(),
        }));
    };
    if caller.resource.is_some() && caller.resource.as_ref() != Some(&thread.resource_id) {
        return Err(ApiError::not_found(format!("thread {chat_id:?} not found")));
    }
    let ui = thread_ui_messages(&state, &agent, &chat_id, &thread.resource_id, version).await?;
    Ok(Json(ChatHistory { ui_messages: ui }))
}
