//! Typed errors: building a [`Memory`](crate::Memory) and using it.

use kestrel_core::memory::MemoryError;
use kestrel_core::model::UnknownModel;
use kestrel_storage::StorageError;

/// Why a [`MemoryBuilder`](crate::MemoryBuilder) could not build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryBuildError {
    /// The title model string could not be resolved.
    #[error("the title model cannot be resolved: {source}")]
    TitleModel {
        /// The registry's answer.
        #[source]
        source: UnknownModel,
    },
    /// The observer or reflector model string of observational memory could not be resolved.
    #[error("the observational memory model cannot be resolved: {source}")]
    ObservationalModel {
        /// The registry's answer.
        #[source]
        source: UnknownModel,
    },
    /// The working memory schema is not a JSON schema of an object.
    #[error("invalid working memory schema: {reason}")]
    WorkingMemorySchema {
        /// What is wrong with it.
        reason: String,
    },
    /// Two processors (or a processor and a built-in feature) share a name.
    #[error("two memory processors are named `{name}`")]
    DuplicateProcessor {
        /// The name.
        name: String,
    },
}

/// What went wrong while memory loaded or stored a conversation.
///
/// The agent sees it as the source of a [`MemoryError`] (inside
/// `AgentError::Memory`); downcast the source to this type to match on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The run's thread belongs to another resource. Nothing was read or written. The owner is
    /// deliberately not named: the message may reach the other user.
    #[error(
        "thread `{thread_id}` belongs to another resource, not to `{resource_id}`; memory refuses to read or write it"
    )]
    ForeignThread {
        /// The thread.
        thread_id: String,
        /// The resource the run named.
        resource_id: String,
    },
    /// The memory has no store: it was built without one and its agent runs in no instance
    /// with a storage. Nothing was read or written.
    #[error(
        "this memory has no storage: give its agent's instance one \
         (Kestrel::builder().storage(..)), or the memory its own (Memory::builder().storage(..))"
    )]
    NoStorage,
    /// The thread disappeared while the run used it (deleted by someone else).
    #[error("thread `{thread_id}` no longer exists; its messages cannot be stored")]
    ThreadGone {
        /// The thread.
        thread_id: String,
    },
    /// Semantic recall's vector index holds vectors of another dimension than the embedder's:
    /// an [index name](crate::SemanticRecall::index_name) reused with another embedding model.
    /// Nothing was searched or indexed.
    #[error(
        "vector index `{index}` holds {index_dimension}-dimensional vectors but the embedder \
         {embedder} makes {embedder_dimension}-dimensional ones; use another index name (or \
         the default, named after the embedder)"
    )]
    IndexDimension {
        /// The index.
        index: String,
        /// The embedder, as `provider/model`.
        embedder: String,
        /// The index's dimension.
        index_dimension: usize,
        /// The length of the embedder's vectors.
        embedder_dimension: usize,
    },
    /// The store failed.
    #[error("memory could not {action}: {source}")]
    Storage {
        /// What memory was doing (`load the thread`, `store messages`...).
        action: &'static str,
        /// The store's error.
        #[source]
        source: StorageError,
    },
}

impl Error {
    /// Maps a store error of `action` on `thread_id` for `resource_id`, turning ownership and
    /// existence errors into their own variants.
    pub(crate) fn storage(
        action: &'static str,
        thread_id: &str,
        resource_id: &str,
        source: StorageError,
    ) -> Self {
        match source {
            StorageError::ThreadOwnedByOtherResource { .. } => Self::ForeignThread {
                thread_id: thread_id.to_owned(),
                resource_id: resource_id.to_owned(),
            },
            StorageError::ThreadNotFound { .. } => Self::ThreadGone {
                thread_id: thread_id.to_owned(),
            },
            source => Self::Storage { action, source },
        }
    }
}

impl From<Error> for MemoryError {
    fn from(error: Error) -> Self {
        let fenced = matches!(
            &error,
            Error::Storage {
                source: StorageError::Fenced { .. },
                ..
            }
        );
        let unavailable = matches!(
            &error,
            Error::Storage {
                source: StorageError::Backend { .. },
                ..
            }
        );
        if fenced {
            MemoryError::fenced(error.to_string(), error)
        } else if unavailable {
            MemoryError::unavailable(error.to_string(), error)
        } else {
            MemoryError::with_source(error.to_string(), error)
        }
    }
}
