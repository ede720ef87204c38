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

mod agents;
mod conn;
mod datasets;
mod messages;
mod observations;
mod queue;
mod rows;
mod runs;
mod schema;
mod scores;
mod search;
mod spans;
mod sql;
mod threads;
mod vectors;
mod workflows;
mod working_memory;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params_from_iter};

use self::conn::{Connections, Cost, Settings};
use self::schema::open_writer;
pub use self::schema::{MIGRATIONS, SCHEMA_VERSION};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::db_err;
use crate::storage::Storage;

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
    /// them fast. Runs on open and in the background after every batch of appended
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

crate::ports::implement_ports!(SqliteStorage);

impl Storage for SqliteStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }
}
