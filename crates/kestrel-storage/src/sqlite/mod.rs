//! [`SqliteStorage`]: the embedded default, one SQLite file.
//!
//! The file is created when missing and migrated on open (versioned migrations in
//! `migrations/sqlite`, the applied version kept in SQLite's `user_version`; a newer build
//! migrates an older file forward, an older build refuses a file migrated by a newer one).
//! Connections use WAL, `synchronous = NORMAL` with the commits that save a run synced (see
//! [`Synchronous`]) and foreign keys. The driver is `rusqlite` with
//! the bundled SQLite.
//!
//! **Concurrency.** All writes go through one connection and every multi-statement write runs in
//! a `BEGIN IMMEDIATE` transaction, which takes SQLite's write lock up front: in-process writers
//! queue on the connection, other processes wait on the busy timeout, and a transaction never
//! fails half-way on a lock upgrade. The common append (new messages) is a single statement,
//! atomic on its own. Reads use separate connections and, thanks to WAL, never wait for writers.
//! Short operations run on the caller's thread, long ones on the blocking pool (see `conn.rs`).
//!
//! **Text search.** An FTS5 trigram index serves `search_messages`; it is brought up to date in
//! batches ([`SqliteStorage::catch_up_search_index`]) and searches scan the few messages it does
//! not hold yet, so appends do not pay for it.

mod conn;
mod rows;
mod sql;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params, params_from_iter};
use rusqlite_migration::{M, Migrations};

use self::conn::{Connections, Cost, Settings};
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

/// The schema migrations of SQLite files, in order; a file's `user_version` is how many of them
/// it has applied.
pub static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(vec![
        M::up(include_str!(
            "../../migrations/sqlite/0001_threads_messages.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0002_runs_observations_vectors.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0003_append_trigger_search_index.sql"
        )),
    ])
});

/// How many migrations this build knows.
pub const SCHEMA_VERSION: usize = 3;

const BACKEND: &str = "sqlite";

/// The JSON array of `ids` (SQLite binds id lists this way).
fn json_ids<S: AsRef<str>>(ids: &[S]) -> String {
    let ids: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    serde_json::Value::from(ids).to_string()
}

fn err(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> StorageError {
    db_err(BACKEND, operation)
}

/// Options of [`SqliteStorage::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Connections of the read pool (default 4).
    pub max_readers: u32,
    /// How long an operation waits for another process's write lock (default 5 s). The wait
    /// happens on tokio's blocking pool, never on an async worker.
    pub busy_timeout: Duration,
    /// Page cache per connection, in KiB (default 16 MiB; SQLite's own default is 2 MiB).
    pub cache_size_kib: u32,
    /// Bytes of the file read through a memory map (default 0: off). SQLite drops and rebuilds
    /// a connection's whole map whenever another connection has written since its last read
    /// (which, with one writer and separate readers, is nearly every read of a busy store), so a
    /// map only pays off for stores that are mostly read.
    pub mmap_size: u64,
    /// When a commit reaches the disk ([`Synchronous::Runs`] by default: the commits that save
    /// a run).
    pub synchronous: Synchronous,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            max_readers: 4,
            busy_timeout: Duration::from_secs(5),
            cache_size_kib: 16 * 1024,
            mmap_size: 0,
            synchronous: Synchronous::Runs,
        }
    }
}

/// When a commit reaches the disk: SQLite's `synchronous` setting, in WAL mode.
///
/// Whichever is chosen, a crash of the process loses nothing that was committed, and the file
/// is never corrupted. They differ on a power cut or an operating system crash, after which the
/// commits not yet synced are rolled back:
///
/// - [`Synchronous::Runs`] (the default) syncs the commits that save a run (a stop for a
///   person, a decision, a run's end) and, with them, everything committed before; messages in
///   between are synced at checkpoints. A decision on a tool call is recorded before the tool
///   runs and reported only once on the disk, so it can never come back after a power cut and
///   run the tool twice; the last messages of a conversation may be lost to one.
/// - [`Synchronous::Full`] syncs every commit: nothing reported stored is ever lost.
/// - [`Synchronous::Normal`] syncs at checkpoints only: a recorded approval may be rolled back by
///   a power cut (and its tool run again once approved again).
///
/// BENCHMARKS.md has what each costs per commit on this project's machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// Sync the commits that save runs (decisions, stops, ends).
    #[default]
    Runs,
    /// Sync the WAL at every commit.
    Full,
    /// Sync at checkpoints only.
    Normal,
}

impl Synchronous {
    /// The setting connections are opened with.
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "full",
            Synchronous::Runs | Synchronous::Normal => "normal",
        }
    }
}

/// How many appended messages wait for the trigram search index before it is brought up to date.
const SEARCH_INDEX_BATCH: u64 = 512;

/// Appends of more messages than this run on the blocking pool.
const SHORT_BATCH: usize = 64;

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
    synchronous: Synchronous,
}

/// Opens the writer and migrates the file (on the blocking pool: it may wait for another
/// process's lock and run migrations).
fn open_writer(settings: &Settings, target: &str) -> Result<Connection> {
    let mut writer = settings
        .open(true)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    writer
        .busy_timeout(settings.busy_timeout)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    adopt_sqlx_versions(&writer)
        .map_err(|e| open_err(target, "cannot read the schema version", e))?;
    MIGRATIONS
        .to_latest(&mut writer)
        .map_err(|e| migrate_err(target, e))?;
    writer
        .busy_timeout(Duration::ZERO)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    Ok(writer)
}

/// Files written by builds that migrated with `sqlx` record their versions in
/// `_sqlx_migrations`, not in `user_version`: carry the count over once.
fn adopt_sqlx_versions(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version != 0 {
        return Ok(());
    }
    let has_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
         AND name = '_sqlx_migrations')",
        [],
        |r| r.get(0),
    )?;
    if !has_table {
        return Ok(());
    }
    let applied: i64 = conn.query_row(
        "SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success",
        [],
        |r| r.get(0),
    )?;
    conn.pragma_update(None, "user_version", applied)
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
        let settings = Settings {
            path: path.clone(),
            busy_timeout: options.busy_timeout,
            cache_size_kib: options.cache_size_kib,
            mmap_size: options.mmap_size,
            synchronous: options.synchronous,
        };
        let writer = {
            let settings = settings.clone();
            let target_in = target.clone();
            tokio::task::spawn_blocking(move || open_writer(&settings, &target_in))
                .await
                .map_err(|e| StorageError::Open {
                    target: target.clone(),
                    reason: format!("the opening task failed: {e}"),
                    source: None,
                })??
        };
        let store = Self {
            conns: Arc::new(Connections::new(settings, writer, options.max_readers)),
            path,
            background: Arc::new(Background::default()),
            synchronous: options.synchronous,
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
        self.conns
            .write(OP, Cost::Long, |conn| {
                let tx = begin(conn, OP)?;
                tx.execute_batch(sql::CATCH_UP_SEARCH_INDEX)
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
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
fn begin<'c>(
    conn: &'c mut Connection,
    operation: &'static str,
) -> Result<rusqlite::Transaction<'c>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err(operation))
}

/// Where the first phase of a search stopped: the oldest seq it scanned (thread scope), or the
/// last message it scanned in search order (resource scope: created_at, thread, seq).
enum Boundary {
    Seq(i64),
    Resource(i64, String, i64),
}

/// The owner and next seq of a thread.
fn thread_owner(
    conn: &Connection,
    thread_id: &str,
    operation: &'static str,
) -> Result<(String, i64)> {
    optional_row(
        conn,
        sql::THREAD_OWNER,
        [thread_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
        operation,
    )?
    .ok_or_else(|| StorageError::thread_not_found(thread_id))
}

/// The one row `statement` gives, if any, read by `map`.
fn optional_row<T>(
    conn: &Connection,
    statement: &str,
    params: impl rusqlite::Params,
    map: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    operation: &'static str,
) -> Result<Option<T>> {
    conn.prepare_cached(statement)
        .and_then(|mut s| s.query_row(params, map).optional())
        .map_err(err(operation))
}

/// Checks that the thread exists and belongs to `resource_id` (when given).
fn owned(
    conn: &Connection,
    thread_id: &str,
    resource_id: Option<&str>,
    operation: &'static str,
) -> Result<(String, i64)> {
    let (owner, next_seq) = thread_owner(conn, thread_id, operation)?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    Ok((owner, next_seq))
}

/// The one JSON column of the one row a message query returns, decoded.
fn fetch_messages(
    conn: &Connection,
    statement: &str,
    params: impl rusqlite::Params,
    operation: &'static str,
) -> Result<Vec<StoredMessage>> {
    let json: String = conn
        .prepare_cached(statement)
        .and_then(|mut s| s.query_row(params, |r| r.get(0)))
        .map_err(err(operation))?;
    parse_messages(&json)
}

/// A range of a thread's messages, checking the owner in the same statement.
fn select_range(
    conn: &Connection,
    thread_id: &str,
    resource_id: Option<&str>,
    range: SeqRange,
) -> Result<MessageList> {
    const OP: &str = "list_messages";
    let statement = match range.anchor {
        Anchor::Start => sql::OWNED_RANGE_ASC,
        Anchor::End => sql::OWNED_RANGE_DESC,
    };
    let row: Option<(String, String)> = conn
        .prepare_cached(statement)
        .and_then(|mut s| {
            s.query_row(
                params![
                    thread_id,
                    range.after.unwrap_or(i64::MIN),
                    range.before.unwrap_or(i64::MAX),
                    range.limit.map_or(-1, |l| i64::from(l) + 1),
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(err(OP))?;
    let (owner, json) = row.ok_or_else(|| StorageError::thread_not_found(thread_id))?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    let messages = parse_messages(&json)?;
    Ok(trim_to_limit(messages, range.limit, range.anchor))
}

/// Keeps the `limit` messages (of `limit + 1` read, in seq order) nearest the anchor.
fn trim_to_limit(
    mut messages: Vec<StoredMessage>,
    limit: Option<u32>,
    anchor: Anchor,
) -> MessageList {
    let has_more = limit.is_some_and(|l| messages.len() > l as usize);
    if let Some(l) = limit.map(|l| l as usize).filter(|&l| messages.len() > l) {
        match anchor {
            Anchor::Start => messages.truncate(l),
            Anchor::End => {
                messages.drain(..messages.len() - l);
            }
        }
    }
    MessageList {
        messages,
        has_more,
        total: None,
    }
}

/// Reserves the batch's seqs on an owned thread; returns the first reserved seq and where the
/// batch's already-stored ids live.
fn reserve_seqs(
    conn: &Connection,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(i64, HashMap<String, ExistingMessage>)> {
    const OP: &str = "append_messages";
    let ids: Vec<&str> = batch.iter().map(|m| m.id.as_str()).collect();
    let reserved: Option<(i64, String)> = conn
        .prepare_cached(sql::RESERVE_SEQS)
        .and_then(|mut s| {
            s.query_row(
                params![
                    thread_id,
                    resource_id,
                    json_ids(&ids),
                    codec::to_micros(now)
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(err(OP))?;
    let Some((next_seq, stored)) = reserved else {
        owned(conn, thread_id, Some(resource_id), OP)?;
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

/// The batch as the JSON array the one-statement append reads.
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
fn append_new(
    writer: &Connection,
    thread_id: &str,
    resource_id: &str,
    batch_json: &str,
    count: usize,
    now: i64,
) -> Result<Option<Vec<i64>>> {
    let mut seqs: Vec<i64> = writer
        .prepare_cached(sql::APPEND_NEW)
        .and_then(|mut s| {
            s.query_map(params![thread_id, resource_id, batch_json, now], |r| {
                r.get(0)
            })?
            .collect()
        })
        .map_err(err("append_messages"))?;
    if seqs.len() != count {
        // Nothing was inserted (the statement is all or nothing).
        return Ok(None);
    }
    seqs.sort_unstable();
    Ok(Some(seqs))
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
fn insert_messages(
    conn: &Connection,
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
    conn.prepare_cached(sql::INSERT_MESSAGES)
        .and_then(|mut s| {
            s.execute(params![
                thread_id,
                resource_id,
                serde_json::Value::from(encoded).to_string()
            ])
        })
        .map_err(err("append_messages"))?;
    Ok(())
}

fn replace_message(conn: &Connection, message: &EncodedMessage) -> Result<()> {
    conn.prepare_cached(sql::REPLACE_MESSAGE)
        .and_then(|mut s| {
            s.execute(params![
                message.id,
                codec::role_str(message.role),
                message.parts_text,
                message.status.as_str(),
                message.metadata_text,
                message.search_text,
            ])
        })
        .map_err(err("append_messages"))?;
    Ok(())
}

/// Where an appended message landed: its seq and creation time.
type Slot = (i64, chrono::DateTime<chrono::Utc>);

/// The transactional append: imports (explicit creation times), retries of stored ids, and
/// the errors of the one-statement path. Returns each message's seq and creation time, and how
/// many were inserted.
fn append_in_transaction(
    conn: &mut Connection,
    thread_id: &str,
    resource_id: &str,
    messages: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Vec<Slot>, usize)> {
    const OP: &str = "append_messages";
    let tx = begin(conn, OP)?;
    let (mut next_seq, existing) = reserve_seqs(&tx, thread_id, resource_id, messages, now)?;
    check_homes(thread_id, &existing)?;
    let mut slots = Vec::with_capacity(messages.len());
    let mut inserts = Vec::new();
    for message in messages {
        match existing.get(&message.id) {
            Some(e) => {
                replace_message(&tx, message)?;
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
    insert_messages(&tx, thread_id, resource_id, &inserts)?;
    tx.commit().map_err(err(OP))?;
    Ok((slots, inserts.len()))
}

fn insert_observations(
    conn: &Connection,
    scope: &Scope,
    observations: &[NewObservation],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Observation>> {
    let thread_id = match scope {
        Scope::Thread { thread_id, .. } => Some(thread_id.as_str()),
        Scope::Resource { .. } => None,
    };
    let mut added = Vec::with_capacity(observations.len());
    for o in observations {
        let observation = Observation {
            id: o.id.clone().unwrap_or_else(codec::new_id),
            scope: scope.clone(),
            text: o.text.clone(),
            created_at: o.created_at.map_or(now, codec::truncate),
            observed_up_to_seq: o.observed_up_to_seq,
            source_thread_id: o.source_thread_id.clone(),
        };
        conn.prepare_cached(sql::INSERT_OBSERVATION)
            .and_then(|mut s| {
                s.execute(params![
                    observation.id,
                    thread_id,
                    scope.resource_id(),
                    observation.text,
                    codec::to_micros(observation.created_at),
                    observation.observed_up_to_seq,
                    observation.source_thread_id,
                ])
            })
            .map_err(err("add_observations"))?;
        added.push(observation);
    }
    Ok(added)
}

fn check_scope(conn: &Connection, scope: &Scope, operation: &'static str) -> Result<()> {
    if let Scope::Thread {
        thread_id,
        resource_id,
    } = scope
    {
        owned(conn, thread_id, Some(resource_id), operation)?;
    }
    Ok(())
}

fn index_dimension(conn: &Connection, index: &str, operation: &'static str) -> Result<usize> {
    let dimension: Option<i64> =
        optional_row(conn, sql::INDEX_DIMENSION, [index], |r| r.get(0), operation)?;
    let dimension = dimension.ok_or_else(|| StorageError::IndexNotFound {
        index: index.to_owned(),
    })?;
    usize::try_from(dimension).map_err(|e| StorageError::corrupt("index dimension", e))
}

/// Saves `rows` with their compare-and-sets in one transaction: the new versions and creation
/// times, or (nothing written) the index of the first run whose version differed and the
/// version it has.
#[allow(clippy::type_complexity)]
fn save_runs_in(
    conn: &mut Connection,
    rows: &[RunWrite],
    at: i64,
) -> Result<std::result::Result<Vec<(i64, i64)>, (usize, Option<i64>)>> {
    const OP: &str = "save_runs";
    let tx = begin(conn, OP)?;
    let mut written = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        match write_run(&tx, row, at)? {
            Ok(saved) => written.push(saved),
            Err(actual) => return Ok(Err((index, actual))),
        }
    }
    tx.commit().map_err(err(OP))?;
    Ok(Ok(written))
}

/// One run to write with its compare-and-set.
struct RunWrite {
    run_id: String,
    agent_id: String,
    thread_id: Option<String>,
    resource_id: Option<String>,
    status: &'static str,
    snapshot: String,
    parent: Option<String>,
    expected: Option<i64>,
}

/// Writes one run if its version is the expected one: its new version and creation time, or
/// the version it has (`None`: no such run).
fn write_run(
    conn: &Connection,
    row: &RunWrite,
    at: i64,
) -> Result<std::result::Result<(i64, i64), Option<i64>>> {
    const OP: &str = "save_run";
    let saved: Option<(i64, i64)> = match row.expected {
        None => {
            let inserted = conn
                .prepare_cached(sql::INSERT_RUN)
                .and_then(|mut s| {
                    s.execute(params![
                        row.run_id,
                        row.agent_id,
                        row.thread_id,
                        row.resource_id,
                        row.status,
                        row.snapshot,
                        row.parent,
                        at
                    ])
                })
                .map_err(err(OP))?;
            (inserted == 1).then_some((1, at))
        }
        Some(expected) => conn
            .prepare_cached(sql::UPDATE_RUN)
            .and_then(|mut s| {
                s.query_row(
                    params![
                        row.run_id,
                        row.agent_id,
                        row.thread_id,
                        row.resource_id,
                        row.status,
                        row.snapshot,
                        row.parent,
                        at,
                        expected
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
            })
            .map_err(err(OP))?,
    };
    match saved {
        Some(saved) => Ok(Ok(saved)),
        None => Ok(Err(run_version(conn, &row.run_id)?)),
    }
}

fn run_version(conn: &Connection, run_id: &str) -> Result<Option<i64>> {
    optional_row(conn, sql::RUN_VERSION, [run_id], |r| r.get(0), "save_run")
}

/// Rows of a statement assembled at run time.
fn query_dynamic<T>(
    conn: &Connection,
    query: &sql::Dynamic,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    operation: &'static str,
) -> Result<Vec<T>> {
    conn.prepare_cached(&query.sql)
        .and_then(|mut s| {
            s.query_map(params_from_iter(query.values.iter()), map)?
                .collect()
        })
        .map_err(err(operation))
}

/// The count and the page of a listing, read in one transaction so they agree.
fn count_and_page<T>(
    conn: &mut Connection,
    count: &sql::Dynamic,
    select: &sql::Dynamic,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    operation: &'static str,
) -> Result<(i64, Vec<T>)> {
    let tx = conn.transaction().map_err(err(operation))?;
    let total = query_dynamic(&tx, count, |r| r.get::<_, i64>(0), operation)?
        .into_iter()
        .next()
        .unwrap_or(0);
    let rows = query_dynamic(&tx, select, map, operation)?;
    tx.finish().map_err(err(operation))?;
    Ok((total, rows))
}

/// A text search (see the phases in `sql.rs`), on one read transaction.
fn search_in(conn: &mut Connection, search: &MessageSearch) -> Result<Vec<StoredMessage>> {
    const OP: &str = "search_messages";
    let needle = codec::search_needle(&search.query);
    let limit = i64::from(search.limit);
    let tx = conn.transaction().map_err(err(OP))?;
    // Phase 1: the scope's newest messages, scanned. Most searches end here: a frequent term
    // fills the limit at once, and a small scope is scanned whole.
    let (mut found, boundary) = match &search.scope {
        Scope::Thread {
            thread_id,
            resource_id,
        } => {
            owned(&tx, thread_id, Some(resource_id), OP)?;
            let (json, scanned, oldest): (String, i64, Option<i64>) = tx
                .prepare_cached(sql::SEARCH_THREAD_RECENT)
                .and_then(|mut s| {
                    s.query_row(params![thread_id, needle, limit, sql::SEARCH_WINDOW], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                })
                .map_err(err(OP))?;
            let boundary = oldest.filter(|_| scanned > sql::SEARCH_WINDOW);
            (parse_messages(&json)?, boundary.map(Boundary::Seq))
        }
        Scope::Resource { resource_id } => {
            let row: (String, i64, Option<i64>, Option<String>, Option<i64>) = tx
                .prepare_cached(sql::SEARCH_RESOURCE_RECENT)
                .and_then(|mut s| {
                    s.query_row(
                        params![resource_id, needle, limit, sql::SEARCH_WINDOW],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                    )
                })
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
    let one = |statement: &str, params: &[&dyn rusqlite::ToSql]| -> Result<Option<String>> {
        tx.prepare_cached(statement)
            .and_then(|mut s| s.query_row(params, |r| r.get(0)))
            .map_err(err(OP))
    };
    let mut older = None;
    if let Some(fts) = trigram_query(&needle) {
        older = match &boundary {
            Boundary::Seq(seq) => one(
                sql::SEARCH_THREAD_INDEXED,
                params![key, needle, remaining, seq, fts, sql::SEARCH_CANDIDATES],
            )?,
            Boundary::Resource(created, thread, seq) => one(
                sql::SEARCH_RESOURCE_INDEXED,
                params![
                    key,
                    needle,
                    remaining,
                    created,
                    thread,
                    seq,
                    fts,
                    sql::SEARCH_CANDIDATES
                ],
            )?,
        };
    }
    let json = match older {
        Some(json) => json,
        None => {
            let json = match &boundary {
                Boundary::Seq(seq) => one(
                    sql::SEARCH_THREAD_OLDER,
                    params![key, needle, remaining, seq],
                )?,
                Boundary::Resource(created, thread, seq) => one(
                    sql::SEARCH_RESOURCE_OLDER,
                    params![key, needle, remaining, created, thread, seq],
                )?,
            };
            json.unwrap_or_else(|| "[]".to_owned())
        }
    };
    found.extend(parse_messages(&json)?);
    Ok(found)
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        const OP: &str = "create_thread";
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let row = (
            id.clone(),
            thread.resource_id.clone(),
            thread.title.clone(),
            codec::canonical_map_text(&thread.metadata),
            codec::to_micros(created),
        );
        let inserted = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let (id, resource, title, metadata, at) = &row;
                conn.prepare_cached(sql::INSERT_THREAD)
                    .and_then(|mut s| {
                        s.execute(params![id, resource, title, metadata, at, at, 1i64])
                    })
                    .map_err(err(OP))
            })
            .await?;
        if inserted == 0 {
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
        let thread_id = thread_id.to_owned();
        let row = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                optional_row(conn, sql::GET_THREAD, [&thread_id], ThreadRow::from_row, OP)
            })
            .await?;
        row.map(ThreadRow::into_thread).transpose()
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        const OP: &str = "update_thread";
        let thread_id = thread_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let row =
                    optional_row(&tx, sql::GET_THREAD, [&thread_id], ThreadRow::from_row, OP)?;
                let mut thread = row
                    .ok_or_else(|| StorageError::thread_not_found(&thread_id))?
                    .into_thread()?;
                if let Some(title) = &patch.title {
                    thread.title = Some(title.clone());
                }
                match &patch.metadata {
                    Some(MetadataUpdate::Merge(changes)) => {
                        thread
                            .metadata
                            .extend(codec::normalize_map(changes.clone()));
                    }
                    Some(MetadataUpdate::Replace(all)) => {
                        thread.metadata = codec::normalize_map(all.clone());
                    }
                    None => {}
                }
                thread.updated_at = codec::now();
                tx.prepare_cached(sql::UPDATE_THREAD)
                    .and_then(|mut s| {
                        s.execute(params![
                            thread_id,
                            thread.title,
                            codec::canonical_map_text(&thread.metadata),
                            codec::to_micros(thread.updated_at),
                        ])
                    })
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(thread)
            })
            .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        const OP: &str = "delete_thread";
        let thread_id = thread_id.to_owned();
        // The cascade may remove a whole history: off the async workers.
        self.conns
            .write(OP, Cost::Long, move |conn| {
                let tx = begin(conn, OP)?;
                tx.execute(sql::DELETE_THREAD_VECTORS, [&thread_id])
                    .map_err(err(OP))?;
                let deleted = tx
                    .execute(sql::DELETE_THREAD, [&thread_id])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(deleted > 0)
            })
            .await
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        const OP: &str = "clone_thread";
        let new_id = options.new_thread_id.clone().unwrap_or_else(codec::new_id);
        codec::check_id("new_thread_id", &new_id)?;
        let source_thread_id = source_thread_id.to_owned();
        self.conns
            .write(OP, Cost::Long, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &source_thread_id, Some(&options.resource_id), OP)?;
                let source = tx
                    .query_row(sql::GET_THREAD, [&source_thread_id], ThreadRow::from_row)
                    .map_err(err(OP))?
                    .into_thread()?;
                let old_ids: Vec<String> = tx
                    .prepare(sql::MESSAGE_IDS)
                    .and_then(|mut s| s.query_map([&source_thread_id], |r| r.get(0))?.collect())
                    .map_err(err(OP))?;
                let now = codec::now();
                let thread = Thread {
                    id: new_id.clone(),
                    resource_id: source.resource_id.clone(),
                    title: options.title.clone().or(source.title.clone()),
                    metadata: codec::clone_metadata(&source.metadata, &source_thread_id, now),
                    created_at: now,
                    updated_at: now,
                };
                let inserted = tx
                    .execute(
                        sql::INSERT_THREAD,
                        params![
                            thread.id,
                            thread.resource_id,
                            thread.title,
                            codec::canonical_map_text(&thread.metadata),
                            codec::to_micros(now),
                            codec::to_micros(now),
                            old_ids.len() as i64 + 1,
                        ],
                    )
                    .map_err(err(OP))?;
                if inserted == 0 {
                    return Err(StorageError::ThreadExists {
                        thread_id: new_id.clone(),
                    });
                }
                let copies: Vec<serde_json::Value> = old_ids
                    .iter()
                    .zip(1i64..)
                    .map(|(old, seq)| serde_json::json!([old, codec::new_id(), seq]))
                    .collect();
                tx.execute(
                    sql::COPY_MESSAGES,
                    params![new_id, serde_json::Value::from(copies).to_string()],
                )
                .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(thread)
            })
            .await
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        const OP: &str = "list_threads";
        codec::check_page(query.page)?;
        let filter =
            codec::parse_filter(query.metadata.as_ref())?.map(|f| codec::canonical_map_text(&f));
        let resource = query.resource_id.as_deref();
        let mut count = sql::Dynamic::new(sql::COUNT_THREADS);
        sql::push_thread_filter(&mut count, resource, filter.clone());
        let mut select = sql::Dynamic::new(sql::SELECT_THREADS);
        sql::push_thread_filter(&mut select, resource, filter);
        select
            .push(sql::thread_order(query.order))
            .push(" LIMIT ")
            .bind(i64::from(query.page.per_page))
            .push(" OFFSET ")
            .bind(query.page.offset() as i64);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                count_and_page(conn, &count, &select, ThreadRow::from_row, OP)
            })
            .await?;
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
        let cost = if messages.len() > SHORT_BATCH {
            Cost::Long
        } else {
            Cost::Short
        };
        // The common case, new messages appended now, is one statement. Imports (explicit
        // creation times), retries of stored ids and errors take the transactional path.
        if !messages.is_empty() && messages.iter().all(|m| m.created_at.is_none()) {
            let args = (
                thread_id.to_owned(),
                resource_id.to_owned(),
                batch_json(&messages),
                messages.len(),
                codec::to_micros(now),
            );
            let appended = self
                .conns
                .write(OP, cost, move |conn| {
                    let (thread, resource, batch, count, at) = &args;
                    append_new(conn, thread, resource, batch, *count, *at)
                })
                .await?;
            if let Some(seqs) = appended {
                self.appended(messages.len());
                return Ok(messages
                    .into_iter()
                    .zip(seqs)
                    .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                    .collect());
            }
        }
        let messages = Arc::new(messages);
        let (slots, inserted) = {
            let messages = Arc::clone(&messages);
            let (thread, resource) = (thread_id.to_owned(), resource_id.to_owned());
            self.conns
                .write(OP, cost, move |conn| {
                    append_in_transaction(conn, &thread, &resource, &messages, now)
                })
                .await?
        };
        self.appended(inserted);
        Ok(messages
            .iter()
            .zip(slots)
            .map(|(m, (seq, at))| m.to_stored(thread_id, resource_id, seq, at))
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
        if !messages.is_empty()
            && last > 0
            && messages.len() <= SHORT_BATCH
            && messages.iter().all(|m| m.created_at.is_none())
        {
            let batch = EncodedMessage::batch(messages.clone())?;
            let now = codec::now();
            let args = (
                thread_id.to_owned(),
                resource_id.to_owned(),
                batch_json(&batch),
                batch.len(),
                codec::to_micros(now),
            );
            // The append and the history before it on the writer, one hand-over.
            let appended = self
                .conns
                .write(OP, Cost::Short, move |conn| {
                    let (thread, resource, json, count, at) = &args;
                    let Some(seqs) = append_new(conn, thread, resource, json, *count, *at)? else {
                        return Ok(None);
                    };
                    let first = seqs.first().copied().unwrap_or(i64::MAX);
                    let history = fetch_messages(
                        conn,
                        sql::HISTORY_BEFORE,
                        params![thread, first, i64::from(last)],
                        OP,
                    )?;
                    Ok(Some((
                        seqs,
                        trim_to_limit(history, Some(last), Anchor::End),
                    )))
                })
                .await?;
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
        // Retries, imports, big batches and errors: the two calls.
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
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.map(str::to_owned));
        // A bounded read is short; a whole history may be long.
        let cost = match selection {
            Selection::Last(_) | Selection::Page(_) => Cost::Short,
            Selection::Range(range) if range.limit.is_some() => Cost::Short,
            Selection::Range(_) => Cost::Long,
        };
        self.conns
            .read(OP, cost, move |conn| {
                let resource_id = resource_id.as_deref();
                match selection {
                    Selection::Last(n) => {
                        let range = SeqRange {
                            limit: Some(n),
                            anchor: Anchor::End,
                            ..SeqRange::default()
                        };
                        select_range(conn, &thread_id, resource_id, range)
                    }
                    Selection::Range(range) => select_range(conn, &thread_id, resource_id, range),
                    Selection::Page(page) => {
                        let tx = conn.transaction().map_err(err(OP))?;
                        owned(&tx, &thread_id, resource_id, OP)?;
                        let messages = fetch_messages(
                            &tx,
                            sql::PAGE_MESSAGES,
                            params![thread_id, i64::from(page.per_page), page.offset() as i64],
                            OP,
                        )?;
                        let total: i64 = tx
                            .prepare_cached(sql::COUNT_MESSAGES)
                            .and_then(|mut s| s.query_row([&thread_id], |r| r.get(0)))
                            .map_err(err(OP))?;
                        tx.finish().map_err(err(OP))?;
                        let total = total as u64;
                        Ok(MessageList {
                            has_more: page.offset() + (messages.len() as u64) < total,
                            messages,
                            total: Some(total),
                        })
                    }
                }
            })
            .await
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        const OP: &str = "get_messages";
        let ids = json_ids(ids);
        let messages = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                fetch_messages(conn, sql::GET_MESSAGES, [&ids], OP)
            })
            .await?;
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
        let (thread_id, resource_id, ids) =
            (thread_id.to_owned(), resource_id.to_owned(), json_ids(ids));
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &thread_id, Some(&resource_id), OP)?;
                let deleted: Vec<String> = tx
                    .prepare_cached(sql::DELETE_MESSAGES)
                    .and_then(|mut s| s.query_map([&thread_id, &ids], |r| r.get(0))?.collect())
                    .map_err(err(OP))?;
                if !deleted.is_empty() {
                    tx.execute(sql::DELETE_MESSAGE_VECTORS, [json_ids(&deleted)])
                        .map_err(err(OP))?;
                    tx.execute(
                        sql::TOUCH_THREAD,
                        params![thread_id, codec::to_micros(codec::now())],
                    )
                    .map_err(err(OP))?;
                }
                tx.commit().map_err(err(OP))?;
                Ok(deleted.len() as u64)
            })
            .await
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        const OP: &str = "search_messages";
        self.conns
            .read(OP, Cost::Long, move |conn| search_in(conn, &search))
            .await
    }

    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        const OP: &str = "get_working_memory";
        let scope = scope.clone();
        self.conns
            .read(OP, Cost::Short, move |conn| {
                let (statement, key) = match &scope {
                    Scope::Thread {
                        thread_id,
                        resource_id,
                    } => {
                        owned(conn, thread_id, Some(resource_id), OP)?;
                        (sql::GET_THREAD_MEMORY, thread_id)
                    }
                    Scope::Resource { resource_id } => (sql::GET_RESOURCE_MEMORY, resource_id),
                };
                let content: Option<Option<String>> =
                    optional_row(conn, statement, [key], |r| r.get(0), OP)?;
                Ok(content.flatten())
            })
            .await
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        const OP: &str = "set_working_memory";
        let (scope, content) = (scope.clone(), content.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                match &scope {
                    Scope::Thread {
                        thread_id,
                        resource_id,
                    } => {
                        owned(&tx, thread_id, Some(resource_id), OP)?;
                        tx.execute(sql::SET_THREAD_MEMORY, params![thread_id, content])
                    }
                    Scope::Resource { resource_id } => tx.execute(
                        sql::SET_RESOURCE_MEMORY,
                        params![resource_id, content, codec::to_micros(codec::now())],
                    ),
                }
                .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
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
        let now = codec::now();
        let at = codec::to_micros(now);
        let mut rows = Vec::with_capacity(saves.len());
        for (record, expected_version) in &saves {
            codec::check_id("run_id", &record.run_id)?;
            let snapshot = serde_json::to_string(&record.snapshot)
                .map_err(|e| StorageError::corrupt("run snapshot", e))?;
            rows.push(RunWrite {
                run_id: record.run_id.clone(),
                agent_id: record.agent_id.clone(),
                thread_id: record.thread_id.clone(),
                resource_id: record.resource_id.clone(),
                status: record.status.as_str(),
                snapshot,
                parent: record.parent_run_id.clone(),
                expected: *expected_version,
            });
        }
        // One transaction: a conflict on any run rolls back the ones before it.
        let sync = self.synchronous == Synchronous::Runs;
        let outcome = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                // The commit of a run (a decision above all) is on the disk before it is
                // reported saved; the setting cannot change inside a transaction.
                if sync {
                    conn.pragma_update(None, "synchronous", "full")
                        .map_err(err(OP))?;
                }
                let saved = save_runs_in(conn, &rows, at);
                if sync {
                    conn.pragma_update(None, "synchronous", "normal")
                        .map_err(err(OP))?;
                }
                saved
            })
            .await?;
        match outcome {
            Ok(written) => saves
                .into_iter()
                .zip(written)
                .map(|((record, _), (version, created))| {
                    Ok(RunRecord {
                        version,
                        created_at: codec::from_micros(created)?,
                        updated_at: now,
                        ..record
                    })
                })
                .collect(),
            Err((index, actual)) => {
                let Some((record, expected)) = saves.into_iter().nth(index) else {
                    return Err(StorageError::corrupt("save_runs", "a conflict on no run"));
                };
                Err(codec::run_conflict(record.run_id, expected, actual))
            }
        }
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        const OP: &str = "get_run";
        let run_id = run_id.to_owned();
        let row = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                optional_row(conn, sql::GET_RUN, [&run_id], RunRow::from_row, OP)
            })
            .await?;
        row.map(RunRow::into_record).transpose()
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        const OP: &str = "list_runs";
        codec::check_page(filter.page)?;
        let mut count = sql::Dynamic::new(sql::COUNT_RUNS);
        sql::push_run_filter(&mut count, &filter);
        let mut select = sql::Dynamic::new(sql::SELECT_RUNS);
        sql::push_run_filter(&mut select, &filter);
        select
            .push(sql::RUN_ORDER)
            .push(" LIMIT ")
            .bind(i64::from(filter.page.per_page))
            .push(" OFFSET ")
            .bind(filter.page.offset() as i64);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                count_and_page(conn, &count, &select, RunRow::from_row, OP)
            })
            .await?;
        let items = rows
            .into_iter()
            .map(RunRow::into_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, filter.page, total as u64))
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        const OP: &str = "delete_run";
        let run_id = run_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let done = conn
                    .prepare_cached(sql::DELETE_RUN)
                    .and_then(|mut s| s.execute([&run_id]))
                    .map_err(err(OP))?;
                Ok(done > 0)
            })
            .await
    }

    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "add_observations";
        let scope = scope.clone();
        let now = codec::now();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                check_scope(&tx, &scope, OP)?;
                let added = insert_observations(&tx, &scope, &observations, now)?;
                tx.commit().map_err(err(OP))?;
                Ok(added)
            })
            .await
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        const OP: &str = "list_observations";
        let scope = scope.clone();
        let rows = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                check_scope(&tx, &scope, OP)?;
                let (statement, key) = match &scope {
                    Scope::Thread { thread_id, .. } => (sql::LIST_THREAD_OBSERVATIONS, thread_id),
                    Scope::Resource { resource_id } => {
                        (sql::LIST_RESOURCE_OBSERVATIONS, resource_id)
                    }
                };
                let rows: Vec<ObservationRow> = tx
                    .prepare_cached(statement)
                    .and_then(|mut s| s.query_map([key], ObservationRow::from_row)?.collect())
                    .map_err(err(OP))?;
                tx.finish().map_err(err(OP))?;
                Ok(rows)
            })
            .await?;
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
        let scope = scope.clone();
        let now = codec::now();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                check_scope(&tx, &scope, OP)?;
                match &scope {
                    Scope::Thread { thread_id, .. } => {
                        tx.execute(sql::DELETE_THREAD_OBSERVATIONS, [thread_id])
                    }
                    Scope::Resource { resource_id } => {
                        tx.execute(sql::DELETE_RESOURCE_OBSERVATIONS, [resource_id])
                    }
                }
                .map_err(err(OP))?;
                let added = insert_observations(&tx, &scope, &observations, now)?;
                tx.commit().map_err(err(OP))?;
                Ok(added)
            })
            .await
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        const OP: &str = "get_observed_seq";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .read(OP, Cost::Short, move |conn| {
                owned(conn, &thread_id, Some(&resource_id), OP)?;
                let seq: Option<Option<i64>> =
                    optional_row(conn, sql::GET_OBSERVED_SEQ, [&thread_id], |r| r.get(0), OP)?;
                Ok(seq.flatten())
            })
            .await
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        const OP: &str = "set_observed_seq";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &thread_id, Some(&resource_id), OP)?;
                tx.execute(sql::SET_OBSERVED_SEQ, params![thread_id, seq])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
    }

    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        const OP: &str = "create_index";
        codec::check_id("index", name)?;
        codec::check_dimension(dimension)?;
        let index = name.to_owned();
        let existing = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                tx.execute(
                    sql::INSERT_INDEX,
                    params![index, dimension as i64, codec::to_micros(codec::now())],
                )
                .map_err(err(OP))?;
                let existing = index_dimension(&tx, &index, OP)?;
                tx.commit().map_err(err(OP))?;
                Ok(existing)
            })
            .await?;
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
        let index = name.to_owned();
        self.conns
            .read(OP, Cost::Short, move |conn| {
                match index_dimension(conn, &index, OP) {
                    Ok(dimension) => Ok(Some(dimension)),
                    Err(StorageError::IndexNotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        const OP: &str = "upsert_vectors";
        let cost = if vectors.len() > SHORT_BATCH {
            Cost::Long
        } else {
            Cost::Short
        };
        let rows: Vec<_> = vectors
            .into_iter()
            .map(|record| {
                let metadata = codec::normalize_map(record.metadata);
                (
                    record.id,
                    record.vector,
                    codec::canonical_map_text(&metadata),
                    codec::meta_str(&metadata, "thread_id"),
                    codec::meta_str(&metadata, "resource_id"),
                    codec::meta_str(&metadata, "message_id"),
                )
            })
            .collect();
        let index = index.to_owned();
        self.conns
            .write(OP, cost, move |conn| {
                let tx = begin(conn, OP)?;
                let dimension = index_dimension(&tx, &index, OP)?;
                for (_, vector, ..) in &rows {
                    codec::check_vector(&index, dimension, vector)?;
                }
                {
                    let mut upsert = tx.prepare_cached(sql::UPSERT_VECTOR).map_err(err(OP))?;
                    for (id, vector, metadata, thread, resource, message) in &rows {
                        upsert
                            .execute(params![
                                index,
                                id,
                                codec::encode_vector(vector),
                                metadata,
                                thread,
                                resource,
                                message,
                            ])
                            .map_err(err(OP))?;
                    }
                }
                tx.commit().map_err(err(OP))
            })
            .await
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        const OP: &str = "query_vectors";
        let index = index.to_owned();
        self.conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let dimension = index_dimension(&tx, &index, OP)?;
                codec::check_vector(&index, dimension, &query.vector)?;
                let filter = &query.filter;
                let mut top = codec::TopK::new(query.top_k);
                let mut score_row = |row: &rusqlite::Row<'_>| -> Result<()> {
                    let id: String = row.get(0).map_err(err(OP))?;
                    let embedding = row.get_ref(1).and_then(|v| v.as_blob().map_err(Into::into));
                    let embedding = embedding.map_err(err(OP))?;
                    let score = codec::cosine(&query.vector, &codec::decode_vector(embedding)?);
                    if top.admits(score, &id) {
                        let metadata: String = row.get(2).map_err(err(OP))?;
                        let metadata = codec::parse_map("vector metadata", &metadata)?;
                        top.push(VectorMatch {
                            id,
                            score,
                            metadata,
                        });
                    }
                    Ok(())
                };
                let (statement, scope): (&str, Vec<Option<&str>>) =
                    match (&filter.thread_id, &filter.resource_id) {
                        (Some(thread), resource) => (
                            sql::SCAN_THREAD_VECTORS,
                            vec![
                                Some(index.as_str()),
                                Some(thread.as_str()),
                                resource.as_deref(),
                            ],
                        ),
                        (None, Some(resource)) => (
                            sql::SCAN_RESOURCE_VECTORS,
                            vec![Some(index.as_str()), Some(resource.as_str())],
                        ),
                        (None, None) => (sql::SCAN_VECTORS, vec![Some(index.as_str())]),
                    };
                let mut statement = tx.prepare_cached(statement).map_err(err(OP))?;
                let mut rows = statement.query(params_from_iter(scope)).map_err(err(OP))?;
                while let Some(row) = rows.next().map_err(err(OP))? {
                    score_row(row)?;
                }
                drop(rows);
                drop(statement);
                tx.finish().map_err(err(OP))?;
                Ok(top.into_vec())
            })
            .await
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        const OP: &str = "delete_vectors";
        let (index, ids) = (index.to_owned(), json_ids(ids));
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                index_dimension(&tx, &index, OP)?;
                let done = tx
                    .execute(sql::DELETE_VECTORS, params![index, ids])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(done as u64)
            })
            .await
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
