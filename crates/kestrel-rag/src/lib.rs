//! Retrieval-augmented generation for Kestrel: answer from your own documents.
//!
//! - [`document`]: a [`Document`] (text, Markdown, HTML or JSON, with metadata) and
//!   [`Document::chunk`].
//! - [`chunk`]: Mastra's nine chunking strategies (recursive, character, token, markdown,
//!   html, json, latex, sentence, semantic-markdown) and their options ([`ChunkOptions`]),
//!   cutting where `@mastra/rag` cuts: the same input gives the same chunks (the fixtures
//!   under `tests/fixtures/chunking` were generated from `@mastra/rag` 2.6.4), except where
//!   Mastra has a known bug, listed in [`chunk`]'s strategies and in `docs/rag.md`.
//! - [`extract`](mod@extract): Mastra's metadata extractors (title, summary, questions,
//!   keywords, schema): after chunking, a language model adds metadata to each chunk through
//!   structured output ([`Document::chunk_and_extract`], [`ExtractOptions`]).
//! - [`vector`]: the [`VectorStore`] port (Mastra's vector store contract, its metadata
//!   [`Filter`] language) and its backends: in memory, SQLite (feature `sqlite`, on by
//!   default) and PostgreSQL with pgvector (feature `pgvector`).
//! - [`embed`]: [`embed_many`], in batches, a few at a time, with retries; [`ingest`]: chunks
//!   embedded and upserted, the index checked against the embedder.
//! - [`query_tool`]: [`VectorQueryTool`], Mastra's `createVectorQueryTool`, optionally with a
//!   [`Reranker`] ([`rerank`]).
//! - `testing` (feature `testing`): the conformance suite every vector store passes.
//!
//! ```
//! use kestrel_rag::{ChunkOptions, Document};
//!
//! let document = Document::from_text("Kestrels hover. They hunt voles. They nest in towers.")
//!     .with("source", "notes.txt");
//! let chunks = document.chunk(&ChunkOptions::sentence(40))?;
//! assert_eq!(chunks[0].text, "Kestrels hover. They hunt voles.");
//! assert_eq!(chunks[0].metadata["source"], "notes.txt");
//! # Ok::<(), kestrel_rag::ChunkError>(())
//! ```
//!
//! Sizes are counted as Mastra counts them: in UTF-16 code units (JavaScript's
//! `String.length`), so an emoji counts two; the token strategies count OpenAI tokens, and
//! json counts characters of JSON text.

pub mod chunk;
pub mod document;
pub mod embed;
pub mod extract;
pub mod ingest;
pub mod query_tool;
pub mod rerank;
#[cfg(feature = "testing")]
pub mod testing;
pub mod vector;

pub use chunk::{Chunk, ChunkError, ChunkOptions, SeparatorPosition, SpecialTokens, Strategy};
pub use document::{Document, DocumentKind};
pub use embed::{EmbedOptions, embed, embed_many};
pub use extract::{
    ExtractError, ExtractOptions, Extractor, KeywordsOptions, QuestionsOptions, SchemaOptions,
    SummaryKind, SummaryOptions, TitleOptions, extract,
};
pub use ingest::RagError;
pub use query_tool::{VectorQueryTool, VectorQueryToolBuilder};
pub use rerank::{ModelRelevanceScorer, RelevanceScorer, RerankWeights, Reranker};
pub use vector::memory::InMemoryVectorStore;
pub use vector::{
    CreateIndex, Filter, FilterError, IndexStats, Metric, QueryResult, Selector, Upsert,
    VectorError, VectorQuery, VectorStore, VectorUpdate,
};
