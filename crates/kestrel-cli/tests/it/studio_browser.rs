//! The Studio in a real browser: `kestrel dev`'s demo agents on a scripted model, served on
//! 127.0.0.1, driven by `studio-tests/studio.mjs` (Playwright's `playwright-core` with
//! Debian's `chromium`).
//!
//! The script chats with the assistant (streamed text, a plain tool), approves the
//! approval-gated tool in the page, answers the suspending tool's form, reloads and finds the
//! same history, watches the supervisor's delegation tree fill with both sub-agents'
//! output, and runs the coordinator as a network (two iterations, their reasons and checks);
//! it edits the assistant's instructions in the Agent tab's editor, tries the draft in the
//! chat (the scripted assistant says whether its system prompt holds the draft's marker),
//! publishes it and sets two versions side by side; then, on a second server that needs a
//! bearer token, it refuses a wrong token and keeps the right one. Without `KESTREL_TEST_CHROMIUM` (the chromium binary) the test says so and passes;
//! with it set, a missing browser, `node` or `studio-tests/node_modules` is a failure.
//!
//! `studio-tests/runs.test.mjs` (node's test runner, no browser) checks how the Studio folds
//! events into runs, including what the demo cannot show: approvals inside a sub-agent;
//! `versions.test.mjs` the editor's logic (the run body's `versions`, the versions set side by
//! side, their line diff).
//!
//! `KESTREL_STUDIO_SCREENSHOT=<path>` makes the script save a screenshot of the Studio
//! mid-delegation there (docs/studio-delegation.png is made this way).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel::model::{ModelEvent, ModelRequest, ModelSpec, ResponseFormat, ScriptStep};
use kestrel::prelude::*;
use kestrel_cli::dev;
use serde_json::json;

/// The token of the second server, which the Studio must ask for.
const TOKEN: &str = "studio-test-token";

/// The markers studio.mjs writes into the assistant's instructions in the Studio's editor
/// (the first and second drafts); the assistant says which one its system prompt holds.
const DRAFT_MARKER: &str = "DRAFT-MARKER";
const SECOND_MARKER: &str = "SECOND-MARKER";

/// Bound on the whole browser script.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate sits two levels under the repository root")
        .to_path_buf()
}

/// Text streamed in `deltas`, `pause` apart, so the page sees it grow.
fn slow_text(deltas: &[&str], pause: Duration) -> ScriptedResponse {
    let mut steps = Vec::new();
    for (i, delta) in deltas.iter().enumerate() {
        if i > 0 {
            steps.push(ScriptStep::Delay(pause));
        }
        steps.push(ScriptStep::Event(ModelEvent::TextDelta {
            text: (*delta).to_owned(),
        }));
    }
    ScriptedResponse::steps(steps)
}

/// The messages of the current turn: everything after the last user message.
fn this_turn(req: &ModelRequest) -> &[Message] {
    let start = req
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    &req.messages[start..]
}

/// The tool results of the turn, in order: each call's tool and its result as text.
fn turn_results(req: &ModelRequest) -> Vec<(String, String)> {
    let mut results = Vec::new();
    for message in this_turn(req).iter().filter(|m| m.role == Role::Tool) {
        for part in &message.parts {
            if let Part::ToolResult {
                tool_name, result, ..
            } = part
            {
                let text = result
                    .as_str()
                    .map_or_else(|| result.to_string(), str::to_owned);
                results.push((tool_name.clone(), text));
            }
        }
    }
    results
}

fn has_tool(req: &ModelRequest, name: &str) -> bool {
    req.tools.iter().any(|t| t.name == name)
}

fn system_text(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .collect()
}

/// The coordinator's network: its routing agent sends the task to `research`, then to the
/// `weather-report` workflow, then finds it done; its completion check passes once both ran.
fn network_answer(req: &ModelRequest) -> Option<ScriptedResponse> {
    let Some(ResponseFormat::Json {
        name: Some(name), ..
    }) = &req.response_format
    else {
        return None;
    };
    let records = req
        .messages
        .iter()
        .filter(|m| m.text().contains("\"isNetwork\":true"))
        .count();
    let answer = match (name.as_str(), records) {
        ("routing", 0) => json!({
            "primitiveId": "research", "primitiveType": "agent",
            "prompt": "Facts about the common kestrel",
            "selectionReason": "the research agent finds facts"
        }),
        ("routing", 1) => json!({
            "primitiveId": "weather-report", "primitiveType": "workflow",
            "prompt": "{\"city\": \"Lisbon\"}",
            "selectionReason": "the weather-report workflow knows the weather"
        }),
        ("routing", _) => json!({
            "primitiveId": "none", "primitiveType": "none", "prompt": "",
            "selectionReason": "both parts are there"
        }),
        ("completion", 0 | 1) => json!({
            "isComplete": false, "completionReason": "the weather is still missing", "finalResult": ""
        }),
        ("completion", _) => json!({
            "isComplete": true, "completionReason": "facts and weather are there",
            "finalResult": "Kestrels hover in the wind and hunt voles; in Lisbon it is sunny today."
        }),
        _ => return None,
    };
    Some(ScriptedResponse::text(answer.to_string()))
}

/// One scripted model for every demo agent, answering by which agent asks (told apart by
/// their tools and instructions) and by the turn so far.
fn scripted_model() -> ScriptedModel {
    let calls = Arc::new(AtomicUsize::new(0));
    ScriptedModel::from_fn(move |req| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let call_id = |what: &str| format!("call-{what}-{n}");
        if let Some(answer) = network_answer(req) {
            return answer;
        }
        if has_tool(req, dev::SEARCH_DOCS) {
            // The docs agent: search, then answer naming the first page found.
            return match turn_results(req).pop() {
                None => ScriptedResponse::tool_call(
                    call_id("docs"),
                    dev::SEARCH_DOCS,
                    json!({"queryText": "resume a suspended run", "topK": 3}),
                ),
                Some((_, result)) => {
                    let result: serde_json::Value =
                        serde_json::from_str(&result).unwrap_or_default();
                    let first = result["sources"][0]["metadata"]["source"]
                        .as_str()
                        .unwrap_or("nothing")
                        .to_owned();
                    ScriptedResponse::text(format!("From {first}: resume the run with its id."))
                }
            };
        }
        if has_tool(req, "agent-research") {
            // The supervisor: research, then writing, then the paragraph.
            let results: Vec<String> = turn_results(req).into_iter().map(|(_, r)| r).collect();
            return match results.len() {
                0 => ScriptedResponse::tool_call(
                    call_id("research"),
                    "agent-research",
                    json!({"prompt": "Facts about the common kestrel"}),
                ),
                1 => ScriptedResponse::tool_call(
                    call_id("writing"),
                    "agent-writing",
                    json!({"prompt": format!("Write a paragraph from these notes:\n{}", results[0])}),
                ),
                _ => ScriptedResponse::text(format!("Here is your paragraph: {}", results[1])),
            };
        }
        if has_tool(req, dev::EMAIL_TOOL) {
            if let Some((tool, result)) = turn_results(req).pop() {
                return match tool.as_str() {
                    // The skill's instructions say to read its clothing reference.
                    "skill" => ScriptedResponse::tool_call(
                        call_id("skill-read"),
                        "skill_read",
                        json!({"skillName": dev::WEATHER_BRIEFING, "path": "references/clothing.md"}),
                    ),
                    "skill_read" if result.contains("light layers") => {
                        ScriptedResponse::text("Mild and sunny: wear light layers.")
                    }
                    dev::WEATHER_TOOL => ScriptedResponse::text(format!("The forecast: {result}")),
                    dev::EMAIL_TOOL => ScriptedResponse::text(format!("Done. {result}")),
                    _ => ScriptedResponse::text(format!("All set. {result}")),
                };
            }
            let asked = this_turn(req)
                .first()
                .map(Message::text)
                .unwrap_or_default()
                .to_lowercase();
            return if asked.contains("who is answering") {
                // Which instructions the run got: the code's, or a version's with a marker
                // (the Studio's editor saves them; its Draft switch runs the draft).
                let system = system_text(req);
                let marker = [DRAFT_MARKER, SECOND_MARKER]
                    .into_iter()
                    .find(|m| system.contains(m));
                ScriptedResponse::text(match marker {
                    Some(marker) => format!("Answering as {marker}."),
                    None => "Answering as the assistant written in code.".to_owned(),
                })
            } else if asked.contains("kitchen") {
                // A tool of an MCP server, which asks before it sends.
                ScriptedResponse::tool_call(
                    call_id("kitchen"),
                    "kitchen_send_email",
                    json!({"to": "ada@example.com", "subject": "Menu", "body": "Soup tonight."}),
                )
            } else if asked.contains("email") {
                ScriptedResponse::tool_call(
                    call_id("email"),
                    dev::EMAIL_TOOL,
                    json!({"to": "ada@example.com", "subject": "Lisbon weather", "body": "Sunny all day."}),
                )
            } else if asked.contains("book") {
                ScriptedResponse::tool_call(
                    call_id("book"),
                    dev::BOOKING_TOOL,
                    json!({"restaurant": "Nora", "guests": 2}),
                )
            } else if asked.contains("slowly") {
                // Long enough for the page to queue and cancel messages behind it.
                slow_text(&["Taking ", "my ", "time."], Duration::from_millis(2500))
            } else if asked.contains("wear") {
                ScriptedResponse::tool_call(
                    call_id("skill"),
                    "skill",
                    json!({"name": dev::WEATHER_BRIEFING}),
                )
            } else if asked.contains("weather") {
                ScriptedResponse::tool_call(
                    call_id("weather"),
                    dev::WEATHER_TOOL,
                    json!({"city": "Lisbon"}),
                )
            } else {
                slow_text(
                    &[
                        "Hello! ",
                        "I can check the weather, ",
                        "book tables ",
                        "and send emails.",
                    ],
                    Duration::from_millis(500),
                )
            };
        }
        let system = system_text(req);
        if system.contains("research topics") {
            slow_text(
                &[
                    "- Kestrels hover in the wind\n",
                    "- They hunt voles\n",
                    "- They nest in cavities",
                ],
                Duration::from_millis(300),
            )
        } else {
            slow_text(
                &[
                    "Kestrels hang in the wind ",
                    "above the fields, ",
                    "watching for voles, ",
                    "and raise their young ",
                    "in cavities.",
                ],
                Duration::from_millis(1000),
            )
        }
    })
}

/// Whether the Studio's tests are on (`KESTREL_TEST_CHROMIUM` set); says why not otherwise.
fn chromium() -> Option<PathBuf> {
    let Some(chromium) = std::env::var_os("KESTREL_TEST_CHROMIUM").filter(|v| !v.is_empty()) else {
        eprintln!(
            "skipping the Studio's tests: set KESTREL_TEST_CHROMIUM to a chromium binary \
             (and run `npm ci` in studio-tests) to run them"
        );
        return None;
    };
    Some(PathBuf::from(chromium))
}

#[tokio::test]
async fn the_studio_folds_events_into_runs() {
    if chromium().is_none() {
        return;
    }
    let output = tokio::process::Command::new("node")
        .args([
            "--test",
            "runs.test.mjs",
            "workflow-runs.test.mjs",
            "network-runs.test.mjs",
            "versions.test.mjs",
        ])
        .current_dir(repo_root().join("studio-tests"))
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run node (is Node.js installed?): {e}"));
    assert!(
        output.status.success(),
        "studio-tests/runs.test.mjs, workflow-runs.test.mjs, network-runs.test.mjs or \
         versions.test.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_studio_works_in_a_browser() {
    let Some(chromium) = chromium() else {
        return;
    };
    assert!(
        chromium.is_file(),
        "KESTREL_TEST_CHROMIUM={} is not a file: install Debian's chromium (apt-get install \
         chromium) or fix the path",
        chromium.display()
    );
    let tests = repo_root().join("studio-tests");
    assert!(
        tests.join("node_modules/playwright-core").is_dir(),
        "{} has no node_modules/playwright-core: run `npm ci` there",
        tests.display()
    );

    let dir = tempfile::tempdir().unwrap();
    let storage = dev::open_storage(&dir.path().join("nested/dev.db"))
        .await
        .unwrap();
    // The demo's tools and workflow steps take a moment, as real work would: the page shows
    // them running before they are done.
    // The MCP page's servers, from a kestrel.toml: `kestrel mcp serve` over stdio, and a
    // server whose command does not exist.
    let config = super::mcp::kitchen_config(dir.path());
    let mcp = dev::DevConfig::parse(&config, Path::new("kestrel.toml"))
        .unwrap()
        .mcp_client(|_| None)
        .unwrap()
        .unwrap();
    // The assistant also gets the kitchen's tools, as `kestrel dev` gives them.
    let kitchen_tools = mcp
        .server_tools("kitchen")
        .await
        .unwrap_or_else(|e| panic!("the kitchen's tools: {e}"));
    // The docs agent searches Kestrel's documentation, indexed here with a hashing embedder
    // (no model file); `kestrel dev` uses the local MiniLM.
    let docs = dev::DocsSearch {
        store: Arc::new(kestrel::rag::InMemoryVectorStore::new()),
        embedder: Arc::new(kestrel::embedding::HashEmbedder::new(256)),
    };
    let indexed = dev::index_docs(&docs, |_| {}).await.unwrap();
    assert_eq!(indexed.ingested(), dev::DOCS.len());
    let options = dev::DemoOptions {
        tool_delay: Duration::from_millis(300),
        assistant_tools: kitchen_tools,
        docs: Some(docs),
        ..dev::DemoOptions::default()
    };
    let kestrel = dev::demo_kestrel_with(
        ModelSpec::Model(Arc::new(scripted_model())),
        Arc::new(storage.clone()),
        options,
    )
    .unwrap();
    let memory = dev::demo_memory().unwrap();
    // The same agents behind a token, for the Studio's token prompt.
    let guarded = dev::server(kestrel.clone(), memory.clone())
        .unwrap()
        .token(TOKEN);
    let server = dev::server(kestrel, memory)
        .unwrap()
        .mcp_client(mcp.clone());
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let serving = tokio::spawn(server.serve_on(listener, addr));
    let (listener, guarded_addr) = guarded.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let serving_guarded = tokio::spawn(guarded.serve_on(listener, guarded_addr));

    let mut command = tokio::process::Command::new("node");
    command
        .arg(tests.join("studio.mjs"))
        .current_dir(&tests)
        .env("KESTREL_STUDIO_URL", format!("http://{addr}/"))
        .env(
            "KESTREL_STUDIO_TOKEN_URL",
            format!("http://{guarded_addr}/"),
        )
        .env("KESTREL_STUDIO_TOKEN", TOKEN)
        .env("KESTREL_TEST_CHROMIUM", &chromium)
        .kill_on_drop(true);
    let output = tokio::time::timeout(SCRIPT_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("the browser script ran longer than {SCRIPT_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("cannot run node (is Node.js installed?): {e}"));
    serving.abort();
    serving_guarded.abort();
    mcp.disconnect().await;
    storage.close().await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the Studio browser script failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("studio: all checks passed"), "{stdout}");
}
