//! The `/api` routes: agents, their runs, and decisions on stopped runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use kestrel_core::agent::{Agent, RunRef, ToolCallRef};
use kestrel_core::store::SuspendedRunsQuery;
use kestrel_core::version::{VersionChoice, VersionStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::limits::{RunSlot, StreamSlot};
use crate::openapi::{Doc, Routes};
use crate::wire::{
    Body, BodyRules, DecisionBody, ResumeBody, RunBody, SendBody, ThreadBody, result_json,
    waiting_json,
};
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

/// Everything under `/api` but the memory routes, documented for the OpenAPI document.
pub(crate) fn api() -> Routes<Arc<AppState>> {
    use crate::openapi::Answer::{Events, Subscription};
    const AGENTS: &str = "agents";
    const RUNS: &str = "runs";
    const TOOLS: &str = "tools";
    Routes::new()
        .get(
            "/agents",
            list_agents,
            Doc::json(AGENTS, "List the agents, by id"),
        )
        .get(
            "/agents/{agent_id}",
            get_agent,
            Doc::json(
                AGENTS,
                "Describe an agent (through its published version, a draft, or a version by id)",
            )
            .query::<AgentQuery>(),
        )
        .post(
            "/agents/{agent_id}/generate",
            generate,
            Doc::json(RUNS, "Run the agent to its end (or its next stop)").body::<RunBody>(),
        )
        .post(
            "/agents/{agent_id}/stream",
            stream,
            Doc::json(RUNS, "Run the agent, streaming its events")
                .body::<RunBody>()
                .answering(Events),
        )
        // `APPROVE`: approve (true) or decline (false).
        .post(
            "/agents/{agent_id}/approve-tool-call",
            decide_stream::<true>,
            Doc::json(
                RUNS,
                "Approve a waiting tool call and stream the continuation",
            )
            .body::<DecisionBody>()
            .answering(Events),
        )
        .post(
            "/agents/{agent_id}/decline-tool-call",
            decide_stream::<false>,
            Doc::json(
                RUNS,
                "Decline a waiting tool call and stream the continuation",
            )
            .body::<DecisionBody>()
            .answering(Events),
        )
        .post(
            "/agents/{agent_id}/approve-tool-call-generate",
            decide_generate::<true>,
            Doc::json(RUNS, "Approve a waiting tool call and run to the end")
                .body::<DecisionBody>(),
        )
        .post(
            "/agents/{agent_id}/decline-tool-call-generate",
            decide_generate::<false>,
            Doc::json(RUNS, "Decline a waiting tool call and run to the end")
                .body::<DecisionBody>(),
        )
        .post(
            "/agents/{agent_id}/resume-stream",
            resume_stream,
            Doc::json(
                RUNS,
                "Resume a suspended tool call with data, streaming the continuation",
            )
            .body::<ResumeBody>()
            .answering(Events),
        )
        .get(
            "/agents/{agent_id}/suspended-runs",
            suspended_runs,
            Doc::json(RUNS, "List runs waiting for a person").query::<SuspendedQuery>(),
        )
        .post(
            "/agents/{agent_id}/threads/abort",
            abort_thread,
            Doc::json(RUNS, "Abort the thread's active run").body::<ThreadBody>(),
        )
        .post(
            "/agents/{agent_id}/runs/{run_id}/abort",
            abort_run,
            Doc::json(RUNS, "Abort a run, live or stored"),
        )
        .post(
            "/agents/{agent_id}/runs/{run_id}/resume",
            resume_run,
            Doc::json(RUNS, "Resume a paused or interrupted run, streaming it").answering(Events),
        )
        .post(
            "/agents/{agent_id}/send-message",
            send_message,
            Doc::json(
                RUNS,
                "Send a message to a thread (to its active run, or to wake one)",
            )
            .body::<crate::wire::SendMessageDoc>(),
        )
        .post(
            "/agents/{agent_id}/signals",
            signal,
            Doc::json(RUNS, "Send a signal to a thread's run").body::<crate::wire::SignalDoc>(),
        )
        .post(
            "/agents/{agent_id}/threads/subscribe",
            subscribe,
            Doc::json(RUNS, "Follow every run of a thread")
                .body::<ThreadBody>()
                .answering(Subscription),
        )
        .get(
            "/agents/{agent_id}/tools",
            list_tools,
            Doc::json(TOOLS, "List the agent's tools"),
        )
        .get(
            "/agents/{agent_id}/tools/{tool_id}",
            get_tool,
            Doc::json(TOOLS, "Describe one of the agent's tools"),
        )
        .post(
            "/agents/{agent_id}/tools/{tool_id}/execute",
            execute_tool,
            Doc::json(
                TOOLS,
                "Run a tool directly (not one that needs approval or a run)",
            )
            .body::<ExecuteBody>(),
        )
}

/// 404 for any other path, as JSON.
pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// The agent with this id, or a 404.
pub(crate) async fn agent(state: &AppState, id: &str) -> Result<Agent, ApiError> {
    state.kestrel.find_agent(id).await.map_err(|e| match e {
        e @ kestrel_core::kestrel::KestrelError::AgentNotFound { .. } => {
            ApiError::not_found(e.to_string())
        }
        e => ApiError::internal(&e),
    })
}

/// A tool as the routes describe it.
fn tool_json(tool: &dyn kestrel_core::tool::Tool) -> Value {
    json!({
        "id": tool.id(),
        "description": tool.description(),
        "inputSchema": tool.input_schema(),
        "outputSchema": tool.output_schema(),
        "suspendSchema": tool.suspend_schema(),
        "resumeSchema": tool.resume_schema(),
        "clientTool": tool.is_client_tool(),
    })
}

/// The agent's tools by name.
fn tools_json(agent: &Agent) -> serde_json::Map<String, Value> {
    agent
        .tools()
        .names()
        .into_iter()
        .filter_map(|name| {
            let tool = agent.tools().get(&name)?;
            Some((name, tool_json(tool.as_ref())))
        })
        .collect()
}

/// An agent as the agents routes describe it.
async fn agent_json(agent: &Agent) -> Value {
    let tools = tools_json(agent);
    let skills = crate::skills::skills_json(agent).await;
    let editable = agent.editable();
    let editable = (!editable.is_none()).then(|| {
        json!({
            "instructions": editable.instructions,
            "toolDescriptions": editable.tool_descriptions,
            "tools": editable.tools,
            "model": editable.model,
            "defaultOptions": editable.default_options,
            "profile": editable.profile,
            "memory": editable.memory,
        })
    });
    json!({
        "id": agent.id(),
        "name": agent.name(),
        "description": agent.description(),
        "instructions": agent.static_instructions(),
        "modelId": agent.model_name(),
        "tools": tools,
        // Mastra's shape: the sub-agents by id, each `{id, name}`.
        "agents": agent
            .sub_agent_ids()
            .into_iter()
            .filter_map(|id| {
                let sub = agent.sub_agent(id)?;
                Some((id.to_owned(), json!({"id": id, "name": sub.name()})))
            })
            .collect::<BTreeMap<String, Value>>(),
        "workflows": agent
            .workflows()
            .iter()
            .map(|w| (w.id().to_owned(), json!({"name": w.id(), "description": w.description()})))
            .collect::<BTreeMap<String, Value>>(),
        "defaultOptions": {"maxSteps": agent.max_steps()},
        "hasMemory": agent.memory().is_some(),
        "skills": skills,
        "source": if agent.is_stored() { "stored" } else { "code" },
        "editable": editable,
        "resolvedVersionId": agent.version_id(),
    })
}

/// `agent` as its runs see it by default: through its published version, if it has one.
/// A published version this instance cannot run is logged, and the agent shown as it is.
async fn published(agent: Agent) -> Agent {
    match agent.at_version(&VersionChoice::published()).await {
        Ok(seen) => seen,
        Err(error) => {
            tracing::warn!(agent = agent.id(), %error, "the agent's published version cannot be used");
            agent
        }
    }
}

async fn list_agents(State(state): Shared) -> Json<Value> {
    let mut agents = BTreeMap::new();
    for agent in state.kestrel.agents() {
        let agent = published(agent.clone()).await;
        agents.insert(agent.id().to_owned(), agent_json(&agent).await);
    }
    // Agents defined in the storage alone; a store that fails leaves the code agents listed.
    let stored = state
        .kestrel
        .stored_agent_ids()
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "listing the stored agents failed");
            Vec::new()
        });
    for id in stored {
        match state.kestrel.find_agent(&id).await {
            Ok(agent) => {
                agents.insert(id, agent_json(&agent).await);
            }
            Err(error) => tracing::warn!(agent = %id, %error, "a stored agent cannot be listed"),
        }
    }
    Json(json!(agents))
}

/// Which version of an agent to describe: at most one of the two.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct AgentQuery {
    /// `published` (the default) or `draft` (the latest version).
    #[serde(default)]
    status: Option<VersionStatus>,
    /// A version by id.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    version_id: Option<String>,
}

async fn get_agent(
    State(state): Shared,
    Path(agent_id): Path<String>,
    query: Result<Query<AgentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let query = crate::memory::parsed(query)?;
    let choice = match (query.status, query.version_id) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_query(
                "give status or versionId, not both",
            ));
        }
        (Some(status), None) => VersionChoice::Status { status },
        (None, Some(id)) => VersionChoice::id(id),
        (None, None) => VersionChoice::published(),
    };
    let agent = agent(&state, &agent_id).await?;
    let agent = agent
        .at_version(&choice)
        .await
        .map_err(crate::stored::version_error)?;
    Ok(Json(agent_json(&agent).await))
}

async fn generate(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<RunBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let (input, options) = body.into_run(&caller, BodyRules::of(&agent, &state))?;
    let agent = agent.clone();
    let result = in_task(async move { agent.generate(input).options(options).await })
        .await?
        .map_err(|e| ApiError::of_run(e, &caller))?;
    Ok(Json(result_json(&result)))
}

async fn stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<RunBody>,
) -> Result<Response, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let (input, options) = body.into_run(&caller, BodyRules::of(&agent, &state))?;
    let stream = agent
        .stream(input)
        .options(options)
        .await
        .map_err(|e| ApiError::of_run(e, &caller))?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

/// Runs `run` in a task of its own, so that a request that times out (or whose client goes
/// away) leaves the run to finish and be stored instead of cutting it off mid-step.
pub(crate) async fn in_task<T: Send + 'static>(
    run: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::spawn(run)
        .await
        .map_err(|e| ApiError::internal(&format!("a run's task failed: {e}")))
}

/// The call a decision names; a pinned caller reaches only its resource's runs.
fn call_ref(
    caller: &Caller,
    run_id: String,
    tool_call_id: String,
    fingerprint: Option<String>,
) -> ToolCallRef {
    let mut call = ToolCallRef::new(run_id, tool_call_id);
    if let Some(fingerprint) = fingerprint {
        call = call.fingerprint(fingerprint);
    }
    if let Some(resource) = &caller.resource {
        call = call.resource(resource);
    }
    call
}

/// A run named by id; a pinned caller reaches only its resource's runs.
fn run_ref(caller: &Caller, run_id: &str) -> RunRef {
    let run = RunRef::new(run_id);
    match &caller.resource {
        Some(resource) => run.resource(resource),
        None => run,
    }
}

/// Approves (`APPROVE`) or declines a waiting call, and continues the run as a stream.
async fn decide_stream<const APPROVE: bool>(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<DecisionBody>,
) -> Result<Response, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let call = call_ref(&caller, body.run_id, body.tool_call_id, body.fingerprint);
    let stream = if APPROVE {
        agent.approve(call).stream().await?
    } else {
        agent.decline(call, body.reason).stream().await?
    };
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

/// Approves (`APPROVE`) or declines a waiting call, and runs the run to its end.
async fn decide_generate<const APPROVE: bool>(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<DecisionBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let call = call_ref(&caller, body.run_id, body.tool_call_id, body.fingerprint);
    let agent = agent.clone();
    let result = in_task(async move {
        if APPROVE {
            agent.approve(call).await
        } else {
            agent.decline(call, body.reason).await
        }
    })
    .await??;
    Ok(Json(result_json(&result)))
}

async fn resume_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<ResumeBody>,
) -> Result<Response, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let tool_call_id = match body.tool_call_id {
        Some(id) => id,
        None => only_suspended_call(&agent, &caller, &body.run_id).await?,
    };
    let call = call_ref(&caller, body.run_id, tool_call_id, body.fingerprint);
    let stream = agent.resume(call, body.resume_data).stream().await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

/// The stored run `run_id` of `agent`, if the caller may reach it (404 otherwise, for both:
/// another resource's run is not revealed).
pub(crate) async fn stored_run(
    agent: &Agent,
    caller: &Caller,
    run_id: &str,
) -> Result<kestrel_core::store::StoredRun, ApiError> {
    agent
        .run_store()
        .load(run_id)
        .await
        .map_err(|e| ApiError::internal(&e))?
        .filter(|s| s.state.agent_id == agent.id())
        .filter(|s| caller.resource.is_none() || s.state.settings.resource_id == caller.resource)
        .ok_or_else(|| ApiError::not_found(format!("run {run_id:?} not found")))
}

/// Without a `toolCallId`, the one suspended call of the run (Mastra's older clients send
/// none); a run with several names them.
async fn only_suspended_call(
    agent: &Agent,
    caller: &Caller,
    run_id: &str,
) -> Result<String, ApiError> {
    let stored = stored_run(agent, caller, run_id).await?;
    let suspended: Vec<String> = stored
        .state
        .waiting_calls()
        .into_iter()
        .filter(|c| matches!(c.waiting, kestrel_core::agent::Waiting::Resume { .. }))
        .map(|c| c.tool_call_id)
        .collect();
    match suspended.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "not_suspended",
            format!("run {run_id:?} has no suspended tool call to resume"),
        )),
        many => Err(ApiError::invalid(format!(
            "run {run_id:?} has several suspended tool calls ({}): name one in toolCallId",
            many.join(", ")
        ))),
    }
}

/// Query of `suspended-runs`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SuspendedQuery {
    /// Only this thread's runs.
    #[serde(default)]
    thread_id: Option<String>,
    /// Only this resource's runs.
    #[serde(default)]
    resource_id: Option<String>,
    /// The page, from 0.
    #[serde(default)]
    page: Option<u32>,
    /// Runs per page: 1 to 1,000; 0 or absent: 50.
    #[serde(default)]
    #[schemars(range(max = 1000))]
    per_page: Option<u32>,
}

async fn suspended_runs(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    query: Result<Query<SuspendedQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(mut query) = query.map_err(|e| ApiError::invalid_query(e.body_text()))?;
    let agent = agent(&state, &agent_id).await?;
    let max = kestrel_core::store::MAX_SUSPENDED_PAGE;
    if let Some(asked) = query.per_page.filter(|n| *n > max) {
        return Err(ApiError::invalid_query(format!(
            "perPage must be at most {max}, not {asked}"
        )));
    }
    if let Some(own) = &caller.resource {
        if let Some(asked) = &query.resource_id {
            caller.check_resource(asked)?;
        }
        query.resource_id = Some(own.clone());
    }
    let page = agent
        .list_suspended_runs(SuspendedRunsQuery {
            thread_id: query.thread_id,
            resource_id: query.resource_id,
            page: query.page.unwrap_or(0),
            per_page: query.per_page.unwrap_or(0),
            ..SuspendedRunsQuery::default()
        })
        .await?;
    let runs: Vec<Value> = page
        .runs
        .iter()
        .map(|run| {
            json!({
                "runId": run.run_id,
                "threadId": run.thread_id,
                "resourceId": run.resource_id,
                "toolCalls": run.tool_calls.iter().map(waiting_json).collect::<Vec<_>>(),
                "suspendedAt": run.suspended_at_ms,
            })
        })
        .collect();
    Ok(Json(json!({"runs": runs, "total": page.total})))
}

async fn abort_thread(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<ThreadBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let aborted = agent
        .abort_thread_anywhere(&body.resource_id, &body.thread_id)
        .await?;
    Ok(Json(json!({"aborted": aborted})))
}

async fn abort_run(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path((agent_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    // A pinned caller reaches its own runs, live or stored; another resource's are not found.
    let marked = match agent.abort_stored_run(run_ref(&caller, &run_id)).await {
        Ok(marked) => marked,
        // Not an agent run: perhaps one of the agent's network runs (live here or elsewhere,
        // stopped, or left behind by a process that died).
        Err(not_found @ kestrel_core::agent::RunControlError::RunNotFound { .. }) => {
            if !agent
                .abort_network(&run_id, caller.resource.as_deref())
                .await?
            {
                return Err(not_found.into());
            }
            0
        }
        Err(error) => return Err(error.into()),
    };
    Ok(Json(json!({"aborted": true, "storedRunsMarked": marked})))
}

async fn resume_run(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path((agent_id, run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let stream = agent.resume_run(run_ref(&caller, &run_id)).await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

async fn send_message(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<SendBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let text = body.text("message")?;
    let sent = agent
        .send_message(text, pinned_target(&caller, body.target()?))
        .await?;
    Ok(Json(sent_json(sent)))
}

async fn signal(
    State(state): Shared,
    _run: RunSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<SendBody>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    caller.check_resource(&body.resource_id)?;
    let text = body.text("signal")?;
    let sent = agent
        .send_signal(text, pinned_target(&caller, body.target()?))
        .await?;
    Ok(Json(sent_json(sent)))
}

/// A run a message wakes acts for the pinned caller's resource, as a run the caller started
/// would: in its options and in its request context.
fn pinned_target(
    caller: &Caller,
    to: kestrel_core::agent::SendMessage,
) -> kestrel_core::agent::SendMessage {
    let Some(own) = &caller.resource else {
        return to;
    };
    let context = kestrel_core::context::RequestContext::new();
    context.set(kestrel_core::context::RESOURCE_ID_KEY, own.as_str());
    to.options(
        kestrel_core::agent::RunOptions::new()
            .resource(own)
            .request_context(context),
    )
}

/// What a sent message did. A run it woke goes on in the background.
fn sent_json(sent: kestrel_core::agent::Sent) -> Value {
    json!({"accepted": sent.accepted, "runId": sent.run_id, "threadId": sent.thread_id})
}

/// How long a thread subscription waits between heartbeats.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(25);

async fn subscribe(
    State(state): Shared,
    slot: StreamSlot,
    Extension(caller): Extension<Caller>,
    Path(agent_id): Path<String>,
    Body(body): Body<ThreadBody>,
) -> Result<Response, ApiError> {
    caller.check_resource(&body.resource_id)?;
    use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
    use futures::StreamExt;
    let agent = agent(&state, &agent_id).await?;
    let subscription = agent
        .subscribe_to_thread(&body.resource_id, &body.thread_id)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let connected = futures::stream::once(async {
        Ok::<_, std::convert::Infallible>(SseEvent::default().comment("connected"))
    });
    let events = subscription.map(move |event| {
        let _held = &slot;
        Ok(SseEvent::default().data(crate::sse::public_json(&event)))
    });
    let sse = Sse::new(connected.chain(events))
        .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat"));
    Ok(sse.into_response())
}

async fn list_tools(
    State(state): Shared,
    Path(agent_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(Value::Object(tools_json(
        &agent(&state, &agent_id).await?,
    ))))
}

async fn get_tool(
    State(state): Shared,
    Path((agent_id, tool_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let agent = agent(&state, &agent_id).await?;
    let tool = agent.tools().get(&tool_id).ok_or_else(|| {
        ApiError::not_found(format!(
            "agent {agent_id:?} has no tool {tool_id:?}; its tools: {}",
            agent.tools().names().join(", ")
        ))
    })?;
    Ok(Json(tool_json(tool.as_ref())))
}

/// Body of a direct tool execution (Mastra's `{data}`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ExecuteBody {
    /// The tool's input.
    #[serde(default)]
    data: Value,
    /// Values the tool reads from its request context.
    #[serde(default)]
    request_context: Option<serde_json::Map<String, Value>>,
}

async fn execute_tool(
    State(state): Shared,
    Extension(caller): Extension<Caller>,
    Path((agent_id, tool_id)): Path<(String, String)>,
    Body(body): Body<ExecuteBody>,
) -> Result<Json<Value>, ApiError> {
    use kestrel_core::tool::{ApprovalContext, ToolCallError, ToolContext};
    let agent = agent(&state, &agent_id).await?;
    let args = if body.data.is_null() {
        json!({})
    } else {
        body.data
    };
    let tool = match agent.tools().checked(&tool_id, &args) {
        Ok(tool) => tool.clone(),
        Err(error @ ToolCallError::UnknownTool { .. }) => {
            return Err(ApiError::not_found(error.to_string()));
        }
        Err(error) => return Err(ApiError::invalid(error.to_string())),
    };
    let context = crate::wire::client_context(body.request_context);
    if let Some(resource) = &caller.resource {
        context.set(kestrel_core::context::RESOURCE_ID_KEY, resource.as_str());
    }
    let refuse = |why: &str| {
        ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "not_executable",
            format!("tool {tool_id:?} {why}; it runs only inside an agent's run"),
        )
    };
    let approval = ApprovalContext {
        tool_name: &tool_id,
        request_context: &context,
        thread_id: None,
        resource_id: caller.resource.as_deref(),
    };
    // Executing here would skip the person who must approve it: the tool's policy or the
    // agent's default one may ask for them.
    if agent.requires_approval(&args, &approval) {
        return Err(refuse("needs a person's approval"));
    }
    if tool.is_client_tool() {
        return Err(refuse("is a client tool (the caller runs it)"));
    }
    if tool.needs_conversation() {
        return Err(refuse("reads the run's conversation"));
    }
    let ctx = ToolContext::standalone(&tool_id).with_request_context(context);
    match tool.execute(args, ctx).await {
        Ok(result) => Ok(Json(json!({"result": result}))),
        Err(error) if error.is_suspension() => Err(refuse("suspends for resume data")),
        Err(error) => Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "tool_error",
            error.message().to_owned(),
        )),
    }
}
