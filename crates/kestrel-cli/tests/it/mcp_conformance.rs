//! The protocol's own conformance suite (`@modelcontextprotocol/conformance` 0.1.16, on the
//! Node 22 that compat-tests installs from npm):
//!
//! - its server scenarios against a Kestrel server's MCP endpoint: the handshake, ping, tools
//!   (text, image, audio, embedded resources, mixed content, errors, progress), elicitation
//!   (with defaults, with enums), JSON Schema 2020-12 kept whole, and DNS-rebinding
//!   protection. The scenarios call tools by fixed names, served here by plain Kestrel tools;
//! - its client scenarios with `kestrel mcp call` as the client: the handshake, a tool call,
//!   and an elicitation accepted with the form's defaults.
//!
//! Not run, as Kestrel does not do what they test: serving resources, prompts, completions,
//! logging levels and sampling (deprecated in 2026-07-28); OAuth; SSE polling and retry.
//!
//! Runs when KESTREL_TEST_JS=1 (CI sets it), else skips saying so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kestrel::kestrel::Kestrel;
use kestrel::mcp::McpServer;
use kestrel::server::Server;
use kestrel::tool::{ToolError, create_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The scenarios run, each against a fresh client of the suite.
const SCENARIOS: [&str; 15] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "dns-rebinding-protection",
];

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV header.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

/// Node 22 and the suite's entry point, from compat-tests.
fn suite() -> Option<(PathBuf, PathBuf)> {
    if std::env::var("KESTREL_TEST_JS").as_deref() != Ok("1") {
        eprintln!("skipping: KESTREL_TEST_JS=1 runs the MCP conformance suite");
        return None;
    }
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../compat-tests/node_modules");
    let node = modules.join("node/bin/node");
    let cli = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "{} has no Node 22 or no @modelcontextprotocol/conformance: run `npm ci` in compat-tests",
        modules.display()
    );
    Some((node, cli))
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Deserialize, JsonSchema)]
struct Asking {
    /// What to ask.
    message: String,
}

/// A tool that asks `schema`'s form (its resume schema) and answers with what it got.
fn asking(name: &str, schema: Value) -> kestrel::tool::FnTool {
    create_tool(name)
        .description("Asks the user, then says what they answered")
        .resume_schema(schema)
        .execute(|_: Nothing, ctx| async move {
            match ctx.resume_data() {
                Some(answer) => Ok(format!(
                    "Elicitation completed: action=accept, content={answer}"
                )),
                None => Err(ctx.suspend(json!({"message": "Please answer the form"}))),
            }
        })
}

/// The tools the scenarios call.
fn conformance_server() -> McpServer {
    let text = create_tool("test_simple_text")
        .description("Returns simple text")
        .execute(|_: Nothing, _ctx| async move {
            Ok("This is a simple text response for testing.".to_owned())
        });
    let image = create_tool("test_image_content")
        .description("Returns an image")
        .execute(|_: Nothing, _ctx| async move {
            Ok(json!([{"type": "image", "data": PNG, "mimeType": "image/png"}]))
        });
    let audio = create_tool("test_audio_content")
        .description("Returns audio")
        .execute(|_: Nothing, _ctx| async move {
            Ok(json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]))
        });
    let resource = json!({
        "type": "resource",
        "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}
    });
    let embedded = {
        let resource = resource.clone();
        create_tool("test_embedded_resource")
            .description("Returns an embedded resource")
            .execute(move |_: Nothing, _ctx| {
                let resource = resource.clone();
                async move { Ok(json!([resource])) }
            })
    };
    let mixed = create_tool("test_multiple_content_types")
        .description("Returns text, an image and a resource")
        .execute(move |_: Nothing, _ctx| {
            let resource = resource.clone();
            async move {
                Ok(json!([
                    {"type": "text", "text": "Multiple content types test:"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    resource
                ]))
            }
        });
    let error = create_tool("test_error_handling")
        .description("Always fails")
        .execute(|_: Nothing, _ctx| async move {
            Err::<String, _>(ToolError::new(
                "This tool intentionally returns an error for testing",
            ))
        });
    let progress = create_tool("test_tool_with_progress")
        .description("Reports progress")
        .execute(|_: Nothing, ctx| async move {
            for step in [0, 50, 100] {
                ctx.writer()
                    .write(
                        json!({"progress": step, "total": 100, "message": format!("step {step}")}),
                    )
                    .await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok("Progress complete".to_owned())
        });
    let elicitation = create_tool("test_elicitation")
        .description("Asks the user for their name and email")
        .resume_schema(json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }))
        .execute(|input: Asking, ctx| async move {
            match ctx.resume_data() {
                Some(answer) => Ok(format!("User response: {answer}")),
                None => Err(ctx.suspend(json!({"message": input.message}))),
            }
        });
    let defaults = asking(
        "test_elicitation_sep1034_defaults",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            }
        }),
    );
    let enums = asking(
        "test_elicitation_sep1330_enums",
        json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}
                ]},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"}
                ]}}
            }
        }),
    );
    let json_schema = create_tool("json_schema_2020_12_tool")
        .description("Tool with JSON Schema 2020-12 features")
        .input_schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"}
            },
            "additionalProperties": false
        }))
        .execute(|input: Value, _ctx| async move { Ok(input) });
    McpServer::builder("conformance")
        .name("Kestrel conformance")
        .tool(text)
        .tool(image)
        .tool(audio)
        .tool(embedded)
        .tool(mixed)
        .tool(error)
        .tool(progress)
        .tool(elicitation)
        .tool(defaults)
        .tool(enums)
        .tool(json_schema)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_protocols_conformance_suite_passes_the_server_scenarios() {
    let Some((node, cli)) = suite() else { return };
    let server = Server::new(Kestrel::builder().build().unwrap()).mcp_server(conformance_server());
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    // `localhost`: the DNS-rebinding scenario checks what a local server accepts.
    let url = format!("http://localhost:{}/api/mcp/conformance/mcp", addr.port());
    let runs = SCENARIOS.map(|scenario| {
        (
            scenario,
            vec!["server", "--url", &url, "--scenario", scenario],
        )
    });
    passes(&node, &cli, &runs).await;
}

/// Runs the suite once per `(scenario, arguments)`, and fails naming every scenario that did
/// not pass, with the suite's report.
async fn passes(node: &Path, cli: &Path, runs: &[(&str, Vec<&str>)]) {
    let mut failed = Vec::new();
    for (scenario, args) in runs {
        let output = tokio::process::Command::new(node)
            .arg(cli)
            .args(args)
            .output()
            .await
            .unwrap();
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let passed = output.status.success() && report.contains(" 0 failed, 0 warnings");
        eprintln!(
            "conformance {scenario}: {}",
            if passed { "passed" } else { "FAILED" }
        );
        if !passed {
            failed.push(format!("{scenario}:\n{report}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[tokio::test]
async fn the_protocols_conformance_suite_passes_the_client_scenarios() {
    // `kestrel mcp call` is the client: the suite starts a server per scenario and runs the
    // command with its URL.
    let Some((node, cli)) = suite() else { return };
    let call = format!(
        "{} mcp call --protocol legacy",
        env!("CARGO_BIN_EXE_kestrel")
    );
    let tools_call = format!(r#"{call} --tool add_numbers --args '{{"a":5,"b":3}}'"#);
    // The answer leaves every field out: the form's defaults fill them (SEP-1034).
    let defaults = format!(
        r#"{call} --tool test_client_elicitation_defaults --answer '{{"action":"accept"}}'"#
    );
    let runs = [
        ("initialize", call.as_str()),
        ("tools_call", tools_call.as_str()),
        ("elicitation-sep1034-client-defaults", defaults.as_str()),
    ]
    .map(|(scenario, command)| {
        (
            scenario,
            vec!["client", "--command", command, "--scenario", scenario],
        )
    });
    passes(&node, &cli, &runs).await;
}
