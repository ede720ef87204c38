//! Kestrel's client against `@modelcontextprotocol/server-everything` (the reference server of
//! the `initialize` era, from compat-tests/node_modules), over stdio and Streamable HTTP: its
//! tools listed under its name, text, structured and image results, and `Auto` falling back to
//! `initialize`. Needs Node and `npm ci` in compat-tests; runs when KESTREL_TEST_JS=1 (CI sets
//! it), else skips saying so.

use std::path::PathBuf;
use std::time::Duration;

use kestrel_core::tool::{SharedTool, ToolContext};
use kestrel_mcp::{McpClient, McpServerConfig, Protocol, ServerState};
use serde_json::{Value, json};

/// server-everything's command, when the JS tests are on.
pub fn everything() -> Option<PathBuf> {
    if std::env::var("KESTREL_TEST_JS").as_deref() != Ok("1") {
        eprintln!("skipping: KESTREL_TEST_JS=1 runs the tests against server-everything");
        return None;
    }
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../compat-tests/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run `npm ci` in compat-tests",
        bin.display()
    );
    Some(bin)
}

const TOOLS: [&str; 13] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
];

async fn call(tools: &[SharedTool], name: &str, input: Value) -> Result<Value, String> {
    let tool = tools
        .iter()
        .find(|t| t.id() == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    tool.execute(input, ToolContext::standalone(name))
        .await
        .map_err(|e| e.message().to_owned())
}

async fn check(mcp: &McpClient) {
    let tools = mcp.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.id()).collect();
    for tool in TOOLS {
        let id = format!("everything_{}", tool.replace('.', "_"));
        assert!(names.contains(&id.as_str()), "{id} is not among {names:?}");
    }
    assert_eq!(
        call(&tools, "everything_echo", json!({"message": "hi"})).await,
        Ok(json!("Echo: hi"))
    );
    assert_eq!(
        call(&tools, "everything_get-sum", json!({"a": 2, "b": 3})).await,
        Ok(json!("The sum of 2 and 3 is 5."))
    );
    // Structured content is the output; the text block beside it is for older clients.
    let weather = call(
        &tools,
        "everything_get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await
    .unwrap();
    assert_eq!(weather["conditions"], "Light rain / drizzle", "{weather}");
    // An image comes back as MCP's content blocks.
    let image = call(&tools, "everything_get-tiny-image", json!({}))
        .await
        .unwrap();
    let blocks = image.as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "image" && b["mimeType"] == "image/png"),
        "{image}"
    );
    // The server's schema is checked before the call leaves.
    let tool = tools
        .iter()
        .find(|t| t.id() == "everything_get-sum")
        .unwrap();
    assert_eq!(tool.input_schema()["required"], json!(["a", "b"]));
    let status = &mcp.status()[0];
    assert_eq!(status.state, ServerState::Connected);
    // server-everything is of the `initialize` era: `Auto` fell back to it.
    assert_eq!(status.protocol_version.as_deref(), Some("2025-11-25"));

    // Its resources and prompts.
    let resources = mcp.list_resources("everything").await.unwrap();
    let document = resources
        .iter()
        .find(|r| r.uri.starts_with("demo://resource/static/document/"))
        .unwrap_or_else(|| panic!("no static document among {resources:?}"));
    let read = mcp
        .read_resource("everything", &document.uri)
        .await
        .unwrap();
    let contents = serde_json::to_value(&read.contents).unwrap();
    assert_eq!(contents[0]["uri"], json!(document.uri), "{contents}");
    assert!(
        contents[0]["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{contents}"
    );
    let prompts = mcp.list_prompts("everything").await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"simple-prompt") && names.contains(&"args-prompt"),
        "{names:?}"
    );
    let filled = mcp
        .get_prompt(
            "everything",
            "args-prompt",
            serde_json::Map::from_iter([("city".to_owned(), json!("Lisbon"))]),
        )
        .await;
    let filled = serde_json::to_value(filled.unwrap().messages).unwrap();
    assert!(filled.to_string().contains("Lisbon"), "{filled}");
    // An unknown server is named.
    let error = mcp.list_prompts("nope").await.unwrap_err();
    assert!(error.to_string().contains("\"nope\""), "{error}");
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let Some(bin) = everything() else { return };
    for protocol in [Protocol::Auto, Protocol::Legacy] {
        let mcp = McpClient::builder()
            .server(
                "everything",
                McpServerConfig::stdio(bin.to_string_lossy())
                    .arg("stdio")
                    .protocol(protocol),
            )
            .build()
            .unwrap();
        check(&mcp).await;
        mcp.disconnect().await;
    }
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let Some(bin) = everything() else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(&bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "server-everything did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for protocol in [Protocol::Auto, Protocol::Legacy] {
        let mcp = McpClient::builder()
            .server(
                "everything",
                McpServerConfig::http(format!("http://127.0.0.1:{port}/mcp")).protocol(protocol),
            )
            .build()
            .unwrap();
        check(&mcp).await;
        mcp.disconnect().await;
    }
    child.kill().await.unwrap();
}
