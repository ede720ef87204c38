//! Messages: as appended, as stored, which of a thread's to read, and searches.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use kestrel_core::message::{Message, Part, Role};
use serde::{Deserialize, Serialize};

use super::{Metadata, PageRequest};
use crate::error::StorageError;

/// Whether a stored message is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// A complete message.
    #[default]
    Complete,
    /// The complete part of a step that was aborted (its text so far, without unfinished tool
    /// calls), saved so nothing the user saw is lost.
    Aborted,
}

impl MessageStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Aborted => "aborted",
        }
    }
}

impl FromStr for MessageStatus {
    type Err = StorageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "complete" => Ok(Self::Complete),
            "aborted" => Ok(Self::Aborted),
            other => Err(StorageError::corrupt("message status", other)),
        }
    }
}

/// A message to append to a thread.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// The message (its id is kept: stored ids equal streamed ids).
    pub message: Message,
    /// Complete or aborted.
    pub status: MessageStatus,
    /// Metadata.
    pub metadata: Metadata,
    /// Its creation time (for imports); the append's time when `None`.
    pub created_at: Option<DateTime<Utc>>,
}

impl NewMessage {
    /// Marks the message aborted.
    pub fn aborted(mut self) -> Self {
        self.status = MessageStatus::Aborted;
        self
    }

    /// Sets the metadata.
    pub fn metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// Sets the creation time.
    pub fn created_at(mut self, at: DateTime<Utc>) -> Self {
        self.created_at = Some(at);
        self
    }
}

impl From<Message> for NewMessage {
    fn from(message: Message) -> Self {
        Self {
            message,
            status: MessageStatus::Complete,
            metadata: Metadata::new(),
            created_at: None,
        }
    }
}

/// A message as stored in a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    /// Globally unique id (equal to the id streamed in events).
    pub id: String,
    /// The thread.
    pub thread_id: String,
    /// The thread's resource.
    pub resource_id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    pub parts: Vec<Part>,
    /// When it was appended.
    pub created_at: DateTime<Utc>,
    /// Its place in the thread: assigned by the store, strictly increasing, and contiguous
    /// within one append.
    pub seq: i64,
    /// Complete or aborted.
    pub status: MessageStatus,
    /// Metadata.
    pub metadata: Metadata,
}

impl StoredMessage {
    /// The conversation message (id, role, parts).
    pub fn to_message(&self) -> Message {
        Message {
            id: self.id.clone(),
            role: self.role,
            parts: self.parts.clone(),
        }
    }
}

/// Which end of a [`SeqRange`] its limit keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anchor {
    /// The oldest messages of the range.
    #[default]
    Start,
    /// The newest messages of the range.
    End,
}

/// Messages between two sequence numbers (both bounds exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqRange {
    /// Only messages with a greater seq.
    pub after: Option<i64>,
    /// Only messages with a smaller seq.
    pub before: Option<i64>,
    /// At most this many, taken from the [`Anchor`] end.
    pub limit: Option<u32>,
    /// Which end the limit keeps.
    pub anchor: Anchor,
}

/// Which messages of a thread [`crate::MessageStore::list_messages`] returns, always in seq order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The last `n` messages.
    Last(u32),
    /// A range of sequence numbers.
    Range(SeqRange),
    /// A page, oldest first; the result carries the total.
    Page(PageRequest),
}

impl Selection {
    /// Every message of the thread.
    pub fn all() -> Self {
        Self::Range(SeqRange::default())
    }

    /// The last `n` messages.
    pub fn last(n: u32) -> Self {
        Self::Last(n)
    }

    /// The messages after `seq`, oldest first, at most `limit`.
    pub fn after(seq: i64, limit: Option<u32>) -> Self {
        Self::Range(SeqRange {
            after: Some(seq),
            limit,
            ..SeqRange::default()
        })
    }

    /// The `limit` messages just before `seq`.
    pub fn before(seq: i64, limit: u32) -> Self {
        Self::Range(SeqRange {
            before: Some(seq),
            limit: Some(limit),
            anchor: Anchor::End,
            ..SeqRange::default()
        })
    }

    /// Page `page` (from 0) of `per_page` messages, oldest first.
    pub fn page(page: u32, per_page: u32) -> Self {
        Self::Page(PageRequest::new(page, per_page))
    }
}

/// What [`crate::MessageStore::list_messages`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageList {
    /// The messages, in seq order.
    pub messages: Vec<StoredMessage>,
    /// Whether the thread has more messages on the far side of the limit (older ones for
    /// [`Selection::Last`] and [`Anchor::End`], newer ones otherwise).
    pub has_more: bool,
    /// The thread's message count, for [`Selection::Page`] only (counting is O(thread size)).
    pub total: Option<u64>,
}

/// Where to look: one thread (whose owner is checked) or all threads of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "camelCase")]
pub enum Scope {
    /// One thread.
    #[serde(rename_all = "camelCase")]
    Thread {
        /// The thread.
        thread_id: String,
        /// The resource that must own it.
        resource_id: String,
    },
    /// One resource (for working memory: the resource itself; for messages: all its threads).
    #[serde(rename_all = "camelCase")]
    Resource {
        /// The resource.
        resource_id: String,
    },
}

impl Scope {
    /// A thread scope.
    pub fn thread(thread_id: impl Into<String>, resource_id: impl Into<String>) -> Self {
        Self::Thread {
            thread_id: thread_id.into(),
            resource_id: resource_id.into(),
        }
    }

    /// A resource scope.
    pub fn resource(resource_id: impl Into<String>) -> Self {
        Self::Resource {
            resource_id: resource_id.into(),
        }
    }

    /// The resource, for either scope.
    pub fn resource_id(&self) -> &str {
        match self {
            Self::Thread { resource_id, .. } | Self::Resource { resource_id } => resource_id,
        }
    }
}

/// A plain-text search over stored messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSearch {
    /// One thread, or every thread of a resource.
    pub scope: Scope,
    /// The text to find: a case-insensitive substring of a message's text parts.
    pub query: String,
    /// At most this many messages.
    pub limit: u32,
}
