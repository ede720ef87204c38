//! [`InMemoryStorage`]: everything in process memory, lost on exit. For tests and throwaway
//! agents; it passes the same conformance suite as the database backends.

mod agents;
mod datasets;
mod listing;
mod messages;
mod observations;
mod queue;
mod runs;
mod scores;
mod spans;
mod threads;
mod vectors;
mod workflows;
mod working_memory;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};

use crate::codec;
use crate::error::{Result, StorageError};
use crate::storage::Storage;
use crate::types::{
    AgentVersion, NewMessage, NewObservation, Observation, QueuedMessage, RunRecord, Scope,
    StoredAgent, StoredMessage, Thread, VectorRecord, WorkflowRunRecord,
};

/// A store in process memory. Cheap to create; one mutex guards it (no lock is held across an
/// await), and another its traces.
#[derive(Debug, Default)]
pub struct InMemoryStorage {
    state: Mutex<State>,
    /// The spans of traces (bounded: past its limit, the oldest traces go).
    spans: kestrel_core::trace::InMemorySpanStore,
    /// Scores (bounded: past its limit, the oldest go).
    scores: kestrel_core::store::InMemoryScoreStore,
    datasets: kestrel_core::store::InMemoryDatasetStore,
}

impl InMemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug, Default)]
struct State {
    threads: HashMap<String, ThreadEntry>,
    /// Message id → its thread and seq.
    message_homes: HashMap<String, (String, i64)>,
    resource_memory: HashMap<String, String>,
    runs: HashMap<String, RunRecord>,
    /// Workflow runs by workflow and run id.
    workflow_runs: HashMap<(String, String), WorkflowRunRecord>,
    /// The greatest lease token written per workflow run (kept when the run is deleted).
    workflow_fences: HashMap<(String, String), i64>,
    /// Per run, the greatest lease token a write carried.
    fences: HashMap<String, i64>,
    observations: HashMap<ObservationKey, Vec<Observation>>,
    indexes: HashMap<String, VectorIndex>,
    /// Stored agents by id.
    stored_agents: BTreeMap<String, StoredAgent>,
    /// Each stored agent's versions.
    agent_versions: HashMap<String, Vec<AgentVersion>>,
    /// Every queued message, oldest first.
    queue: Vec<QueuedMessage>,
    /// The seq of the last queued message.
    queue_seq: i64,
}

#[derive(Debug)]
struct ThreadEntry {
    thread: Thread,
    next_seq: i64,
    working_memory: Option<String>,
    observed_seq: Option<i64>,
    messages: BTreeMap<i64, StoredMessage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ObservationKey {
    Thread(String),
    Resource(String),
}

#[derive(Debug)]
struct VectorIndex {
    dimension: usize,
    vectors: BTreeMap<String, VectorRecord>,
}

impl State {
    fn thread(&self, thread_id: &str) -> Result<&ThreadEntry> {
        self.threads
            .get(thread_id)
            .ok_or_else(|| StorageError::thread_not_found(thread_id))
    }

    fn owned_thread(&self, thread_id: &str, resource_id: Option<&str>) -> Result<&ThreadEntry> {
        let entry = self.thread(thread_id)?;
        codec::check_owner(thread_id, &entry.thread.resource_id, resource_id)?;
        Ok(entry)
    }

    fn owned_thread_mut(&mut self, thread_id: &str, resource_id: &str) -> Result<&mut ThreadEntry> {
        self.owned_thread(thread_id, Some(resource_id))?;
        self.threads
            .get_mut(thread_id)
            .ok_or_else(|| StorageError::thread_not_found(thread_id))
    }

    fn observation_key(&self, scope: &Scope) -> Result<ObservationKey> {
        match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                self.owned_thread(thread_id, Some(resource_id))?;
                Ok(ObservationKey::Thread(thread_id.clone()))
            }
            Scope::Resource { resource_id } => Ok(ObservationKey::Resource(resource_id.clone())),
        }
    }

    fn index(&self, name: &str) -> Result<&VectorIndex> {
        self.indexes
            .get(name)
            .ok_or_else(|| StorageError::IndexNotFound {
                index: name.to_owned(),
            })
    }

    fn remove_vectors_where(&mut self, keep: impl Fn(&VectorRecord) -> bool) {
        for index in self.indexes.values_mut() {
            index.vectors.retain(|_, record| keep(record));
        }
    }

    fn append(
        &mut self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        self.owned_thread(thread_id, Some(resource_id))?;
        let messages = codec::dedupe_batch(messages);
        self.check_message_homes(thread_id, &messages)?;
        let now = codec::now();
        let existing: HashMap<String, i64> = messages
            .iter()
            .filter_map(|m| {
                let (_, seq) = self.message_homes.get(&m.message.id)?;
                Some((m.message.id.clone(), *seq))
            })
            .collect();
        let entry = self.owned_thread_mut(thread_id, resource_id)?;
        let mut stored = Vec::with_capacity(messages.len());
        for message in messages {
            let (seq, created_at) = match existing.get(&message.message.id) {
                Some(&seq) => (seq, entry.messages.get(&seq).map_or(now, |m| m.created_at)),
                None => {
                    entry.next_seq += 1;
                    let created = message.created_at.map_or(now, codec::truncate);
                    (entry.next_seq - 1, created)
                }
            };
            let record = to_stored(message, thread_id, resource_id, seq, created_at);
            entry.messages.insert(seq, record.clone());
            stored.push(record);
        }
        entry.thread.updated_at = now;
        for record in &stored {
            self.message_homes
                .insert(record.id.clone(), (thread_id.to_owned(), record.seq));
        }
        Ok(stored)
    }

    fn check_message_homes(&self, thread_id: &str, messages: &[NewMessage]) -> Result<()> {
        for message in messages {
            match self.message_homes.get(&message.message.id) {
                Some((home, _)) if home != thread_id => {
                    return Err(StorageError::MessageInOtherThread {
                        message_id: message.message.id.clone(),
                        stored_in: home.clone(),
                        requested: thread_id.to_owned(),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn to_stored(
    message: NewMessage,
    thread_id: &str,
    resource_id: &str,
    seq: i64,
    created_at: DateTime<Utc>,
) -> StoredMessage {
    StoredMessage {
        id: message.message.id,
        thread_id: thread_id.to_owned(),
        resource_id: resource_id.to_owned(),
        role: message.message.role,
        parts: message.message.parts,
        created_at,
        seq,
        status: message.status,
        metadata: codec::normalize_map(message.metadata),
    }
}

fn new_observations(scope: &Scope, observations: Vec<NewObservation>) -> Vec<Observation> {
    let now = codec::now();
    observations
        .into_iter()
        .map(|o| Observation {
            id: o.id.unwrap_or_else(codec::new_id),
            scope: scope.clone(),
            text: o.text,
            created_at: o.created_at.map_or(now, codec::truncate),
            observed_up_to_seq: o.observed_up_to_seq,
            source_thread_id: o.source_thread_id,
        })
        .collect()
}

crate::ports::implement_ports!(InMemoryStorage);

impl Storage for InMemoryStorage {
    fn backend(&self) -> &'static str {
        "memory"
    }
}
