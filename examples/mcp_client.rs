//! An agent with the tools of an MCP server (Mastra's `MCPClient`), on the scripted model.
//!
//! `cargo run -p kestrel --features mcp --example mcp_client`
//!
//! The server is `@modelcontextprotocol/server-everything` when `MCP_SERVER_EVERYTHING` names
//! its command (after `npm i @modelcontextprotocol/server-everything`:
//! `MCP_SERVER_EVERYTHING=node_modules/.bin/mcp-server-everything`). Without it, this program
//! starts itself again as a small Kestrel MCP server on stdio (`--serve`), so it runs
//! anywhere. Either way the tools reach the agent as `<server>_<tool>`.

use std::sync::Arc;

use kestrel::mcp::{McpClient, McpServer, McpServerConfig};
use kestrel::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Input of the echo tool.
#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// What to echo.
    message: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--serve") {
        // The server side: one tool, `echo`, as server-everything has (its answer too).
        let echo = create_tool("echo")
            .description("Echoes back the input")
            .execute(|input: Echo, _ctx| async move { Ok(format!("Echo: {}", input.message)) });
        McpServer::builder("echo")
            .tool(echo)
            .build()?
            .serve_stdio()
            .await?;
        return Ok(());
    }

    let server = match std::env::var("MCP_SERVER_EVERYTHING") {
        Ok(command) => McpServerConfig::stdio(command).arg("stdio"),
        Err(_) => McpServerConfig::stdio(std::env::current_exe()?.to_string_lossy()).arg("--serve"),
    };
    let mcp = McpClient::builder().server("everything", server).build()?;
    let tools = mcp.list_tools().await?;
    println!(
        "tools: {}",
        tools.iter().map(|t| t.id()).collect::<Vec<_>>().join(", ")
    );

    // The scripted model calls the server's echo tool, then answers with what it said.
    let model = ScriptedModel::new()
        .respond(ScriptedResponse::tool_call(
            "c1",
            "everything_echo",
            json!({"message": "hello over MCP"}),
        ))
        .respond(ScriptedResponse::text(
            "The server said: Echo: hello over MCP",
        ));
    let agent = Agent::builder("mcp-user")
        .instructions("Use the MCP server's tools.")
        .model(Arc::new(model))
        .tools(tools)
        .build()?;
    let result = agent.generate("Echo something").await?;
    for record in &result.tool_results {
        println!("{} -> {}", record.tool_name, record.result);
    }
    println!("{}", result.text);
    assert_eq!(result.tool_results[0].result, json!("Echo: hello over MCP"));

    // The child process stops with the client.
    mcp.disconnect().await;
    Ok(())
}
