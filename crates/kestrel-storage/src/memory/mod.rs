//! [`InMemoryStorage`]: everything in process memory, lost on exit. For tests and throwaway
//! agents; it passes the same conformance suite as the database backends.

mod agents;
mod listing;
mod queue;
mod runs;
mod vectors;
mod workflows;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kestrel_core::lease::Fence;

use self::listing::{paginate, select, sort_threads};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::storage::Storage;
use crate::types::{
    AgentVersion, CloneThread, MessageList, MessageSearch, MetadataUpdate, NewAgentVersion,
    NewMessage, NewObservation, NewQueuedMessage, NewStoredAgent, NewThread, Observation, Page,
    QueuedMessage, QueuedThread, RunFilter, RunRecord, Scope, Selection, StoredAgent,
    StoredMessage, Thread, ThreadPatch, ThreadQuery, VectorMatch, VectorQuery, VectorRecord,
    WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus,
};

/// A store in process memory. Cheap to create; one mutex guards it (no lock is held across an
/// await).
#[derive(Debug, Default)]
pub struct InMemoryStorage {
    state: Mutex<State>,
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

#[async_trait]
impl Storage for InMemoryStorage {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let mut state = self.state();
        if state.threads.contains_key(&id) {
            return Err(StorageError::ThreadExists { thread_id: id });
        }
        let record = Thread {
            id: id.clone(),
            resource_id: thread.resource_id,
            title: thread.title,
            metadata: thread.metadata,
            created_at: created,
            updated_at: created,
        };
        state.threads.insert(
            id,
            ThreadEntry {
                thread: record.clone(),
                next_seq: 1,
                working_memory: None,
                observed_seq: None,
                messages: BTreeMap::new(),
            },
        );
        Ok(record)
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        Ok(self
            .state()
            .threads
            .get(thread_id)
            .map(|e| e.thread.clone()))
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        let mut state = self.state();
        let entry = state
            .threads
            .get_mut(thread_id)
            .ok_or_else(|| StorageError::thread_not_found(thread_id))?;
        let thread = &mut entry.thread;
        if let Some(title) = patch.title {
            thread.title = Some(title);
        }
        match patch.metadata {
            Some(MetadataUpdate::Merge(changes)) => {
                thread.metadata.extend(codec::normalize_map(changes))
            }
            Some(MetadataUpdate::Replace(all)) => thread.metadata = codec::normalize_map(all),
            None => {}
        }
        thread.updated_at = codec::now();
        Ok(thread.clone())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        let mut state = self.state();
        let Some(entry) = state.threads.remove(thread_id) else {
            return Ok(false);
        };
        for id in entry.messages.values().map(|m| &m.id) {
            state.message_homes.remove(id);
        }
        state
            .observations
            .remove(&ObservationKey::Thread(thread_id.to_owned()));
        state.queue.retain(|q| q.thread_id != thread_id);
        state.remove_vectors_where(|r| {
            codec::meta_str(&r.metadata, "thread_id").as_deref() != Some(thread_id)
        });
        Ok(true)
    }

    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)> {
        agents::create(&mut self.state(), agent)
    }

    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>> {
        Ok(agents::get(&self.state(), agent_id))
    }

    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>> {
        Ok(agents::list(&self.state()))
    }

    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool> {
        Ok(agents::delete(&mut self.state(), agent_id))
    }

    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion> {
        agents::add_version(&mut self.state(), agent_id, version)
    }

    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
        agents::get_version(&self.state(), agent_id, version_id)
    }

    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>> {
        agents::list_versions(&self.state(), agent_id)
    }

    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent> {
        agents::activate(&mut self.state(), agent_id, version_id)
    }

    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()> {
        agents::delete_version(&mut self.state(), agent_id, version_id)
    }

    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage> {
        queue::enqueue(&mut self.state(), message)
    }

    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>> {
        queue::list(&self.state(), thread_id, resource_id)
    }

    async fn remove_queued_message(&self, id: &str) -> Result<bool> {
        Ok(queue::remove(&mut self.state(), id))
    }

    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>> {
        queue::cancel(&mut self.state(), thread_id, resource_id, ids.as_deref())
    }

    async fn queued_threads(&self) -> Result<Vec<QueuedThread>> {
        Ok(queue::threads(&self.state()))
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        let mut state = self.state();
        let source = state.owned_thread(source_thread_id, Some(&options.resource_id))?;
        let new_id = options.new_thread_id.unwrap_or_else(codec::new_id);
        codec::check_id("new_thread_id", &new_id)?;
        if state.threads.contains_key(&new_id) {
            return Err(StorageError::ThreadExists { thread_id: new_id });
        }
        let now = codec::now();
        let thread = Thread {
            id: new_id.clone(),
            resource_id: source.thread.resource_id.clone(),
            title: options.title.or_else(|| source.thread.title.clone()),
            metadata: codec::clone_metadata(&source.thread.metadata, source_thread_id, now),
            created_at: now,
            updated_at: now,
        };
        let messages: BTreeMap<i64, StoredMessage> = source
            .messages
            .values()
            .zip(1..)
            .map(|(m, seq)| {
                let copy = StoredMessage {
                    id: codec::new_id(),
                    thread_id: new_id.clone(),
                    seq,
                    ..m.clone()
                };
                (seq, copy)
            })
            .collect();
        for message in messages.values() {
            state
                .message_homes
                .insert(message.id.clone(), (new_id.clone(), message.seq));
        }
        let next_seq = messages.len() as i64 + 1;
        state.threads.insert(
            new_id,
            ThreadEntry {
                thread: thread.clone(),
                next_seq,
                working_memory: None,
                observed_seq: None,
                messages,
            },
        );
        Ok(thread)
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        codec::check_page(query.page)?;
        let filter = codec::parse_filter(query.metadata.as_ref())?;
        let state = self.state();
        let mut threads: Vec<&Thread> = state
            .threads
            .values()
            .map(|e| &e.thread)
            .filter(|t| {
                query
                    .resource_id
                    .as_ref()
                    .is_none_or(|r| &t.resource_id == r)
            })
            .filter(|t| {
                filter
                    .as_ref()
                    .is_none_or(|f| codec::matches_filter(&t.metadata, f))
            })
            .collect();
        sort_threads(&mut threads, query.order.field, query.order.direction);
        let items = paginate(&threads, query.page.offset(), query.page.per_page);
        Ok(Page::new(items, query.page, threads.len() as u64))
    }

    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        self.state().append(thread_id, resource_id, messages)
    }

    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>> {
        let token = Some(codec::fence_token(fence.token)?);
        let mut state = self.state();
        state.check_fence(fence.run_id, token)?;
        let stored = state.append(thread_id, resource_id, messages)?;
        state.raise_fence(fence.run_id, token);
        Ok(stored)
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        if let Selection::Page(page) = selection {
            codec::check_page(page)?;
        }
        let state = self.state();
        let entry = state.owned_thread(thread_id, resource_id)?;
        Ok(select(&entry.messages, selection))
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        let state = self.state();
        let mut found = Vec::new();
        for id in ids.iter().collect::<HashSet<_>>() {
            let Some((thread_id, seq)) = state.message_homes.get(id) else {
                continue;
            };
            let entry = state.owned_thread(thread_id, resource_id)?;
            if let Some(m) = entry.messages.get(seq) {
                found.push(m.clone());
            }
        }
        found.sort_by(|a, b| a.thread_id.cmp(&b.thread_id).then(a.seq.cmp(&b.seq)));
        Ok(found)
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        let mut state = self.state();
        let entry = state.owned_thread_mut(thread_id, resource_id)?;
        let wanted: HashSet<&String> = ids.iter().collect();
        let before = entry.messages.len();
        entry.messages.retain(|_, m| !wanted.contains(&m.id));
        let deleted = (before - entry.messages.len()) as u64;
        if deleted > 0 {
            entry.thread.updated_at = codec::now();
        }
        let gone: HashSet<String> = ids
            .iter()
            .filter(|id| {
                state
                    .message_homes
                    .get(*id)
                    .is_some_and(|(home, _)| home == thread_id)
            })
            .cloned()
            .collect();
        for id in &gone {
            state.message_homes.remove(id);
        }
        state.remove_vectors_where(|r| {
            codec::meta_str(&r.metadata, "message_id").is_none_or(|m| !gone.contains(&m))
        });
        Ok(deleted)
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        let needle = codec::search_needle(&search.query);
        let state = self.state();
        let mut hits: Vec<&StoredMessage> = match &search.scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                let entry = state.owned_thread(thread_id, Some(resource_id))?;
                entry.messages.values().rev().collect()
            }
            Scope::Resource { resource_id } => {
                let mut all: Vec<&StoredMessage> = state
                    .threads
                    .values()
                    .filter(|e| &e.thread.resource_id == resource_id)
                    .flat_map(|e| e.messages.values())
                    .collect();
                all.sort_by(|a, b| {
                    b.created_at
                        .cmp(&a.created_at)
                        .then_with(|| a.thread_id.cmp(&b.thread_id))
                        .then_with(|| b.seq.cmp(&a.seq))
                });
                all
            }
        };
        hits.retain(|m| codec::search_text(&m.parts).contains(&needle));
        Ok(hits
            .into_iter()
            .take(search.limit as usize)
            .cloned()
            .collect())
    }

    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        let state = self.state();
        match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => Ok(state
                .owned_thread(thread_id, Some(resource_id))?
                .working_memory
                .clone()),
            Scope::Resource { resource_id } => Ok(state.resource_memory.get(resource_id).cloned()),
        }
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        let mut state = self.state();
        match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                state
                    .owned_thread_mut(thread_id, resource_id)?
                    .working_memory = Some(content.to_owned());
            }
            Scope::Resource { resource_id } => {
                state
                    .resource_memory
                    .insert(resource_id.clone(), content.to_owned());
            }
        }
        Ok(())
    }

    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        runs::save(&mut self.state(), record, expected_version)
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        runs::save_many(&mut self.state(), saves)
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        Ok(self.state().runs.get(run_id).cloned())
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        runs::list(&self.state(), filter)
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        Ok(self.state().runs.remove(run_id).is_some())
    }

    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
        workflows::save(&mut self.state(), record)
    }

    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
        workflows::fence(&mut self.state(), workflow_id, run_id, token)
    }

    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>> {
        Ok(workflows::get(&self.state(), workflow_id, run_id))
    }

    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool> {
        Ok(workflows::claim(
            &mut self.state(),
            workflow_id,
            run_id,
            from,
            to,
        ))
    }

    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>> {
        workflows::list(&self.state(), filter)
    }

    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool> {
        let key = (workflow_id.to_owned(), run_id.to_owned());
        Ok(self.state().workflow_runs.remove(&key).is_some())
    }

    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        let mut state = self.state();
        let key = state.observation_key(scope)?;
        let added = new_observations(scope, observations);
        state
            .observations
            .entry(key)
            .or_default()
            .extend(added.iter().cloned());
        Ok(added)
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        let state = self.state();
        let key = state.observation_key(scope)?;
        Ok(state.observations.get(&key).cloned().unwrap_or_default())
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        let mut state = self.state();
        let key = state.observation_key(scope)?;
        let added = new_observations(scope, observations);
        state.observations.insert(key, added.clone());
        Ok(added)
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        Ok(self
            .state()
            .owned_thread(thread_id, Some(resource_id))?
            .observed_seq)
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        self.state()
            .owned_thread_mut(thread_id, resource_id)?
            .observed_seq = Some(seq);
        Ok(())
    }

    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        vectors::create_index(&mut self.state(), name, dimension)
    }

    async fn index_dimension(&self, name: &str) -> Result<Option<usize>> {
        Ok(self.state().indexes.get(name).map(|i| i.dimension))
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        vectors::upsert(&mut self.state(), index, vectors)
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        vectors::query(&self.state(), index, query)
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        vectors::delete(&mut self.state(), index, ids)
    }
}
