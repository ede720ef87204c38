//! The server driven by the JavaScript clients front ends really use: `@mastra/client-js`
//! (a front end written for Mastra's HTTP API, its agents and its workflows) and the AI SDK's
//! chat (the core of `useChat`).
//! The scripts live in `compat-tests/`; `npm ci --prefix compat-tests` installs their pinned
//! packages. Without them (and without `KESTREL_TEST_JS`) the tests skip and say so; with
//! `KESTREL_TEST_JS=1` (as `.ci/run` sets) a missing `node` or package fails them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Email {
    to: String,
}

#[derive(Deserialize, JsonSchema)]
struct Question {
    topic: String,
}

#[derive(Deserialize, JsonSchema)]
struct Answer {
    answer: String,
}

fn compat_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../compat-tests")
}

/// Whether the scripts can run here; panics when `KESTREL_TEST_JS` asks for them and they
/// cannot.
fn available() -> bool {
    let required = std::env::var("KESTREL_TEST_JS").is_ok_and(|v| !v.is_empty() && v != "0");
    let modules = compat_dir().join("node_modules");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match (node, modules.is_dir(), required) {
        (true, true, _) => true,
        (false, _, true) => panic!("KESTREL_TEST_JS is set but `node` cannot be run"),
        (_, false, true) => panic!(
            "KESTREL_TEST_JS is set but {} is missing: run `npm ci --prefix compat-tests`",
            modules.display()
        ),
        _ => {
            eprintln!(
                "skipped: the JavaScript client tests need node and `npm ci --prefix compat-tests` \
                 (set KESTREL_TEST_JS=1 to require them)"
            );
            false
        }
    }
}

fn kestrel(memory: &Memory) -> Kestrel {
    let echo = Agent::builder("echo")
        .description("Echoes")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
            ScriptedResponse::text_deltas(["echo: ", last.as_str()])
        })))
        .memory(memory.clone())
        .build()
        .unwrap();
    let send_email = create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(|email: Email, _ctx| async move { Ok(format!("sent to {}", email.to)) });
    let mailer = Agent::builder("mailer")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
                ScriptedResponse::text("Done.")
            } else {
                ScriptedResponse::tool_call(
                    "call-1",
                    "send_email",
                    json!({"to": "bob@example.com"}),
                )
            }
        })))
        .tool(send_email)
        .memory(memory.clone())
        .build()
        .unwrap();
    let asker = Agent::builder("asker")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
                ScriptedResponse::text("Thanks.")
            } else {
                ScriptedResponse::tool_call("ask-1", "ask", json!({"topic": "colour"}))
            }
        })))
        .tool(
            create_tool("ask")
                .description("Asks the person")
                .resume_type::<Answer>()
                .execute(|q: Question, ctx| async move {
                    match ctx.resume_data_as::<Answer>()? {
                        Some(a) => Ok(json!({"topic": q.topic, "answer": a.answer})),
                        None => {
                            Err(ctx.suspend(json!({"question": format!("Which {}?", q.topic)})))
                        }
                    }
                }),
        )
        .memory(memory.clone())
        .build()
        .unwrap();
    let mut builder = Kestrel::builder()
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .agent(echo)
        .agent(mailer)
        .agent(asker);
    for workflow in crate::workflows::workflows() {
        builder = builder.workflow(workflow);
    }
    builder.build().unwrap()
}

/// Serves the agents and runs `node compat-tests/<script> <base URL>`.
async fn run_script(script: &str) {
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    run_script_on(script, kestrel(&memory), memory).await;
}

/// Serves `kestrel` (its memory routes serving `memory`) and runs
/// `node compat-tests/<script> <base URL>`.
async fn run_script_on(script: &str, kestrel: Kestrel, memory: Memory) {
    let server = Server::new(kestrel).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let output = tokio::process::Command::new("node")
        .arg(script)
        .arg(format!("http://{addr}"))
        .current_dir(compat_dir())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("ok - "),
        "{script} ran no checks:\n{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mastra_client_works_against_kestrel() {
    if available() {
        run_script("mastra-client.mjs").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mastra_client_drives_workflows_against_kestrel() {
    if available() {
        run_script("mastra-workflows.mjs").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mastra_client_drives_networks_against_kestrel() {
    if available() {
        let memory = Memory::new(Arc::new(InMemoryStorage::new()));
        let unlocks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut builder = Kestrel::builder()
            .storage(Arc::clone(memory.storage().unwrap()))
            .memory(memory.clone());
        for agent in crate::networks::network_agents(&memory, Arc::clone(&unlocks)) {
            builder = builder.agent(agent);
        }
        run_script_on("mastra-networks.mjs", builder.build().unwrap(), memory).await;
        assert_eq!(unlocks.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mastra_client_manages_stored_agents_and_versions() {
    if available() {
        let echo = || -> kestrel_core::model::SharedModel {
            Arc::new(ScriptedModel::from_fn(|req| {
                let system = req
                    .messages
                    .iter()
                    .find(|m| m.role == Role::System)
                    .map(|m| m.text())
                    .unwrap_or_default();
                ScriptedResponse::text(format!("[{system}]"))
            }))
        };
        let mut models = kestrel_core::model::ModelRegistry::empty();
        models.register("scripted", move |_: &str, _: &str| Ok(echo()));
        let writing = Agent::builder("writing")
            .instructions("Write plainly.")
            .model(echo())
            .editable(kestrel_core::version::Editable::instructions())
            .build()
            .unwrap();
        let lookup = create_tool("lookup")
            .description("Looks up")
            .input_schema(json!({"type": "object"}))
            .execute(|_: serde_json::Value, _ctx| async { Ok("found") });
        let memory = Memory::new(Arc::new(InMemoryStorage::new()));
        let kestrel = Kestrel::builder()
            .models(models)
            .agent(writing)
            .tool(lookup)
            .storage(Arc::clone(memory.storage().unwrap()))
            .memory(memory.clone())
            .build()
            .unwrap();
        run_script_on("mastra-versions.mjs", kestrel, memory).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mastra_client_reads_and_deletes_traces() {
    if available() {
        let writing = Agent::builder("writing")
            .model(Arc::new(ScriptedModel::from_fn(|_| {
                ScriptedResponse::text("Plain words.")
            })))
            .build()
            .unwrap();
        let memory = Memory::new(Arc::new(InMemoryStorage::new()));
        let kestrel = Kestrel::builder()
            .tracing(kestrel_core::trace::TracingConfig::new())
            .agent(writing)
            .storage(Arc::clone(memory.storage().unwrap()))
            .memory(memory.clone())
            .build()
            .unwrap();
        run_script_on("mastra-observability.mjs", kestrel, memory).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_chat_works_against_kestrel() {
    if available() {
        run_script("ai-sdk-chat.mjs").await;
    }
}
