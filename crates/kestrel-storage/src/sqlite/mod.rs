//! [`SqliteStorage`]: the embedded default, one SQLite file.
//!
//! The file is created when missing and migrated on open (versioned migrations in
//! `migrations/sqlite`, recorded in `_sqlx_migrations`; a newer build migrates an older file
//! forward, an older build refuses a file migrated by a newer one). Connections use WAL,
//! `synchronous = NORMAL`, foreign keys and a busy timeout.
//!
//! **Concurrency.** All writes go through one connection and every multi-statement write runs in
//! a `BEGIN IMMEDIATE` transaction, which takes SQLite's write lock up front: in-process writers
//! queue on the connection, other processes wait on the busy timeout, and a transaction never
//! fails half-way on a lock upgrade. The common append (new messages) is a single statement,
//! atomic on its own. Reads use separate connections and, thanks to WAL, never wait for writers.
//! Connections are the store's own, not an `sqlx` pool (see `conn.rs` for why).
//!
//! **Text search.** An FTS5 trigram index serves `search_messages`; it is brought up to date in
//! batches ([`SqliteStorage::catch_up_search_index`]) and searches scan the few messages it does
//! not hold yet, so appends do not pay for it.

mod conn;
mod rows;
mod sql;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, QueryBuilder, Row, Sqlite};

use self::conn::Connections;
use self::rows::{ObservationRow, RunRow, ThreadRow, parse_messages};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::{
    EncodedMessage, ExistingMessage, check_homes, db_err, migrate_err, open_err,
};
use crate::storage::Storage;
use crate::types::{
    Anchor, CloneThread, MessageList, MessageSearch, MetadataUpdate, NewMessage, NewObservation,
    NewThread, Observation, Page, RunFilter, RunRecord, Scope, Selection, SeqRange, StoredMessage,
    Thread, ThreadPatch, ThreadQuery, VectorMatch, VectorQuery, VectorRecord,
};

/// The schema migrations this build applies to SQLite files.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

const BACKEND: &str = "sqlite";

/// The JSON array of `ids` (SQLite binds id lists this way).
fn json_ids<S: AsRef<str>>(ids: &[S]) -> String {
    let ids: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    serde_json::Value::from(ids).to_string()
}

fn err(operation: &'static str) -> impl FnOnce(sqlx::Error) -> StorageError {
    db_err(BACKEND, operation)
}

/// Options of [`SqliteStorage::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Connections of the read pool (default 4).
    pub max_readers: u32,
    /// How long a statement waits for another process's write lock (default 5 s).
    pub busy_timeout: Duration,
    /// Page cache per connection, in KiB (default 16 MiB; SQLite's own default is 2 MiB).
    pub cache_size_kib: u32,
    /// Bytes of the file read through a memory map (default 0: off). SQLite drops and rebuilds
    /// a connection's whole map whenever another connection has written since its last read
    /// (which, with one writer and separate readers, is nearly every read of a busy store), so a
    /// map only pays off for stores that are mostly read.
    pub mmap_size: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            max_readers: 4,
            busy_timeout: Duration::from_secs(5),
            cache_size_kib: 16 * 1024,
            mmap_size: 0,
        }
    }
}

/// How many appended messages wait for the trigram search index before it is brought up to date.
const SEARCH_INDEX_BATCH: u64 = 512;

/// Bookkeeping of the work done off the request path.
#[derive(Debug, Default)]
struct Background {
    /// Messages appended since the search index was last brought up to date.
    unindexed: AtomicU64,
}

/// A store in one SQLite file. Cheap to clone; clones share the connections.
#[derive(Debug, Clone)]
pub struct SqliteStorage {
    conns: Arc<Connections>,
    path: PathBuf,
    background: Arc<Background>,
}

impl SqliteStorage {
    /// Opens (creating and migrating when needed) the database file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`SqliteStorage::open`] with options.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let target = format!("SQLite database {}", path.display());
        let connect = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout)
            .pragma("cache_size", format!("-{}", options.cache_size_kib))
            .pragma("mmap_size", options.mmap_size.to_string());

        let mut writer = SqliteConnection::connect_with(&connect)
            .await
            .map_err(|e| open_err(&target, "cannot open the file", e))?;
        MIGRATOR
            .run(&mut writer)
            .await
            .map_err(|e| migrate_err(&target, e))?;
        let store = Self {
            conns: Arc::new(Connections::new(connect, writer, options.max_readers)),
            path,
            background: Arc::new(Background::default()),
        };
        store
            .catch_up_search_index()
            .await
            .map_err(|e| StorageError::Open {
                target: target.clone(),
                reason: format!("cannot update the search index: {e}"),
                source: Some(Box::new(e)),
            })?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the connections, waiting for operations in progress; later operations fail.
    pub async fn close(&self) {
        self.conns.close().await;
    }

    /// Adds the messages appended since the last time to the trigram search index (one write
    /// transaction). Searches are right without it (they scan what the index lacks); it keeps
    /// them fast. Runs on open and in the background after every [`SEARCH_INDEX_BATCH`] appended
    /// messages.
    pub async fn catch_up_search_index(&self) -> Result<()> {
        const OP: &str = "catch_up_search_index";
        self.background.unindexed.store(0, Ordering::Relaxed);
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        sqlx::query(sql::CATCH_UP_SEARCH_INDEX)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))
    }

    /// Counts appended messages: past [`SEARCH_INDEX_BATCH`], brings the search index up to date
    /// in the background.
    fn appended(&self, count: usize) {
        let count = count as u64;
        let before = self
            .background
            .unindexed
            .fetch_add(count, Ordering::Relaxed);
        if before >= SEARCH_INDEX_BATCH || before + count < SEARCH_INDEX_BATCH {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.clone();
        runtime.spawn(async move {
            if let Err(error) = store.catch_up_search_index().await {
                tracing::warn!(%error, path = %store.path.display(), "updating the search index failed; searches scan instead");
            }
        });
    }
}

/// Starts a `BEGIN IMMEDIATE` transaction (SQLite's write lock taken up front).
async fn begin<'c>(
    conn: &'c mut SqliteConnection,
    operation: &'static str,
) -> Result<sqlx::Transaction<'c, Sqlite>> {
    conn.begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(err(operation))
}

/// Where the first phase of a search stopped: the oldest seq it scanned (thread scope), or the
/// last message it scanned in search order (resource scope: created_at, thread, seq).
enum Boundary {
    Seq(i64),
    Resource(i64, String, i64),
}

/// The owner and next seq of a thread.
async fn thread_owner(
    conn: &mut SqliteConnection,
    thread_id: &str,
    operation: &'static str,
) -> Result<(String, i64)> {
    sqlx::query_as(sql::THREAD_OWNER)
        .bind(thread_id)
        .fetch_optional(conn)
        .await
        .map_err(err(operation))?
        .ok_or_else(|| StorageError::thread_not_found(thread_id))
}

/// Checks that the thread exists and belongs to `resource_id` (when given).
async fn owned(
    conn: &mut SqliteConnection,
    thread_id: &str,
    resource_id: Option<&str>,
    operation: &'static str,
) -> Result<(String, i64)> {
    let (owner, next_seq) = thread_owner(conn, thread_id, operation).await?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    Ok((owner, next_seq))
}

async fn fetch_messages<'q>(
    conn: &mut SqliteConnection,
    query: sqlx::query::QueryScalar<'q, Sqlite, String, sqlx::sqlite::SqliteArguments<'q>>,
    operation: &'static str,
) -> Result<Vec<StoredMessage>> {
    let json = query.fetch_one(conn).await.map_err(err(operation))?;
    parse_messages(&json)
}

/// A range of a thread's messages, checking the owner in the same statement.
async fn select_range(
    conn: &mut SqliteConnection,
    thread_id: &str,
    resource_id: Option<&str>,
    range: SeqRange,
) -> Result<MessageList> {
    const OP: &str = "list_messages";
    let statement = match range.anchor {
        Anchor::Start => sql::OWNED_RANGE_ASC,
        Anchor::End => sql::OWNED_RANGE_DESC,
    };
    let row: Option<(String, String)> = sqlx::query_as(statement)
        .bind(thread_id)
        .bind(range.after.unwrap_or(i64::MIN))
        .bind(range.before.unwrap_or(i64::MAX))
        .bind(range.limit.map_or(-1, |l| i64::from(l) + 1))
        .fetch_optional(conn)
        .await
        .map_err(err(OP))?;
    let (owner, json) = row.ok_or_else(|| StorageError::thread_not_found(thread_id))?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    let mut messages = parse_messages(&json)?;
    let has_more = range.limit.is_some_and(|l| messages.len() > l as usize);
    // The limit + 1 messages (in seq order) are the ones nearest the anchor: drop the extra one.
    if let Some(l) = range
        .limit
        .map(|l| l as usize)
        .filter(|&l| messages.len() > l)
    {
        match range.anchor {
            Anchor::Start => messages.truncate(l),
            Anchor::End => {
                messages.drain(..messages.len() - l);
            }
        }
    }
    Ok(MessageList {
        messages,
        has_more,
        total: None,
    })
}

/// Reserves the batch's seqs on an owned thread; returns the first reserved seq and where the
/// batch's already-stored ids live.
async fn reserve_seqs(
    conn: &mut SqliteConnection,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(i64, HashMap<String, ExistingMessage>)> {
    const OP: &str = "append_messages";
    let ids: Vec<&str> = batch.iter().map(|m| m.id.as_str()).collect();
    let reserved: Option<(i64, String)> = sqlx::query_as(sql::RESERVE_SEQS)
        .bind(thread_id)
        .bind(resource_id)
        .bind(json_ids(&ids))
        .bind(codec::to_micros(now))
        .fetch_optional(&mut *conn)
        .await
        .map_err(err(OP))?;
    let Some((next_seq, stored)) = reserved else {
        owned(conn, thread_id, Some(resource_id), OP).await?;
        return Err(StorageError::thread_not_found(thread_id));
    };
    let stored: Vec<(String, String, i64, i64)> =
        serde_json::from_str(&stored).map_err(|e| StorageError::corrupt("message ids", e))?;
    let existing = stored
        .into_iter()
        .map(|(id, thread_id, seq, created)| {
            let created_at = codec::from_micros(created)?;
            let home = ExistingMessage {
                thread_id,
                seq,
                created_at,
            };
            Ok((id, home))
        })
        .collect::<Result<HashMap<_, _>>>()?;
    let new_count = (batch.len() - existing.len()) as i64;
    Ok((next_seq - new_count, existing))
}

/// The batch as the JSON array the one-statement appends read.
fn batch_json(batch: &[EncodedMessage]) -> String {
    let encoded: Vec<serde_json::Value> = batch
        .iter()
        .map(|m| {
            serde_json::json!([
                m.id,
                codec::role_str(m.role),
                m.parts_text,
                m.status.as_str(),
                m.metadata_text,
                m.search_text,
            ])
        })
        .collect();
    serde_json::Value::from(encoded).to_string()
}

/// The one-statement append of a batch of new messages ([`sql::APPEND_NEW`]): their seqs, in
/// batch order, or `None` when the statement inserted nothing (a missing or foreign thread, or an
/// id already stored), which the transactional path then sorts out.
async fn append_new(
    writer: &mut SqliteConnection,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Vec<i64>>> {
    let mut seqs: Vec<i64> = sqlx::query_scalar(sql::APPEND_NEW)
        .bind(thread_id)
        .bind(resource_id)
        .bind(batch_json(batch))
        .bind(codec::to_micros(now))
        .fetch_all(writer)
        .await
        .map_err(err("append_messages"))?;
    if seqs.len() != batch.len() {
        // Nothing was inserted (the statement is all or nothing).
        return Ok(None);
    }
    seqs.sort_unstable();
    Ok(Some(seqs))
}

/// [`append_new`] and the `last` messages before the batch, in one round trip
/// ([`sql::APPEND_NEW_WITH_HISTORY`]); `None` when nothing was inserted.
async fn append_new_with_history(
    writer: &mut SqliteConnection,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
    last: u32,
) -> Result<Option<(Vec<i64>, MessageList)>> {
    const OP: &str = "append_with_history";
    let rows = sqlx::query(sql::APPEND_NEW_WITH_HISTORY)
        .bind(thread_id)
        .bind(resource_id)
        .bind(batch_json(batch))
        .bind(codec::to_micros(now))
        .bind(i64::from(last))
        .fetch_all(writer)
        .await
        .map_err(err(OP))?;
    // The new seqs, then one row holding the history.
    let Some((history, inserted)) = rows.split_last() else {
        return Ok(None);
    };
    if inserted.len() != batch.len() {
        return Ok(None);
    }
    let mut seqs = inserted
        .iter()
        .map(|row| row.try_get::<i64, _>(0))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(err(OP))?;
    seqs.sort_unstable();
    let json: String = history.try_get(0).map_err(err(OP))?;
    let mut messages = parse_messages(&json)?;
    let has_more = messages.len() > last as usize;
    if has_more {
        messages.drain(..messages.len() - last as usize);
    }
    let history = MessageList {
        messages,
        has_more,
        total: None,
    };
    Ok(Some((seqs, history)))
}

/// An FTS5 query for the trigram index matching the messages that contain `needle`'s rarest
/// trigrams (at most two, judged by how common their characters are in text: a third common one
/// would cost more to intersect than it saves in candidates), or `None` when
/// the needle is shorter than three characters. It selects a superset of the matches: every
/// candidate is checked against the text.
fn trigram_query(needle: &str) -> Option<String> {
    /// How common a character is in text, roughly: English letter frequencies, with spaces
    /// counted low because a trigram spanning a word boundary is only as common as its letters,
    /// and digits, punctuation and other characters lowest.
    fn commonness(c: char) -> u32 {
        match c {
            'e' => 12,
            't' => 9,
            'a' | 'o' => 8,
            'i' | 'n' => 7,
            's' | 'h' | 'r' => 6,
            'd' | 'l' => 4,
            'c' | 'u' | 'm' | 'w' | 'f' => 3,
            ' ' | 'g' | 'y' | 'p' | 'b' => 2,
            'v' | 'k' | ',' | '.' => 1,
            _ => 0,
        }
    }
    let chars: Vec<char> = needle.chars().collect();
    let mut trigrams: Vec<(u32, String)> = chars
        .windows(3)
        .map(|w| (w.iter().copied().map(commonness).sum(), w.iter().collect()))
        .collect();
    if trigrams.is_empty() {
        return None;
    }
    trigrams.sort();
    trigrams.dedup_by(|a, b| a.1 == b.1);
    let phrases: Vec<String> = trigrams
        .iter()
        .take(2)
        .map(|(_, t)| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    Some(phrases.join(" "))
}

/// Inserts new messages with one statement.
async fn insert_messages(
    conn: &mut SqliteConnection,
    thread_id: &str,
    resource_id: &str,
    rows: &[(&EncodedMessage, i64, chrono::DateTime<chrono::Utc>)],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let encoded: Vec<serde_json::Value> = rows
        .iter()
        .map(|(m, seq, created_at)| {
            serde_json::json!([
                m.id,
                seq,
                codec::role_str(m.role),
                m.parts_text,
                m.status.as_str(),
                m.metadata_text,
                m.search_text,
                codec::to_micros(*created_at),
            ])
        })
        .collect();
    sqlx::query(sql::INSERT_MESSAGES)
        .bind(thread_id)
        .bind(resource_id)
        .bind(serde_json::Value::from(encoded).to_string())
        .execute(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(())
}

async fn replace_message(conn: &mut SqliteConnection, message: &EncodedMessage) -> Result<()> {
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
    conn: &mut SqliteConnection,
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
            .bind(codec::to_micros(observation.created_at))
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
    conn: &mut SqliteConnection,
    scope: &Scope,
    operation: &'static str,
) -> Result<()> {
    if let Scope::Thread {
        thread_id,
        resource_id,
    } = scope
    {
        owned(conn, thread_id, Some(resource_id), operation).await?;
    }
    Ok(())
}

async fn index_dimension(
    conn: &mut SqliteConnection,
    index: &str,
    operation: &'static str,
) -> Result<usize> {
    let dimension: Option<i64> = sqlx::query_scalar(sql::INDEX_DIMENSION)
        .bind(index)
        .fetch_optional(conn)
        .await
        .map_err(err(operation))?;
    let dimension = dimension.ok_or_else(|| StorageError::IndexNotFound {
        index: index.to_owned(),
    })?;
    usize::try_from(dimension).map_err(|e| StorageError::corrupt("index dimension", e))
}

async fn run_version(conn: &mut SqliteConnection, run_id: &str) -> Result<Option<i64>> {
    sqlx::query_scalar(sql::RUN_VERSION)
        .bind(run_id)
        .fetch_optional(conn)
        .await
        .map_err(err("save_run"))
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        const OP: &str = "create_thread";
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let mut conn = self.conns.writer(OP).await?;
        let inserted = sqlx::query(sql::INSERT_THREAD)
            .bind(&id)
            .bind(&thread.resource_id)
            .bind(&thread.title)
            .bind(codec::canonical_map_text(&thread.metadata))
            .bind(codec::to_micros(created))
            .bind(codec::to_micros(created))
            .bind(1i64)
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        drop(conn);
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
        const OP: &str = "get_thread";
        let mut conn = self.conns.reader(OP).await?;
        let row: Option<ThreadRow> = sqlx::query_as(sql::GET_THREAD)
            .bind(thread_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?;
        row.map(ThreadRow::into_thread).transpose()
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        const OP: &str = "update_thread";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        let row: Option<ThreadRow> = sqlx::query_as(sql::GET_THREAD)
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
            .bind(codec::to_micros(thread.updated_at))
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        Ok(thread)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        const OP: &str = "delete_thread";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
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
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        owned(&mut tx, source_thread_id, Some(&options.resource_id), OP).await?;
        let source: ThreadRow = sqlx::query_as(sql::GET_THREAD)
            .bind(source_thread_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(err(OP))?;
        let source = source.into_thread()?;
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
            .bind(codec::to_micros(now))
            .bind(codec::to_micros(now))
            .bind(old_ids.len() as i64 + 1)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        if inserted.rows_affected() == 0 {
            return Err(StorageError::ThreadExists { thread_id: new_id });
        }
        let copies: Vec<serde_json::Value> = old_ids
            .iter()
            .zip(1i64..)
            .map(|(old, seq)| serde_json::json!([old, codec::new_id(), seq]))
            .collect();
        sqlx::query(sql::COPY_MESSAGES)
            .bind(&new_id)
            .bind(serde_json::Value::from(copies).to_string())
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
        let mut count = QueryBuilder::<Sqlite>::new(sql::COUNT_THREADS);
        sql::push_thread_filter(&mut count, resource, filter.clone());
        let mut select = QueryBuilder::<Sqlite>::new(sql::SELECT_THREADS);
        sql::push_thread_filter(&mut select, resource, filter);
        select
            .push(sql::thread_order(query.order))
            .push(" LIMIT ")
            .push_bind(i64::from(query.page.per_page))
            .push(" OFFSET ")
            .push_bind(query.page.offset() as i64);
        let mut conn = self.conns.reader(OP).await?;
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
        let now = codec::now();
        // The common case, new messages appended now, is one statement (one round trip through
        // the driver's worker). Imports (explicit creation times), retries of stored ids and
        // errors take the transactional path below.
        if !messages.is_empty() && messages.iter().all(|m| m.created_at.is_none()) {
            let mut conn = self.conns.writer(OP).await?;
            let appended = append_new(&mut conn, thread_id, resource_id, &messages, now).await?;
            drop(conn);
            if let Some(seqs) = appended {
                self.appended(messages.len());
                return Ok(messages
                    .into_iter()
                    .zip(seqs)
                    .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                    .collect());
            }
        }
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        let (mut next_seq, existing) =
            reserve_seqs(&mut tx, thread_id, resource_id, &messages, now).await?;
        check_homes(thread_id, &existing)?;
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
        self.appended(inserts.len());
        Ok(messages
            .into_iter()
            .zip(slots)
            .map(|(m, (seq, at))| m.into_stored(thread_id, resource_id, seq, at))
            .collect())
    }

    async fn append_with_history(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        last: u32,
    ) -> Result<(Vec<StoredMessage>, MessageList)> {
        const OP: &str = "append_with_history";
        if !messages.is_empty() && last > 0 && messages.iter().all(|m| m.created_at.is_none()) {
            let batch = EncodedMessage::batch(messages.clone())?;
            let now = codec::now();
            let mut conn = self.conns.writer(OP).await?;
            let appended =
                append_new_with_history(&mut conn, thread_id, resource_id, &batch, now, last)
                    .await?;
            drop(conn);
            if let Some((seqs, history)) = appended {
                self.appended(batch.len());
                let stored = batch
                    .into_iter()
                    .zip(seqs)
                    .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                    .collect();
                return Ok((stored, history));
            }
        }
        // Retries, imports and errors: the two calls.
        let stored = self
            .append_messages(thread_id, resource_id, messages)
            .await?;
        let first = stored.iter().map(|m| m.seq).min().unwrap_or(i64::MAX);
        let history = self
            .list_messages(thread_id, Some(resource_id), Selection::before(first, last))
            .await?;
        Ok((stored, history))
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
        let mut conn = self.conns.reader(OP).await?;
        match selection {
            Selection::Last(n) => {
                let range = SeqRange {
                    limit: Some(n),
                    anchor: Anchor::End,
                    ..SeqRange::default()
                };
                select_range(&mut conn, thread_id, resource_id, range).await
            }
            Selection::Range(range) => select_range(&mut conn, thread_id, resource_id, range).await,
            Selection::Page(page) => {
                owned(&mut conn, thread_id, resource_id, OP).await?;
                let query = sqlx::query_scalar(sql::PAGE_MESSAGES)
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
        let mut conn = self.conns.reader(OP).await?;
        let query = sqlx::query_scalar(sql::GET_MESSAGES).bind(json_ids(ids));
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
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        owned(&mut tx, thread_id, Some(resource_id), OP).await?;
        let deleted: Vec<String> = sqlx::query_scalar(sql::DELETE_MESSAGES)
            .bind(thread_id)
            .bind(json_ids(ids))
            .fetch_all(&mut *tx)
            .await
            .map_err(err(OP))?;
        if !deleted.is_empty() {
            sqlx::query(sql::DELETE_MESSAGE_VECTORS)
                .bind(json_ids(&deleted))
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            sqlx::query(sql::TOUCH_THREAD)
                .bind(thread_id)
                .bind(codec::to_micros(codec::now()))
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
        }
        tx.commit().await.map_err(err(OP))?;
        Ok(deleted.len() as u64)
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        const OP: &str = "search_messages";
        let needle = codec::search_needle(&search.query);
        let limit = i64::from(search.limit);
        let mut conn = self.conns.reader(OP).await?;
        // Phase 1: the scope's newest messages, scanned. Most searches end here: a frequent term
        // fills the limit at once, and a small scope is scanned whole.
        let (mut found, boundary) = match &search.scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut conn, thread_id, Some(resource_id), OP).await?;
                let (json, scanned, oldest): (String, i64, Option<i64>) =
                    sqlx::query_as(sql::SEARCH_THREAD_RECENT)
                        .bind(thread_id.as_str())
                        .bind(&needle)
                        .bind(limit)
                        .bind(sql::SEARCH_WINDOW)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(err(OP))?;
                let boundary = oldest.filter(|_| scanned > sql::SEARCH_WINDOW);
                (parse_messages(&json)?, boundary.map(Boundary::Seq))
            }
            Scope::Resource { resource_id } => {
                let row: (String, i64, Option<i64>, Option<String>, Option<i64>) =
                    sqlx::query_as(sql::SEARCH_RESOURCE_RECENT)
                        .bind(resource_id.as_str())
                        .bind(&needle)
                        .bind(limit)
                        .bind(sql::SEARCH_WINDOW)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(err(OP))?;
                let (json, scanned, created, thread, seq) = row;
                let boundary = match (created, thread, seq) {
                    (Some(c), Some(t), Some(s)) if scanned > sql::SEARCH_WINDOW => {
                        Some(Boundary::Resource(c, t, s))
                    }
                    _ => None,
                };
                (parse_messages(&json)?, boundary)
            }
        };
        let Some(boundary) = boundary else {
            return Ok(found);
        };
        let remaining = limit - found.len() as i64;
        if remaining <= 0 {
            return Ok(found);
        }
        // Phase 2: the older messages through the trigram index, when the needle's rarest
        // trigrams narrow them down; phase 3: otherwise, scanned.
        let key = match &search.scope {
            Scope::Thread { thread_id, .. } => thread_id.as_str(),
            Scope::Resource { resource_id } => resource_id.as_str(),
        };
        let mut older = None;
        if let Some(fts) = trigram_query(&needle) {
            let query = match &boundary {
                Boundary::Seq(seq) => sqlx::query_scalar(sql::SEARCH_THREAD_INDEXED)
                    .bind(key)
                    .bind(&needle)
                    .bind(remaining)
                    .bind(*seq)
                    .bind(fts)
                    .bind(sql::SEARCH_CANDIDATES),
                Boundary::Resource(created, thread, seq) => {
                    sqlx::query_scalar(sql::SEARCH_RESOURCE_INDEXED)
                        .bind(key)
                        .bind(&needle)
                        .bind(remaining)
                        .bind(*created)
                        .bind(thread.as_str())
                        .bind(*seq)
                        .bind(fts)
                        .bind(sql::SEARCH_CANDIDATES)
                }
            };
            let json: Option<String> = query.fetch_one(&mut *conn).await.map_err(err(OP))?;
            older = json;
        }
        let json = match older {
            Some(json) => json,
            None => {
                let query = match &boundary {
                    Boundary::Seq(seq) => sqlx::query_scalar(sql::SEARCH_THREAD_OLDER)
                        .bind(key)
                        .bind(&needle)
                        .bind(remaining)
                        .bind(*seq),
                    Boundary::Resource(created, thread, seq) => {
                        sqlx::query_scalar(sql::SEARCH_RESOURCE_OLDER)
                            .bind(key)
                            .bind(&needle)
                            .bind(remaining)
                            .bind(*created)
                            .bind(thread.as_str())
                            .bind(*seq)
                    }
                };
                query.fetch_one(&mut *conn).await.map_err(err(OP))?
            }
        };
        found.extend(parse_messages(&json)?);
        Ok(found)
    }

    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        const OP: &str = "get_working_memory";
        let mut conn = self.conns.reader(OP).await?;
        let (statement, key) = match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut conn, thread_id, Some(resource_id), OP).await?;
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
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        let query = match scope {
            Scope::Thread {
                thread_id,
                resource_id,
            } => {
                owned(&mut tx, thread_id, Some(resource_id), OP).await?;
                sqlx::query(sql::SET_THREAD_MEMORY)
                    .bind(thread_id)
                    .bind(content)
            }
            Scope::Resource { resource_id } => sqlx::query(sql::SET_RESOURCE_MEMORY)
                .bind(resource_id)
                .bind(content)
                .bind(codec::to_micros(codec::now())),
        };
        query.execute(&mut *tx).await.map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))
    }

    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        const OP: &str = "save_run";
        codec::check_id("run_id", &record.run_id)?;
        let snapshot = serde_json::to_string(&record.snapshot)
            .map_err(|e| StorageError::corrupt("run snapshot", e))?;
        let now = codec::now();
        let mut conn = self.conns.writer(OP).await?;
        let saved: Option<(i64, i64)> = match expected_version {
            None => {
                let inserted = sqlx::query(sql::INSERT_RUN)
                    .bind(&record.run_id)
                    .bind(&record.agent_id)
                    .bind(&record.thread_id)
                    .bind(&record.resource_id)
                    .bind(record.status.as_str())
                    .bind(&snapshot)
                    .bind(&record.parent_run_id)
                    .bind(codec::to_micros(now))
                    .execute(&mut *conn)
                    .await
                    .map_err(err(OP))?;
                (inserted.rows_affected() == 1).then_some((1, codec::to_micros(now)))
            }
            Some(expected) => sqlx::query_as(sql::UPDATE_RUN)
                .bind(&record.run_id)
                .bind(&record.agent_id)
                .bind(&record.thread_id)
                .bind(&record.resource_id)
                .bind(record.status.as_str())
                .bind(&snapshot)
                .bind(&record.parent_run_id)
                .bind(codec::to_micros(now))
                .bind(expected)
                .fetch_optional(&mut *conn)
                .await
                .map_err(err(OP))?,
        };
        let Some((version, created)) = saved else {
            let actual = run_version(&mut conn, &record.run_id).await?;
            return Err(match (expected_version, actual) {
                (Some(_), None) => StorageError::RunNotFound {
                    run_id: record.run_id,
                },
                (expected, actual) => StorageError::Conflict {
                    run_id: record.run_id,
                    expected,
                    actual,
                },
            });
        };
        Ok(RunRecord {
            version,
            created_at: codec::from_micros(created)?,
            updated_at: now,
            ..record
        })
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        const OP: &str = "get_run";
        let mut conn = self.conns.reader(OP).await?;
        let row: Option<RunRow> = sqlx::query_as(sql::GET_RUN)
            .bind(run_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?;
        row.map(RunRow::into_record).transpose()
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        const OP: &str = "list_runs";
        codec::check_page(filter.page)?;
        let mut count = QueryBuilder::<Sqlite>::new(sql::COUNT_RUNS);
        sql::push_run_filter(&mut count, &filter);
        let mut select = QueryBuilder::<Sqlite>::new(sql::SELECT_RUNS);
        sql::push_run_filter(&mut select, &filter);
        select
            .push(sql::RUN_ORDER)
            .push(" LIMIT ")
            .push_bind(i64::from(filter.page.per_page))
            .push(" OFFSET ")
            .push_bind(filter.page.offset() as i64);
        let mut conn = self.conns.reader(OP).await?;
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
        const OP: &str = "delete_run";
        let mut conn = self.conns.writer(OP).await?;
        let done = sqlx::query(sql::DELETE_RUN)
            .bind(run_id)
            .execute(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(done.rows_affected() > 0)
    }

    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "add_observations";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        check_scope(&mut tx, scope, OP).await?;
        let added = insert_observations(&mut tx, scope, observations).await?;
        tx.commit().await.map_err(err(OP))?;
        Ok(added)
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        const OP: &str = "list_observations";
        let mut conn = self.conns.reader(OP).await?;
        check_scope(&mut conn, scope, OP).await?;
        let query = match scope {
            Scope::Thread { thread_id, .. } => {
                sqlx::query_as(sql::LIST_THREAD_OBSERVATIONS).bind(thread_id)
            }
            Scope::Resource { resource_id } => {
                sqlx::query_as(sql::LIST_RESOURCE_OBSERVATIONS).bind(resource_id)
            }
        };
        let rows: Vec<ObservationRow> = query.fetch_all(&mut *conn).await.map_err(err(OP))?;
        rows.into_iter()
            .map(ObservationRow::into_observation)
            .collect()
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "replace_observations";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        check_scope(&mut tx, scope, OP).await?;
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
        let mut conn = self.conns.reader(OP).await?;
        owned(&mut conn, thread_id, Some(resource_id), OP).await?;
        let seq: Option<Option<i64>> = sqlx::query_scalar(sql::GET_OBSERVED_SEQ)
            .bind(thread_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?;
        Ok(seq.flatten())
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        const OP: &str = "set_observed_seq";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        owned(&mut tx, thread_id, Some(resource_id), OP).await?;
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
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        sqlx::query(sql::INSERT_INDEX)
            .bind(name)
            .bind(dimension as i64)
            .bind(codec::to_micros(codec::now()))
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        let existing = index_dimension(&mut tx, name, OP).await?;
        tx.commit().await.map_err(err(OP))?;
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
        let mut conn = self.conns.reader(OP).await?;
        match index_dimension(&mut conn, name, OP).await {
            Ok(dimension) => Ok(Some(dimension)),
            Err(StorageError::IndexNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        const OP: &str = "upsert_vectors";
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
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
        let mut conn = self.conns.reader(OP).await?;
        let dimension = index_dimension(&mut conn, index, OP).await?;
        codec::check_vector(index, dimension, &query.vector)?;
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
        while let Some((id, embedding, metadata)) = rows
            .try_next()
            .await
            .map_err(err(OP))?
            .map(|row: (String, Vec<u8>, String)| row)
        {
            let score = codec::cosine(&query.vector, &codec::decode_vector(&embedding)?);
            if top.admits(score, &id) {
                let metadata = codec::parse_map("vector metadata", &metadata)?;
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
        let mut conn = self.conns.writer(OP).await?;
        let mut tx = begin(&mut conn, OP).await?;
        index_dimension(&mut tx, index, OP).await?;
        let done = sqlx::query(sql::DELETE_VECTORS)
            .bind(index)
            .bind(json_ids(ids))
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::trigram_query;

    #[test]
    fn the_rarest_trigrams_are_queried() {
        assert_eq!(trigram_query("ab"), None);
        assert_eq!(
            trigram_query("message 7:").as_deref(),
            Some(r#"" 7:" "e 7""#)
        );
        // Quotes are doubled inside FTS5 strings.
        assert_eq!(
            trigram_query(r#"say "hi""#).as_deref(),
            Some(r#""y """ " ""h""#)
        );
    }
}
