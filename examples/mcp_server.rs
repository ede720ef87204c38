//! Kestrel's tools, agents and workflows served to MCP clients (Mastra's `MCPServer`).
//!
//! `cargo run -p kestrel --features mcp,server --example mcp_server` mounts the server at
//! `/api/mcp/kitchen/mcp` of a Kestrel server on a free loopback port, calls it with Kestrel's
//! own MCP client (as an IDE or another framework would), and exits. Add `-- --serve` to keep
//! serving on 127.0.0.1:4111 (then point any MCP client at
//! `http://127.0.0.1:4111/api/mcp/kitchen/mcp`), or `-- --stdio` to serve on stdin and stdout
//! for a client that starts this program itself.
//!
//! What is served: the tool `convert` under its own name, the agent `chef` as `ask_chef`
//! (`{message}` in, its answer out) and the workflow `scale` as `run_scale`.

use std::sync::Arc;

use kestrel::kestrel::Kestrel;
use kestrel::mcp::{McpClient, McpServer, McpServerConfig};
use kestrel::prelude::*;
use kestrel::server::Server;
use kestrel::workflow::{Workflow, create_step};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Input of `convert`.
#[derive(Deserialize, JsonSchema)]
struct Grams {
    /// Grams of flour.
    grams: f64,
}

/// The input and output of the `scale` workflow.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Recipe {
    /// Servings.
    servings: u32,
}

fn mcp_server() -> Result<McpServer, Box<dyn std::error::Error>> {
    let convert = create_tool("convert")
        .description("Converts grams of flour to cups")
        .execute(|input: Grams, _ctx| async move { Ok(json!({"cups": input.grams / 125.0})) });
    let chef = Agent::builder("chef")
        .description("Answers cooking questions")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Rest the dough for an hour.")
        })))
        .build()?;
    let scale = Workflow::builder("scale")
        .description("Doubles a recipe")
        .then(create_step("double").execute(|r: Recipe, _ctx| async move {
            Ok(Recipe {
                servings: r.servings * 2,
            })
        }))
        .commit()?;
    Ok(McpServer::builder("kitchen")
        .name("Kitchen")
        .instructions("Cooking tools, a chef to ask and a recipe scaler.")
        .tool(convert)
        .agent(chef)
        .workflow(scale)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = mcp_server()?;
    if std::env::args().any(|arg| arg == "--stdio") {
        server.serve_stdio().await?;
        return Ok(());
    }
    let http = Server::new(Kestrel::builder().build()?).mcp_server(server);
    let keep_serving = std::env::args().any(|arg| arg == "--serve");
    let addr = if keep_serving {
        "127.0.0.1:4111"
    } else {
        "127.0.0.1:0"
    };
    let (listener, bound) = http.bind(addr.parse()?).await?;
    let url = format!("http://{bound}/api/mcp/kitchen/mcp");
    println!("MCP server: {url}");
    if keep_serving {
        http.serve_on(listener, bound).await?;
        return Ok(());
    }
    let serving = tokio::spawn(http.serve_on(listener, bound));

    // A client, as an IDE would be: list the tools, call each kind.
    let mcp = McpClient::builder()
        .server("kitchen", McpServerConfig::http(&url))
        .build()?;
    let tools = mcp.list_tools().await?;
    for tool in &tools {
        println!("  {}: {}", tool.id(), tool.description());
    }
    for (name, input) in [
        ("kitchen_convert", json!({"grams": 250})),
        (
            "kitchen_ask_chef",
            json!({"message": "How long should bread dough rest?"}),
        ),
        ("kitchen_run_scale", json!({"servings": 4})),
    ] {
        let tool = tools
            .iter()
            .find(|t| t.id() == name)
            .ok_or("a tool is missing")?;
        let output = tool
            .execute(input, ToolContext::standalone(name))
            .await
            .map_err(|e| e.message().to_owned())?;
        println!("{name} -> {output}");
    }
    mcp.disconnect().await;
    serving.abort();
    Ok(())
}
