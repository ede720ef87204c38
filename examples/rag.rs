//! Answer from your own documents: a folder of notes is chunked, embedded by the local
//! all-MiniLM-L6-v2 and kept in a SQLite vector index; an agent searches it with the vector
//! query tool and answers naming its source.
//!
//! `cargo run -p kestrel --example rag --features rag,embed-local`
//!
//! The embedder's model (91 MB) is downloaded into Kestrel's model cache on first use, or
//! ahead of time with `kestrel models pull all-minilm-l6-v2`. The agent runs on the scripted
//! model so the example needs no API key: swap in `"openai/gpt-5-mini"` (with
//! `OPENAI_API_KEY`) or the local SmolLM2 for a real one.

use std::sync::Arc;

use kestrel::embed_local::LocalEmbedder;
use kestrel::prelude::*;
use kestrel::rag::VectorQueryTool;
use kestrel::rag::ingest::{FileOutcome, IngestOptions, ingest_paths};
use kestrel::rag::vector::sqlite::SqliteVectorStore;
use serde_json::{Value, json};

const NOTES: &[(&str, &str)] = &[
    (
        "hunting.md",
        "# Hunting\n\nThe common kestrel hunts by hovering in the wind over open fields, \
         head still, then dropping onto voles and other small mammals. It also takes \
         insects and small birds.",
    ),
    (
        "nesting.md",
        "# Nesting\n\nKestrels do not build nests. They lay their eggs in cavities in trees, \
         on cliff ledges, in old crow nests and on the ledges of buildings, and readily use \
         nest boxes. A clutch is usually four to six eggs.",
    ),
    (
        "migration.md",
        "# Migration\n\nNorthern populations migrate south for the winter, while kestrels in \
         Western Europe mostly stay all year round.",
    ),
];

const QUESTION: &str = "Where do kestrels lay their eggs?";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes)?;
    for (name, text) in NOTES {
        std::fs::write(notes.join(name), text)?;
    }

    // The index lives in a SQLite file (it could be kestrel's own database file).
    let store = Arc::new(SqliteVectorStore::open(dir.path().join("vectors.db")).await?);
    let embedder = Arc::new(LocalEmbedder::from_env().with_auto_pull(true));
    let report = ingest_paths(
        store.as_ref(),
        "notes",
        embedder.as_ref(),
        std::slice::from_ref(&notes),
        &IngestOptions::default(),
        |p| {
            if let FileOutcome::Ingested(chunks) = p.outcome {
                println!("[{}/{}] {}: {chunks} chunks", p.done, p.total, p.source);
            }
        },
    )
    .await?;
    println!(
        "ingested {} files, {} chunks",
        report.ingested(),
        report.chunks()
    );

    let search = VectorQueryTool::builder("notes", store, "notes", embedder)
        .id("search_notes")
        .description("Searches the notes about kestrels.")
        .build();

    // The scripted model plays an LLM: it searches, then answers from the best passage.
    let model = ScriptedModel::from_fn(|request| {
        let found = request
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .find_map(|part| match part {
                Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            });
        match found {
            None => ScriptedResponse::tool_call(
                "call-1",
                "search_notes",
                json!({"queryText": QUESTION, "topK": 2}),
            ),
            Some(result) => {
                let result: Value = match result {
                    Value::String(text) => serde_json::from_str(&text).unwrap_or_default(),
                    other => other,
                };
                let best = &result["sources"][0];
                ScriptedResponse::text(format!(
                    "{} (source: {})",
                    best["document"].as_str().unwrap_or("I found nothing."),
                    best["metadata"]["source"].as_str().unwrap_or("none")
                ))
            }
        }
    });
    let agent = Agent::builder("naturalist")
        .instructions("Answer from the notes: search them first, then name your source.")
        .model(Arc::new(model))
        .tool(search)
        .build()?;
    let answer = agent.generate(QUESTION).await?;
    println!("Q: {QUESTION}\nA: {}", answer.text);
    if !answer.text.contains("notes/nesting.md") {
        return Err(format!("expected the nesting note as the source: {}", answer.text).into());
    }
    Ok(())
}
