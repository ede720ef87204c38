//! Retrieval-augmented generation for Kestrel: answer from your own documents.
//!
//! - [`document`]: a [`Document`] (text, Markdown, HTML or JSON, with metadata) and
//!   [`Document::chunk`].
//! - [`chunk`]: Mastra's chunking strategies and their options ([`ChunkOptions`]), cutting
//!   where `@mastra/rag` cuts: the same input gives the same chunks (the fixtures under
//!   `tests/fixtures/chunking` were generated from `@mastra/rag` 2.6.4).
//!
//! Sizes are counted as Mastra counts them: in UTF-16 code units (JavaScript's
//! `String.length`), so an emoji counts two.

pub mod chunk;
pub mod document;

pub use chunk::{Chunk, ChunkError, ChunkOptions, SeparatorPosition, SpecialTokens, Strategy};
pub use document::{Document, DocumentKind};
