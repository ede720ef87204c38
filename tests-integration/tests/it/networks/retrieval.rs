//! A network whose tool is the vector query tool: the router sends a search to it, and the
//! passages come back as the primitive's result.

use kestrel_core::embedding::HashEmbedder;
use kestrel_rag::ingest::upsert_chunks;
use kestrel_rag::{ChunkOptions, Document, EmbedOptions, InMemoryVectorStore, VectorQueryTool};

use super::*;

pub(super) async fn the_vector_query_tool_is_a_network_primitive(store: Store) {
    let vectors = Arc::new(InMemoryVectorStore::new());
    let embedder = Arc::new(HashEmbedder::new(128));
    let chunks = Document::from_text(
        "Kestrels hover over fields.\n\nKestrels nest in cavities and nest boxes.",
    )
    .with("source", "notes.txt")
    .chunk(&ChunkOptions::recursive().max_size(45).overlap(0))
    .unwrap();
    upsert_chunks(
        vectors.as_ref(),
        "notes",
        embedder.as_ref(),
        &chunks,
        &EmbedOptions::default(),
    )
    .await
    .unwrap();
    let search = VectorQueryTool::builder("notes-store", vectors, "notes", embedder)
        .id("search_notes")
        .build();
    let router = scripted(vec![
        route(
            "search_notes",
            "tool",
            r#"{"queryText": "where do kestrels nest", "topK": 1}"#,
            "the notes answer this",
        ),
        verdict(
            true,
            "the passage answers it",
            "In cavities and nest boxes.",
        ),
    ]);
    let network = Agent::builder("librarian")
        .instructions("Answer from the notes.")
        .model(router)
        .tool(search);
    let kestrel = Instance::on(&store).agent(network).build();
    let agent = kestrel.agent("librarian").unwrap();
    let (events, result) = agent
        .network("Where do kestrels nest?")
        .memory(THREAD, RESOURCE)
        .max_steps(3)
        .await
        .unwrap()
        .collect()
        .await;
    let result = result.unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    let json = wire(&events);
    let end = payload_of(&json, "tool-execution-end");
    let text = end.to_string();
    assert!(text.contains("Kestrels nest in cavities"), "{end}");
    assert!(text.contains("notes.txt"), "{end}");
}
