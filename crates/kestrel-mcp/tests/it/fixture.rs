//! A Kestrel MCP server with a tool, an agent and a workflow, served over HTTP on loopback.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kestrel_core::agent::Agent;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::{ToolError, create_tool};
use kestrel_core::workflow::{Workflow, create_step};
use kestrel_mcp::McpServer;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Sum {
    pub a: i64,
    pub b: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Total {
    pub sum: i64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Nap {
    pub ms: u64,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Greeting {
    pub name: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Booking {
    pub hotel: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Nights {
    pub nights: u32,
}

/// How many `nap` calls were cancelled by their client (each test runs in its own process).
pub static NAPS_CANCELLED: AtomicUsize = AtomicUsize::new(0);

/// Tools `add`, `fail`, `nap` (sleeps, to be cancelled), `delete` (needs approval) and `book`
/// (suspends to ask how many nights); agents `helper` (answers "you said: <message>") and
/// `clerk` (calls `delete`, then answers with its result); workflow `greet` (`{name}` to
/// `{greeting}`).
pub fn server() -> McpServer {
    let add = create_tool("add")
        .description("Adds two integers")
        .execute(|n: Sum, _ctx| async move { Ok(Total { sum: n.a + n.b }) });
    let fail = create_tool("fail")
        .description("Always fails")
        .execute(
            |_: Sum, _ctx| async move { Err::<Total, _>(ToolError::new("it failed, as asked")) },
        );
    let nap = create_tool("nap")
        .description("Sleeps")
        .execute(|n: Nap, ctx| async move {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(n.ms)) => {
                    Ok("rested".to_owned())
                }
                () = ctx.abort_signal().aborted() => {
                    NAPS_CANCELLED.fetch_add(1, Ordering::SeqCst);
                    Err(ToolError::new("cancelled"))
                }
            }
        });
    let delete = create_tool("delete")
        .description("Deletes everything")
        .require_approval(true)
        .execute(|_: Sum, _ctx| async move { Ok("deleted".to_owned()) });
    let book = create_tool("book")
        .description("Books a hotel; asks how many nights")
        .resume_type::<Nights>()
        .execute(|b: Booking, ctx| async move {
            let Some(nights) = ctx.resume_data_as::<Nights>()? else {
                return Err(ctx.suspend(serde_json::json!({"question": "How many nights?"})));
            };
            Ok(format!("{} booked for {} nights", b.hotel, nights.nights))
        });
    let clerk_model = Arc::new(ScriptedModel::from_fn(|req| {
        let result = req.messages.last().and_then(|m| {
            m.parts.iter().find_map(|p| match p {
                kestrel_core::message::Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
        });
        match result {
            Some(result) => ScriptedResponse::text(format!("clerk: {result}")),
            None => {
                ScriptedResponse::tool_call("d1", "delete", serde_json::json!({"a": 1, "b": 2}))
            }
        }
    }));
    let clerk = Agent::builder("clerk")
        .description("Deletes things, once allowed")
        .model(clerk_model)
        .tool(delete.clone())
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let asked = req.messages.last().map(|m| m.text()).unwrap_or_default();
        ScriptedResponse::text(format!("you said: {asked}"))
    }));
    let helper = Agent::builder("helper")
        .description("Repeats what it is told")
        .model(model)
        .build()
        .unwrap();
    let greet = Workflow::builder("greet")
        .description("Greets someone")
        .then(
            create_step("hello").execute(|g: Greeting, _ctx| async move {
                Ok(serde_json::json!({"greeting": format!("hello, {}", g.name)}))
            }),
        )
        .commit()
        .unwrap();
    McpServer::builder("fixture")
        .name("Kestrel fixture")
        .tool(add)
        .tool(fail)
        .tool(nap)
        .tool(delete)
        .tool(book)
        .agent(helper)
        .agent(clerk)
        .workflow(greet)
        .build()
        .unwrap()
}

/// `server` served over Streamable HTTP on a free loopback port; its URL and the token that
/// stops it.
pub async fn serve_http(server: McpServer) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_http_on(server, listener).await
}

/// `server` served over Streamable HTTP on `listener`; its URL and the token that stops it.
pub async fn serve_http_on(
    server: McpServer,
    listener: tokio::net::TcpListener,
) -> (String, CancellationToken) {
    let stop = CancellationToken::new();
    let service = server.http_service(
        rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
            .with_cancellation_token(stop.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let address = listener.local_addr().unwrap();
    let stopped = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stopped.cancelled_owned().await })
            .await
            .unwrap();
    });
    (format!("http://{address}/mcp"), stop)
}
