//! The `/api` routes: agents, their runs, and decisions on stopped runs.

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use kestrel_core::agent::{Agent, Continue, RunHandle};
use kestrel_core::store::SuspendedRunsQuery;
use kestrel_core::version::{VersionChoice, VersionStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::extract::{AgentAccess, AgentBody, Query};
use crate::limits::{RunSlot, StreamSlot};
use crate::lookup::{agent, stored_run};
use crate::openapi::{Doc, Routes};
use crate::wire::{
    Body, BodyRules, DecisionBody, ResumeBody, RunBody, RunResult, SendBody, ThreadBody,
};
use crate::{ApiError, AppState};

mod agent_info;
mod suspended;

use agent_info::{AgentInfo, AgentList, ToolInfo, ToolList};
use suspended::{SuspendedCall, SuspendedRunInfo, SuspendedRunsPage};

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
            Doc::json(AGENTS, "List the agents, by id").returns::<AgentList>(),
        )
        .get(
            "/agents/{agent_id}",
            get_agent,
            Doc::json(
                AGENTS,
                "Describe an agent (through its published version, a draft, or a version by id)",
            )
            .query::<AgentQuery>()
            .returns::<AgentInfo>(),
        )
        .post(
            "/agents/{agent_id}/generate",
            generate,
            Doc::json(RUNS, "Run the agent to its end (or its next stop)")
                .body::<RunBody>()
                .returns::<RunResult>(),
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
                .body::<DecisionBody>()
                .returns::<RunResult>(),
        )
        .post(
            "/agents/{agent_id}/decline-tool-call-generate",
            decide_generate::<false>,
            Doc::json(RUNS, "Decline a waiting tool call and run to the end")
                .body::<DecisionBody>()
                .returns::<RunResult>(),
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
            Doc::json(RUNS, "List runs waiting for a person")
                .query::<SuspendedQuery>()
                .returns::<SuspendedRunsPage>(),
        )
        .post(
            "/agents/{agent_id}/threads/abort",
            abort_thread,
            Doc::json(RUNS, "Abort the thread's active run")
                .body::<ThreadBody>()
                .returns::<ThreadAborted>(),
        )
        .post(
            "/agents/{agent_id}/runs/{run_id}/abort",
            abort_run,
            Doc::json(RUNS, "Abort a run, live or stored").returns::<RunAborted>(),
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
            .body::<crate::wire::SendMessageDoc>()
            .returns::<SentMessage>(),
        )
        .post(
            "/agents/{agent_id}/signals",
            signal,
            Doc::json(RUNS, "Send a signal to a thread's run")
                .body::<crate::wire::SignalDoc>()
                .returns::<SentMessage>(),
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
            Doc::json(TOOLS, "List the agent's tools").returns::<ToolList>(),
        )
        .get(
            "/agents/{agent_id}/tools/{tool_id}",
            get_tool,
            Doc::json(TOOLS, "Describe one of the agent's tools").returns::<ToolInfo>(),
        )
        .post(
            "/agents/{agent_id}/tools/{tool_id}/execute",
            execute_tool,
            Doc::json(
                TOOLS,
                "Run a tool directly (not one that needs approval or a run)",
            )
            .body::<ExecuteBody>()
            .returns::<ToolOutput>(),
        )
}

/// 404 for any other path, as JSON.
pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
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

async fn list_agents(State(state): Shared) -> Json<AgentList> {
    let mut agents = BTreeMap::new();
    for agent in state.kestrel.agents() {
        let agent = published(agent.clone()).await;
        agents.insert(agent.id().to_owned(), AgentInfo::of(&agent).await);
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
                agents.insert(id, AgentInfo::of(&agent).await);
            }
            Err(error) => tracing::warn!(agent = %id, %error, "a stored agent cannot be listed"),
        }
    }
    Json(AgentList(agents))
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
    Query(query): Query<AgentQuery>,
) -> Result<Json<AgentInfo>, ApiError> {
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
    // Looked up after the query is checked: a bad query answers 400 even for an unknown agent.
    let agent = agent(&state, &agent_id).await?;
    let agent = agent
        .at_version(&choice)
        .await
        .map_err(crate::error::version_error)?;
    Ok(Json(AgentInfo::of(&agent).await))
}

async fn generate(
    State(state): Shared,
    _run: RunSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<RunBody>,
) -> Result<Json<RunResult>, ApiError> {
    let (input, options) = body.into_run(&caller, BodyRules::of(&agent, &state))?;
    let agent = agent.clone();
    let outcome = in_task(async move { agent.generate(input).options(options).await }).await?;
    let result = RunResult::of(outcome).map_err(|e| ApiError::of_run(e, &caller))?;
    Ok(Json(result))
}

async fn stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<RunBody>,
) -> Result<Response, ApiError> {
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

/// A run named by id; a pinned caller reaches only its resource's runs.
fn run_of(agent: &Agent, caller: &Caller, run_id: impl Into<String>) -> RunHandle {
    let run = agent.run(run_id);
    match &caller.resource {
        Some(resource) => run.resource(resource),
        None => run,
    }
}

/// A decision pinned, when the body gives one, to the call the person saw.
fn pinned_to(decision: Continue, fingerprint: Option<String>) -> Continue {
    match fingerprint {
        Some(fingerprint) => decision.fingerprint(fingerprint),
        None => decision,
    }
}

/// Approves (`APPROVE`) or declines a waiting call, and continues the run as a stream.
async fn decide_stream<const APPROVE: bool>(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<DecisionBody>,
) -> Result<Response, ApiError> {
    let run = run_of(&agent, &caller, body.run_id);
    let decision = if APPROVE {
        run.approve(body.tool_call_id)
    } else {
        run.decline(body.tool_call_id, body.reason)
    };
    let stream = pinned_to(decision, body.fingerprint).stream().await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

/// Approves (`APPROVE`) or declines a waiting call, and runs the run to its end.
async fn decide_generate<const APPROVE: bool>(
    _run: RunSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<DecisionBody>,
) -> Result<Json<RunResult>, ApiError> {
    let run = run_of(&agent, &caller, body.run_id);
    let decision = if APPROVE {
        run.approve(body.tool_call_id)
    } else {
        run.decline(body.tool_call_id, body.reason)
    };
    let outcome = in_task(pinned_to(decision, body.fingerprint).into_future()).await?;
    let result = match outcome {
        Err(kestrel_core::agent::RunControlError::Run(error)) => RunResult::of(Err(error))
            .map_err(|e| ApiError::from(kestrel_core::agent::RunControlError::Run(e)))?,
        other => other?.into(),
    };
    Ok(Json(result))
}

async fn resume_stream(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<ResumeBody>,
) -> Result<Response, ApiError> {
    let tool_call_id = match body.tool_call_id {
        Some(id) => id,
        None => only_suspended_call(&agent, &caller, &body.run_id).await?,
    };
    let decision = run_of(&agent, &caller, body.run_id).resume(tool_call_id, body.resume_data);
    let stream = pinned_to(decision, body.fingerprint).stream().await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
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
    caller: Caller,
    Path(agent_id): Path<String>,
    Query(mut query): Query<SuspendedQuery>,
) -> Result<Json<SuspendedRunsPage>, ApiError> {
    // Looked up after the query is checked: a bad query answers 400 even for an unknown agent.
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
    let runs = page
        .runs
        .into_iter()
        .map(|run| SuspendedRunInfo {
            run_id: run.run_id,
            status: "suspended",
            thread_id: run.thread_id,
            resource_id: run.resource_id,
            tool_calls: run
                .tool_calls
                .into_iter()
                .map(SuspendedCall::from)
                .collect(),
            suspended_at: chrono::DateTime::from_timestamp_millis(run.suspended_at_ms)
                .unwrap_or_default(),
        })
        .collect();
    Ok(Json(SuspendedRunsPage {
        runs,
        total: page.total,
    }))
}

/// What aborting a thread's run did: Mastra's `{aborted}`, and how many.
#[derive(Debug, Serialize, JsonSchema)]
struct ThreadAborted {
    /// Whether a run was aborted.
    aborted: bool,
    /// How many of the thread's runs were aborted: those in progress in this process, and in
    /// a cluster its active run on another instance (0 when none was running).
    count: usize,
}

async fn abort_thread(
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<ThreadBody>,
) -> Result<Json<ThreadAborted>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let count = agent
        .thread(&body.resource_id, &body.thread_id)
        .abort()
        .await?;
    Ok(Json(ThreadAborted {
        aborted: count > 0,
        count,
    }))
}

/// What aborting a run did (a run that cannot be aborted is a 404 or 409 instead).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct RunAborted {
    /// Always `true`.
    #[schemars(extend("const" = true))]
    aborted: bool,
    /// How many stored runs were marked aborted: a stopped run and its unfinished sub-agent
    /// runs (0 for a run in progress here, which records its own end, and for a network run).
    stored_runs_marked: usize,
}

async fn abort_run(
    caller: Caller,
    AgentAccess { agent, .. }: AgentAccess,
    Path((_, run_id)): Path<(String, String)>,
) -> Result<Json<RunAborted>, ApiError> {
    // A pinned caller reaches its own runs, live or stored; another resource's are not found.
    let run = run_of(&agent, &caller, run_id);
    let marked = match run.abort().await {
        Ok(marked) => marked,
        // Not an agent run: perhaps one of the agent's network runs (live here or elsewhere,
        // stopped, or left behind by a process that died).
        Err(not_found @ kestrel_core::agent::RunControlError::RunNotFound { .. }) => {
            if !run.network().abort().await? {
                return Err(not_found.into());
            }
            0
        }
        Err(error) => return Err(error.into()),
    };
    Ok(Json(RunAborted {
        aborted: true,
        stored_runs_marked: marked,
    }))
}

async fn resume_run(
    State(state): Shared,
    _run: RunSlot,
    slot: StreamSlot,
    caller: Caller,
    AgentAccess { agent, .. }: AgentAccess,
    Path((_, run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let stream = run_of(&agent, &caller, run_id).proceed().stream().await?;
    Ok(crate::sse::run_events(stream, state.abort_on_disconnect, slot).into_response())
}

async fn send_message(
    _run: RunSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<SendBody>,
) -> Result<Json<SentMessage>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let text = body.text("message")?;
    let thread = pinned_thread(&caller, body.thread(&agent)?);
    let sent = body.apply(thread.send(text)).await?;
    Ok(Json(sent.into()))
}

async fn signal(
    _run: RunSlot,
    caller: Caller,
    AgentBody { agent, body, .. }: AgentBody<SendBody>,
) -> Result<Json<SentMessage>, ApiError> {
    caller.check_resource(&body.resource_id)?;
    let text = body.text("signal")?;
    let thread = pinned_thread(&caller, body.thread(&agent)?);
    let sent = body.apply(thread.signal(text)).await?;
    Ok(Json(sent.into()))
}

/// A run a message wakes acts for the pinned caller's resource, as a run the caller started
/// would: in its options and in its request context.
fn pinned_thread(
    caller: &Caller,
    thread: kestrel_core::agent::ThreadHandle,
) -> kestrel_core::agent::ThreadHandle {
    let Some(own) = &caller.resource else {
        return thread;
    };
    let context = kestrel_core::context::RequestContext::new();
    context.set(kestrel_core::context::RESOURCE_ID_KEY, own.as_str());
    thread.options(
        kestrel_core::agent::RunOptions::new()
            .resource(own)
            .request_context(context),
    )
}

/// What a sent message (or signal) did. A run it woke goes on in the background.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SentMessage {
    /// Whether it was delivered, stored or started a run (`false`: discarded).
    accepted: bool,
    /// The thread's active run, or the run it woke; `null` when there is none.
    run_id: Option<String>,
    /// The thread it went to: the one named, or the fork.
    thread_id: String,
}

impl From<kestrel_core::agent::Sent> for SentMessage {
    fn from(sent: kestrel_core::agent::Sent) -> Self {
        Self {
            accepted: sent.accepted,
            run_id: sent.run_id,
            thread_id: sent.thread_id,
        }
    }
}

/// How long a thread subscription waits between heartbeats.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(25);

async fn subscribe(
    State(state): Shared,
    slot: StreamSlot,
    caller: Caller,
    Path(agent_id): Path<String>,
    Body(body): Body<ThreadBody>,
) -> Result<Response, ApiError> {
    caller.check_resource(&body.resource_id)?;
    use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
    use futures::StreamExt;
    // Looked up after the resource is checked: another resource's answers 403 even for an
    // unknown agent.
    let agent = agent(&state, &agent_id).await?;
    let subscription = agent
        .thread(&body.resource_id, &body.thread_id)
        .subscribe()
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let connected = futures::stream::once(async {
        Ok::<_, std::convert::Infallible>(SseEvent::default().comment("connected"))
    });
    let events = subscription.map(move |event| {
        let _held = &slot;
        Ok(SseEvent::default().data(crate::redact::public_json(&event)))
    });
    let sse = Sse::new(connected.chain(events))
        .keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat"));
    Ok(sse.into_response())
}

async fn list_tools(AgentAccess { agent, .. }: AgentAccess) -> Json<ToolList> {
    Json(ToolList(agent_info::tools_of(&agent)))
}

async fn get_tool(
    AgentAccess {
        agent,
        id: agent_id,
    }: AgentAccess,
    Path((_, tool_id)): Path<(String, String)>,
) -> Result<Json<ToolInfo>, ApiError> {
    let tool = agent.tools().get(&tool_id).ok_or_else(|| {
        ApiError::not_found(format!(
            "agent {agent_id:?} has no tool {tool_id:?}; its tools: {}",
            agent.tools().names().join(", ")
        ))
    })?;
    Ok(Json(ToolInfo::of(tool.as_ref())))
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

/// What a directly run tool returned.
#[derive(Debug, Serialize, JsonSchema)]
struct ToolOutput {
    /// The tool's output (its output schema, when it states one, describes it).
    result: Value,
}

async fn execute_tool(
    caller: Caller,
    Path((_, tool_id)): Path<(String, String)>,
    AgentBody { agent, body, .. }: AgentBody<ExecuteBody>,
) -> Result<Json<ToolOutput>, ApiError> {
    use kestrel_core::tool::{ApprovalContext, ToolCallError, ToolContext};
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
        Ok(result) => Ok(Json(ToolOutput { result })),
        Err(error) if error.is_suspension() => Err(refuse("suspends for resume data")),
        Err(error) => Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "tool_error",
            error.message().to_owned(),
        )),
    }
}
