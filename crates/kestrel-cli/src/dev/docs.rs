//! The `docs` agent of `kestrel dev`: it answers questions about Kestrel from Kestrel's own
//! documentation, compiled into the binary and indexed (once, then only what changed) in the
//! dev database with the local embedder.

use std::sync::Arc;

use kestrel::agent::Agent;
use kestrel::embedding::SharedEmbedder;
use kestrel::model::ModelSpec;
use kestrel::rag::ingest::{IngestOptions, IngestProgress, IngestReport, ingest_texts};
use kestrel::rag::vector::SharedVectorStore;
use kestrel::rag::{RagError, VectorQueryTool};

/// The agent's id.
pub const DOCS_AGENT: &str = "docs";
/// The index Kestrel's documentation is kept in.
pub const DOCS_INDEX: &str = "kestrel_docs";
/// The agent's search tool.
pub const SEARCH_DOCS: &str = "search_docs";

/// Kestrel's documentation as `(source, text)`: the README and every page under `docs/`.
pub const DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../../README.md")),
    (
        "docs/human-in-the-loop.md",
        include_str!("../../../../docs/human-in-the-loop.md"),
    ),
    ("docs/mcp.md", include_str!("../../../../docs/mcp.md")),
    (
        "docs/networks.md",
        include_str!("../../../../docs/networks.md"),
    ),
    (
        "docs/observability.md",
        include_str!("../../../../docs/observability.md"),
    ),
    ("docs/rag.md", include_str!("../../../../docs/rag.md")),
    (
        "docs/scaling.md",
        include_str!("../../../../docs/scaling.md"),
    ),
    ("docs/server.md", include_str!("../../../../docs/server.md")),
    ("docs/skills.md", include_str!("../../../../docs/skills.md")),
    ("docs/studio.md", include_str!("../../../../docs/studio.md")),
    (
        "docs/sub-agents.md",
        include_str!("../../../../docs/sub-agents.md"),
    ),
    (
        "docs/versions.md",
        include_str!("../../../../docs/versions.md"),
    ),
    (
        "docs/workflows.md",
        include_str!("../../../../docs/workflows.md"),
    ),
];

/// Where the docs agent searches: a vector store and the embedder its index is made with.
#[derive(Clone)]
pub struct DocsSearch {
    /// The store holding [`DOCS_INDEX`].
    pub store: SharedVectorStore,
    /// The embedder of the index and of the questions.
    pub embedder: SharedEmbedder,
}

impl std::fmt::Debug for DocsSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocsSearch")
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

/// Indexes [`DOCS`] into [`DOCS_INDEX`]: pages unchanged since the last time are skipped.
pub async fn index_docs(
    search: &DocsSearch,
    progress: impl FnMut(IngestProgress<'_>),
) -> Result<IngestReport, RagError> {
    ingest_texts(
        search.store.as_ref(),
        DOCS_INDEX,
        search.embedder.as_ref(),
        DOCS,
        &IngestOptions::default(),
        progress,
    )
    .await
}

/// The `docs` agent on `model`, searching `search`.
pub fn docs_agent(
    model: ModelSpec,
    search: &DocsSearch,
) -> Result<Agent, kestrel::agent::AgentBuildError> {
    let tool = VectorQueryTool::builder(
        "dev",
        Arc::clone(&search.store),
        DOCS_INDEX,
        Arc::clone(&search.embedder),
    )
    .id(SEARCH_DOCS)
    .description(
        "Searches Kestrel's documentation (the README and the pages under docs/). Returns the \
         passages nearest the query and the files they come from.",
    )
    .max_top_k(8)
    .build();
    Agent::builder(DOCS_AGENT)
        .name("Kestrel docs")
        .description("Answers questions about Kestrel from its documentation, naming the pages.")
        .instructions(
            "You answer questions about Kestrel, a Rust agent framework. First call search_docs \
             with the question (topK 4). Then answer briefly from the passages it returns, and \
             name the files you used (their `source`). If the passages do not answer the \
             question, say so.",
        )
        .model(model)
        .tool(tool)
        .build()
}
