//! The engine's errors: [`LoadError`] when opening a model, [`GenerateError`] for one request.

use std::path::PathBuf;

/// Why a GGUF model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// There is no file at the path.
    #[error("model file not found: {}", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("cannot read model file {}: {source}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path is not valid UTF-8 (llama.cpp takes paths as C strings).
    #[error("model path is not valid UTF-8: {}", path.display())]
    NonUtf8Path {
        /// The path given.
        path: PathBuf,
    },
    /// The file does not start with the GGUF magic bytes.
    #[error("{} is not a GGUF file (found magic {found:?}, expected \"GGUF\")", path.display())]
    NotGguf {
        /// The path given.
        path: PathBuf,
        /// The first bytes of the file, lossily decoded.
        found: String,
    },
    /// The file starts like a GGUF file but its header or metadata cannot be parsed
    /// (truncated or corrupt download, unsupported GGUF version).
    #[error("{} is a corrupt or truncated GGUF file: {reason}", path.display())]
    CorruptGguf {
        /// The path given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The GGUF metadata names an architecture this build of llama.cpp cannot run for text
    /// generation (unknown to it, or an encoder-only / non-text model).
    #[error(
        "{}: unsupported model architecture {architecture:?} ({reason})",
        path.display()
    )]
    UnsupportedArchitecture {
        /// The path given.
        path: PathBuf,
        /// `general.architecture` from the file.
        architecture: String,
        /// Why it is not supported.
        reason: &'static str,
    },
    /// llama.cpp refused the model (missing or malformed tensors, not enough memory...).
    /// llama.cpp's own log (forwarded to `tracing`) has the details.
    #[error("llama.cpp failed to load {} (architecture {architecture:?}); see the llama.cpp log for details", path.display())]
    ModelLoad {
        /// The path given.
        path: PathBuf,
        /// `general.architecture` from the file.
        architecture: String,
    },
    /// llama.cpp could not create an inference context (usually out of memory).
    #[error("cannot create an inference context for {} with {context_size} tokens: {message}", path.display())]
    Context {
        /// The path given.
        path: PathBuf,
        /// The context size asked for.
        context_size: u32,
        /// What llama.cpp reported.
        message: String,
    },
    /// The llama.cpp backend could not be initialised, or the worker thread not started.
    #[error("cannot start the llama.cpp engine: {0}")]
    Backend(String),
}

/// Why a generation request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The rendered prompt does not fit in the context window (one token must stay free for
    /// the answer).
    #[error("prompt of {prompt_tokens} tokens does not fit the context window of {context} tokens")]
    ContextOverflow {
        /// Tokens in the rendered prompt.
        prompt_tokens: u32,
        /// The context window.
        context: u32,
    },
    /// A JSON schema (a tool's input or the response format) uses a feature the grammar
    /// builder cannot enforce.
    #[error("unsupported JSON schema feature {feature:?} at {path}: {reason}")]
    UnsupportedSchema {
        /// The keyword or construct, e.g. `not`, `multipleOf`, `pattern`.
        feature: String,
        /// JSON pointer to the schema location (`#/properties/x`), prefixed by the tool name
        /// for tool schemas (`get_weather#/properties/x`).
        path: String,
        /// Details.
        reason: String,
    },
    /// A JSON schema is malformed, or llama.cpp's converter rejected it.
    #[error("invalid JSON schema at {path}: {message}")]
    InvalidSchema {
        /// Where (tool name or `response_format`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// llama.cpp refused the grammar built from the schemas (for instance too many
    /// repetitions from a huge `minItems`), or no token could satisfy it.
    #[error("grammar rejected by llama.cpp: {0}")]
    Grammar(String),
    /// The request is inconsistent: a forced tool that is not in the tool list, tools required
    /// but none given, duplicate tool names, an invalid sampling setting...
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// llama.cpp failed while evaluating tokens.
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    /// The request was cancelled (its [`CancelToken`](crate::CancelToken) fired or its
    /// [`Generation`](crate::Generation) was dropped).
    #[error("generation cancelled")]
    Cancelled,
    /// An internal error (a bug) failed this request; the engine keeps serving others.
    #[error("internal error in the local model engine: {0}")]
    Internal(String),
    /// The engine's worker thread is gone (it panicked, or the engine was shut down).
    #[error("the engine worker has stopped")]
    EngineStopped,
}
