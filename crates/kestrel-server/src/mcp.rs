//! MCP servers ([`kestrel_mcp::McpServer`]) given to the server with
//! [`Server::mcp_server`](crate::Server::mcp_server), under Mastra's routes:
//!
//! - `/api/mcp/{serverId}/mcp`: the Streamable HTTP endpoint, both protocol eras (2026-07-28
//!   stateless, and `initialize` with sessions), behind the same token, Host and Origin checks
//!   and body limit as every route;
//! - `GET /api/mcp/v0/servers` and `GET /api/mcp/v0/servers/{id}`: the registry, in the MCP
//!   registry's shape Mastra answers with;
//! - `GET /api/mcp/{serverId}/tools`, `…/tools/{toolId}` and `POST …/tools/{toolId}/execute`:
//!   a server's tools, and one run by hand (input checked; a tool that needs approval is
//!   refused, as over MCP).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::tool::ToolCallError;
use kestrel_mcp::{McpServer, ToolCallFailure};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::extract::Query;
use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

/// The MCP servers a [`crate::Server`] serves, by id, and when they were given.
#[derive(Debug, Clone, Default)]
pub(crate) struct McpServers {
    pub(crate) servers: BTreeMap<String, McpServer>,
    /// When the server was built: the registry's `release_date`.
    pub(crate) released: String,
}

impl McpServers {
    fn get(&self, id: &str) -> Result<&McpServer, ApiError> {
        self.servers.get(id).ok_or_else(|| {
            ApiError::not_found(format!(
                "MCP server {id:?} not found; served: {}",
                self.servers.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

/// Refuses (403) a caller whose token is pinned to a resource on every MCP route: a tool run
/// over MCP, or an agent asked there, is not scoped to one resource, so such a token would
/// reach past its resource.
pub(crate) async fn unpinned_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let pinned = request
        .extensions()
        .get::<crate::auth::Caller>()
        .is_some_and(|caller| caller.resource.is_some());
    if pinned {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a token pinned to a resource cannot use the MCP routes",
        )
        .into_response();
    }
    next.run(request).await
}

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/mcp/v0/servers",
            list_servers,
            Doc::json("mcp", "List the MCP servers (the MCP registry's shape)")
                .query::<ListQuery>()
                .returns::<ServerList>(),
        )
        .get(
            "/mcp/v0/servers/{id}",
            get_server,
            Doc::json("mcp", "Describe an MCP server and where to reach it")
                .query::<VersionQuery>()
                .returns::<ServerDetail>(),
        )
        .get(
            "/mcp/{server_id}/tools",
            list_tools,
            Doc::json("mcp", "List an MCP server's tools").returns::<ToolList>(),
        )
        .get(
            "/mcp/{server_id}/tools/{tool_id}",
            get_tool,
            Doc::json("mcp", "Describe one of an MCP server's tools").returns::<ToolInfo>(),
        )
        .post(
            "/mcp/{server_id}/tools/{tool_id}/execute",
            execute_tool,
            Doc::json("mcp", "Run one of an MCP server's tools")
                .body::<ExecuteBody>()
                .returns::<ToolOutput>(),
        )
}

/// `GET /mcp/v0/servers`: a page of servers (`page` and `perPage`, or Mastra's older `offset`
/// and `limit`, read when neither `page` nor `perPage` is given).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    /// The page, from 0 (with `perPage`).
    #[schemars(range(max = 100_000))]
    page: Option<u32>,
    /// Servers per page (default 100).
    #[schemars(range(min = 1, max = 1000))]
    per_page: Option<u32>,
    /// How many servers to skip (with `limit`; when `page` and `perPage` are left out).
    #[schemars(range(max = 100_000))]
    offset: Option<u32>,
    /// The most servers to give (when `page` and `perPage` are left out).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
}

/// `GET /mcp/v0/servers/{id}?version=`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct VersionQuery {
    /// The version asked for: another than the server's answers 404.
    #[schemars(length(max = 100))]
    version: Option<String>,
}

/// A page of the registry.
#[derive(Debug, Serialize, JsonSchema)]
struct ServerList {
    /// The servers, by id.
    servers: Vec<ServerEntry>,
    /// How many servers there are in all.
    total_count: usize,
    /// The query of the next page, when there is one.
    next: Option<String>,
}

/// A server as the registry lists it.
#[derive(Debug, Serialize, JsonSchema)]
struct ServerEntry {
    /// Its id (what the routes take).
    id: String,
    /// Its name.
    name: String,
    /// Its version.
    version_detail: VersionDetail,
    /// How to reach it: `streamable-http`.
    transports: Vec<String>,
}

/// A server's version.
#[derive(Debug, Serialize, JsonSchema)]
struct VersionDetail {
    /// The version.
    version: String,
    /// When this server started serving it (RFC 3339).
    release_date: String,
    /// Always true: one version is served.
    is_latest: bool,
}

/// A server described, with where to reach it.
#[derive(Debug, Serialize, JsonSchema)]
struct ServerDetail {
    #[serde(flatten)]
    entry: ServerEntry,
    /// What it serves.
    description: String,
    /// No package: it is served here.
    package_canonical: Option<String>,
    /// No package: it is served here.
    packages: Vec<Value>,
    /// Its endpoints.
    remotes: Vec<Remote>,
}

/// An endpoint of a server.
#[derive(Debug, Serialize, JsonSchema)]
struct Remote {
    /// `streamable-http`.
    transport_type: String,
    /// The endpoint's path on this server.
    url: String,
}

/// A server's tools.
#[derive(Debug, Serialize, JsonSchema)]
struct ToolList {
    /// The tools, as `tools/list` gives them.
    tools: Vec<ToolInfo>,
}

/// A tool as Mastra's route describes it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ToolInfo {
    /// The tool's name (what `…/tools/{toolId}` takes).
    id: String,
    /// The tool's name.
    name: String,
    /// What it does.
    description: Option<String>,
    /// The JSON schema of its input.
    input_schema: Value,
    /// The JSON schema of its structured output, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
    /// `agent` for `ask_<agent>`, `workflow` for `run_<workflow>`, else `tool`.
    tool_type: String,
}

/// `POST …/tools/{toolId}/execute` (Mastra's `{data}`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecuteBody {
    /// The tool's input.
    #[serde(default)]
    data: Value,
}

/// What the tool gave.
#[derive(Debug, Serialize, JsonSchema)]
struct ToolOutput {
    /// The tool's output.
    result: Value,
}

fn entry(servers: &McpServers, server: &McpServer) -> ServerEntry {
    ServerEntry {
        id: server.id().to_owned(),
        name: server.name().to_owned(),
        version_detail: VersionDetail {
            version: server.version().to_owned(),
            release_date: servers.released.clone(),
            is_latest: true,
        },
        transports: vec!["streamable-http".to_owned()],
    }
}

/// The most servers a page gives when the query says nothing.
const DEFAULT_PAGE: u32 = 100;

async fn list_servers(State(state): Shared, Query(query): Query<ListQuery>) -> Json<ServerList> {
    let servers = &state.mcp;
    let (offset, limit, paged) = match (query.page, query.per_page) {
        (None, None) => (
            query.offset.unwrap_or(0),
            query.limit.unwrap_or(DEFAULT_PAGE),
            false,
        ),
        (page, per_page) => {
            let per_page = per_page.unwrap_or(DEFAULT_PAGE);
            (page.unwrap_or(0).saturating_mul(per_page), per_page, true)
        }
    };
    let total_count = servers.servers.len();
    let listed: Vec<ServerEntry> = servers
        .servers
        .values()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|server| entry(servers, server))
        .collect();
    let end = offset as usize + listed.len();
    let next = (end < total_count).then(|| {
        if paged {
            format!("page={}&perPage={limit}", offset / limit + 1)
        } else {
            format!("offset={end}&limit={limit}")
        }
    });
    Json(ServerList {
        servers: listed,
        total_count,
        next,
    })
}

async fn get_server(
    State(state): Shared,
    Path(id): Path<String>,
    Query(query): Query<VersionQuery>,
) -> Result<Json<ServerDetail>, ApiError> {
    let server = state.mcp.get(&id)?;
    if let Some(version) = query.version.filter(|v| v != server.version()) {
        return Err(ApiError::not_found(format!(
            "MCP server {id:?} serves version {}, not {version}",
            server.version()
        )));
    }
    Ok(Json(ServerDetail {
        entry: entry(&state.mcp, server),
        description: server.instructions().unwrap_or_default().to_owned(),
        package_canonical: None,
        packages: Vec::new(),
        remotes: vec![Remote {
            transport_type: "streamable-http".to_owned(),
            url: format!("/api/mcp/{}/mcp", server.id()),
        }],
    }))
}

fn tool_info(tool: &kestrel_mcp::rmcp::model::Tool) -> ToolInfo {
    let tool_type = if tool.name.starts_with("ask_") {
        "agent"
    } else if tool.name.starts_with("run_") {
        "workflow"
    } else {
        "tool"
    };
    ToolInfo {
        id: tool.name.to_string(),
        name: tool.name.to_string(),
        description: tool.description.as_ref().map(|d| d.to_string()),
        input_schema: Value::Object((*tool.input_schema).clone()),
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone())),
        tool_type: tool_type.to_owned(),
    }
}

async fn list_tools(
    State(state): Shared,
    Path(server_id): Path<String>,
) -> Result<Json<ToolList>, ApiError> {
    let server = state.mcp.get(&server_id)?;
    Ok(Json(ToolList {
        tools: server.tools().iter().map(tool_info).collect(),
    }))
}

async fn get_tool(
    State(state): Shared,
    Path((server_id, tool_id)): Path<(String, String)>,
) -> Result<Json<ToolInfo>, ApiError> {
    let server = state.mcp.get(&server_id)?;
    server
        .tools()
        .iter()
        .find(|tool| tool.name == tool_id)
        .map(|tool| Json(tool_info(tool)))
        .ok_or_else(|| {
            ApiError::not_found(format!("MCP server {server_id:?} has no tool {tool_id:?}"))
        })
}

async fn execute_tool(
    State(state): Shared,
    Path((server_id, tool_id)): Path<(String, String)>,
    Body(body): Body<ExecuteBody>,
) -> Result<Json<ToolOutput>, ApiError> {
    let server = state.mcp.get(&server_id)?;
    let input = if body.data.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        body.data
    };
    match server.call(&tool_id, input).await {
        Ok(result) => Ok(Json(ToolOutput { result })),
        Err(ToolCallFailure::Input(error @ ToolCallError::UnknownTool { .. })) => {
            Err(ApiError::not_found(error.to_string()))
        }
        // 400, as Mastra's route answers an input the tool's schema refuses.
        Err(ToolCallFailure::Input(error)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            error.to_string(),
        )),
        Err(failure @ ToolCallFailure::Failed { .. }) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "tool_error",
            failure.to_string(),
        )),
        Err(failure) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_executable",
            failure.to_string(),
        )),
    }
}
