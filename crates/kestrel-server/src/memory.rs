//! The `/api/memory` routes: threads, their messages, working memory and observations, read
//! from the [`Memory`](kestrel_memory::Memory) given to the server
//! ([`Server::memory`](crate::Server::memory)).
//!
//! Paths, query parameters and bodies are Mastra's. A caller pinned to a resource sees only
//! that resource's threads: another resource's thread is "not found", so its existence is not
//! revealed, and a list or create naming another resource is refused (403).

mod responses;

use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use kestrel_core::agent::Agent;
use kestrel_memory::{Memory, ObservationScope, WorkingMemoryScope};
use kestrel_storage::{
    Direction, MetadataUpdate, NewThread, PageRequest, Scope, Selection, Storage, Thread,
    ThreadOrder, ThreadOrderField, ThreadPatch, ThreadQuery,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use responses::{
    MemoryConfig, MemoryStatus, Observations, StorageThread, StoredObservation, ThreadDeleted,
    ThreadWorkingMemory, ThreadsPage, WorkingMemoryUpdated, observation_scope_name,
};

use crate::auth::Caller;
use crate::chat::history;
use crate::chat::ui_stream::Version;
use crate::error::storage_error;
use crate::extract::{BodyFirst, Query};
use crate::lookup::{ServedMemory, memory};
use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

/// The default and the largest page of threads or messages.
const DEFAULT_PER_PAGE: u32 = 100;
const MAX_PER_PAGE: u32 = 1000;

/// The memory routes, under `/api`, documented for the OpenAPI document.
pub(crate) fn routes() -> Routes<Arc<AppState>> {
    const MEMORY: &str = "memory";
    Routes::new()
        .get(
            "/memory/status",
            status,
            Doc::json(MEMORY, "Whether memory is configured, and how")
                .query::<StatusQuery>()
                .returns::<MemoryStatus>(),
        )
        .get(
            "/memory/threads",
            list_threads,
            Doc::json(MEMORY, "List threads, a page at a time")
                .query::<ListQuery>()
                .returns::<ThreadsPage>(),
        )
        .post(
            "/memory/threads",
            create_thread,
            Doc::json(MEMORY, "Create a thread")
                .query::<ThreadQueryParams>()
                .body::<CreateBody>()
                .returns::<StorageThread>()
                .created(),
        )
        .get(
            "/memory/threads/{thread_id}",
            get_thread,
            Doc::json(MEMORY, "Get a thread")
                .query::<ThreadQueryParams>()
                .returns::<StorageThread>(),
        )
        .patch(
            "/memory/threads/{thread_id}",
            update_thread,
            Doc::json(MEMORY, "Change a thread's title or metadata")
                .query::<ThreadQueryParams>()
                .body::<UpdateBody>()
                .returns::<StorageThread>(),
        )
        .delete(
            "/memory/threads/{thread_id}",
            delete_thread,
            Doc::json(MEMORY, "Delete a thread and its messages")
                .query::<ThreadQueryParams>()
                .returns::<ThreadDeleted>(),
        )
        .get(
            "/memory/threads/{thread_id}/messages",
            list_messages,
            Doc::json(
                MEMORY,
                "A thread's messages, oldest first, with their AI SDK UI form",
            )
            .query::<MessagesQuery>()
            .returns::<MessagesPage>(),
        )
        .get(
            "/memory/threads/{thread_id}/working-memory",
            get_working_memory,
            Doc::json(MEMORY, "The working memory a thread sees")
                .query::<ThreadQueryParams>()
                .returns::<ThreadWorkingMemory>(),
        )
        .post(
            "/memory/threads/{thread_id}/working-memory",
            set_working_memory,
            Doc::json(MEMORY, "Replace the working memory a thread sees")
                .query::<ThreadQueryParams>()
                .body::<WorkingMemoryBody>()
                .returns::<WorkingMemoryUpdated>(),
        )
        .get(
            "/memory/observational-memory",
            observations,
            Doc::json(MEMORY, "The observations a thread sees")
                .query::<ObservationsQuery>()
                .returns::<Observations>(),
        )
}

/// Checks that `agentId`, when given, names an agent.
async fn check_agent(state: &AppState, agent_id: Option<&str>) -> Result<(), ApiError> {
    if let Some(id) = agent_id {
        crate::lookup::agent(state, id).await?;
    }
    Ok(())
}

/// The thread, if it exists and the caller may see it (404 otherwise, for both).
async fn visible_thread(
    storage: &dyn Storage,
    caller: &Caller,
    thread_id: &str,
    resource_id: Option<&str>,
) -> Result<Thread, ApiError> {
    let thread = storage
        .get_thread(thread_id)
        .await
        .map_err(storage_error)?
        .filter(|t| {
            caller
                .resource
                .as_ref()
                .is_none_or(|own| *own == t.resource_id)
        })
        .filter(|t| resource_id.is_none_or(|asked| asked == t.resource_id))
        .ok_or_else(|| ApiError::not_found(format!("thread {thread_id:?} not found")))?;
    Ok(thread)
}

/// The server's memory and the thread the caller names, if the agent named (when one is)
/// exists and the caller may see the thread.
async fn thread_of<'a>(
    state: &'a AppState,
    caller: &Caller,
    thread_id: &str,
    agent_id: Option<&str>,
    resource_id: Option<&str>,
) -> Result<(&'a ServedMemory, Thread), ApiError> {
    check_agent(state, agent_id).await?;
    let memory = memory(state)?;
    let thread = visible_thread(memory.storage().as_ref(), caller, thread_id, resource_id).await?;
    Ok((memory, thread))
}

/// A route's thread (the `{thread_id}` of its path, with the `agentId` and `resourceId` of its
/// query), checked: the agent exists, the server has memory, and the caller may see the thread.
struct ThreadAccess {
    memory: ServedMemory,
    thread: Thread,
}

impl FromRequestParts<Arc<AppState>> for ThreadAccess {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let Path(thread_id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::not_found(e.body_text()))?;
        let Query(query) = Query::<ThreadQueryParams>::from_request_parts(parts, state).await?;
        let caller = Caller::from_request_parts(parts, state).await?;
        let (memory, thread) = thread_of(
            state,
            &caller,
            &thread_id,
            query.agent_id.as_deref(),
            query.resource_id.as_deref(),
        )
        .await?;
        Ok(Self {
            memory: memory.clone(),
            thread,
        })
    }
}

/// Query of `status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct StatusQuery {
    #[serde(default)]
    agent_id: Option<String>,
}

/// Whether memory is there: the agent's own when `agentId` is given, else the server's.
async fn status(
    State(state): Shared,
    Query(query): Query<StatusQuery>,
) -> Result<Json<MemoryStatus>, ApiError> {
    let result = match &query.agent_id {
        Some(id) => state
            .kestrel
            .agent(id)
            .map_err(|e| ApiError::not_found(e.to_string()))?
            .memory()
            .is_some(),
        None => state.memory.is_some(),
    };
    Ok(Json(MemoryStatus {
        result,
        config: state.memory.as_deref().map(MemoryConfig::of),
    }))
}

/// Query of the thread list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    /// An agent that must exist (Mastra's client names the agent whose memory it reads).
    #[serde(default)]
    agent_id: Option<String>,
    /// Only this resource's threads.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    /// A JSON object every listed thread's metadata must contain.
    #[serde(default)]
    metadata: Option<String>,
    /// The page, from 0.
    #[serde(default)]
    page: Option<u32>,
    /// Threads per page: 1 to 1,000, 100 by default.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    per_page: Option<u32>,
    /// `createdAt` (the default) or `updatedAt`.
    #[serde(default, rename = "orderBy[field]", alias = "orderBy")]
    #[schemars(extend("enum" = ["createdAt", "updatedAt"]))]
    order_by: Option<String>,
    /// `DESC` (the default) or `ASC`.
    #[serde(default, rename = "orderBy[direction]", alias = "sortDirection")]
    #[schemars(extend("enum" = ["DESC", "ASC", "desc", "asc"]))]
    sort_direction: Option<String>,
}

/// A page size from the query: 100 by default, 1 to 1,000.
fn per_page(asked: Option<u32>) -> Result<u32, ApiError> {
    match asked {
        None => Ok(DEFAULT_PER_PAGE),
        Some(n @ 1..=MAX_PER_PAGE) => Ok(n),
        Some(n) => Err(ApiError::invalid_query(format!(
            "perPage must be between 1 and {MAX_PER_PAGE}, not {n}"
        ))),
    }
}

async fn list_threads(
    State(state): Shared,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<Json<ThreadsPage>, ApiError> {
    check_agent(&state, query.agent_id.as_deref()).await?;
    let memory = memory(&state)?;
    let resource_id = match (&caller.resource, query.resource_id) {
        (Some(own), Some(asked)) => {
            caller.check_resource(&asked)?;
            Some(own.clone())
        }
        (Some(own), None) => Some(own.clone()),
        (None, asked) => asked,
    };
    // An empty `metadata` is no filter.
    let metadata = match query
        .metadata
        .as_ref()
        .filter(|text| !text.trim().is_empty())
    {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Some(object),
            Ok(other) => {
                return Err(ApiError::invalid_query(format!(
                    "metadata must be a JSON object, not {other}"
                )));
            }
            Err(e) => {
                return Err(ApiError::invalid_query(format!(
                    "metadata must be a JSON object: {e}"
                )));
            }
        },
        None => None,
    };
    let field = match query.order_by.as_deref() {
        None | Some("createdAt") => ThreadOrderField::CreatedAt,
        Some("updatedAt") => ThreadOrderField::UpdatedAt,
        Some(other) => {
            return Err(ApiError::invalid_query(format!(
                "orderBy[field] must be createdAt or updatedAt, not {other:?}"
            )));
        }
    };
    let direction = match query.sort_direction.as_deref() {
        None => Direction::Desc,
        Some(d) if d.eq_ignore_ascii_case("desc") => Direction::Desc,
        Some(d) if d.eq_ignore_ascii_case("asc") => Direction::Asc,
        Some(other) => {
            return Err(ApiError::invalid_query(format!(
                "orderBy[direction] must be ASC or DESC, not {other:?}"
            )));
        }
    };
    let page = memory
        .storage()
        .list_threads(ThreadQuery {
            resource_id,
            metadata,
            page: PageRequest::new(query.page.unwrap_or(0), per_page(query.per_page)?),
            order: ThreadOrder { field, direction },
        })
        .await
        .map_err(storage_error)?;
    Ok(Json(ThreadsPage::from(page)))
}

/// Query naming the agent (accepted on every thread route, as Mastra's client sends it).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ThreadQueryParams {
    /// An agent that must exist (Mastra's client names the agent whose memory it reads).
    #[serde(default)]
    agent_id: Option<String>,
    /// The thread's resource, checked: another resource's thread is not found.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
}

/// Body of a thread creation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: String,
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    title: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: Option<String>,
}

async fn create_thread(
    State(state): Shared,
    caller: Caller,
    BodyFirst(Body(body), Query(query)): BodyFirst<Body<CreateBody>, Query<ThreadQueryParams>>,
) -> Result<(StatusCode, Json<StorageThread>), ApiError> {
    check_agent(&state, query.agent_id.as_deref()).await?;
    let memory = memory(&state)?;
    caller.check_resource(&body.resource_id)?;
    if body.resource_id.trim().is_empty() {
        return Err(ApiError::invalid("resourceId must not be empty"));
    }
    let mut thread = NewThread::new(body.resource_id);
    if let Some(id) = body.thread_id {
        if id.trim().is_empty() {
            return Err(ApiError::invalid("threadId must not be empty"));
        }
        thread = thread.id(id);
    }
    if let Some(title) = body.title {
        thread = thread.title(title);
    }
    if let Some(metadata) = body.metadata {
        thread = thread.metadata(metadata);
    }
    let created = memory
        .storage()
        .create_thread(thread)
        .await
        .map_err(storage_error)?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

async fn get_thread(access: ThreadAccess) -> Json<StorageThread> {
    Json(access.thread.into())
}

/// Body of a thread update: a new title, and metadata merged in (or replacing the old with
/// `replaceMetadata`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateBody {
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_NAME_LEN))]
    title: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    replace_metadata: bool,
    /// Accepted when it names the thread's own resource; threads do not move between
    /// resources.
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
}

async fn update_thread(
    ThreadAccess { memory, thread }: ThreadAccess,
    Body(body): Body<UpdateBody>,
) -> Result<Json<StorageThread>, ApiError> {
    let thread_id = &thread.id;
    let storage = memory.storage();
    if let Some(resource) = &body.resource_id
        && *resource != thread.resource_id
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "thread_resource",
            format!(
                "thread {thread_id:?} belongs to resource {:?}; a thread cannot move to \
                 {resource:?}",
                thread.resource_id
            ),
        ));
    }
    let metadata = body.metadata.map(|m| {
        if body.replace_metadata {
            MetadataUpdate::Replace(m)
        } else {
            MetadataUpdate::Merge(m)
        }
    });
    let updated = storage
        .update_thread(
            thread_id,
            ThreadPatch {
                title: body.title,
                metadata,
            },
        )
        .await
        .map_err(storage_error)?;
    Ok(Json(updated.into()))
}

async fn delete_thread(
    ThreadAccess { memory, thread }: ThreadAccess,
) -> Result<Json<ThreadDeleted>, ApiError> {
    let thread_id = &thread.id;
    let deleted = memory
        .storage()
        .delete_thread(thread_id)
        .await
        .map_err(storage_error)?;
    if !deleted {
        return Err(ApiError::not_found(format!(
            "thread {thread_id:?} not found"
        )));
    }
    Ok(Json(ThreadDeleted {
        result: "Thread deleted",
    }))
}

/// Query of a thread's messages: a page, oldest first (all of them by default, up to 1,000).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MessagesQuery {
    /// Pending approvals and suspensions of this agent's runs only (any agent's by default).
    #[serde(default)]
    agent_id: Option<String>,
    /// The thread's resource, checked.
    #[allow(dead_code)] // read by `ThreadAccess`; declared here for the OpenAPI document
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
    /// The page, from 0.
    #[serde(default)]
    page: Option<u32>,
    /// Messages per page: 1 to 1,000, all (up to 1,000) by default. `uiMessages` is built
    /// from the page's messages: a turn that a page boundary splits is split there too, so a
    /// front end that renders history asks for whole threads (the default).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    per_page: Option<u32>,
    /// The AI SDK version of `uiMessages`: `v5` (the default) or `v6`.
    #[serde(default)]
    #[schemars(extend("enum" = ["v5", "v6"]))]
    version: Option<String>,
}

/// A page of a thread's messages.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MessagesPage {
    /// The page's messages, as Mastra's `MastraDBMessage` (tool results inside their calls).
    messages: Vec<crate::db_messages::DbMessage>,
    /// The same messages as AI SDK `UIMessage`s (one per turn), with pending approvals.
    ui_messages: Vec<history::UiMessage>,
    /// The page, from 0.
    page: u32,
    /// Stored messages per page.
    per_page: u32,
    /// How many stored messages the thread has (a tool result counts as one).
    total: Option<u64>,
    /// Whether a later page has more.
    has_more: bool,
}

async fn list_messages(
    State(state): Shared,
    ThreadAccess { memory, thread }: ThreadAccess,
    Query(query): Query<MessagesQuery>,
) -> Result<Json<MessagesPage>, ApiError> {
    let storage = memory.storage();
    let per_page = match query.per_page {
        None => MAX_PER_PAGE,
        asked => per_page(asked)?,
    };
    let page = query.page.unwrap_or(0);
    let list = storage
        .list_messages(
            &thread.id,
            Some(&thread.resource_id),
            Selection::page(page, per_page),
        )
        .await
        .map_err(storage_error)?;
    let version = match query.version.as_deref() {
        None => Version::default(),
        Some(text) => Version::parse(text).ok_or_else(|| {
            ApiError::invalid_query(format!("version must be v5 or v6, not {text:?}"))
        })?,
    };
    // A pending approval or suspension shows as the chat stream showed it: from the named
    // agent's runs, or from any agent's.
    let mut pending = Vec::new();
    let agents: Vec<Agent> = match query.agent_id.as_deref() {
        Some(id) => vec![crate::lookup::agent(&state, id).await?],
        None => state.kestrel.agents().cloned().collect(),
    };
    for agent in &agents {
        pending
            .extend(history::thread_pending_calls(agent, &thread.id, &thread.resource_id).await?);
    }
    let ui_messages = history::ui_messages(&list.messages, &pending, version);
    Ok(Json(MessagesPage {
        messages: crate::db_messages::db_messages(&list.messages),
        ui_messages,
        page,
        per_page,
        total: list.total,
        has_more: list.has_more,
    }))
}

/// The storage scope of the thread's working memory.
fn working_scope(memory: &Memory, thread: &Thread) -> (Scope, WorkingMemoryScope) {
    let kind = memory
        .working_memory()
        .map(|w| w.scope_kind())
        .unwrap_or_default();
    let scope = match kind {
        WorkingMemoryScope::Thread => Scope::thread(&thread.id, &thread.resource_id),
        WorkingMemoryScope::Resource => Scope::resource(&thread.resource_id),
    };
    (scope, kind)
}

async fn get_working_memory(
    ThreadAccess { memory, thread }: ThreadAccess,
) -> Result<Json<ThreadWorkingMemory>, ApiError> {
    let storage = memory.storage();
    let (scope, kind) = working_scope(&memory, &thread);
    let content = storage
        .get_working_memory(&scope)
        .await
        .map_err(storage_error)?;
    Ok(Json(ThreadWorkingMemory::new(&memory, kind, content)))
}

/// Body of a working memory update: the whole new content.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WorkingMemoryBody {
    #[schemars(length(max = crate::wire::MAX_PROMPT_LEN))]
    working_memory: String,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
}

async fn set_working_memory(
    State(state): Shared,
    caller: Caller,
    Path(thread_id): Path<String>,
    BodyFirst(Body(body), Query(query)): BodyFirst<
        Body<WorkingMemoryBody>,
        Query<ThreadQueryParams>,
    >,
) -> Result<Json<WorkingMemoryUpdated>, ApiError> {
    check_agent(&state, query.agent_id.as_deref()).await?;
    let memory = memory(&state)?;
    let Some(options) = memory.working_memory() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "working_memory_disabled",
            "this memory keeps no working memory: enable it with MemoryBuilder::working_memory",
        ));
    };
    if options.schema_value().is_some()
        && !serde_json::from_str::<Value>(&body.working_memory).is_ok_and(|v| v.is_object())
    {
        return Err(ApiError::invalid(
            "workingMemory must be a JSON object (as text): this working memory has a schema",
        ));
    }
    let storage = memory.storage();
    let resource = body.resource_id.or(query.resource_id);
    let thread = visible_thread(storage.as_ref(), &caller, &thread_id, resource.as_deref()).await?;
    if memory.is_read_only() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "read_only",
            "this memory is read-only",
        ));
    }
    let (scope, _) = working_scope(memory, &thread);
    storage
        .set_working_memory(&scope, &body.working_memory)
        .await
        .map_err(storage_error)?;
    Ok(Json(WorkingMemoryUpdated { success: true }))
}

/// Query of the observations.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ObservationsQuery {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    thread_id: String,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    resource_id: Option<String>,
}

async fn observations(
    State(state): Shared,
    caller: Caller,
    Query(query): Query<ObservationsQuery>,
) -> Result<Json<Observations>, ApiError> {
    let (memory, thread) = thread_of(
        &state,
        &caller,
        &query.thread_id,
        query.agent_id.as_deref(),
        query.resource_id.as_deref(),
    )
    .await?;
    let storage = memory.storage();
    let Some(kind) = memory.observation_scope() else {
        return Ok(Json(Observations {
            enabled: false,
            scope: None,
            observations: Vec::new(),
        }));
    };
    let scope = match kind {
        ObservationScope::Thread => Scope::thread(&thread.id, &thread.resource_id),
        ObservationScope::Resource => Scope::resource(&thread.resource_id),
    };
    let observations = storage
        .list_observations(&scope)
        .await
        .map_err(storage_error)?
        .into_iter()
        .map(StoredObservation::from)
        .collect();
    Ok(Json(Observations {
        enabled: true,
        scope: Some(observation_scope_name(kind)),
        observations,
    }))
}
