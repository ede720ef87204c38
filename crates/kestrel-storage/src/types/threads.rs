//! Threads: conversations owned by a resource, and how they are created, changed, copied and listed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Direction, Metadata, PageRequest};

/// A conversation, owned by one resource (a user or another entity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// Globally unique id.
    pub id: String,
    /// The resource that owns it.
    pub resource_id: String,
    /// A title, often generated after the first exchange.
    pub title: Option<String>,
    /// Free-form metadata, filterable with [`ThreadQuery::metadata`].
    pub metadata: Metadata,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it, or its messages, last changed. Appends move it to within a second: SQLite
    /// leaves a thread's row alone for appends less than a second after its `updated_at`, so a
    /// busy thread is not rewritten by every message.
    pub updated_at: DateTime<Utc>,
}

/// A thread to create.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewThread {
    /// Its id; a fresh UUID when `None`.
    pub id: Option<String>,
    /// The resource that owns it.
    pub resource_id: String,
    /// A title.
    pub title: Option<String>,
    /// Metadata.
    pub metadata: Metadata,
    /// Its creation time (for imports); now when `None`.
    pub created_at: Option<DateTime<Utc>>,
}

impl NewThread {
    /// A thread of `resource_id` with a fresh id, no title and no metadata.
    pub fn new(resource_id: impl Into<String>) -> Self {
        Self {
            resource_id: resource_id.into(),
            ..Self::default()
        }
    }

    /// Sets the id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
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

/// How [`ThreadPatch`] changes metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataUpdate {
    /// Sets these keys, keeps the others (a shallow merge).
    Merge(Metadata),
    /// Replaces the whole object.
    Replace(Metadata),
}

/// Changes to a thread; `None` fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThreadPatch {
    /// A new title.
    pub title: Option<String>,
    /// A metadata change.
    pub metadata: Option<MetadataUpdate>,
}

/// Options of [`crate::ThreadStore::clone_thread`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CloneThread {
    /// The resource that owns the source thread (checked).
    pub resource_id: String,
    /// The new thread's id; a fresh UUID when `None`.
    pub new_thread_id: Option<String>,
    /// The new thread's title; the source's when `None`.
    pub title: Option<String>,
}

/// The field threads are ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ThreadOrderField {
    /// Creation time.
    #[default]
    CreatedAt,
    /// Last change.
    UpdatedAt,
}

/// How threads are ordered; ties are broken by id in the same direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThreadOrder {
    /// The field.
    pub field: ThreadOrderField,
    /// The direction.
    pub direction: Direction,
}

/// What [`crate::ThreadStore::list_threads`] returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThreadQuery {
    /// Only this resource's threads.
    pub resource_id: Option<String>,
    /// Only threads whose metadata has every key of this JSON object with an equal value
    /// (nested values compared as JSON). Anything but an object is
    /// [`StorageError::InvalidFilter`].
    pub metadata: Option<Value>,
    /// The page.
    pub page: PageRequest,
    /// The order.
    pub order: ThreadOrder,
}
