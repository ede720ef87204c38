//! [`LocalError`]: why the local model could not be found, loaded or run.

use std::path::PathBuf;

use kestrel_core::embedding::EmbedError;

use crate::{MODEL_ID, PROVIDER};

/// Why the local embedding model could not be found, loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The model is not in the model cache (or not verified there).
    #[error(
        "the all-MiniLM-L6-v2 model is not downloaded yet; run `kestrel models pull {MODEL_ID}` \
         (cache: {})",
        dir.display()
    )]
    NotPulled {
        /// The cache directory that was searched.
        dir: PathBuf,
    },
    /// The model cache could not be opened or searched.
    #[error("model cache: {0}")]
    Store(#[from] kestrel_model_store::Error),
    /// A model file is missing or unreadable.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The tokenizer could not be loaded or failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The weights do not fit the configuration, or the forward pass failed.
    #[error("model: {0}")]
    Model(String),
    /// The blocking inference task panicked or was cancelled.
    #[error("the inference task failed: {0}")]
    Task(String),
}

impl LocalError {
    /// The [`EmbedError`] reported through the [`kestrel_core::embedding::Embedder`] trait:
    /// [`EmbedError::Unavailable`] while loading, [`EmbedError::Inference`] while running.
    pub(crate) fn into_embed_error(self, loading: bool) -> EmbedError {
        let provider = PROVIDER.to_string();
        let model = MODEL_ID.to_string();
        let message = self.to_string();
        if loading {
            EmbedError::Unavailable {
                provider,
                model,
                message,
            }
        } else {
            EmbedError::Inference {
                provider,
                model,
                message,
            }
        }
    }
}

impl From<candle_core::Error> for LocalError {
    fn from(error: candle_core::Error) -> Self {
        LocalError::Model(error.to_string())
    }
}
