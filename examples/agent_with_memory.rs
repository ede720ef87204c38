//! An agent that remembers: `Memory` on a SQLite file, one thread per conversation, owned by a
//! resource (the user).
//!
//! `cargo run -p kestrel --features local,sqlite --example agent_with_memory`
//!
//! The agent has no model set, so it runs on the default (the embedded `local/smollm2`, or a
//! hosted model when `KESTREL_MODEL` or an API key is set). The second run sees the first
//! exchange because memory loads the thread's last messages; every complete message is stored
//! with the id streamed in its events, and the thread gets a generated title in the background.

use std::sync::Arc;

use kestrel::memory::{GenerateTitle, Memory};
use kestrel::model::{ModelSettings, default_model, process_env};
use kestrel::prelude::*;
use kestrel::storage::{Selection, SqliteStorage, Storage};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kestrel.db");
    // Created and migrated on first open; WAL mode.
    let store: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await?);
    let model = default_model(process_env).ok_or("no model configured")?;
    // The memory has no store of its own: it keeps the agent's threads in the agent's storage.
    let memory = Memory::builder()
        .last_messages(10)
        .generate_title(GenerateTitle::new(model.as_str()))
        .build()?;
    let agent = Agent::builder("assistant")
        .instructions("You are a helpful assistant. Keep answers short.")
        .memory(memory)
        .storage(store.clone())
        .build()?;

    for question in ["Hi! My name is Ada.", "What is my name?"] {
        let options = RunOptions::new()
            .memory("thread-1", "user-ada")
            .model_settings(ModelSettings {
                max_output_tokens: Some(60),
                ..ModelSettings::default()
            });
        let result = agent.generate(question).options(options).await?;
        println!("user: {question}\nassistant: {}\n", result.text.trim());
    }

    let stored = store
        .list_messages("thread-1", Some("user-ada"), Selection::all())
        .await?;
    println!(
        "{} messages stored in {}:",
        stored.messages.len(),
        path.display()
    );
    for message in &stored.messages {
        println!("  #{} {:?} {}", message.seq, message.role, message.id);
    }
    // The title is generated after the first response, without delaying it.
    for _ in 0..100 {
        if let Some(title) = store.get_thread("thread-1").await?.and_then(|t| t.title) {
            println!("title: {title}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}
