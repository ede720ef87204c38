//! The MCP servers the instance's agents use ([`kestrel_mcp::McpClient`], given with
//! [`Server::mcp_client`](crate::Server::mcp_client)), for the Studio's MCP page:
//!
//! - `GET /api/mcp-client/servers`: each server's status (state, protocol, server, last error,
//!   last log lines);
//! - `GET /api/mcp-client/servers/{name}/tools`: its tools (connecting first; a server that
//!   cannot be reached is a 502 naming it and why, never an empty list);
//! - `POST /api/mcp-client/servers/{name}/tools/{toolId}/execute`: one call by hand, its input
//!   checked against the tool's schema. A server that asks a question answers `{question}`
//!   (an `McpElicitation` payload); the caller calls again with that `question` and its
//!   `answer` to go on;
//! - `POST /api/mcp-client/servers/{name}/reconnect`: drops the connection and connects anew.
//!
//! They sit behind the same token, Host and Origin checks and body limit as every route, and
//! refuse resource-pinned tokens as the MCP routes do.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::tool::{SharedTool, ToolContext};
use kestrel_mcp::{McpClient, ServerStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};

type Shared = State<Arc<AppState>>;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/mcp-client/servers",
            list_servers,
            Doc::json(
                "mcp",
                "List the MCP servers the instance's agents use, with their status",
            )
            .returns::<ServerStatusList>(),
        )
        .get(
            "/mcp-client/servers/{name}/tools",
            list_tools,
            Doc::json("mcp", "List the tools of an MCP server the agents use")
                .returns::<ClientToolList>(),
        )
        .post(
            "/mcp-client/servers/{name}/tools/{tool_id}/execute",
            execute,
            Doc::json(
                "mcp",
                "Call a tool of an MCP server the agents use, by hand (answering its questions)",
            )
            .body::<ClientExecuteBody>()
            .returns::<ClientExecuteAnswer>(),
        )
        .post(
            "/mcp-client/servers/{name}/reconnect",
            reconnect,
            Doc::json("mcp", "Drop an MCP server's connection and connect again")
                .returns::<ServerStatusList>(),
        )
}

/// The servers' status.
#[derive(Debug, Serialize, JsonSchema)]
struct ServerStatusList {
    /// One per server, by name.
    #[schemars(with = "Vec<Value>")]
    servers: Vec<ServerStatus>,
}

/// A server's tools.
#[derive(Debug, Serialize, JsonSchema)]
struct ClientToolList {
    /// Its tools, as its agents see them.
    tools: Vec<ClientTool>,
}

/// One tool of a server.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ClientTool {
    /// `<server>_<tool>`, the name agents call it by.
    id: String,
    /// Its name on the server.
    name: String,
    /// What it does.
    description: String,
    /// Its input's JSON schema.
    input_schema: Value,
    /// Its output's JSON schema, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<Value>,
}

/// `POST …/execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClientExecuteBody {
    /// The tool's input.
    #[serde(default)]
    data: Value,
    /// The question an earlier call answered with (`{question}`), to go on from.
    #[serde(default)]
    question: Option<Value>,
    /// The answer to that question: `{"action": "accept", "content": {...}}`, or
    /// `{"action": "decline"}` / `{"action": "cancel"}`.
    #[serde(default)]
    answer: Option<Value>,
}

/// What a call by hand gave: its result, or the server's question.
#[derive(Debug, Serialize, JsonSchema)]
struct ClientExecuteAnswer {
    /// The tool's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// The server's question (an `McpElicitation` payload), to answer by calling again.
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<Value>,
}

fn client(state: &AppState) -> Result<&McpClient, ApiError> {
    state.mcp_client.as_ref().ok_or_else(|| {
        ApiError::not_found("this instance's agents use no MCP servers (Server::mcp_client)")
    })
}

fn known(client: &McpClient, name: &str) -> Result<(), ApiError> {
    let names = client.server_names();
    if names.iter().any(|n| n == name) {
        return Ok(());
    }
    Err(ApiError::not_found(format!(
        "no MCP server {name:?}; the agents use: {}",
        names.join(", ")
    )))
}

async fn server_tools(client: &McpClient, name: &str) -> Result<Vec<SharedTool>, ApiError> {
    known(client, name)?;
    client.server_tools(name).await.map_err(|error| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "mcp_unreachable",
            error.to_string(),
        )
    })
}

async fn list_servers(State(state): Shared) -> Result<Json<ServerStatusList>, ApiError> {
    Ok(Json(ServerStatusList {
        servers: client(&state)?.status(),
    }))
}

async fn list_tools(
    State(state): Shared,
    Path(name): Path<String>,
) -> Result<Json<ClientToolList>, ApiError> {
    let tools = server_tools(client(&state)?, &name).await?;
    let prefix = format!("{name}_");
    Ok(Json(ClientToolList {
        tools: tools
            .iter()
            .map(|tool| ClientTool {
                id: tool.id().to_owned(),
                name: tool
                    .id()
                    .strip_prefix(&prefix)
                    .unwrap_or(tool.id())
                    .to_owned(),
                description: tool.description().to_owned(),
                input_schema: tool.input_schema().clone(),
                output_schema: tool.output_schema().cloned(),
            })
            .collect(),
    }))
}

async fn execute(
    State(state): Shared,
    Path((name, tool_id)): Path<(String, String)>,
    Body(body): Body<ClientExecuteBody>,
) -> Result<Json<ClientExecuteAnswer>, ApiError> {
    let tools = server_tools(client(&state)?, &name).await?;
    let tool = tools.iter().find(|t| t.id() == tool_id).ok_or_else(|| {
        ApiError::not_found(format!("MCP server {name:?} has no tool {tool_id:?}"))
    })?;
    let input = if body.data.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        body.data
    };
    let errors = kestrel_core::schema::schema_errors(tool.input_schema(), &input);
    if !errors.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("invalid input for {tool_id}: {}", errors.join("; ")),
        ));
    }
    let mut ctx = ToolContext::standalone(tool_id.clone());
    match (body.question, body.answer) {
        (Some(question), Some(answer)) => {
            ctx = ctx.with_resume_data(answer).with_suspend_payload(question);
        }
        (None, None) => {}
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_input",
                "`question` and `answer` go together: the question a call asked, and its answer",
            ));
        }
    }
    match tool.execute(input, ctx).await {
        Ok(result) => Ok(Json(ClientExecuteAnswer {
            result: Some(result),
            question: None,
        })),
        Err(error) => match error.into_suspension() {
            Ok(question) => Ok(Json(ClientExecuteAnswer {
                result: None,
                question: Some(question),
            })),
            Err(error) => Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "tool_error",
                error.message().to_owned(),
            )),
        },
    }
}

async fn reconnect(
    State(state): Shared,
    Path(name): Path<String>,
) -> Result<Json<ServerStatusList>, ApiError> {
    let client = client(&state)?;
    known(client, &name)?;
    // A failure is in the status, which the answer gives.
    let _ = client.reconnect_server(&name).await;
    Ok(Json(ServerStatusList {
        servers: client.status(),
    }))
}
