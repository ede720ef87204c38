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

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres};

pub use self::schema::MIGRATOR;
use self::schema::{check_schema, create_schema};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::{db_err, migrate_err, open_err, redact_url};
use crate::storage::Storage;

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
    /// The server's `statement_timeout` for every statement of the pool's sessions (default
    /// 30 s): a statement that runs longer is canceled by PostgreSQL, and its operation fails.
    pub statement_timeout: Duration,
    /// How long one storage operation may take as the client sees it, waiting for a connection
    /// included (default 60 s). A database whose answers stop arriving (a network that went
    /// silent, an answer lost on the way) fails the operation with a timeout instead of
    /// holding it forever; the connection it was on is closed, never reused.
    pub operation_timeout: Duration,
    /// The sessions' TCP keepalive and user timeout (PostgreSQL's `tcp_keepalives_idle`,
    /// `tcp_keepalives_interval`, `tcp_keepalives_count` and `tcp_user_timeout`; default 10 s
    /// idle): the server finds a client that went away and ends its session, releasing its
    /// locks. `None` leaves the server's settings.
    pub keepalive: Option<Duration>,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            schema: "public".to_owned(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(30),
            statement_timeout: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(60),
            keepalive: Some(Duration::from_secs(10)),
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
    operation_timeout: Duration,
}

/// How long a connection given back to the pool may take to show it is still usable: one
/// whose operation was abandoned may wait for an answer that never comes.
const RELEASE_PING: Duration = Duration::from_secs(2);

/// The session settings of `options`, as the `options` startup parameter carries them.
fn session_settings(options: &PgOptions) -> Vec<(&'static str, String)> {
    let millis = |d: Duration| d.as_millis().max(1).to_string();
    let mut settings = vec![("statement_timeout", millis(options.statement_timeout))];
    if let Some(keepalive) = options.keepalive {
        let secs = keepalive.as_secs().max(1);
        settings.extend([
            ("tcp_keepalives_idle", secs.to_string()),
            (
                "tcp_keepalives_interval",
                secs.div_ceil(2).max(1).to_string(),
            ),
            ("tcp_keepalives_count", "3".to_owned()),
            ("tcp_user_timeout", (secs * 3 * 1000).to_string()),
        ]);
    }
    settings
}

fn check_options(options: &PgOptions) -> Result<()> {
    for (argument, value) in [
        ("statement_timeout", options.statement_timeout),
        ("operation_timeout", options.operation_timeout),
        ("acquire_timeout", options.acquire_timeout),
    ] {
        if value.is_zero() || value > Duration::from_secs(24 * 60 * 60) {
            return Err(StorageError::invalid(
                argument,
                "must be between 1 ms and 24 hours",
            ));
        }
    }
    if options
        .keepalive
        .is_some_and(|k| k.is_zero() || k > Duration::from_secs(2 * 60 * 60))
    {
        return Err(StorageError::invalid(
            "keepalive",
            "must be between 1 s and 2 hours",
        ));
    }
    Ok(())
}

impl PostgresStorage {
    /// Connects to `url`, creates the schema when missing and runs the migrations.
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self> {
        check_schema(&options.schema)?;
        check_options(&options)?;
        let target = format!("PostgreSQL database {}", redact_url(url));
        let connect: PgConnectOptions = url
            .parse()
            .map_err(|e| open_err(&target, "invalid connection URL", e))?;
        let connect = connect.options(session_settings(&options));
        let search_path = format!("SET search_path TO \"{}\", public", options.schema);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .after_connect(move |conn, _| {
                let search_path = search_path.clone();
                Box::pin(async move { conn.execute(search_path.as_str()).await.map(|_| ()) })
            })
            // A connection given back after its operation was abandoned (it timed out) may be
            // waiting for an answer that never comes: one that does not answer a ping in time
            // is closed, not kept in the pool (whose own check would wait for good).
            .after_release(|conn, _| {
                Box::pin(async move {
                    match tokio::time::timeout(RELEASE_PING, sqlx::Connection::ping(conn)).await {
                        Ok(Ok(())) => Ok(true),
                        Ok(Err(error)) => Err(error),
                        Err(_) => Ok(false),
                    }
                })
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
            operation_timeout: options.operation_timeout,
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

    /// Runs one storage operation within [`PgOptions::operation_timeout`]: past it, the
    /// operation is abandoned (its connection is closed when it is given back, never reused)
    /// and fails with a timeout naming it.
    async fn bounded<T>(
        &self,
        operation: &'static str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.operation_timeout, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StorageError::Backend {
                backend: BACKEND,
                operation,
                source: Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no answer from the database in {:?} (PgOptions::operation_timeout)",
                        self.operation_timeout
                    ),
                )),
            }),
        }
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

crate::ports::implement_ports!(PostgresStorage);

impl Storage for PostgresStorage {
    fn backend(&self) -> &'static str {
        BACKEND
    }
}
