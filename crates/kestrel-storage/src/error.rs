//! The one error type of every storage operation.

use std::error::Error as StdError;

/// A boxed error from a database driver, kept as the source of [`StorageError::Backend`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What went wrong in a storage operation. Every variant names what was wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// No thread has this id.
    #[error("thread `{thread_id}` not found")]
    ThreadNotFound {
        /// The id asked for.
        thread_id: String,
    },
    /// A thread with this id already exists.
    #[error("thread `{thread_id}` already exists")]
    ThreadExists {
        /// The id that was taken.
        thread_id: String,
    },
    /// The thread belongs to another resource; nothing was read or written.
    #[error("thread `{thread_id}` belongs to resource `{owner}`, not to `{requested}`")]
    ThreadOwnedByOtherResource {
        /// The thread.
        thread_id: String,
        /// The resource that owns it.
        owner: String,
        /// The resource the caller named.
        requested: String,
    },
    /// A message id is already stored in another thread (message ids are globally unique).
    #[error("message `{message_id}` is stored in thread `{stored_in}`, not in `{requested}`")]
    MessageInOtherThread {
        /// The message id.
        message_id: String,
        /// The thread that holds it.
        stored_in: String,
        /// The thread the caller appended to.
        requested: String,
    },
    /// A metadata filter that is not a JSON object.
    #[error("invalid metadata filter: {reason}")]
    InvalidFilter {
        /// Why it was refused.
        reason: String,
    },
    /// An argument out of range or malformed (a page size of 0, a bad schema name...).
    #[error("invalid argument `{argument}`: {reason}")]
    InvalidArgument {
        /// The argument's name.
        argument: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// Optimistic concurrency failed: the run's stored version is not the one expected.
    /// Nothing was changed.
    #[error(
        "run `{run_id}` was changed concurrently: expected version {}, stored version {}",
        fmt_version(*expected), fmt_version(*actual)
    )]
    Conflict {
        /// The run.
        run_id: String,
        /// The version the caller expected (`None`: the caller expected no run).
        expected: Option<i64>,
        /// The stored version (`None`: no run is stored).
        actual: Option<i64>,
    },
    /// A write of a run carries a lease token below one already seen for the run: the
    /// writer lost the run to a newer owner, and nothing was written.
    #[error(
        "run `{run_id}` has a newer owner: the write's lease token {token} is below the stored {current}"
    )]
    Fenced {
        /// The run.
        run_id: String,
        /// The token the write carried.
        token: i64,
        /// The greatest token stored for the run.
        current: i64,
    },
    /// A workflow run's write carried a lease token below one the store has seen for the run:
    /// another instance drives it now. Nothing was written.
    #[error(
        "workflow run `{workflow_id}/{run_id}` has a newer owner: the write's lease token {token} is below the stored {current}"
    )]
    WorkflowRunFenced {
        /// The workflow.
        workflow_id: String,
        /// The run.
        run_id: String,
        /// The token the write carried.
        token: i64,
        /// The greatest token stored for the run.
        current: i64,
    },
    /// No run has this id.
    #[error("run `{run_id}` not found")]
    RunNotFound {
        /// The id asked for.
        run_id: String,
    },
    /// No vector index has this name.
    #[error("vector index `{index}` not found")]
    IndexNotFound {
        /// The index name.
        index: String,
    },
    /// `create_index` named an existing index with another dimension.
    #[error("vector index `{index}` exists with dimension {existing}, not {requested}")]
    IndexExists {
        /// The index name.
        index: String,
        /// Its dimension.
        existing: usize,
        /// The dimension asked for.
        requested: usize,
    },
    /// A vector whose length is not the index's dimension.
    #[error("vector index `{index}` expects dimension {expected}, got {got}")]
    DimensionMismatch {
        /// The index name.
        index: String,
        /// The index's dimension.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// No stored agent has this id.
    #[error("stored agent `{agent_id}` not found")]
    AgentNotFound {
        /// The id asked for.
        agent_id: String,
    },
    /// A stored agent with this id exists already.
    #[error("stored agent `{agent_id}` already exists")]
    AgentExists {
        /// The id that was taken.
        agent_id: String,
    },
    /// The agent has no version with this id (it may be another agent's).
    #[error("agent `{agent_id}` has no version `{version_id}`")]
    VersionNotFound {
        /// The agent.
        agent_id: String,
        /// The version asked for.
        version_id: String,
    },
    /// The published version cannot be deleted.
    #[error(
        "version `{version_id}` is agent `{agent_id}`'s published version; publish another first"
    )]
    VersionPublished {
        /// The agent.
        agent_id: String,
        /// The version.
        version_id: String,
    },
    /// The database could not be opened (or migrated on open).
    #[error("cannot open {target}: {reason}")]
    Open {
        /// The path or URL (password redacted).
        target: String,
        /// Why.
        reason: String,
        /// The driver's error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// Stored data could not be decoded (written by a newer build, or corrupted).
    #[error("stored {what} could not be decoded: {reason}")]
    Corrupt {
        /// What was being read.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The database failed during an operation.
    #[error("{backend} storage failed in {operation}: {source}")]
    Backend {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The storage operation (the trait method).
        operation: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
}

fn fmt_version(version: Option<i64>) -> String {
    version.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

/// The result of a storage operation.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

impl StorageError {
    /// A [`StorageError::ThreadNotFound`].
    pub fn thread_not_found(thread_id: &str) -> Self {
        Self::ThreadNotFound {
            thread_id: thread_id.to_owned(),
        }
    }

    /// A [`StorageError::Corrupt`].
    pub fn corrupt(what: &'static str, reason: impl ToString) -> Self {
        Self::Corrupt {
            what,
            reason: reason.to_string(),
        }
    }

    /// A [`StorageError::InvalidArgument`].
    pub fn invalid(argument: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            argument,
            reason: reason.into(),
        }
    }
}
