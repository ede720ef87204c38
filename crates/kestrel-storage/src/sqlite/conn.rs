//! The store's own SQLite connections: one writer and a few readers.
//!
//! Not an `sqlx::Pool`: a pool hands every released connection to a spawned task that pings it
//! (one more round trip to the connection's worker thread) before another caller may use it,
//! which made a short statement cost about four times what it costs on a held connection. Here a
//! connection is a mutex-guarded slot, opened on first use and held for one operation.
//! Statements run to completion on the connection's worker thread even when the caller's future
//! is dropped, and a dropped transaction rolls back, so a connection is always fit for the next
//! holder.

use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::{BACKEND, err};
use crate::error::{Result, StorageError};

/// A connection held for one operation.
pub(super) type Held<'a> = MappedMutexGuard<'a, SqliteConnection>;

type Slot = Mutex<Option<SqliteConnection>>;

/// One writer connection (every write of this store goes through it, so in-process writers queue
/// on its mutex) and `readers` reader connections.
pub(super) struct Connections {
    options: SqliteConnectOptions,
    writer: Slot,
    readers: Vec<Slot>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("readers", &self.readers.len())
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

fn closed(operation: &'static str) -> StorageError {
    StorageError::Backend {
        backend: BACKEND,
        operation,
        source: Box::new(sqlx::Error::PoolClosed),
    }
}

impl Connections {
    /// Connections opened with `options`, starting with an already open `writer`.
    pub(super) fn new(
        options: SqliteConnectOptions,
        writer: SqliteConnection,
        readers: u32,
    ) -> Self {
        Self {
            options,
            writer: Mutex::new(Some(writer)),
            readers: (0..readers.max(1)).map(|_| Mutex::new(None)).collect(),
            closed: AtomicBool::new(false),
        }
    }

    /// The writer, once the writers before this one are done.
    pub(super) async fn writer(&self, operation: &'static str) -> Result<Held<'_>> {
        let slot = self.writer.lock().await;
        self.open(slot, operation).await
    }

    /// A reader: the first free one (so a sequential caller keeps reusing a warm connection), or
    /// the first one once it is free.
    pub(super) async fn reader(&self, operation: &'static str) -> Result<Held<'_>> {
        for slot in &self.readers {
            if let Ok(slot) = slot.try_lock() {
                return self.open(slot, operation).await;
            }
        }
        let Some(first) = self.readers.first() else {
            return Err(closed(operation));
        };
        let slot = first.lock().await;
        self.open(slot, operation).await
    }

    async fn open<'a>(
        &self,
        mut slot: MutexGuard<'a, Option<SqliteConnection>>,
        operation: &'static str,
    ) -> Result<Held<'a>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(operation));
        }
        if slot.is_none() {
            let conn = SqliteConnection::connect_with(&self.options)
                .await
                .map_err(err(operation))?;
            *slot = Some(conn);
        }
        MutexGuard::try_map(slot, Option::as_mut).map_err(|_| closed(operation))
    }

    /// Closes every connection once its holder is done; later operations fail.
    pub(super) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in self.readers.iter().chain(std::iter::once(&self.writer)) {
            let conn = slot.lock().await.take();
            if let Some(conn) = conn {
                let _ = conn.close().await;
            }
        }
    }
}
