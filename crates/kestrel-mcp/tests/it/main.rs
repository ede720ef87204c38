//! kestrel-mcp's tests: a Kestrel MCP client against a Kestrel MCP server, over real
//! Streamable HTTP on loopback, in each protocol era.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fixture;
mod http;
