//! MCP (the Model Context Protocol) for Kestrel, in both directions and both protocol eras.
//!
//! - [`McpClient`] gives agents the tools of MCP servers (Mastra's `MCPClient`): each named
//!   server is a child process spoken to over stdio, or a Streamable HTTP endpoint, and each
//!   of its tools becomes a Kestrel [`Tool`](kestrel_core::tool::Tool) named
//!   `<server>_<tool>`. An MCP tool is a tool like any other: approval policies, suspend and
//!   resume, abort (which cancels the MCP request), timeouts, the event stream.
//! - [`McpServer`] serves chosen Kestrel tools, agents (`ask_<agent>`, input `{message}`) and
//!   workflows (`run_<workflow>`, the workflow's input schema) to any MCP client (Mastra's
//!   `MCPServer`), over stdio ([`McpServer::serve_stdio`]) or Streamable HTTP
//!   ([`McpServer::http_service`], which `kestrel-server` mounts at
//!   `/api/mcp/{serverId}/mcp`).
//!
//! Both eras of the protocol are spoken: the stateless 2026-07-28 revision (`server/discover`,
//! per-request `_meta`) and the `initialize` era (2025-11-25 and older). A client negotiates
//! ([`Protocol::Auto`], the default: it asks `server/discover` and falls back to
//! `initialize`) or is pinned per server; a server answers both on the same endpoint.
//!
//! The protocol itself is the official Rust SDK, [`rmcp`], re-exported so that an application
//! uses the same version as Kestrel (two versions would mean two `Tool` types).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kestrel_mcp::{McpClient, McpServerConfig};
//!
//! let mcp = McpClient::builder()
//!     .server(
//!         "everything",
//!         McpServerConfig::stdio("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
//!     )
//!     .server("weather", McpServerConfig::http("http://127.0.0.1:8080/mcp"))
//!     .build()?;
//! let tools = mcp.list_tools().await?; // `everything_echo`, `weather_forecast`, ...
//! # let _ = tools; Ok(()) }
//! ```

pub mod client;
mod convert;
mod error;
pub mod server;

pub use client::{
    McpClient, McpClientBuilder, McpElicitation, McpServerConfig, McpTool, PresetAnswers, Protocol,
    ServerState, ServerStatus, ToolsWithErrors,
};
pub use error::{McpConfigError, McpError};
pub use rmcp;
pub use server::{McpServer, McpServerBuildError, McpServerBuilder, ToolCallFailure};
