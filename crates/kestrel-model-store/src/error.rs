//! Typed errors: [`Error`] for the store's operations, [`SourceFailure`] for one source of one
//! pull.

use std::path::PathBuf;
use std::time::Duration;

/// Why an operation of the [`crate::ModelStore`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The name is not in the catalog.
    #[error("unknown model `{name}` (known models: {known})")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The catalog's names, comma-separated.
        known: String,
    },
    /// The model is in the catalog but not (or not correctly) in the cache.
    #[error("model `{name}` is not downloaded yet; run `kestrel models pull {name}`")]
    NotCached {
        /// The catalog name.
        name: String,
    },
    /// A path given to [`crate::ModelStore::resolve`] is not a file.
    #[error("{}: no such model file", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// A path given to [`crate::ModelStore::resolve`] is not a GGUF file.
    #[error("{} is not a GGUF file (it does not start with the `GGUF` magic)", path.display())]
    NotGguf {
        /// The path given.
        path: PathBuf,
    },
    /// Every source of a pull failed; one [`SourceFailure`] per source, in catalog order.
    #[error("could not download `{name}` from any source: {}", join(failures))]
    AllSourcesFailed {
        /// The catalog name.
        name: String,
        /// What went wrong with each source.
        failures: Vec<SourceFailure>,
    },
    /// Neither `KESTREL_HOME` nor a user cache directory is known.
    #[error(
        "no cache directory for models: set KESTREL_HOME (models go to $KESTREL_HOME/models) \
         or HOME"
    )]
    NoCacheDir,
    /// A catalog (e.g. the file named by `KESTREL_MODEL_CATALOG`) is malformed.
    #[error("invalid model catalog {origin}: {message}")]
    InvalidCatalog {
        /// Where the catalog came from.
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing the cache failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn join(failures: &[SourceFailure]) -> String {
    let parts: Vec<String> = failures.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// One source that did not deliver a verified file, e.g.
/// `huggingface.co: connection timed out after 5s`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{label}: {reason}")]
pub struct SourceFailure {
    /// The source's label (see [`crate::Source::label`]).
    pub label: String,
    /// What went wrong.
    pub reason: FailureReason,
}

/// What went wrong with one source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailureReason {
    /// The source was not tried, e.g. the hub with `KESTREL_OFFLINE_HUB=1`.
    #[error("skipped ({0})")]
    Skipped(String),
    /// No TCP/TLS connection within the connect timeout.
    #[error("connection timed out after {}", seconds(*.0))]
    ConnectTimeout(Duration),
    /// The host name did not resolve (with the resolver's message).
    #[error("could not resolve host ({0})")]
    HostNotFound(String),
    /// Any other network failure (refused, reset, TLS, stalled…).
    #[error("{0}")]
    Network(String),
    /// The server answered with an error status.
    #[error("HTTP {0}")]
    HttpStatus(u16),
    /// The source delivered a file of the wrong size (deleted).
    #[error("size mismatch: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The catalog size.
        expected: u64,
        /// What the source delivered (or announced).
        actual: u64,
    },
    /// The source kept sending past the catalog size (the download was stopped and deleted).
    #[error("more than the expected {expected} bytes")]
    TooLarge {
        /// The catalog size.
        expected: u64,
    },
    /// The source delivered bytes whose sha256 is not the catalog's (deleted).
    #[error("sha256 mismatch: expected {expected}, got {actual} (the bad file was deleted)")]
    ShaMismatch {
        /// The catalog sha256.
        expected: String,
        /// The sha256 of what was delivered.
        actual: String,
    },
    /// No working pip was found.
    #[error("no pip found (tried {0}); install pip or set KESTREL_PIP")]
    PipNotFound(String),
    /// pip ran and failed.
    #[error("pip exited with {status}: {last_line}")]
    PipFailed {
        /// How pip ended, e.g. `status 1`.
        status: String,
        /// The last non-empty line pip wrote to stderr (its error message).
        last_line: String,
    },
    /// The wheel was not usable (no wheel written, not a zip, member missing…).
    #[error("{0}")]
    BadWheel(String),
    /// A local file operation failed while fetching.
    #[error("{0}")]
    Io(String),
    /// One file of a multi-file model failed (the others of that source are discarded too).
    #[error("{file}: {reason}")]
    InFile {
        /// The file's name in the cache.
        file: String,
        /// What went wrong with it.
        reason: Box<FailureReason>,
    },
}

fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}
