//! Stopped or running agent runs, as stored, and how they are listed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{PageRequest, now};
use crate::error::StorageError;

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
