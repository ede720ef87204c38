//! The store's own SQLite connections (one writer, a few readers) and where their work runs.
//!
//! **Where work runs.** A short operation (an append, a history read, a lookup by key: tens of
//! microseconds of SQLite work) runs on the thread that polls the caller's future. Handing it to
//! another thread and back costs two thread wake-ups, more than the statement itself. A long
//! operation (a search, a vector scan, a bulk copy) runs on tokio's blocking pool, and so does a
//! short one that meets another process's write lock: inline, connections wait for no lock
//! (busy timeout zero), so an async worker never sleeps on SQLite; the retry on the blocking
//! pool waits up to the configured busy timeout. Retrying is safe because a statement or
//! `BEGIN IMMEDIATE` that finds the lock taken has changed nothing.
//!
//! **Why the mutexes are async.** Callers queue for a connection without blocking a thread, and
//! a connection handed to the blocking pool travels with its guard, so a caller that gives up
//! (its future dropped) never leaves a connection in use by two holders. A statement runs to
//! completion once started and a dropped transaction rolls back, so the connection is always fit
//! for the next holder.
//!
//! **Checkpoints.** Committing to a WAL file is cheap until SQLite copies the log back into the
//! database (a checkpoint, with an fsync). Writers would do that inline every 1,000 pages; the
//! store instead checkpoints on the blocking pool every [`CHECKPOINT_EVERY`] writes, which keeps
//! the log below that mark (SQLite's own automatic checkpoint stays as a backstop).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::BACKEND;
use crate::error::{Result, StorageError};

/// How long an operation is expected to hold its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cost {
    /// Tens of microseconds: run on the caller's thread.
    Short,
    /// Scans, searches, bulk writes: run on the blocking pool.
    Long,
}

/// Writes between two background checkpoints.
pub(super) const CHECKPOINT_EVERY: u64 = 64;

/// What every connection of a store is opened with.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub path: PathBuf,
    pub busy_timeout: Duration,
    pub cache_size_kib: u32,
    pub mmap_size: u64,
    pub synchronous: super::Synchronous,
}

impl Settings {
    /// Opens a connection: WAL, `synchronous` as configured (`NORMAL` by default, the run saves
    /// switching to `FULL`), foreign keys, the page cache and map
    /// sizes, no busy wait (see the module docs), and room for every statement of the store in
    /// the prepared-statement cache.
    pub fn open(&self, create: bool) -> rusqlite::Result<Connection> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(&self.path, flags)?;
        // Another process may be converting the file to WAL right now: wait for it here (this
        // runs on the blocking pool or at open), not inline later.
        conn.busy_timeout(self.busy_timeout)?;
        conn.pragma_update(None, "journal_mode", "wal")?;
        conn.busy_timeout(Duration::ZERO)?;
        conn.pragma_update(None, "synchronous", self.synchronous.pragma())?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.pragma_update(None, "cache_size", -i64::from(self.cache_size_kib))?;
        conn.pragma_update(None, "mmap_size", self.mmap_size)?;
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }
}

type Slot = Arc<Mutex<Option<Connection>>>;

/// One writer connection (every write of this store goes through it, so in-process writers queue
/// on its mutex) and `readers` reader connections, opened on first use.
pub(super) struct Connections {
    settings: Settings,
    writer: Slot,
    readers: Vec<Slot>,
    closed: AtomicBool,
    writes: AtomicU64,
    checkpointing: Arc<AtomicBool>,
    /// The connection background checkpoints run on, kept open between them: opening one
    /// parses the whole schema, which cost more than the checkpoint itself.
    checkpointer: Arc<std::sync::Mutex<Option<Connection>>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("path", &self.settings.path)
            .field("readers", &self.readers.len())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

fn closed(operation: &'static str) -> StorageError {
    StorageError::Backend {
        backend: BACKEND,
        operation,
        source: "the store is closed".into(),
    }
}

/// Whether `error` is SQLite reporting a lock held by another connection.
fn is_busy(error: &StorageError) -> bool {
    let StorageError::Backend { source, .. } = error else {
        return false;
    };
    matches!(
        source.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(e, _))
            if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

impl Connections {
    /// Connections opened with `settings`, starting with an already open `writer`.
    pub fn new(settings: Settings, writer: Connection, readers: u32) -> Self {
        Self {
            settings,
            writer: Arc::new(Mutex::new(Some(writer))),
            readers: (0..readers.max(1))
                .map(|_| Arc::new(Mutex::new(None)))
                .collect(),
            closed: AtomicBool::new(false),
            writes: AtomicU64::new(0),
            checkpointing: Arc::new(AtomicBool::new(false)),
            checkpointer: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    /// Runs `work` on the writer, once the writers before it are done.
    pub async fn write<T, F>(&self, operation: &'static str, cost: Cost, work: F) -> Result<T>
    where
        F: Fn(&mut Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let slot = Arc::clone(&self.writer).lock_owned().await;
        let result = self.run(slot, operation, cost, work).await;
        if result.is_ok()
            && self
                .writes
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(CHECKPOINT_EVERY)
        {
            self.checkpoint_in_background();
        }
        result
    }

    /// Runs `work` on a reader: the first free one (so a sequential caller keeps reusing a warm
    /// connection), or the first one once it is free.
    pub async fn read<T, F>(&self, operation: &'static str, cost: Cost, work: F) -> Result<T>
    where
        F: Fn(&mut Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let slot = self.free_reader().await.ok_or_else(|| closed(operation))?;
        self.run(slot, operation, cost, work).await
    }

    async fn free_reader(&self) -> Option<OwnedMutexGuard<Option<Connection>>> {
        for slot in &self.readers {
            if let Ok(guard) = Arc::clone(slot).try_lock_owned() {
                return Some(guard);
            }
        }
        Some(Arc::clone(self.readers.first()?).lock_owned().await)
    }

    async fn run<T, F>(
        &self,
        mut slot: OwnedMutexGuard<Option<Connection>>,
        operation: &'static str,
        cost: Cost,
        work: F,
    ) -> Result<T>
    where
        F: Fn(&mut Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(operation));
        }
        if cost == Cost::Short
            && let Some(conn) = slot.as_mut()
        {
            match work(conn) {
                Err(e) if is_busy(&e) => {}
                done => return done,
            }
        }
        let settings = self.settings.clone();
        let err = super::err(operation);
        tokio::task::spawn_blocking(move || {
            if slot.is_none() {
                *slot = Some(settings.open(false).map_err(super::err(operation))?);
            }
            let conn = slot.as_mut().ok_or_else(|| closed(operation))?;
            conn.busy_timeout(settings.busy_timeout)
                .map_err(super::err(operation))?;
            let result = work(conn);
            if let Err(e) = conn.busy_timeout(Duration::ZERO) {
                // A connection that would wait inline must not be used again.
                *slot = None;
                return Err(err(e));
            }
            result
        })
        .await
        .map_err(|join| StorageError::Backend {
            backend: BACKEND,
            operation,
            source: format!("the blocking task failed: {join}").into(),
        })?
    }

    /// Copies the log back into the database on the blocking pool (one checkpoint at a time),
    /// so that writers do not do it inline.
    fn checkpoint_in_background(&self) {
        if self.checkpointing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.checkpointing.store(false, Ordering::Release);
            return;
        };
        let settings = self.settings.clone();
        let flag = Arc::clone(&self.checkpointing);
        let checkpointer = Arc::clone(&self.checkpointer);
        runtime.spawn_blocking(move || {
            // Its own connection: a checkpoint must not hold up the readers' or the writer's.
            let mut slot = checkpointer.lock().unwrap_or_else(|e| e.into_inner());
            let conn = match slot.take() {
                Some(conn) => Ok(conn),
                None => settings.open(false),
            };
            let done = conn.and_then(|conn| {
                conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
                Ok(conn)
            });
            match done {
                // Kept for the next one (a failed one is reopened then).
                Ok(conn) => *slot = Some(conn),
                Err(error) => {
                    tracing::debug!(%error, path = %settings.path.display(), "background checkpoint failed; SQLite checkpoints on commit instead");
                }
            }
            drop(slot);
            flag.store(false, Ordering::Release);
        });
    }

    /// Closes every connection once its holder is done; later operations fail.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // A checkpoint going on now keeps its connection until it ends (then it is dropped
        // with the store).
        if let Ok(mut slot) = self.checkpointer.try_lock()
            && let Some(conn) = slot.take()
        {
            let _ = conn.close();
        }
        for slot in self.readers.iter().chain(std::iter::once(&self.writer)) {
            let conn = slot.lock().await.take();
            if let Some(conn) = conn {
                let _ = conn.close();
            }
        }
    }
}

#[cfg(test)]
mod durability_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn settings(path: PathBuf, synchronous: super::super::Synchronous) -> Settings {
        Settings {
            path,
            busy_timeout: Duration::from_secs(1),
            cache_size_kib: 1024,
            mmap_size: 0,
            synchronous,
        }
    }

    #[test]
    fn commits_are_synced_unless_asked_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let level = |synchronous| {
            let conn = settings(dir.path().join("d.db"), synchronous)
                .open(true)
                .unwrap();
            conn.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))
                .unwrap()
        };
        // SQLite's numbers: 1 NORMAL, 2 FULL. The default opens NORMAL and syncs the commits
        // that save runs (they switch to FULL around their transaction).
        assert_eq!(
            super::super::Synchronous::default(),
            super::super::Synchronous::Runs
        );
        assert_eq!(level(super::super::Synchronous::Runs), 1);
        assert_eq!(level(super::super::Synchronous::Full), 2);
        assert_eq!(level(super::super::Synchronous::Normal), 1);
    }
}
