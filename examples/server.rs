//! Agents behind HTTP: Mastra's routes under `/api`, streams as server-sent events, the AI SDK
//! chat route, and memory.
//!
//! `cargo run -p kestrel --features server --example server` starts the server on a free
//! loopback port, calls it with `generate`, with `stream` (the SSE lines are printed as they
//! arrive), and with `POST /chat/greeter` as `useChat` would (the UI message stream), reads the
//! thread back from `/api/memory`, and exits. Add `-- --serve` to keep serving on 127.0.0.1:4111, then
//! try `curl -N -X POST localhost:4111/api/agents/greeter/stream -H 'content-type:
//! application/json' -d '{"messages":"Ada"}'`.
//!
//! Scripted models answer unless `KESTREL_MODEL` is set.

use std::sync::Arc;

use kestrel::memory::Memory;
use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use kestrel::server::Server;
use kestrel::storage::InMemoryStorage;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

fn model() -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(ScriptedModel::from_fn(|req| {
            let name = req.messages.last().map(Message::text).unwrap_or_default();
            ScriptedResponse::text_deltas(["Hello, ", name.as_str(), "!"])
        }))),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // One storage (use SQLite or PostgreSQL storage to keep threads and runs across restarts),
    // given to the instance once; the agent's memory keeps its threads there too.
    let storage = InMemoryStorage::new();
    let greeter = Agent::builder("greeter")
        .description("Greets people by name")
        .instructions("Greet the user by name, briefly.")
        .model(model())
        .memory(Memory::default())
        .build()?;
    let kestrel = Kestrel::builder().agent(greeter).storage(storage).build()?;
    // Beyond loopback the server refuses to start without KESTREL_API_TOKEN. Its memory
    // routes serve the instance's storage.
    let server = Server::from_env(kestrel);

    if std::env::args().any(|a| a == "--serve") {
        println!("serving on http://127.0.0.1:4111/api");
        server.serve("127.0.0.1:4111".parse()?).await?;
        return Ok(());
    }

    let (listener, addr) = server.bind("127.0.0.1:0".parse()?).await?;
    tokio::spawn(server.serve_on(listener, addr));
    let http = reqwest::Client::new();
    let base = format!("http://{addr}/api/agents/greeter");

    let result: Value = http
        .post(format!("{base}/generate"))
        .json(&json!({"messages": "Ada"}))
        .send()
        .await?
        .json()
        .await?;
    println!("generate: {} ({})", result["text"], result["finishReason"]);
    if result["text"] != "Hello, Ada!" && std::env::var("KESTREL_MODEL").is_err() {
        return Err(format!("unexpected answer: {result}").into());
    }

    let mut response = http
        .post(format!("{base}/stream"))
        .json(&json!({"messages": [{"role": "user", "content": "Bo"}]}))
        .send()
        .await?;
    println!("stream ({}):", response.headers()["content-type"].to_str()?);
    let mut body = String::new();
    while let Some(chunk) = response.chunk().await? {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    for line in body.lines().filter(|l| l.starts_with("data: ")) {
        println!("  {line}");
    }
    if !body.trim_end().ends_with("data: [DONE]") {
        return Err("the stream did not end with [DONE]".into());
    }

    // What `useChat` posts: the chat id (here also the thread) and its messages.
    let chat = http
        .post(format!("http://{addr}/chat/greeter"))
        .json(&json!({
            "id": "chat-1",
            "resourceId": "ada",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Cy"}]}],
        }))
        .send()
        .await?;
    println!(
        "chat (x-vercel-ai-ui-message-stream: {}):",
        chat.headers()["x-vercel-ai-ui-message-stream"].to_str()?
    );
    let chat_body = chat.text().await?;
    for line in chat_body.lines().filter(|l| l.starts_with("data: ")) {
        println!("  {line}");
    }
    if !chat_body.contains(r#""type":"text-delta""#) {
        return Err("the chat stream had no text".into());
    }

    // The chat's thread, as stored: messages and their AI SDK form for `useChat`.
    let thread: Value = http
        .get(format!("http://{addr}/api/memory/threads/chat-1/messages"))
        .send()
        .await?
        .json()
        .await?;
    let roles: Vec<&str> = thread["uiMessages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    println!("thread chat-1: {roles:?}");
    if roles != ["user", "assistant"] {
        return Err(format!("unexpected thread: {thread}").into());
    }
    Ok(())
}
