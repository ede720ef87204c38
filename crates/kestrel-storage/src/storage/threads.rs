//! Threads owned by resources: created, read, changed, deleted, copied and listed.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{CloneThread, NewThread, Page, Thread, ThreadPatch, ThreadQuery};

/// Threads owned by resources: created, read, changed, deleted, copied and listed.
///
/// A thread is one conversation; every operation on its content names the resource the caller acts for.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// Creates a thread. An existing id is [`StorageError::ThreadExists`](crate::StorageError::ThreadExists).
    async fn create_thread(&self, thread: NewThread) -> Result<Thread>;

    /// The thread with this id, if any. The caller compares its `resource_id` with the resource
    /// it acts for.
    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>>;

    /// Changes a thread's title and/or metadata and bumps `updated_at`.
    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread>;

    /// Deletes a thread with its messages, its thread-scoped observations, its working memory,
    /// its observed-seq marker and the vectors whose metadata names it. `false` when there was
    /// no such thread.
    async fn delete_thread(&self, thread_id: &str) -> Result<bool>;

    /// Copies a thread: a new id, the source's messages in the same order (new message ids,
    /// seqs renumbered from 1), the source's metadata plus
    /// `"clone": {"sourceThreadId", "clonedAt"}`. Working memory, observations and vectors are
    /// not copied.
    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread>;

    /// Threads by resource and/or metadata filter, paginated and ordered.
    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>>;
}
