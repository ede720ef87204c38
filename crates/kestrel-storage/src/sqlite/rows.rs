//! Rows as SQLite returns them, and their decoding.

use crate::codec;
use crate::error::Result;
use kestrel_core::message::{Part, Role};

use crate::types::{MessageStatus, Metadata, Observation, RunRecord, Scope, StoredMessage, Thread};

/// A `threads` row.
pub(super) struct ThreadRow {
    id: String,
    resource_id: String,
    title: Option<String>,
    metadata: String,
    created_at: i64,
    updated_at: i64,
}

impl ThreadRow {
    /// Reads the columns of `sql::thread_cols!`, in order.
    pub(super) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            resource_id: row.get(1)?,
            title: row.get(2)?,
            metadata: row.get(3)?,
            created_at: row.get(4)?,
            updated_at: row.get(5)?,
        })
    }

    pub(super) fn into_thread(self) -> Result<Thread> {
        Ok(Thread {
            metadata: codec::parse_map("thread metadata", &self.metadata)?,
            created_at: codec::from_micros(self.created_at)?,
            updated_at: codec::from_micros(self.updated_at)?,
            id: self.id,
            resource_id: self.resource_id,
            title: self.title,
        })
    }
}

/// One message of a JSON array built by `sql::messages_json!`.
#[derive(serde::Deserialize)]
struct MessageJson(
    String,
    String,
    String,
    i64,
    Role,
    Vec<Part>,
    MessageStatus,
    Metadata,
    i64,
);

/// Decodes the JSON array of messages a message query returns.
pub(super) fn parse_messages(json: &str) -> Result<Vec<StoredMessage>> {
    let rows: Vec<MessageJson> =
        serde_json::from_str(json).map_err(|e| crate::StorageError::corrupt("messages", e))?;
    rows.into_iter()
        .map(
            |MessageJson(id, thread_id, resource_id, seq, role, parts, status, metadata, at)| {
                Ok(StoredMessage {
                    id,
                    thread_id,
                    resource_id,
                    role,
                    parts,
                    created_at: codec::from_micros(at)?,
                    seq,
                    status,
                    metadata,
                })
            },
        )
        .collect()
}

/// A `messages` row, in the column order of [`super::sql::HISTORY_BEFORE`].
pub(super) struct MessageRow {
    id: String,
    thread_id: String,
    resource_id: String,
    seq: i64,
    role: String,
    parts: String,
    status: String,
    metadata: String,
    created_at: i64,
}

impl MessageRow {
    /// Reads the row's columns, in order.
    pub(super) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            thread_id: row.get(1)?,
            resource_id: row.get(2)?,
            seq: row.get(3)?,
            role: row.get(4)?,
            parts: row.get(5)?,
            status: row.get(6)?,
            metadata: row.get(7)?,
            created_at: row.get(8)?,
        })
    }

    pub(super) fn into_message(self) -> Result<StoredMessage> {
        Ok(StoredMessage {
            status: self.status.parse()?,
            role: codec::parse_role(&self.role)?,
            parts: codec::parse_parts(&self.parts)?,
            metadata: codec::parse_map("message metadata", &self.metadata)?,
            created_at: codec::from_micros(self.created_at)?,
            seq: self.seq,
            id: self.id,
            thread_id: self.thread_id,
            resource_id: self.resource_id,
        })
    }
}

/// A `runs` row.
pub(super) struct RunRow {
    run_id: String,
    agent_id: String,
    thread_id: Option<String>,
    resource_id: Option<String>,
    status: String,
    snapshot: String,
    parent_run_id: Option<String>,
    version: i64,
    created_at: i64,
    updated_at: i64,
    lease_token: Option<i64>,
}

impl RunRow {
    /// Reads the columns of `sql::run_cols!`, in order.
    pub(super) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            run_id: row.get(0)?,
            agent_id: row.get(1)?,
            thread_id: row.get(2)?,
            resource_id: row.get(3)?,
            status: row.get(4)?,
            snapshot: row.get(5)?,
            parent_run_id: row.get(6)?,
            version: row.get(7)?,
            created_at: row.get(8)?,
            updated_at: row.get(9)?,
            lease_token: row.get(10)?,
        })
    }

    pub(super) fn into_record(self) -> Result<RunRecord> {
        Ok(RunRecord {
            status: crate::types::parse_phase(&self.status)?,
            snapshot: serde_json::value::RawValue::from_string(self.snapshot)
                .map_err(|e| crate::StorageError::corrupt("run snapshot", e))?,
            created_at: codec::from_micros(self.created_at)?,
            updated_at: codec::from_micros(self.updated_at)?,
            run_id: self.run_id,
            agent_id: self.agent_id,
            thread_id: self.thread_id,
            resource_id: self.resource_id,
            parent_run_id: self.parent_run_id,
            version: self.version,
            lease_token: self.lease_token,
        })
    }
}

/// An `observations` row.
pub(super) struct ObservationRow {
    id: String,
    thread_id: Option<String>,
    resource_id: String,
    text: String,
    created_at: i64,
    observed_up_to_seq: Option<i64>,
    source_thread_id: Option<String>,
}

impl ObservationRow {
    /// Reads the columns of `sql::observation_cols!`, in order.
    pub(super) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            thread_id: row.get(1)?,
            resource_id: row.get(2)?,
            text: row.get(3)?,
            created_at: row.get(4)?,
            observed_up_to_seq: row.get(5)?,
            source_thread_id: row.get(6)?,
        })
    }

    pub(super) fn into_observation(self) -> Result<Observation> {
        let scope = match self.thread_id {
            Some(thread_id) => Scope::Thread {
                thread_id,
                resource_id: self.resource_id,
            },
            None => Scope::Resource {
                resource_id: self.resource_id,
            },
        };
        Ok(Observation {
            id: self.id,
            scope,
            text: self.text,
            created_at: codec::from_micros(self.created_at)?,
            observed_up_to_seq: self.observed_up_to_seq,
            source_thread_id: self.source_thread_id,
        })
    }
}
