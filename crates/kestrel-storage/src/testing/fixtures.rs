//! Fresh stores for the conformance suite.

use std::sync::Arc;

use crate::memory::InMemoryStorage;
use crate::storage::Storage;

/// The environment variable naming the PostgreSQL server the tests use.
pub const POSTGRES_URL_VAR: &str = "KESTREL_TEST_POSTGRES_URL";

/// A fresh store and what to clean up after the test.
pub struct Fixture {
    store: Arc<dyn Storage>,
    cleanup: Cleanup,
}

enum Cleanup {
    None,
    #[cfg(feature = "sqlite")]
    Sqlite(crate::sqlite::SqliteStorage, tempfile::TempDir),
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres::PostgresStorage, String),
}

impl Fixture {
    /// The store under test.
    pub fn store(&self) -> Arc<dyn Storage> {
        Arc::clone(&self.store)
    }

    /// Closes the store and removes its file or schema.
    pub async fn teardown(self) {
        match self.cleanup {
            Cleanup::None => {}
            #[cfg(feature = "sqlite")]
            Cleanup::Sqlite(store, dir) => {
                store.close().await;
                drop(dir);
            }
            #[cfg(feature = "postgres")]
            Cleanup::Postgres(store, url) => {
                store.close().await;
                drop_schema(&url, store.schema()).await;
            }
        }
    }
}

/// An empty in-memory store.
pub async fn memory() -> Option<Fixture> {
    Some(Fixture {
        store: Arc::new(InMemoryStorage::new()),
        cleanup: Cleanup::None,
    })
}

/// A SQLite store in a fresh temporary directory.
#[cfg(feature = "sqlite")]
pub async fn sqlite() -> Option<Fixture> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = crate::sqlite::SqliteStorage::open(dir.path().join("kestrel.db"))
        .await
        .expect("open SQLite");
    Some(Fixture {
        store: Arc::new(store.clone()),
        cleanup: Cleanup::Sqlite(store, dir),
    })
}

/// The PostgreSQL URL the tests use, or `None` (after saying the tests are skipped).
pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: set {POSTGRES_URL_VAR} (e.g. postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL tests"
            );
            None
        }
    }
}

/// A fresh, unique schema name.
pub fn test_schema() -> String {
    format!("kestrel_test_{}", uuid::Uuid::new_v4().simple())
}

/// A PostgreSQL store in a fresh schema, or `None` when `KESTREL_TEST_POSTGRES_URL` is unset.
#[cfg(feature = "postgres")]
pub async fn postgres() -> Option<Fixture> {
    let url = postgres_url()?;
    let options = crate::postgres::PgOptions {
        max_connections: 8,
        ..crate::postgres::PgOptions::schema(test_schema())
    };
    let store = crate::postgres::PostgresStorage::connect(&url, options)
        .await
        .expect("connect to PostgreSQL");
    Some(Fixture {
        store: Arc::new(store.clone()),
        cleanup: Cleanup::Postgres(store, url),
    })
}

/// Drops a test schema (best effort).
#[cfg(feature = "postgres")]
pub async fn drop_schema(url: &str, schema: &str) {
    use sqlx::{Connection, Executor};
    if let Ok(mut conn) = sqlx::PgConnection::connect(url).await {
        let _ = conn
            .execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str())
            .await;
        let _ = conn.close().await;
    }
}
