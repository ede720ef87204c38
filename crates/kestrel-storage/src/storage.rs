//! The [`Storage`] trait every backend implements.

use async_trait::async_trait;
use kestrel_core::lease::Fence;

use crate::error::Result;
use crate::types::{
    AgentVersion, CloneThread, MessageList, MessageSearch, NewAgentVersion, NewMessage,
    NewObservation, NewQueuedMessage, NewStoredAgent, NewThread, Observation, Page, QueuedMessage,
    QueuedThread, RunFilter, RunRecord, Scope, Selection, StoredAgent, StoredMessage, Thread,
    ThreadPatch, ThreadQuery, VectorMatch, VectorQuery, VectorRecord, WorkflowRunFilter,
    WorkflowRunRecord, WorkflowStatus,
};

/// Durable state of agents: threads and their messages, working memory, run snapshots,
/// observations and vectors.
///
/// Object-safe and shared as `Arc<dyn Storage>`. Every backend passes the same conformance suite
/// (`kestrel_storage::testing`, feature `testing`), so behaviour, ordering and errors are the same
/// on each.
///
/// **Ownership.** Operations on a thread's content take the resource the caller acts for; a
/// thread of another resource is refused with
/// [`StorageError::ThreadOwnedByOtherResource`](crate::StorageError::ThreadOwnedByOtherResource)
/// and nothing is read or written.
///
/// **Ports.** A storage is also every port of [`kestrel_core::store`] (stopped runs, workflow
/// runs, the message queue, agents' versions: see [`crate::ports`]), so an instance is given
/// it once (`Kestrel::builder().storage(storage)`) and keeps everything in the same database.
///
/// **Concurrency.** Appends to one thread are serialised by the store (a row lock on Postgres,
/// the single writer on SQLite, a mutex in memory): concurrent appenders never share a seq and
/// never interleave inside one batch. Runs use optimistic concurrency (a version compare-and-set),
/// so several server instances may share one database.
#[async_trait]
pub trait Storage: kestrel_core::store::DurableStore + Send + Sync {
    /// The backend's name: `memory`, `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    // --- threads -------------------------------------------------------------------------

    /// Creates a thread. An existing id is [`StorageError::ThreadExists`](crate::StorageError::ThreadExists).
    async fn create_thread(&self, thread: NewThread) -> Result<Thread>;

    /// The thread with this id, if any. The caller compares its `resource_id` with the resource
    /// it acts for.
    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>>;

    /// Changes a thread's title and/or metadata and bumps `updated_at`.
    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread>;

    /// Deletes a thread with its messages, its thread-scoped observations, its working memory,
    /// its observed-seq marker and the vectors whose metadata names it. `false` when there was
    /// no such thread.
    async fn delete_thread(&self, thread_id: &str) -> Result<bool>;

    /// Copies a thread: a new id, the source's messages in the same order (new message ids,
    /// seqs renumbered from 1), the source's metadata plus
    /// `"clone": {"sourceThreadId", "clonedAt"}`. Working memory, observations and vectors are
    /// not copied.
    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread>;

    // --- stored agents and their versions ---------------------------------------------

    /// Creates a stored agent with its first version (published when `agent.publish`). A
    /// taken id is [`StorageError::AgentExists`](crate::StorageError::AgentExists).
    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)>;

    /// The stored agent with this id, if any.
    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>>;

    /// Every stored agent, by id.
    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>>;

    /// Deletes a stored agent and its versions; `false` when there was none.
    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool>;

    /// Adds a version (numbered one more than the agent's latest) and returns it.
    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion>;

    /// The agent's version with this id; [`StorageError::VersionNotFound`](crate::StorageError::VersionNotFound)
    /// when the agent has none (another agent's version included).
    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion>;

    /// The agent's versions, newest first.
    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>>;

    /// Publishes one of the agent's versions (`None`: none, the agent's code or nothing is
    /// served) and returns the agent.
    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent>;

    /// Deletes one of the agent's versions; the published one is refused with
    /// [`StorageError::VersionPublished`](crate::StorageError::VersionPublished).
    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()>;

    // --- queued messages ---------------------------------------------------------------

    /// Adds a message at the end of the queue of a thread owned by `message.resource_id`. A
    /// queued id that exists is [`StorageError::InvalidArgument`](crate::StorageError::InvalidArgument).
    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage>;

    /// The queue of a thread owned by `resource_id`, oldest first.
    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>>;

    /// Removes a queued message (a run took it); `false` when it was not queued.
    async fn remove_queued_message(&self, id: &str) -> Result<bool>;

    /// Removes the queued messages of a thread owned by `resource_id`: those with these ids,
    /// or all of them; returns those removed, oldest first.
    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>>;

    /// Every thread with queued messages (the agent of its oldest), oldest queue first: what a
    /// process that starts drains.
    async fn queued_threads(&self) -> Result<Vec<QueuedThread>>;

    /// Threads by resource and/or metadata filter, paginated and ordered.
    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>>;

    // --- messages ------------------------------------------------------------------------

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

    /// Appends messages like [`Storage::append_messages`], as a write of run `fence.run_id`
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

    /// Appends messages like [`Storage::append_messages`] and also returns the thread's last
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

    // --- working memory ------------------------------------------------------------------

    /// The working memory of a thread (owner checked) or a resource.
    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>>;

    /// Sets the working memory (markdown or JSON text) of a thread or a resource.
    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()>;

    // --- runs ----------------------------------------------------------------------------

    /// Saves a run with a compare-and-set on its version.
    ///
    /// `expected_version: None` creates it (version 1); an existing run is a
    /// [`StorageError::Conflict`](crate::StorageError::Conflict). `Some(v)` updates it only if
    /// its stored version is `v` (the new version is `v + 1`); otherwise `Conflict` and nothing
    /// changes, or `RunNotFound`. The record's `version`, `created_at` and `updated_at` are
    /// assigned by the store; the saved record is returned.
    async fn save_run(&self, record: RunRecord, expected_version: Option<i64>)
    -> Result<RunRecord>;

    /// Saves several distinct runs together, each with its compare-and-set as in
    /// [`Storage::save_run`]: all of them, or (on the first conflict or failure) none. A
    /// decision on a sub-agent's call records it in the parent and the sub-agents' runs this
    /// way, so a conflict leaves nothing half-decided. The saved records are returned in
    /// order.
    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>>;

    /// The run with this id, if any.
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>>;

    /// Runs matching the filter, newest first (ties by run id, descending).
    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>>;

    /// Deletes a run; `false` when there was none.
    async fn delete_run(&self, run_id: &str) -> Result<bool>;

    // --- workflow runs -------------------------------------------------------------------

    /// Stores a workflow run's snapshot: the run is created, or its stored snapshot replaced.
    /// The record's `created_at` (kept from the first save) and `updated_at` are assigned by
    /// the store; the saved record is returned.
    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord>;

    /// Raises the fence of a workflow run to `token` (whether or not the run is stored): every
    /// later save with a smaller [`WorkflowRunRecord::lease_token`] is refused. Refused itself
    /// ([`crate::StorageError::WorkflowRunFenced`]) when the fence is above `token`. Fences
    /// outlive their runs' deletion.
    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()>;

    /// The workflow run, if any.
    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>>;

    /// Moves the run from status `from` to `to` if it is in `from` (a compare-and-set, so of
    /// two resumers one wins); `false` when it is not, or there is no such run.
    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool>;

    /// Workflow runs matching the filter, newest first (ties by run id, descending).
    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>>;

    /// Deletes a workflow run; `false` when there was none.
    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool>;

    // --- observations --------------------------------------------------------------------

    /// Adds observations to a scope, after the existing ones.
    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>>;

    /// A scope's observations, in the order they were added.
    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>>;

    /// Replaces all observations of a scope at once (the reflector's condensed log).
    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>>;

    /// The last seq of this thread that observational memory has condensed.
    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>>;

    /// Records the last seq of this thread that observational memory has condensed.
    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()>;

    // --- vectors -------------------------------------------------------------------------

    /// Creates a vector index of dimension `dimension` (at least 1). Idempotent for the same
    /// dimension; another dimension is [`StorageError::IndexExists`](crate::StorageError::IndexExists).
    async fn create_index(&self, name: &str, dimension: usize) -> Result<()>;

    /// The dimension of an index, if it exists.
    async fn index_dimension(&self, name: &str) -> Result<Option<usize>>;

    /// Inserts or replaces vectors by id. A vector of the wrong length is
    /// [`StorageError::DimensionMismatch`](crate::StorageError::DimensionMismatch) and nothing is
    /// written.
    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()>;

    /// The `top_k` vectors most similar to the query (cosine similarity, highest first; ties by
    /// id ascending). An exact scan of the filtered vectors: O(n·dimension), the same results on
    /// every backend.
    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>>;

    /// Deletes vectors by id; returns how many were deleted.
    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64>;
}
