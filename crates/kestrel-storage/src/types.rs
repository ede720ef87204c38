//! The records the store keeps and the queries it answers.
//!
//! Timestamps are UTC with microsecond precision on every backend (the store truncates what it is
//! given), so a record reads back equal to what was written, whichever backend holds it.

use std::str::FromStr;

use chrono::{DateTime, SubsecRound, Utc};
use kestrel_core::message::{Message, Part, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::StorageError;

// Stored agents, their versions and message queues: their own file, the same place here.
pub use crate::records::*;

/// Now, truncated to microseconds (the precision every backend keeps).
pub fn now() -> DateTime<Utc> {
    truncate(Utc::now())
}

/// A time truncated to microseconds.
pub fn truncate(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

// ---------------------------------------------------------------------------------------------
// Pages

/// Which page of a listing to return. Pages are numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageRequest {
    /// The page, from 0.
    pub page: u32,
    /// Items per page; at least 1.
    pub per_page: u32,
}

impl PageRequest {
    /// Page `page` (from 0) of `per_page` items.
    pub fn new(page: u32, per_page: u32) -> Self {
        Self { page, per_page }
    }

    /// The number of items before this page.
    pub fn offset(&self) -> u64 {
        u64::from(self.page) * u64::from(self.per_page)
    }
}

impl Default for PageRequest {
    /// The first page of 100 items.
    fn default() -> Self {
        Self::new(0, 100)
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// The items of this page, in the listing's order.
    pub items: Vec<T>,
    /// The page number, from 0.
    pub page: u32,
    /// The page size asked for.
    pub per_page: u32,
    /// How many items the whole listing has.
    pub total: u64,
    /// Whether a later page has items.
    pub has_more: bool,
}

impl<T> Page<T> {
    /// A page of `items` out of `total`.
    pub fn new(items: Vec<T>, request: PageRequest, total: u64) -> Self {
        let shown = request.offset() + items.len() as u64;
        Self {
            items,
            page: request.page,
            per_page: request.per_page,
            total,
            has_more: shown < total,
        }
    }
}

/// Ascending or descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Oldest (smallest) first.
    Asc,
    /// Newest (largest) first.
    #[default]
    Desc,
}

// ---------------------------------------------------------------------------------------------
// Threads

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

// ---------------------------------------------------------------------------------------------
// Messages

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

// ---------------------------------------------------------------------------------------------
// Runs

/// Where a run stands, as stored: the runtime's own vocabulary ([`RunPhase`]), so a run is
/// written as it ended (completed, failed or aborted) and read back the same.
pub use kestrel_core::run::RunPhase;

/// The phase stored under `name`; a name no phase has is corrupt data.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn parse_phase(name: &str) -> Result<RunPhase, StorageError> {
    RunPhase::parse(name).ok_or_else(|| StorageError::corrupt("run status", name))
}

/// A stored run: its status and its snapshot (a serialised `RunState`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// The agent running it.
    pub agent_id: String,
    /// Its thread, when it uses memory.
    pub thread_id: Option<String>,
    /// Its resource, when it uses memory.
    pub resource_id: Option<String>,
    /// Where it stands.
    pub status: RunPhase,
    /// The snapshot, as JSON text: stores keep it as it is, without reading it (the run store
    /// serialises the run's state straight to this text and back, with no JSON tree
    /// between). A store may give back equivalent text (PostgreSQL's `jsonb` orders keys and
    /// spaces them its own way).
    pub snapshot: Box<RawValue>,
    /// The run that delegated to this one.
    pub parent_run_id: Option<String>,
    /// Assigned by the store: 1 on creation, +1 on every save.
    pub version: i64,
    /// Assigned by the store on creation.
    pub created_at: DateTime<Utc>,
    /// Assigned by the store on every save.
    pub updated_at: DateTime<Utc>,
    /// The lease token this save is written under, when runs are shared between instances:
    /// the store keeps per run the greatest token a write carried and refuses a save with a
    /// smaller one ([`crate::StorageError::Fenced`]). `None` is not
    /// checked, and keeps the token stored before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<i64>,
}

/// Records are equal when their fields are, the snapshots compared as JSON values (a store
/// may give back the snapshot's text spaced or ordered its own way).
impl PartialEq for RunRecord {
    fn eq(&self, other: &Self) -> bool {
        let same_snapshot = self.snapshot.get() == other.snapshot.get()
            || matches!(
                (
                    serde_json::from_str::<Value>(self.snapshot.get()),
                    serde_json::from_str::<Value>(other.snapshot.get()),
                ),
                (Ok(a), Ok(b)) if a == b
            );
        same_snapshot
            && self.run_id == other.run_id
            && self.agent_id == other.agent_id
            && self.thread_id == other.thread_id
            && self.resource_id == other.resource_id
            && self.status == other.status
            && self.parent_run_id == other.parent_run_id
            && self.version == other.version
            && self.created_at == other.created_at
            && self.updated_at == other.updated_at
            && self.lease_token == other.lease_token
    }
}

impl RunRecord {
    /// A record to create (version and timestamps are assigned by the store).
    pub fn new(
        run_id: impl Into<String>,
        agent_id: impl Into<String>,
        status: RunPhase,
        snapshot: Box<RawValue>,
    ) -> Self {
        let now = now();
        Self {
            run_id: run_id.into(),
            agent_id: agent_id.into(),
            thread_id: None,
            resource_id: None,
            status,
            snapshot,
            parent_run_id: None,
            version: 0,
            created_at: now,
            updated_at: now,
            lease_token: None,
        }
    }
}

/// What [`crate::RunRecordStore::list_runs`] returns; `None` fields do not filter.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunFilter {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only runs on this thread.
    pub thread_id: Option<String>,
    /// Only runs of this resource.
    pub resource_id: Option<String>,
    /// Only runs in one of these statuses (empty: any).
    pub statuses: Vec<RunPhase>,
    /// Only sub-runs of this run.
    pub parent_run_id: Option<String>,
    /// Only runs created at or after this time.
    pub created_from: Option<DateTime<Utc>>,
    /// Only runs created before this time.
    pub created_to: Option<DateTime<Utc>>,
    /// The page (newest first; ties by run id, descending).
    pub page: PageRequest,
}

// ---------------------------------------------------------------------------------------------
// Workflow runs

pub use kestrel_core::event::WorkflowStatus;

/// A workflow run as stored: its latest snapshot (JSON) and the columns runs are found by.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRunRecord {
    /// The workflow.
    pub workflow_id: String,
    /// The run.
    pub run_id: String,
    /// The resource the run acts for.
    pub resource_id: Option<String>,
    /// Where it stands (the store's copy wins over the snapshot's own).
    pub status: WorkflowStatus,
    /// The snapshot, as JSON text: stores keep it as it is, without reading it (the workflow
    /// store serialises its snapshot straight to this text and back, with no JSON tree
    /// between). A store may give back equivalent text (PostgreSQL's `jsonb` orders keys and
    /// spaces them its own way).
    pub snapshot: Box<RawValue>,
    /// Assigned by the store on creation.
    pub created_at: DateTime<Utc>,
    /// Assigned by the store on every save.
    pub updated_at: DateTime<Utc>,
    /// In a cluster: the lease token of the instance that saves it. The save raises the run's
    /// fence to it, and is refused ([`crate::StorageError::WorkflowRunFenced`], nothing
    /// written) when the fence is above. `None` is not checked. Not read back.
    pub lease_token: Option<u64>,
}

impl WorkflowRunRecord {
    /// A record to save (the times are assigned by the store).
    pub fn new(
        workflow_id: impl Into<String>,
        run_id: impl Into<String>,
        status: WorkflowStatus,
        snapshot: Box<RawValue>,
    ) -> Self {
        let now = now();
        Self {
            workflow_id: workflow_id.into(),
            run_id: run_id.into(),
            resource_id: None,
            status,
            snapshot,
            created_at: now,
            updated_at: now,
            lease_token: None,
        }
    }
}

/// Which workflow runs [`crate::WorkflowRecordStore::list_workflow_runs`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunFilter {
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Only runs of this resource.
    pub resource_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<WorkflowStatus>,
    /// The page (newest first; ties by run id, descending).
    pub page: PageRequest,
}

// ---------------------------------------------------------------------------------------------
// Observations

/// A dated note condensed from messages by observational memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// Its id.
    pub id: String,
    /// The thread or resource it belongs to.
    pub scope: Scope,
    /// The note.
    pub text: String,
    /// When it was observed.
    pub created_at: DateTime<Utc>,
    /// The last message seq (of `source_thread_id`) it covers.
    pub observed_up_to_seq: Option<i64>,
    /// The thread its messages came from.
    pub source_thread_id: Option<String>,
}

/// An observation to add.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewObservation {
    /// Its id; a fresh UUID when `None`.
    pub id: Option<String>,
    /// The note.
    pub text: String,
    /// When it was observed; now when `None`.
    pub created_at: Option<DateTime<Utc>>,
    /// The last message seq it covers.
    pub observed_up_to_seq: Option<i64>,
    /// The thread its messages came from.
    pub source_thread_id: Option<String>,
}

impl NewObservation {
    /// An observation holding `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Vectors

/// A vector to store in an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorRecord {
    /// Its id in the index.
    pub id: String,
    /// The embedding; its length must be the index's dimension.
    pub vector: Vec<f32>,
    /// Metadata; the string values of `thread_id`, `resource_id` and `message_id` are indexed
    /// for [`VectorFilter`] and for cascades.
    pub metadata: Metadata,
}

/// Restricts a vector query; `None` fields do not filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VectorFilter {
    /// Only vectors whose metadata `thread_id` is this.
    pub thread_id: Option<String>,
    /// Only vectors whose metadata `resource_id` is this.
    pub resource_id: Option<String>,
}

/// A nearest-neighbour query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VectorQuery {
    /// The query embedding.
    pub vector: Vec<f32>,
    /// At most this many matches.
    pub top_k: u32,
    /// The filter.
    pub filter: VectorFilter,
}

/// A query result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorMatch {
    /// The vector's id.
    pub id: String,
    /// Cosine similarity in [-1, 1] (0 when either vector is zero).
    pub score: f32,
    /// The vector's metadata.
    pub metadata: Metadata,
}
