//! The library half of the `kestrel` command-line tool.
//!
//! The binary's subcommands live in the binary; what other programs and tests reuse lives
//! here: [`dev`], the demo agents and the server of `kestrel dev`, so a test can serve exactly
//! what `kestrel dev` serves with a scripted model in place of the local one; [`rag`], the
//! vector store and embedder `kestrel rag` and `kestrel dev` share.

pub mod dev;
pub mod rag;
