//! The messages of threads, in the order the store gives them (a per-thread seq).

use async_trait::async_trait;
use kestrel_core::lease::Fence;

use crate::error::Result;
use crate::types::{MessageList, MessageSearch, NewMessage, Selection, StoredMessage};

/// The messages of threads, in the order the store gives them (a per-thread seq).
///
/// Appends are idempotent by message id and atomic per batch: concurrent appenders to one thread never share a seq or interleave inside a batch.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Appends messages to a thread owned by `resource_id`, in order, and returns them as
    /// stored.
    ///
    /// New messages get the next seqs, contiguous within the batch. A message whose id is already
    /// in this thread is replaced (role, parts, status, metadata) and keeps its seq and creation
    /// time, so retried saves and resumed runs never duplicate. An id stored in another thread
    /// is [`StorageError::MessageInOtherThread`](crate::StorageError::MessageInOtherThread). A
    /// repeated id within the batch keeps its first position and its last content.
    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>>;

    /// Appends messages like [`MessageStore::append_messages`], as a write of run `fence.run_id`
    /// under lease token `fence.token`, in one transaction with the fence: refused with
    /// [`StorageError::Fenced`](crate::StorageError::Fenced), nothing written, when a write of
    /// the run (a snapshot or messages) carried a greater token before. Runs shared between
    /// instances store their messages this way, so an owner that lost its lease cannot add
    /// messages behind its successor's.
    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>>;

    /// Appends messages like [`MessageStore::append_messages`] and also returns the thread's last
    /// `last` messages stored before the first of them (in seq order, as
    /// `Selection::before(first_seq, last)` would): what a new turn of a conversation stores and
    /// reads, in one round trip where the backend can (SQLite). The default makes the two calls.
    async fn append_with_history(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        last: u32,
    ) -> Result<(Vec<StoredMessage>, MessageList)> {
        let stored = self
            .append_messages(thread_id, resource_id, messages)
            .await?;
        let first = stored.iter().map(|m| m.seq).min().unwrap_or(i64::MAX);
        let history = self
            .list_messages(thread_id, Some(resource_id), Selection::before(first, last))
            .await?;
        Ok((stored, history))
    }

    /// Messages of a thread, in seq order. With `resource_id`, the thread must belong to it.
    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList>;

    /// The messages with these ids that exist, ordered by thread then seq. With `resource_id`,
    /// a message of another resource's thread is refused.
    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>>;

    /// Deletes these messages of a thread (ids not in it are ignored), and the vectors whose
    /// metadata `message_id` names one of them. Returns how many messages were deleted. Seqs are
    /// not reused.
    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64>;

    /// Messages whose text parts contain `query` (case-insensitive, Unicode lowercase), newest
    /// first (thread scope: by seq; resource scope: by creation time, then thread id, then seq),
    /// at most `limit`.
    ///
    /// Cost: without a text index, the scan walks the scope's messages newest first through an
    /// index (`(thread_id, seq)` or `(resource_id, created_at)`) and stops after `limit` matches,
    /// so a frequent term is cheap and a rare one is O(messages in scope). SQLite keeps an FTS5
    /// trigram index and PostgreSQL a `pg_trgm` GIN index (when the server offers the
    /// extension), which make rare terms of three characters or more cheap as well; the results
    /// are the same either way.
    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>>;
}
