//! The network routes (Mastra's): `POST /agents/{id}/network` runs the agent as a network
//! and streams its events over SSE; `approve-network-tool-call` / `decline-network-tool-call`
//! decide what a stopped network run waits for, by its run id, and stream the continuation;
//! `resume-network` (Kestrel's; Mastra has no route for it) resumes a suspended tool or
//! workflow of a network with data.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kestrel_core::network::{NetworkError, NetworkOptions, NetworkRequest};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::extract::AgentBody;
use crate::limits::{RunSlot, StreamSlot};
use crate::openapi::{Answer, Doc, Routes};
use crate::wire::{BodyRules, RunBody, client_context};
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const NETWORKS: &str = "networks";
    const DECIDED: &str = "Another decision claimed the run first";
    Routes::new()
        .post(
            "/agents/{agent_id}/network",
            network,
            Doc::json(
                NETWORKS,
                "Run the agent as a network (a routing agent hands each iteration to a sub-agent, a workflow or a tool), streaming its events",
            )
            .body::<RunBody>()
            .answering(Answer::Events)
            .conflict("A run with this runId was started already, or the thread is busy"),
        )
        .post(
            "/agents/{agent_id}/approve-network-tool-call",
            decide::<true>,
            Doc::json(
                NETWORKS,
                "Approve what a stopped network run waits for, streaming the continuation",
            )
            .body::<NetworkDecisionBody>()
            .answering(Answer::Events)
            .conflict(DECIDED),
        )
        .post(
            "/agents/{agent_id}/decline-network-tool-call",
            decide::<false>,
            Doc::json(
                NETWORKS,
                "Decline what a stopped network run waits for, streaming the continuation",
            )
            .body::<NetworkDecisionBody>()
            .answering(Answer::Events)
            .conflict(DECIDED),
        )
        .post(
            "/agents/{agent_id}/resume-network",
            resume,
            Doc::json(
                NETWORKS,
                "Resume a stopped network run's suspended tool or workflow with data, streaming the continuation",
            )
            .body::<NetworkResumeBody>()
            .answering(Answer::Events)
            .conflict(DECIDED),
        )
}

/// The body of the network decision routes (Mastra's `{runId, requestContext?, format?}`,
/// with `reason` for a decline).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkDecisionBody {
    /// The network's run id.
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    /// Values the primitives read.
    #[serde(default)]
    pub request_context: Option<Map<String, Value>>,
    /// Why it was declined.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_REASON_LEN))]
    pub reason: Option<String>,
    /// Accepted for Mastra's clients; the stream is always Mastra's format.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    #[allow(dead_code)] // Taken, so a Mastra client's body parses.
    pub format: Option<String>,
}

/// The body of `resume-network`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkResumeBody {
    /// The network's run id.
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    /// What the suspended tool or workflow step is resumed with.
    pub resume_data: Value,
    /// Values the primitives read.
    #[serde(default)]
    pub request_context: Option<Map<String, Value>>,
}

impl From<NetworkError> for ApiError {
    fn from(error: NetworkError) -> Self {
        let message = error.to_string();
        let bad = |code| ApiError::new(StatusCode::BAD_REQUEST, code, message.clone());
        match error {
            NetworkError::Run(run) => ApiError::from(run),
            NetworkError::MemoryRequired { .. } => bad("network_memory_required"),
            NetworkError::ThreadRequired { .. } => bad("network_thread_required"),
            NetworkError::NoPrimitives { .. } => bad("network_no_primitives"),
            NetworkError::ZeroMaxSteps => ApiError::invalid(message),
            NetworkError::ForeignResource { .. } => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
            }
            NetworkError::NotFound { .. } => ApiError::not_found(message),
            other => ApiError::internal(&other),
        }
    }
}

/// A pinned caller reaches only its resource's runs.
fn pinned(request: NetworkRequest, caller: &Caller) -> NetworkRequest {
    match &caller.resource {
        Some(resource) => request.resource(resource),
        None => request,
    }
}

async fn network(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<RunBody>,
) -> Result<Response, ApiError> {
    let (input, run) = body.into_run(&caller, BodyRules::of(&agent, &state))?;
    let mut options = NetworkOptions::new();
    if let Some(memory) = run.memory {
        options = options.memory(memory.thread, memory.resource);
    }
    if let Some(max_steps) = run.max_steps {
        options = options.max_steps(max_steps);
    }
    if let Some(run_id) = run.run_id {
        options = options.run_id(run_id);
    }
    if let Some(context) = run.request_context {
        options = options.request_context(context);
    }
    let request = pinned(agent.network(input).options(options), &caller);
    let stream = request.await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

fn with_context(
    request: NetworkRequest,
    entries: Option<Map<String, Value>>,
    caller: &Caller,
) -> NetworkRequest {
    let context = client_context(entries);
    if let Some(own) = &caller.resource {
        context.set(kestrel_core::context::RESOURCE_ID_KEY, own.as_str());
    }
    pinned(
        request.options(NetworkOptions::new().request_context(context)),
        caller,
    )
}

async fn decide<const APPROVE: bool>(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<NetworkDecisionBody>,
) -> Result<Response, ApiError> {
    let run = agent.run(body.run_id).network();
    let request = if APPROVE {
        run.approve()
    } else {
        run.decline(body.reason)
    };
    let stream = with_context(request, body.request_context, &caller).await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

async fn resume(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<NetworkResumeBody>,
) -> Result<Response, ApiError> {
    let request = agent.run(body.run_id).network().resume(body.resume_data);
    let stream = with_context(request, body.request_context, &caller).await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}
