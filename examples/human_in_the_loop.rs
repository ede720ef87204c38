//! A person approves a tool call, after a restart.
//!
//! `cargo run -p kestrel --features sqlite --example human_in_the_loop`
//!
//! The `send_email` tool requires approval. The run stops with a `tool-call-approval` event and
//! is saved in the SQLite file; the "process" (the `Kestrel` instance and its store) then goes
//! away. A new instance on the same file lists the waiting run, approves the call, and the same
//! run continues: the email is sent once and the thread holds every message once.
//!
//! A scripted model plays the LLM so the example runs the same everywhere; with a real model,
//! replace `.model(...)` with `.model("openai/gpt-5-mini")` (or leave it out for the default).

use std::sync::Arc;

use futures::StreamExt;
use kestrel::memory::Memory;
use kestrel::prelude::*;
use kestrel::storage::prelude::*;
use kestrel::storage::{Selection, SqliteStorage};
use kestrel::store::SuspendedRunsQuery;
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Email {
    to: String,
    subject: String,
}

/// One "process": an instance on `store` (its stopped runs are saved there), whose agent
/// remembers the thread in the same store.
fn instance(store: Arc<dyn Storage>) -> Result<Kestrel, Box<dyn std::error::Error>> {
    let model = ScriptedModel::from_fn(|req| {
        if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
            ScriptedResponse::text("Done: the report is on its way to Bob.")
        } else {
            ScriptedResponse::tool_call(
                "call-1",
                "send_email",
                json!({"to": "bob@example.com", "subject": "Q3 report"}),
            )
        }
    });
    let send_email = create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .execute(|email: Email, _ctx| async move {
            println!("  (sending {:?} to {})", email.subject, email.to);
            Ok(format!("sent to {}", email.to))
        });
    // No store of its own: the memory keeps threads in the instance's storage.
    let memory = Memory::builder().last_messages(10).build()?;
    let agent = Agent::builder("assistant")
        .instructions("You send emails for the user.")
        .model(Arc::new(model))
        .tool(send_email)
        .memory(memory)
        .build()?;
    Ok(Kestrel::builder().storage(store).agent(agent).build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kestrel.db");

    // First process: the run stops before the email is sent.
    let store = SqliteStorage::open(&path).await?;
    let kestrel = instance(Arc::new(store.clone()))?;
    let agent = kestrel.agent("assistant")?;
    let mut stream = agent
        .stream("Send the Q3 report to Bob.")
        .memory("thread-1", "user-ada")
        .await?;
    while let Some(event) = stream.next().await {
        if let EventKind::ToolCallApproval(approval) = &event.kind {
            println!(
                "waiting for approval: {} {} (run {})",
                approval.tool_name, approval.args, event.run_id
            );
        }
    }
    let stopped = stream.result().await?;
    println!("the run stopped: {}", stopped.finish_reason.as_str());
    drop(kestrel);
    store.close().await;

    // Second process, later: find the waiting run and approve it.
    let store = SqliteStorage::open(&path).await?;
    let kestrel = instance(Arc::new(store.clone()))?;
    let agent = kestrel.agent("assistant")?;
    let waiting = agent
        .list_suspended_runs(SuspendedRunsQuery {
            resource_id: Some("user-ada".into()),
            ..SuspendedRunsQuery::default()
        })
        .await?;
    let run = waiting.runs.first().ok_or("no run waits")?;
    let call = run.tool_calls.first().ok_or("no call waits")?;
    println!(
        "after the restart, run {} waits on {}",
        run.run_id, call.tool_name
    );
    // The run's handle decides for it: this very call (its fingerprint), for this user.
    let done = agent
        .run(&run.run_id)
        .resource("user-ada")
        .approve(&call.tool_call_id)
        .fingerprint(&call.fingerprint)
        .await?;
    println!(
        "{} (same run: {})",
        done.text,
        done.run_id == stopped.run_id
    );

    let thread = store
        .list_messages("thread-1", Some("user-ada"), Selection::all())
        .await?;
    println!("the thread holds {} messages:", thread.messages.len());
    for message in &thread.messages {
        println!("  {:?} {}", message.role, message.to_message().text());
    }
    store.close().await;
    Ok(())
}
