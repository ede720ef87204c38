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

mod rows;
mod sql;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres, QueryBuilder};

use self::rows::{MessageRow, ObservationRow, RunRow, ThreadRow};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::{
    EncodedMessage, ExistingMessage, check_homes, db_err, migrate_err, open_err, redact_url,
};
use crate::storage::Storage;
use crate::types::{
    Anchor, CloneThread, MessageList, MessageSearch, MetadataUpdate, NewMessage, NewObservation,
    NewThread, Observation, Page, RunFilter, RunRecord, Scope, Selection, SeqRange, StoredMessage,
    Thread, ThreadPatch, ThreadQuery, VectorMatch, VectorQuery, VectorRecord,
};

/// The schema migrations this build applies to PostgreSQL schemas.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

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

fn check_schema(schema: &str) -> Result<()> {
    let mut chars = schema.chars();
    let valid_start = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let valid_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_start || !valid_rest || schema.len() > 63 {
        return Err(StorageError::invalid(
            "schema",
            format!("`{schema}` is not a plain identifier (letters, digits, `_`; at most 63)"),
        ));
    }
    Ok(())
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
}

/// Writes one run if its version is the expected one: its new version and creation time, or
/// the version it has (`None`: no such run).
async fn write_run(
    conn: &mut PgConnection,
    record: &RunRecord,
    snapshot: &str,
    expected_version: Option<i64>,
    now: DateTime<Utc>,
) -> Result<std::result::Result<(i64, DateTime<Utc>), Option<i64>>> {
    const OP: &str = "save_run";
    let saved: Option<(i64, DateTime<Utc>)> = match expected_version {
        None => {
            let inserted = sqlx::query(sql::INSERT_RUN)
                .bind(&record.run_id)
                .bind(&record.agent_id)
                .bind(&record.thread_id)
                .bind(&record.resource_id)
                .bind(record.status.as_str())
                .bind(snapshot)
                .bind(&record.parent_run_id)
                .bind(now)
                .execute(&mut *conn)
                .await
                .map_err(err(OP))?;
            (inserted.rows_affected() == 1).then_some((1, now))
        }
        Some(expected) => sqlx::query_as(sql::UPDATE_RUN)
            .bind(&record.run_id)
            .bind(&record.agent_id)
            .bind(&record.thread_id)
            .bind(&record.resource_id)
            .bind(record.status.as_str())
            .bind(snapshot)
            .bind(&record.parent_run_id)
            .bind(now)
            .bind(expected)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?,
    };
    match saved {
        Some(saved) => Ok(Ok(saved)),
        None => {
            let actual: Option<i64> = sqlx::query_scalar(sql::RUN_VERSION)
                .bind(&record.run_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(err(OP))?;
            Ok(Err(actual))
        }
    }
}

async fn create_schema(pool: &PgPool, schema: &str) -> std::result::Result<(), sqlx::Error> {
    let statement = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    match pool.execute(statement.as_str()).await {
        Ok(_) => Ok(()),
        // Two instances creating the schema at once: the loser sees a unique violation.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e),
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

async fn fetch_messages<'q>(
    conn: &mut PgConnection,
    query: sqlx::query::QueryAs<'q, Postgres, MessageRow, sqlx::postgres::PgArguments>,
    operation: &'static str,
) -> Result<Vec<StoredMessage>> {
    query
        .fetch_all(conn)
        .await
        .map_err(err(operation))?
        .into_iter()
        .map(MessageRow::into_message)
        .collect()
}

async fn select_range(
    conn: &mut PgConnection,
    thread_id: &str,
    range: SeqRange,
) -> Result<MessageList> {
    let statement = match range.anchor {
        Anchor::Start => sql::RANGE_ASC,
        Anchor::End => sql::RANGE_DESC,
    };
    let query = sqlx::query_as(statement)
        .bind(thread_id)
        .bind(range.after.unwrap_or(i64::MIN))
        .bind(range.before.unwrap_or(i64::MAX))
        .bind(range.limit.map(|l| i64::from(l) + 1));
    let mut messages = fetch_messages(conn, query, "list_messages").await?;
    let has_more = range.limit.is_some_and(|l| messages.len() > l as usize);
    if let Some(l) = range.limit {
        messages.truncate(l as usize);
    }
    if range.anchor == Anchor::End {
        messages.reverse();
    }
    Ok(MessageList {
        messages,
        has_more,
        total: None,
    })
}

async fn find_existing(
    conn: &mut PgConnection,
    ids: &[&str],
) -> Result<HashMap<String, ExistingMessage>> {
    let rows: Vec<(String, String, i64, DateTime<Utc>)> = sqlx::query_as(sql::FIND_MESSAGES)
        .bind(ids)
        .fetch_all(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(rows
        .into_iter()
        .map(|(id, thread_id, seq, created_at)| {
            (
                id,
                ExistingMessage {
                    thread_id,
                    seq,
                    created_at,
                },
            )
        })
        .collect())
}

/// The one-statement append of a batch of new messages ([`sql::APPEND_NEW`]): their seqs in batch
/// order, or `None` when nothing was inserted (a missing or foreign thread, an id already stored,
/// or a concurrent append of the same ids), which the transactional path then sorts out.
async fn append_new(
    pool: &PgPool,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: DateTime<Utc>,
) -> Result<Option<Vec<i64>>> {
    let column = |f: fn(&EncodedMessage) -> &str| -> Vec<&str> { batch.iter().map(f).collect() };
    let inserted = sqlx::query_scalar(sql::APPEND_NEW)
        .bind(thread_id)
        .bind(resource_id)
        .bind(column(|m| &m.id))
        .bind(column(|m| codec::role_str(m.role)))
        .bind(column(|m| &m.parts_text))
        .bind(column(|m| m.status.as_str()))
        .bind(column(|m| &m.metadata_text))
        .bind(column(|m| &m.search_text))
        .bind(now)
        .fetch_all(pool)
        .await;
    let mut seqs: Vec<i64> = match inserted {
        Ok(seqs) => seqs,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => return Ok(None),
        Err(e) => return Err(err("append_messages")(e)),
    };
    if seqs.len() != batch.len() {
        return Ok(None);
    }
    seqs.sort_unstable();
    Ok(Some(seqs))
}

/// The `LIKE` pattern matching text that contains `needle` (backslash, `%` and `_` escaped).
fn like_pattern(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Inserts new messages with one statement (parallel arrays).
async fn insert_messages(
    conn: &mut PgConnection,
    thread_id: &str,
    resource_id: &str,
    rows: &[(&EncodedMessage, i64, DateTime<Utc>)],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&EncodedMessage) -> &str| -> Vec<&str> {
        rows.iter().map(|(m, _, _)| f(m)).collect()
    };
    let seqs: Vec<i64> = rows.iter().map(|(_, seq, _)| *seq).collect();
    let created: Vec<DateTime<Utc>> = rows.iter().map(|(_, _, at)| *at).collect();
    sqlx::query(sql::INSERT_MESSAGES)
        .bind(thread_id)
        .bind(resource_id)
        .bind(column(|m| &m.id))
        .bind(seqs)
        .bind(column(|m| codec::role_str(m.role)))
        .bind(column(|m| &m.parts_text))
        .bind(column(|m| m.status.as_str()))
        .bind(column(|m| &m.metadata_text))
        .bind(column(|m| &m.search_text))
        .bind(created)
        .execute(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(())
}

async fn replace_message(conn: &mut PgConnection, message: &EncodedMessage) -> Result<()> {
    sqlx::query(sql::REPLACE_MESSAGE)
        .bind(&message.id)
        .bind(codec::role_str(message.role))
        .bind(&message.parts_text)
        .bind(message.status.as_str())
        .bind(&message.metadata_text)
        .bind(&message.search_text)
        .execute(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(())
}

async fn insert_observations(
    conn: &mut PgConnection,
    scope: &Scope,
    observations: Vec<NewObservation>,
) -> Result<Vec<Observation>> {
    let now = codec::now();
    let thread_id = match scope {
        Scope::Thread { thread_id, .. } => Some(thread_id.as_str()),
        Scope::Resource { .. } => None,
    };
    let mut added = Vec::with_capacity(observations.len());
    for o in observations {
        let observation = Observation {
            id: o.id.unwrap_or_else(codec::new_id),
            scope: scope.clone(),
            text: o.text,
            created_at: o.created_at.map_or(now, codec::truncate),
            observed_up_to_seq: o.observed_up_to_seq,
            source_thread_id: o.source_thread_id,
        };
        sqlx::query(sql::INSERT_OBSERVATION)
            .bind(&observation.id)
            .bind(thread_id)
            .bind(scope.resource_id())
            .bind(&observation.text)
            .bind(observation.created_at)
            .bind(observation.observed_up_to_seq)
            .bind(&observation.source_thread_id)
            .execute(&mut *conn)
            .await
            .map_err(err("add_observations"))?;
        added.push(observation);
    }
    Ok(added)
}

async fn check_scope(
    conn: &mut PgConnection,
    scope: &Scope,
    lock: bool,
    operation: &'static str,
) -> Result<()> {
    if let Scope::Thread {
        thread_id,
        resource_id,
    } = scope
    {
        owned(conn, thread_id, Some(resource_id), lock, operation).await?;
    }
    Ok(())
}

async fn index_dimension(
    conn: &mut PgConnection,
    index: &str,
    operation: &'static str,
) -> Result<usize> {
    let dimension: Option<i32> = sqlx::query_scalar(sql::INDEX_DIMENSION)
        .bind(index)
        .fetch_optional(conn)
        .await
        .map_err(err(operation))?;
    let dimension = dimension.ok_or_else(|| StorageError::IndexNotFound {
        index: index.to_owned(),
    })?;
    usize::try_from(dimension).map_err(|e| StorageError::corrupt("index dimension", e))
}

#[async_trait]
impl Storage for PostgresStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        const OP: &str = "create_thread";
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let inserted = sqlx::query(sql::INSERT_THREAD)
            .bind(&id)
            .bind(&thread.resource_id)
            .bind(&thread.title)
            .bind(codec::canonical_map_text(&thread.metadata))
            .bind(created)
            .bind(1i64)
            .execute(&self.pool)
            .await
            .map_err(err(OP))?;
        if inserted.rows_affected() == 0 {
            return Err(StorageError::ThreadExists { thread_id: id });
        }
        Ok(Thread {
            id,
            resource_id: thread.resource_id,
            title: thread.title,
            metadata: thread.metadata,
            created_at: created,
            updated_at: created,
        })
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        let row: Option<ThreadRow> = sqlx::query_as(sql::GET_THREAD)
            .bind(thread_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("get_thread"))?;
        row.map(ThreadRow::into_thread).transpose()
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        const OP: &str = "update_thread";
        let mut tx = self.begin(OP).await?;
        let row: Option<ThreadRow> = sqlx::query_as(sql::LOCK_THREAD)
            .bind(thread_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err(OP))?;
        let mut thread = row
            .ok_or_else(|| StorageError::thread_not_found(thread_id))?
            .into_thread()?;
        if let Some(title) = patch.title {
            thread.title = Some(title);
        }
        match patch.metadata {
            Some(MetadataUpdate::Merge(changes)) => {
                thread.metadata.extend(codec::normalize_map(changes));
            }
            Some(MetadataUpdate::Replace(all)) => thread.metadata = codec::normalize_map(all),
            None => {}
        }
        thread.updated_at = codec::now();
        sqlx::query(sql::UPDATE_THREAD)
            .bind(thread_id)
            .bind(&thread.title)
            .bind(codec::canonical_map_text(&thread.metadata))
            .bind(thread.updated_at)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        Ok(thread)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        const OP: &str = "delete_thread";
        let mut tx = self.begin(OP).await?;
        sqlx::query(sql::DELETE_THREAD_VECTORS)
            .bind(thread_id)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        let deleted = sqlx::query(sql::DELETE_THREAD)
            .bind(thread_id)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?
            .rows_affected();
        tx.commit().await.map_err(err(OP))?;
        Ok(deleted > 0)
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        const OP: &str = "clone_thread";
        let new_id = options.new_thread_id.unwrap_or_else(codec::new_id);
        codec::check_id("new_thread_id", &new_id)?;
        let mut tx = self.begin(OP).await?;
        let source: Option<ThreadRow> = sqlx::query_as(sql::LOCK_THREAD)
            .bind(source_thread_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err(OP))?;
        let source = source
            .ok_or_else(|| StorageError::thread_not_found(source_thread_id))?
            .into_thread()?;
        codec::check_owner(
            source_thread_id,
            &source.resource_id,
            Some(&options.resource_id),
        )?;
        let old_ids: Vec<String> = sqlx::query_scalar(sql::MESSAGE_IDS)
            .bind(source_thread_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(err(OP))?;
        let now = codec::now();
        let thread = Thread {
            id: new_id.clone(),
            resource_id: source.resource_id.clone(),
            title: options.title.or(source.title.clone()),
            metadata: codec::clone_metadata(&source.metadata, source_thread_id, now),
            created_at: now,
            updated_at: now,
        };
        let inserted = sqlx::query(sql::INSERT_THREAD)
            .bind(&thread.id)
            .bind(&thread.resource_id)
            .bind(&thread.title)
            .bind(codec::canonical_map_text(&thread.metadata))
            .bind(now)
            .bind(old_ids.len() as i64 + 1)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        if inserted.rows_affected() == 0 {
            return Err(StorageError::ThreadExists { thread_id: new_id });
        }
        let new_ids: Vec<String> = old_ids.iter().map(|_| codec::new_id()).collect();
        let seqs: Vec<i64> = (1..=old_ids.len() as i64).collect();
        sqlx::query(sql::COPY_MESSAGES)
            .bind(&new_id)
            .bind(&old_ids)
            .bind(&new_ids)
            .bind(&seqs)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        Ok(thread)
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        const OP: &str = "list_threads";
        codec::check_page(query.page)?;
        let filter =
            codec::parse_filter(query.metadata.as_ref())?.map(|f| codec::canonical_map_text(&f));
        let resource = query.resource_id.as_deref();
        let mut count = QueryBuilder::<Postgres>::new(sql::COUNT_THREADS);
        sql::push_thread_filter(&mut count, resource, filter.clone());
        let mut select = QueryBuilder::<Postgres>::new(sql::SELECT_THREADS);
        sql::push_thread_filter(&mut select, resource, filter);
        select
            .push(sql::thread_order(query.order))
            .push(" LIMIT ")
            .push_bind(i64::from(query.page.per_page))
            .push(" OFFSET ")
            .push_bind(query.page.offset() as i64);
        let mut conn = self.conn(OP).await?;
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&mut *conn)
            .await
            .map_err(err(OP))?;
        let rows: Vec<ThreadRow> = select
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(err(OP))?;
        let items = rows
            .into_iter()
            .map(ThreadRow::into_thread)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, query.page, total as u64))
    }

    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        const OP: &str = "append_messages";
        let messages = EncodedMessage::batch(messages)?;
        // The common case, new messages appended now, is one statement. Imports (explicit
        // creation times), retries of stored ids and errors take the transactional path below.
        if !messages.is_empty() && messages.iter().all(|m| m.created_at.is_none()) {
            let now = codec::now();
            if let Some(seqs) =
                append_new(&self.pool, thread_id, resource_id, &messages, now).await?
            {
                return Ok(messages
                    .into_iter()
                    .zip(seqs)
                    .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                    .collect());
            }
        }
        let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        let mut tx = self.begin(OP).await?;
        owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
        let existing = find_existing(&mut tx, &ids).await?;
        check_homes(thread_id, &existing)?;
        let now = codec::now();
        let new_count = (messages.len() - existing.len()) as i64;
        let mut next_seq: i64 = sqlx::query_scalar(sql::BUMP_NEXT_SEQ)
            .bind(thread_id)
            .bind(new_count)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(err(OP))?;
        let mut slots = Vec::with_capacity(messages.len());
        let mut inserts = Vec::new();
        for message in &messages {
            match existing.get(&message.id) {
                Some(e) => {
                    replace_message(&mut tx, message).await?;
                    slots.push((e.seq, e.created_at));
                }
                None => {
                    let created = message.created_at.unwrap_or(now);
                    inserts.push((message, next_seq, created));
                    slots.push((next_seq, created));
                    next_seq += 1;
                }
            }
        }
        insert_messages(&mut tx, thread_id, resource_id, &inserts).await?;
        tx.commit().await.map_err(err(OP))?;
        Ok(messages
            .into_iter()
            .zip(slots)
            .map(|(m, (seq, at))| m.into_stored(thread_id, resource_id, seq, at))
            .collect())
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        const OP: &str = "list_messages";
        if let Selection::Page(page) = selection {
            codec::check_page(page)?;
        }
        let mut conn = self.conn(OP).await?;
        owned(&mut conn, thread_id, resource_id, false, OP).await?;
        match selection {
            Selection::Last(n) => {
                let range = SeqRange {
                    limit: Some(n),
                    anchor: Anchor::End,
                    ..SeqRange::default()
                };
                select_range(&mut conn, thread_id, range).await
            }
            Selection::Range(range) => select_range(&mut conn, thread_id, range).await,
            Selection::Page(page) => {
                let query = sqlx::query_as(sql::PAGE_MESSAGES)
                    .bind(thread_id)
                    .bind(i64::from(page.per_page))
                    .bind(page.offset() as i64);
                let messages = fetch_messages(&mut conn, query, OP).await?;
                let total: i64 = sqlx::query_scalar(sql::COUNT_MESSAGES)
                    .bind(thread_id)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(err(OP))?;
                let total = total as u64;
                Ok(MessageList {
                    has_more: page.offset() + (messages.len() as u64) < total,
                    messages,
                    total: Some(total),
                })
            }
        }
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        const OP: &str = "get_messages";
        let mut conn = self.conn(OP).await?;
        let query = sqlx::query_as(sql::GET_MESSAGES).bind(ids);
        let messages = fetch_messages(&mut conn, query, OP).await?;
        for m in &messages {
            codec::check_owner(&m.thread_id, &m.resource_id, resource_id)?;
        }
        Ok(messages)
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        const OP: &str = "delete_messages";
        let mut tx = self.begin(OP).await?;
        owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
        let deleted: Vec<String> = sqlx::query_scalar(sql::DELETE_MESSAGES)
            .bind(thread_id)
            .bind(ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(err(OP))?;
        if !deleted.is_empty() {
            sqlx::query(sql::DELETE_MESSAGE_VECTORS)
                .bind(&deleted)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            sqlx::query(sql::TOUCH_THREAD)
                .bind(thread_id)
                .bind(codec::now())
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
        }
        tx.commit().await.map_err(err(OP))?;
        Ok(deleted.len() as u64)
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        const OP: &str = "search_messages";
        let pattern = like_pattern(&codec::search_needle(&search.query));
        let limit = i64::from(search.limit);
        let mut conn = self.conn(OP).await?;
        let (key, recent, whole) = match &search.scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
                (
                    thread_id.as_str(),
                    sql::SEARCH_THREAD_RECENT,
                    sql::SEARCH_THREAD,
                )
            }
            Scope::Resource { resource_id } => (
                resource_id.as_str(),
                sql::SEARCH_RESOURCE_RECENT,
                sql::SEARCH_RESOURCE,
            ),
        };
        // The newest messages first: a frequent term fills the limit there.
        let query = sqlx::query_as(recent)
            .bind(key)
            .bind(&pattern)
            .bind(limit)
            .bind(sql::SEARCH_WINDOW);
        let found = fetch_messages(&mut conn, query, OP).await?;
        if found.len() as i64 >= limit {
            return Ok(found);
        }
        let size: i64 = match &search.scope {
            Scope::Thread { .. } => sqlx::query_scalar(sql::THREAD_SIZE_BOUND).bind(key),
            Scope::Resource { .. } => sqlx::query_scalar(sql::COUNT_RESOURCE_UP_TO)
                .bind(key)
                .bind(sql::SEARCH_WINDOW + 1),
        }
        .fetch_one(&mut *conn)
        .await
        .map_err(err(OP))?;
        if size <= sql::SEARCH_WINDOW {
            return Ok(found);
        }
        // A bigger scope: the whole of it, planned for this pattern (the trigram index, if any).
        let query = sqlx::query_as(whole)
            .bind(key)
            .bind(pattern)
            .bind(limit)
            .persistent(false);
        fetch_messages(&mut conn, query, OP).await
    }

    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        const OP: &str = "get_working_memory";
        let mut conn = self.conn(OP).await?;
        let (statement, key) = match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
                (sql::GET_THREAD_MEMORY, thread_id)
            }
            Scope::Resource { resource_id } => (sql::GET_RESOURCE_MEMORY, resource_id),
        };
        let content: Option<Option<String>> = sqlx::query_scalar(statement)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(content.flatten())
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        const OP: &str = "set_working_memory";
        let mut tx = self.begin(OP).await?;
        let query = match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
                sqlx::query(sql::SET_THREAD_MEMORY)
                    .bind(thread_id)
                    .bind(content)
            }
            Scope::Resource { resource_id } => sqlx::query(sql::SET_RESOURCE_MEMORY)
                .bind(resource_id)
                .bind(content)
                .bind(codec::now()),
        };
        query.execute(&mut *tx).await.map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))
    }

    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        let mut saved = self.save_runs(vec![(record, expected_version)]).await?;
        saved
            .pop()
            .ok_or_else(|| StorageError::corrupt("save_run", "no run was saved"))
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        const OP: &str = "save_runs";
        let mut snapshots = Vec::with_capacity(saves.len());
        for (record, _) in &saves {
            codec::check_id("run_id", &record.run_id)?;
            snapshots.push(
                serde_json::to_string(&record.snapshot)
                    .map_err(|e| StorageError::corrupt("run snapshot", e))?,
            );
        }
        let now = codec::now();
        // One transaction: a conflict on any run rolls back the ones before it (dropping the
        // transaction without commit rolls it back).
        let mut tx = self.begin(OP).await?;
        let mut written = Vec::with_capacity(saves.len());
        for ((record, expected_version), snapshot) in saves.iter().zip(&snapshots) {
            match write_run(&mut tx, record, snapshot, *expected_version, now).await? {
                Ok(saved) => written.push(saved),
                Err(actual) => {
                    return Err(codec::run_conflict(
                        record.run_id.clone(),
                        *expected_version,
                        actual,
                    ));
                }
            }
        }
        tx.commit().await.map_err(err(OP))?;
        Ok(saves
            .into_iter()
            .zip(written)
            .map(|((record, _), (version, created_at))| RunRecord {
                version,
                created_at,
                updated_at: now,
                ..record
            })
            .collect())
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        let row: Option<RunRow> = sqlx::query_as(sql::GET_RUN)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err("get_run"))?;
        row.map(RunRow::into_record).transpose()
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        const OP: &str = "list_runs";
        codec::check_page(filter.page)?;
        let mut count = QueryBuilder::<Postgres>::new(sql::COUNT_RUNS);
        sql::push_run_filter(&mut count, &filter);
        let mut select = QueryBuilder::<Postgres>::new(sql::SELECT_RUNS);
        sql::push_run_filter(&mut select, &filter);
        select
            .push(sql::RUN_ORDER)
            .push(" LIMIT ")
            .push_bind(i64::from(filter.page.per_page))
            .push(" OFFSET ")
            .push_bind(filter.page.offset() as i64);
        let mut conn = self.conn(OP).await?;
        let total: i64 = count
            .build_query_scalar()
            .fetch_one(&mut *conn)
            .await
            .map_err(err(OP))?;
        let rows: Vec<RunRow> = select
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(err(OP))?;
        let items = rows
            .into_iter()
            .map(RunRow::into_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, filter.page, total as u64))
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        let done = sqlx::query(sql::DELETE_RUN)
            .bind(run_id)
            .execute(&self.pool)
            .await
            .map_err(err("delete_run"))?;
        Ok(done.rows_affected() > 0)
    }

    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "add_observations";
        let mut tx = self.begin(OP).await?;
        check_scope(&mut tx, scope, true, OP).await?;
        let added = insert_observations(&mut tx, scope, observations).await?;
        tx.commit().await.map_err(err(OP))?;
        Ok(added)
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        const OP: &str = "list_observations";
        let mut conn = self.conn(OP).await?;
        check_scope(&mut conn, scope, false, OP).await?;
        let query = match scope {
            Scope::Thread { thread_id, .. } => {
                sqlx::query_as(sql::LIST_THREAD_OBSERVATIONS).bind(thread_id)
            }
            Scope::Resource { resource_id } => {
                sqlx::query_as(sql::LIST_RESOURCE_OBSERVATIONS).bind(resource_id)
            }
        };
        let rows: Vec<ObservationRow> = query.fetch_all(&mut *conn).await.map_err(err(OP))?;
        Ok(rows
            .into_iter()
            .map(ObservationRow::into_observation)
            .collect())
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "replace_observations";
        let mut tx = self.begin(OP).await?;
        check_scope(&mut tx, scope, true, OP).await?;
        let delete = match scope {
            Scope::Thread { thread_id, .. } => {
                sqlx::query(sql::DELETE_THREAD_OBSERVATIONS).bind(thread_id)
            }
            Scope::Resource { resource_id } => {
                sqlx::query(sql::DELETE_RESOURCE_OBSERVATIONS).bind(resource_id)
            }
        };
        delete.execute(&mut *tx).await.map_err(err(OP))?;
        let added = insert_observations(&mut tx, scope, observations).await?;
        tx.commit().await.map_err(err(OP))?;
        Ok(added)
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        const OP: &str = "get_observed_seq";
        let mut conn = self.conn(OP).await?;
        owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
        let seq: Option<Option<i64>> = sqlx::query_scalar(sql::GET_OBSERVED_SEQ)
            .bind(thread_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(seq.flatten())
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        const OP: &str = "set_observed_seq";
        let mut tx = self.begin(OP).await?;
        owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
        sqlx::query(sql::SET_OBSERVED_SEQ)
            .bind(thread_id)
            .bind(seq)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))
    }

    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        const OP: &str = "create_index";
        codec::check_id("index", name)?;
        codec::check_dimension(dimension)?;
        let stored_dimension = i32::try_from(dimension)
            .map_err(|_| StorageError::invalid("dimension", "too large"))?;
        let mut conn = self.conn(OP).await?;
        sqlx::query(sql::INSERT_INDEX)
            .bind(name)
            .bind(stored_dimension)
            .bind(codec::now())
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        let existing = index_dimension(&mut conn, name, OP).await?;
        if existing != dimension {
            return Err(StorageError::IndexExists {
                index: name.to_owned(),
                existing,
                requested: dimension,
            });
        }
        Ok(())
    }

    async fn index_dimension(&self, name: &str) -> Result<Option<usize>> {
        const OP: &str = "index_dimension";
        let mut conn = self.conn(OP).await?;
        match index_dimension(&mut conn, name, OP).await {
            Ok(dimension) => Ok(Some(dimension)),
            Err(StorageError::IndexNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        const OP: &str = "upsert_vectors";
        let mut tx = self.begin(OP).await?;
        let dimension = index_dimension(&mut tx, index, OP).await?;
        for record in &vectors {
            codec::check_vector(index, dimension, &record.vector)?;
        }
        for record in vectors {
            let metadata = codec::normalize_map(record.metadata);
            sqlx::query(sql::UPSERT_VECTOR)
                .bind(index)
                .bind(&record.id)
                .bind(codec::encode_vector(&record.vector))
                .bind(codec::canonical_map_text(&metadata))
                .bind(codec::meta_str(&metadata, "thread_id"))
                .bind(codec::meta_str(&metadata, "resource_id"))
                .bind(codec::meta_str(&metadata, "message_id"))
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
        }
        tx.commit().await.map_err(err(OP))
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        const OP: &str = "query_vectors";
        let mut conn = self.conn(OP).await?;
        let dimension = index_dimension(&mut conn, index, OP).await?;
        codec::check_vector(index, dimension, &query.vector)?;
        // TODO(pgvector): with `has_pgvector()`, an approximate `ORDER BY embedding <=> $q`
        // over an HNSW index goes here; the exact scan below is the tested default.
        let filter = &query.filter;
        let scan = match (&filter.thread_id, &filter.resource_id) {
            (Some(thread), resource) => sqlx::query_as(sql::SCAN_THREAD_VECTORS)
                .bind(index)
                .bind(thread.as_str())
                .bind(resource.as_deref()),
            (None, Some(resource)) => sqlx::query_as(sql::SCAN_RESOURCE_VECTORS)
                .bind(index)
                .bind(resource.as_str()),
            (None, None) => sqlx::query_as(sql::SCAN_VECTORS).bind(index),
        };
        let mut rows = scan.fetch(&mut *conn);
        let mut top = codec::TopK::new(query.top_k);
        while let Some(row) = rows.try_next().await.map_err(err(OP))? {
            let (id, embedding, metadata): (String, Vec<u8>, serde_json::Value) = row;
            let score = codec::cosine(&query.vector, &codec::decode_vector(&embedding)?);
            if top.admits(score, &id) {
                let metadata = codec::value_to_map("vector metadata", metadata)?;
                top.push(VectorMatch {
                    id,
                    score,
                    metadata,
                });
            }
        }
        Ok(top.into_vec())
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        const OP: &str = "delete_vectors";
        let mut conn = self.conn(OP).await?;
        index_dimension(&mut conn, index, OP).await?;
        let done = sqlx::query(sql::DELETE_VECTORS)
            .bind(index)
            .bind(ids)
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(done.rows_affected())
    }
}
