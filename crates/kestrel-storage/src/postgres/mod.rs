//! [`PostgresStorage`]: PostgreSQL for servers, shared by several instances.
//!
//! A connection pool whose connections set `search_path` to the schema named in [`PgOptions`]
//! (created when missing); versioned migrations (`migrations/postgres`, recorded in the schema's
//! `_sqlx_migrations`, serialised across instances by sqlx's advisory lock) run on connect.
//!
//! **Concurrency.** An append locks its thread's row (`SELECT … FOR UPDATE`) and reserves its
//! seqs with `UPDATE threads SET next_seq = next_seq + n RETURNING …` in the same transaction, so
//! appenders on one thread — in one process or many — queue on that row, never share a seq and
//! never interleave inside a batch; appends to different threads do not wait for each other. Runs
//! are saved with a version compare-and-set (`UPDATE … WHERE version = $expected`).
//!
//! **Vectors.** Queries are an exact scan decoded and scored in Rust, so results equal SQLite's
//! and the in-memory store's. [`PostgresStorage::has_pgvector`] reports whether the server has
//! the pgvector extension; an approximate index on it is a later, opt-in addition.

mod agents;
mod messages;
mod observations;
mod queue;
mod rows;
mod runs;
mod schema;
mod search;
mod sql;
mod threads;
mod vectors;
mod workflows;
mod working_memory;

use std::time::Duration;

use async_trait::async_trait;
use kestrel_core::lease::Fence;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres};

pub use self::schema::MIGRATOR;
use self::schema::{check_schema, create_schema};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::{db_err, migrate_err, open_err, redact_url};
use crate::storage::Storage;
use crate::types::{
    AgentVersion, CloneThread, MessageList, MessageSearch, NewAgentVersion, NewMessage,
    NewObservation, NewQueuedMessage, NewStoredAgent, NewThread, Observation, Page, QueuedMessage,
    QueuedThread, RunFilter, RunRecord, Scope, Selection, StoredAgent, StoredMessage, Thread,
    ThreadPatch, ThreadQuery, VectorMatch, VectorQuery, VectorRecord, WorkflowRunFilter,
    WorkflowRunRecord, WorkflowStatus,
};

const BACKEND: &str = "postgres";

fn err(operation: &'static str) -> impl FnOnce(sqlx::Error) -> StorageError {
    db_err(BACKEND, operation)
}

/// Options of [`PostgresStorage::connect`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The schema holding Kestrel's tables (default `public`); created when missing. Letters,
    /// digits and `_`, not starting with a digit, at most 63 characters.
    pub schema: String,
    /// The pool's size (default 10).
    pub max_connections: u32,
    /// How long to wait for a pooled connection (default 30 s).
    pub acquire_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            schema: "public".to_owned(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

impl PgOptions {
    /// Options using `schema`.
    pub fn schema(schema: impl Into<String>) -> Self {
        Self {
            schema: schema.into(),
            ..Self::default()
        }
    }
}

/// A store in a PostgreSQL schema.
#[derive(Debug, Clone)]
pub struct PostgresStorage {
    pool: PgPool,
    schema: String,
    pgvector: bool,
}

impl PostgresStorage {
    /// Connects to `url`, creates the schema when missing and runs the migrations.
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self> {
        check_schema(&options.schema)?;
        let target = format!("PostgreSQL database {}", redact_url(url));
        let connect: PgConnectOptions = url
            .parse()
            .map_err(|e| open_err(&target, "invalid connection URL", e))?;
        let search_path = format!("SET search_path TO \"{}\", public", options.schema);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .after_connect(move |conn, _| {
                let search_path = search_path.clone();
                Box::pin(async move { conn.execute(search_path.as_str()).await.map(|_| ()) })
            })
            .connect_with(connect)
            .await
            .map_err(|e| open_err(&target, "cannot connect", e))?;
        create_schema(&pool, &options.schema)
            .await
            .map_err(|e| open_err(&target, "cannot create the schema", e))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| migrate_err(&target, e))?;
        let pgvector: bool = sqlx::query_scalar(sql::HAS_PGVECTOR)
            .fetch_one(&pool)
            .await
            .map_err(|e| open_err(&target, "cannot list extensions", e))?;
        Ok(Self {
            pool,
            schema: options.schema,
            pgvector,
        })
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Whether the server has the pgvector extension (checked on connect).
    ///
    /// TODO(pgvector): when true, a migration could add a `vector(dim)` column and an HNSW index
    /// per index, and `query_vectors` could order by `<=>` there; without the extension (as on
    /// this project's machines) the exact scan is used, and it is the tested path.
    pub fn has_pgvector(&self) -> bool {
        self.pgvector
    }

    /// The connection pool (for diagnostics and tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn begin(&self, operation: &'static str) -> Result<sqlx::Transaction<'static, Postgres>> {
        self.pool.begin().await.map_err(err(operation))
    }

    async fn conn(&self, operation: &'static str) -> Result<sqlx::pool::PoolConnection<Postgres>> {
        self.pool.acquire().await.map_err(err(operation))
    }

    /// One page of a listing, on one connection: the total that `count` gives, and the rows
    /// of `select` (ordered already) with the page's `LIMIT` and `OFFSET` appended.
    async fn count_and_page<R>(
        &self,
        operation: &'static str,
        mut count: sqlx::QueryBuilder<'_, Postgres>,
        mut select: sqlx::QueryBuilder<'_, Postgres>,
        page: crate::types::PageRequest,
    ) -> Result<(u64, Vec<R>)>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        select
            .push(" LIMIT ")
            .push_bind(i64::from(page.per_page))
            .push(" OFFSET ")
            .push_bind(page.offset() as i64);
        let mut conn = self.conn(operation).await?;
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&mut *conn)
            .await
            .map_err(err(operation))?;
        let rows: Vec<R> = select
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(err(operation))?;
        Ok((u64::try_from(total).unwrap_or(0), rows))
    }
}

/// Checks that the thread exists and belongs to `resource_id` (when given); with `lock`, takes
/// its row lock until the transaction ends.
async fn owned(
    conn: &mut PgConnection,
    thread_id: &str,
    resource_id: Option<&str>,
    lock: bool,
    operation: &'static str,
) -> Result<String> {
    let statement = if lock {
        sql::LOCK_THREAD_OWNER
    } else {
        sql::THREAD_OWNER
    };
    let owner: String = sqlx::query_scalar(statement)
        .bind(thread_id)
        .fetch_optional(conn)
        .await
        .map_err(err(operation))?
        .ok_or_else(|| StorageError::thread_not_found(thread_id))?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    Ok(owner)
}

#[async_trait]
impl Storage for PostgresStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        threads::create_thread(self, thread).await
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        threads::get_thread(self, thread_id).await
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        threads::update_thread(self, thread_id, patch).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        threads::delete_thread(self, thread_id).await
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        threads::clone_thread(self, source_thread_id, options).await
    }

    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)> {
        agents::create(self, agent).await
    }

    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>> {
        agents::get(self, agent_id).await
    }

    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>> {
        agents::list(self).await
    }

    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool> {
        agents::delete(self, agent_id).await
    }

    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion> {
        agents::add_version(self, agent_id, version).await
    }

    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
        agents::get_version(self, agent_id, version_id).await
    }

    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>> {
        agents::list_versions(self, agent_id).await
    }

    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent> {
        agents::activate(self, agent_id, version_id).await
    }

    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()> {
        agents::delete_version(self, agent_id, version_id).await
    }

    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage> {
        queue::enqueue_message(self, message).await
    }

    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>> {
        queue::queued_messages(self, thread_id, resource_id).await
    }

    async fn remove_queued_message(&self, id: &str) -> Result<bool> {
        queue::remove_queued_message(self, id).await
    }

    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>> {
        queue::cancel_queued_messages(self, thread_id, resource_id, ids).await
    }

    async fn queued_threads(&self) -> Result<Vec<QueuedThread>> {
        queue::queued_threads(self).await
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        threads::list_threads(self, query).await
    }

    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        messages::append_messages(self, thread_id, resource_id, messages, None).await
    }

    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>> {
        let token = codec::fence_token(fence.token)?;
        let fence = Some((fence.run_id, token));
        messages::append_messages(self, thread_id, resource_id, messages, fence).await
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        messages::list_messages(self, thread_id, resource_id, selection).await
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        messages::get_messages(self, ids, resource_id).await
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        messages::delete_messages(self, thread_id, resource_id, ids).await
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        search::search_messages(self, search).await
    }

    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        working_memory::get_working_memory(self, scope).await
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        working_memory::set_working_memory(self, scope, content).await
    }

    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        runs::save_run(self, record, expected_version).await
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        runs::save_runs(self, saves).await
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        runs::get_run(self, run_id).await
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        runs::list_runs(self, filter).await
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        runs::delete_run(self, run_id).await
    }

    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
        workflows::save(self, record).await
    }

    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
        workflows::fence(self, workflow_id, run_id, token).await
    }

    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>> {
        workflows::get(self, workflow_id, run_id).await
    }

    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool> {
        workflows::claim(self, workflow_id, run_id, from, to).await
    }

    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>> {
        workflows::list(self, filter).await
    }

    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool> {
        workflows::delete(self, workflow_id, run_id).await
    }

    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        observations::add_observations(self, scope, observations).await
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        observations::list_observations(self, scope).await
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        observations::replace_observations(self, scope, observations).await
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        observations::get_observed_seq(self, thread_id, resource_id).await
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        observations::set_observed_seq(self, thread_id, resource_id, seq).await
    }

    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        vectors::create_index(self, name, dimension).await
    }

    async fn index_dimension(&self, name: &str) -> Result<Option<usize>> {
        vectors::get_index_dimension(self, name).await
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        vectors::upsert_vectors(self, index, vectors).await
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        vectors::query_vectors(self, index, query).await
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        vectors::delete_vectors(self, index, ids).await
    }
}
