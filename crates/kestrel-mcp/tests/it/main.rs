//! kestrel-mcp's tests: a Kestrel MCP client against a Kestrel MCP server, over real
//! Streamable HTTP on loopback, in each protocol era; and against the protocol's reference
//! server (server-everything).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod elicitation;
mod everything;
mod fixture;
mod http;
mod ts_client;
