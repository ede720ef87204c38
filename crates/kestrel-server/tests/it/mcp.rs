//! MCP servers under `/api/mcp`: the Streamable HTTP endpoint in both eras (driven by
//! Kestrel's own MCP client), Mastra's REST routes, and the server's security on them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_core::kestrel::Kestrel;
use kestrel_core::tool::{ToolContext, create_tool};
use kestrel_mcp::{McpClient, McpServer, McpServerConfig, Protocol};
use kestrel_server::{ServeError, Server};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, Serialize, schemars::JsonSchema)]
struct Sum {
    a: i64,
    b: i64,
}

fn fixture() -> McpServer {
    let add = create_tool("add")
        .description("Adds two integers")
        .execute(|n: Sum, _ctx| async move { Ok(json!({"sum": n.a + n.b})) });
    let wipe = create_tool("wipe")
        .description("Wipes everything")
        .require_approval(true)
        .execute(|_: Sum, _ctx| async move { Ok("wiped".to_owned()) });
    McpServer::builder("tools")
        .name("Kestrel tools")
        .version("1.2.3")
        .instructions("Arithmetic.")
        .tool(add)
        .tool(wipe)
        .build()
        .unwrap()
}

async fn serve(configure: impl FnOnce(Server) -> Server) -> String {
    let server = configure(Server::new(Kestrel::builder().build().unwrap()).mcp_server(fixture()));
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}")
}

async fn add_over_mcp(config: McpServerConfig) -> Result<Value, String> {
    let mcp = McpClient::builder().server("k", config).build().unwrap();
    let tools = mcp.list_tools().await.map_err(|e| e.to_string())?;
    let add = tools.iter().find(|t| t.id() == "k_add").unwrap();
    add.execute(json!({"a": 2, "b": 40}), ToolContext::standalone("k_add"))
        .await
        .map_err(|e| e.message().to_owned())
}

#[tokio::test]
async fn the_mcp_endpoint_answers_both_eras() {
    let base = serve(|s| s).await;
    let url = format!("{base}/api/mcp/tools/mcp");
    for protocol in [Protocol::Auto, Protocol::Stateless, Protocol::Legacy] {
        let answer = add_over_mcp(McpServerConfig::http(&url).protocol(protocol.clone())).await;
        assert_eq!(answer, Ok(json!({"sum": 42})), "{protocol:?}");
    }
}

#[tokio::test]
async fn the_mcp_endpoint_needs_the_servers_token() {
    let base = serve(|s| s.token("sesame")).await;
    let url = format!("{base}/api/mcp/tools/mcp");
    let refused = add_over_mcp(McpServerConfig::http(&url)).await.unwrap_err();
    assert!(refused.contains("\"k\""), "{refused}");
    let wrong = add_over_mcp(McpServerConfig::http(&url).bearer_token("guess")).await;
    assert!(wrong.is_err(), "{wrong:?}");
    assert_eq!(
        add_over_mcp(McpServerConfig::http(&url).bearer_token("sesame")).await,
        Ok(json!({"sum": 42}))
    );
}

#[tokio::test]
async fn a_token_pinned_to_a_resource_cannot_use_the_mcp_routes() {
    let base = serve(|s| s.token("sesame").resource_token("alice-token", "alice")).await;
    let url = format!("{base}/api/mcp/tools/mcp");
    let refused = add_over_mcp(McpServerConfig::http(&url).bearer_token("alice-token")).await;
    assert!(refused.is_err(), "{refused:?}");
    let response = reqwest::Client::new()
        .get(format!("{base}/api/mcp/tools/tools"))
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let response = reqwest::Client::new()
        .get(format!("{base}/api/mcp/tools/tools"))
        .bearer_auth("sesame")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn the_mcp_endpoint_refuses_foreign_hosts_and_origins() {
    let base = serve(|s| s).await;
    let url = format!("{base}/api/mcp/tools/mcp");
    let client = reqwest::Client::new();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "1"}}
    });
    let post = |host: Option<&str>, origin: Option<&str>| {
        let mut request = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(post(None, None).await.unwrap().status(), 200);
    // A page on another host rebinding its name to this server reaches nothing.
    assert_eq!(
        post(Some("evil.example"), None).await.unwrap().status(),
        421
    );
    // A cross-origin write from a browser is refused.
    assert_eq!(
        post(None, Some("https://evil.example"))
            .await
            .unwrap()
            .status(),
        403
    );
    // A body over the server's limit is refused before anything reads it.
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": "x".repeat(2 << 20)}});
    let response = client
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
}

#[tokio::test]
async fn the_registry_and_tool_routes_answer_in_mastras_shapes() {
    let base = serve(|s| s).await;
    let client = reqwest::Client::new();
    let get = |path: &str| {
        let client = client.clone();
        let url = format!("{base}/api{path}");
        async move {
            let response = client.get(url).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, list) = get("/mcp/v0/servers").await;
    assert_eq!(status, 200);
    assert_eq!(list["total_count"], 1);
    assert_eq!(list["next"], Value::Null);
    let server = &list["servers"][0];
    assert_eq!(server["id"], "tools");
    assert_eq!(server["name"], "Kestrel tools");
    assert_eq!(server["version_detail"]["version"], "1.2.3");
    assert_eq!(server["version_detail"]["is_latest"], true);
    assert_eq!(server["transports"], json!(["streamable-http"]));
    let (status, page) = get("/mcp/v0/servers?page=1&perPage=1").await;
    assert_eq!(status, 200);
    assert_eq!(page["servers"], json!([]));
    // Mastra's older offset and limit; page and perPage win when both are given.
    let (status, page) = get("/mcp/v0/servers?offset=1&limit=5").await;
    assert_eq!((status, &page["servers"]), (200, &json!([])));
    let (status, page) = get("/mcp/v0/servers?page=0&offset=1").await;
    assert_eq!(status, 200);
    assert_eq!(page["servers"][0]["id"], "tools");

    let (status, detail) = get("/mcp/v0/servers/tools").await;
    assert_eq!(status, 200);
    assert_eq!(detail["description"], "Arithmetic.");
    assert_eq!(
        detail["remotes"],
        json!([{"transport_type": "streamable-http", "url": "/api/mcp/tools/mcp"}])
    );
    assert_eq!(get("/mcp/v0/servers/tools?version=1.2.3").await.0, 200);
    assert_eq!(get("/mcp/v0/servers/tools?version=9").await.0, 404);
    assert_eq!(get("/mcp/v0/servers/nope").await.0, 404);

    let (status, tools) = get("/mcp/tools/tools").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "wipe"]);
    let (status, add) = get("/mcp/tools/tools/add").await;
    assert_eq!(status, 200);
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(add["toolType"], "tool");
    assert_eq!(get("/mcp/tools/tools/nope").await.0, 404);

    let execute = |tool: &str, body: Value| {
        let client = client.clone();
        let url = format!("{base}/api/mcp/tools/tools/{tool}/execute");
        async move {
            let response = client.post(url).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    assert_eq!(
        execute("add", json!({"data": {"a": 1, "b": 2}})).await,
        (200, json!({"result": {"sum": 3}}))
    );
    let (status, refused) = execute("add", json!({"data": {"a": "one"}})).await;
    assert_eq!(status, 400, "{refused}");
    // A body the route does not know is refused as every route's is.
    assert_eq!(execute("add", json!({"data": {}, "extra": 1})).await.0, 422);
    assert_eq!(execute("nope", json!({"data": {}})).await.0, 404);
    let (status, body) = execute("add", json!([1, 2])).await;
    assert_eq!(status, 422, "{body}");
    let (status, refused) = execute("wipe", json!({"data": {"a": 1, "b": 2}})).await;
    assert_eq!(status, 403);
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("approval")
            || refused.to_string().contains("approval"),
        "{refused}"
    );
}

#[tokio::test]
async fn two_mcp_servers_with_one_id_are_refused_when_bound() {
    let server = Server::new(Kestrel::builder().build().unwrap())
        .mcp_server(fixture())
        .mcp_server(fixture());
    let error = server
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ServeError::DuplicateMcpServer { id } if id == "tools"),
        "{error}"
    );
}
