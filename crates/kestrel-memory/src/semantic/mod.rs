//! Semantic recall: earlier messages found by meaning, not by recency.
//!
//! The `last_messages` window shows a run what was said just before. Semantic recall finds what
//! was said long ago (or in the user's other conversations) that relates to the new message:
//!
//! - **when messages are stored**, the text of each new user and assistant message is embedded
//!   and upserted into a vector index of the store ([`VectorStore::upsert_vectors`]), with the
//!   message's `thread_id`, `resource_id`, `message_id` and `seq` as metadata. The vector's id is
//!   the message id, so deleting a message or a thread deletes its vector;
//! - **before a run**, the text of the input's last user message is embedded and the index is
//!   searched for the [`top_k`](SemanticRecall::top_k) most similar messages of this thread or of
//!   all the resource's threads ([`scope`](SemanticRecall::scope)). Each match is loaded with
//!   [`message_range`](SemanticRecall::message_range) neighbours before and after it. Matches of
//!   this thread join the run's history in their place (in seq order, before the recent window);
//!   matches of the resource's other threads are shown in the system text as earlier
//!   conversations, with their thread id and timestamps.
//!
//! Messages the run already sees (its input, the `last_messages` window) are never counted as
//! matches, so `top_k` always brings in older context. A message is never recalled into another
//! resource's run: the search filters by resource and every load checks the thread's owner.
//!
//! The index is named after the embedder and its dimension ([`default_index_name`]), and created
//! on first use; changing the embedding model therefore starts a new index rather than mixing
//! vectors of different models. An explicit [`index_name`](SemanticRecall::index_name) whose
//! index exists with another dimension fails the run with
//! [`Error::IndexDimension`](crate::Error::IndexDimension).
//!
//! This module holds the options; the memory stage that stores and searches the vectors is in
//! `processor`.
//!
//! [`VectorStore::upsert_vectors`]: kestrel_storage::VectorStore::upsert_vectors

mod processor;

use std::fmt;

use kestrel_core::embedding::{Embedder, SharedEmbedder};

pub(crate) use processor::SemanticRecallProcessor;

/// How many matches semantic recall brings in unless [`SemanticRecall::top_k`] says otherwise.
pub const DEFAULT_TOP_K: u32 = 4;

/// Which messages semantic recall searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SemanticRecallScope {
    /// Only the run's thread.
    Thread,
    /// Every thread of the run's resource (the default, as in Mastra): what the user said in
    /// other conversations is found too, and shown as earlier conversations.
    #[default]
    Resource,
}

/// How many neighbours of each match are loaded with it, for context.
///
/// A number means as many before as after: `MessageRange::from(2)` is two before and two after.
/// The default is one before and one after (the question before an answer, the answer after a
/// question).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRange {
    /// Messages before the match.
    pub before: u32,
    /// Messages after the match.
    pub after: u32,
}

impl MessageRange {
    /// `before` messages before each match and `after` after it.
    pub fn new(before: u32, after: u32) -> Self {
        Self { before, after }
    }
}

impl Default for MessageRange {
    /// One before, one after.
    fn default() -> Self {
        Self::new(1, 1)
    }
}

impl From<u32> for MessageRange {
    /// As many before as after.
    fn from(both: u32) -> Self {
        Self::new(both, both)
    }
}

impl From<(u32, u32)> for MessageRange {
    /// `(before, after)`.
    fn from((before, after): (u32, u32)) -> Self {
        Self::new(before, after)
    }
}

/// Semantic recall options: an embedder, how many matches, their neighbours, the scope and the
/// vector index. Give them to
/// [`MemoryBuilder::semantic_recall`](crate::MemoryBuilder::semantic_recall); see
/// [the module docs](crate::semantic) for what happens.
///
/// ```
/// # fn main() -> Result<(), kestrel_memory::MemoryBuildError> {
/// use std::sync::Arc;
///
/// use kestrel_core::embedding::HashEmbedder;
/// use kestrel_memory::{Memory, SemanticRecall, SemanticRecallScope};
/// use kestrel_storage::{InMemoryStorage, Storage};
///
/// // In real programs, a real embedder: `kestrel_embed_local::LocalEmbedder::from_env()`, or
/// // `EmbedderRegistry::from_env().resolve("openai/text-embedding-3-small")?`.
/// let embedder = Arc::new(HashEmbedder::new(256));
/// let store: Arc<dyn Storage> = Arc::new(InMemoryStorage::new());
/// let memory = Memory::builder().storage(store)
///     .last_messages(10)
///     .semantic_recall(
///         SemanticRecall::new(embedder)
///             .top_k(3)
///             .message_range(2)
///             .scope(SemanticRecallScope::Thread),
///     )
///     .build()?;
/// # let _ = memory;
/// # Ok(())
/// # }
/// ```
///
/// **When the embedder fails.** Storing never fails because of the embedder: the messages are
/// stored, the failure is logged (`tracing` warning) and those messages are simply not
/// searchable. Searching degrades the same way: if the input cannot be embedded, the run goes on
/// with its recent window only, and a warning is logged. Semantic recall adds older context to a
/// conversation that works without it; an embedding provider being down or rate-limited for a
/// minute should make answers less informed, not make the whole chat fail. A vector index that
/// cannot be written is treated like a failed embedding (logged; the messages are stored).
///
/// Two errors do fail the run, with a typed [`Error`](crate::Error): an index of another
/// dimension ([`Error::IndexDimension`](crate::Error::IndexDimension)), a configuration mistake
/// that would otherwise silently disable recall for good, and a store that cannot be searched or
/// read before a run ([`Error::Storage`](crate::Error::Storage)), as for the rest of memory.
#[derive(Clone)]
pub struct SemanticRecall {
    embedder: SharedEmbedder,
    top_k: u32,
    message_range: MessageRange,
    scope: SemanticRecallScope,
    index_name: Option<String>,
    min_score: Option<f32>,
}

impl fmt::Debug for SemanticRecall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemanticRecall")
            .field("embedder", &self.embedder)
            .field("top_k", &self.top_k)
            .field("message_range", &self.message_range)
            .field("scope", &self.scope)
            .field("index_name", &self.index_name)
            .field("min_score", &self.min_score)
            .finish()
    }
}

impl SemanticRecall {
    /// Semantic recall with `embedder` and the defaults: the 4 best matches, one message before
    /// and after each, across the resource's threads, in the index named after the embedder.
    pub fn new(embedder: SharedEmbedder) -> Self {
        Self {
            embedder,
            top_k: DEFAULT_TOP_K,
            message_range: MessageRange::default(),
            scope: SemanticRecallScope::default(),
            index_name: None,
            min_score: None,
        }
    }

    /// How many matching messages to bring in (default 4), not counting their neighbours. With
    /// 0 messages are still indexed but nothing is recalled.
    pub fn top_k(mut self, top_k: u32) -> Self {
        self.top_k = top_k;
        self
    }

    /// How many neighbours to load around each match: a number (as many before as after), a
    /// `(before, after)` pair or a [`MessageRange`]. Default one before and one after.
    pub fn message_range(mut self, range: impl Into<MessageRange>) -> Self {
        self.message_range = range.into();
        self
    }

    /// Searches this thread only or all the resource's threads (default: resource).
    pub fn scope(mut self, scope: SemanticRecallScope) -> Self {
        self.scope = scope;
        self
    }

    /// Uses the vector index `name` instead of the one named after the embedder
    /// ([`default_index_name`]). Its dimension must be the embedder's.
    pub fn index_name(mut self, name: impl Into<String>) -> Self {
        self.index_name = Some(name.into());
        self
    }

    /// Ignores matches whose cosine similarity to the input is below `score` (default: none
    /// ignored; the `top_k` best always come in).
    pub fn min_score(mut self, score: f32) -> Self {
        self.min_score = Some(score);
        self
    }

    /// The embedder.
    pub fn embedder(&self) -> &SharedEmbedder {
        &self.embedder
    }

    /// The index the vectors of `dimension` go to.
    fn index_for(&self, dimension: usize) -> String {
        match &self.index_name {
            Some(name) => name.clone(),
            None => default_index_name(self.embedder.as_ref(), dimension),
        }
    }
}

/// The vector index semantic recall uses for `embedder` when no name is given:
/// `memory_messages_<provider>_<model>_<dimension>`, lowercase, with every character but ASCII
/// letters and digits replaced by `_` (e.g. `memory_messages_openai_text_embedding_3_small_1536`).
pub fn default_index_name(embedder: &dyn Embedder, dimension: usize) -> String {
    let raw = format!(
        "memory_messages_{}_{}_{dimension}",
        embedder.provider(),
        embedder.model_id()
    );
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use kestrel_core::embedding::HashEmbedder;
    use kestrel_core::message::{Message, Part, Role};
    use kestrel_storage::{MessageStatus, Metadata, StoredMessage};

    use super::processor::{earlier_conversations, query_text};
    use super::{MessageRange, default_index_name};

    #[test]
    fn message_ranges_from_numbers_and_pairs() {
        assert_eq!(MessageRange::default(), MessageRange::new(1, 1));
        assert_eq!(MessageRange::from(3), MessageRange::new(3, 3));
        assert_eq!(MessageRange::from((0, 2)), MessageRange::new(0, 2));
    }

    #[test]
    fn the_default_index_is_named_after_the_embedder() {
        let embedder = Arc::new(HashEmbedder::new(64));
        assert_eq!(
            default_index_name(embedder.as_ref(), 64),
            "memory_messages_hash_hash_64_64"
        );
    }

    #[test]
    fn the_query_is_the_last_user_text() {
        let input = vec![
            Message::user("first"),
            Message::user("second"),
            Message {
                id: "a".into(),
                role: Role::Assistant,
                parts: vec![Part::Text {
                    text: "reply".into(),
                }],
            },
        ];
        assert_eq!(query_text(&input).as_deref(), Some("second"));
        assert_eq!(query_text(&input[2..]).as_deref(), Some("reply"));
        assert_eq!(query_text(&[]), None);
    }

    #[test]
    fn earlier_conversations_name_the_thread_and_the_times() {
        let message = |seq: i64, role: Role, text: &str| StoredMessage {
            id: format!("m{seq}"),
            thread_id: "old".into(),
            resource_id: "r".into(),
            role,
            parts: vec![Part::Text { text: text.into() }],
            created_at: kestrel_storage::codec::now(),
            seq,
            status: MessageStatus::Complete,
            metadata: Metadata::new(),
        };
        let text = earlier_conversations(&[(
            "old".into(),
            vec![
                message(1, Role::User, "hello"),
                message(2, Role::Assistant, "hi"),
                message(5, Role::User, "bye"),
            ],
        )]);
        assert!(text.starts_with("# Earlier conversations"));
        assert!(text.contains("<earlier_conversation thread_id=\"old\" from=\""));
        assert!(text.contains(" UTC] user: hello\n"));
        assert!(text.contains(" UTC] assistant: hi\n…\n["));
        assert!(text.ends_with("</earlier_conversation>\n"));
    }
}
