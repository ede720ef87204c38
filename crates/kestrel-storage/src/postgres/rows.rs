//! Rows as PostgreSQL returns them, and their decoding.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{MessageStatus, Observation, RunRecord, Scope, StoredMessage, Thread};

/// A `threads` row.
#[derive(sqlx::FromRow)]
pub(super) struct ThreadRow {
    id: String,
    resource_id: String,
    title: Option<String>,
    metadata: Value,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl ThreadRow {
    pub(super) fn into_thread(self) -> Result<Thread> {
        Ok(Thread {
            metadata: codec::value_to_map("thread metadata", self.metadata)?,
            created_at: self.created_at,
            updated_at: self.updated_at,
            id: self.id,
            resource_id: self.resource_id,
            title: self.title,
        })
    }
}

/// A `messages` row.
#[derive(sqlx::FromRow)]
pub(super) struct MessageRow {
    id: String,
    thread_id: String,
    resource_id: String,
    seq: i64,
    role: String,
    parts: Value,
    status: String,
    metadata: Value,
    created_at: DateTime<Utc>,
}

impl MessageRow {
    pub(super) fn into_message(self) -> Result<StoredMessage> {
        Ok(StoredMessage {
            role: codec::parse_role(&self.role)?,
            parts: serde_json::from_value(self.parts)
                .map_err(|e| StorageError::corrupt("message parts", e))?,
            status: MessageStatus::from_str(&self.status)?,
            metadata: codec::value_to_map("message metadata", self.metadata)?,
            created_at: self.created_at,
            id: self.id,
            thread_id: self.thread_id,
            resource_id: self.resource_id,
            seq: self.seq,
        })
    }
}

/// A `runs` row.
#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    run_id: String,
    agent_id: String,
    thread_id: Option<String>,
    resource_id: Option<String>,
    status: String,
    snapshot: String,
    parent_run_id: Option<String>,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    lease_token: Option<i64>,
}

impl RunRow {
    pub(super) fn into_record(self) -> Result<RunRecord> {
        Ok(RunRecord {
            status: crate::types::parse_phase(&self.status)?,
            snapshot: serde_json::value::RawValue::from_string(self.snapshot)
                .map_err(|e| crate::StorageError::corrupt("run snapshot", e))?,
            created_at: self.created_at,
            updated_at: self.updated_at,
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
#[derive(sqlx::FromRow)]
pub(super) struct ObservationRow {
    id: String,
    thread_id: Option<String>,
    resource_id: String,
    text: String,
    created_at: DateTime<Utc>,
    observed_up_to_seq: Option<i64>,
    source_thread_id: Option<String>,
}

impl ObservationRow {
    pub(super) fn into_observation(self) -> Observation {
        let scope = match self.thread_id {
            Some(thread_id) => Scope::Thread {
                thread_id,
                resource_id: self.resource_id,
            },
            None => Scope::Resource {
                resource_id: self.resource_id,
            },
        };
        Observation {
            id: self.id,
            scope,
            text: self.text,
            created_at: self.created_at,
            observed_up_to_seq: self.observed_up_to_seq,
            source_thread_id: self.source_thread_id,
        }
    }
}
