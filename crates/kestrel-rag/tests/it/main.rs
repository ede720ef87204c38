//! The integration tests of kestrel-rag (one binary; each file a module).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod chunking;
mod extract;
mod filter;
mod retrieval;
mod vector_memory;
mod vector_pgvector;
mod vector_sqlite;
