//! [`SqliteVectorStore`]: exact vector search inside a SQLite database file.
//!
//! Vectors are rows of one table (`kestrel_rag_vectors`: index, id, the embedding as
//! little-endian `f32` bytes, metadata as JSON), indexes rows of another
//! (`kestrel_rag_indexes`). A query scores every row of the index that passes the filter
//! with `kestrel_vec_score`, a SQL function written in Rust (no C extension, no `unsafe`),
//! and SQLite keeps the best `top_k`: exact results, and a filtered query always returns
//! `top_k` rows when that many match. Scanning costs about a millisecond per thousand
//! 384-dimension vectors (see BENCHMARKS.md): right for tens of thousands of chunks, the
//! size of most document sets; use [`PgVectorStore`](super::pgvector::PgVectorStore) beyond.
//!
//! The tables can live in the same file as Kestrel's storage (`kestrel.db`): their names
//! do not collide and the store keeps its schema version in a table of its own.

mod filter;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::{
    CreateIndex, IndexStats, Metadata, Metric, QueryResult, Selector, Upsert, VectorError,
    VectorQuery, VectorStore, VectorUpdate, check_index_name,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kestrel_rag_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kestrel_rag_indexes (
    name TEXT PRIMARY KEY,
    dimension INTEGER NOT NULL,
    metric TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS kestrel_rag_vectors (
    index_name TEXT NOT NULL,
    vector_id TEXT NOT NULL,
    embedding BLOB NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (index_name, vector_id)
);
";
const SCHEMA_VERSION: i64 = 1;

/// A vector store in a SQLite file; clones share the connection.
#[derive(Clone)]
pub struct SqliteVectorStore {
    conn: Arc<Mutex<Connection>>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteVectorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteVectorStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn backend(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> VectorError {
    move |e| VectorError::backend(operation, e)
}

impl SqliteVectorStore {
    /// Opens (creating if needed) the store in the SQLite file at `path`, in WAL mode.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteVectorStore, VectorError> {
        let path = path.as_ref().to_path_buf();
        let opened = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection, VectorError> {
            let conn = Connection::open(&opened).map_err(backend("open"))?;
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(backend("open"))?;
            Ok(conn)
        })
        .await
        .map_err(|e| VectorError::backend("open", e))??;
        SqliteVectorStore::setup(conn, Some(path))
    }

    /// A store in a private in-memory database (gone when the last clone is dropped).
    pub fn open_in_memory() -> Result<SqliteVectorStore, VectorError> {
        let conn = Connection::open_in_memory().map_err(backend("open"))?;
        SqliteVectorStore::setup(conn, None)
    }

    fn setup(conn: Connection, path: Option<PathBuf>) -> Result<SqliteVectorStore, VectorError> {
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(backend("open"))?;
        conn.execute_batch(SCHEMA).map_err(backend("open"))?;
        let version: Option<i64> = conn
            .query_row("SELECT max(version) FROM kestrel_rag_schema", [], |row| {
                row.get(0)
            })
            .map_err(backend("open"))?;
        match version {
            None => {
                conn.execute(
                    "INSERT INTO kestrel_rag_schema (version) VALUES (?1)",
                    [SCHEMA_VERSION],
                )
                .map_err(backend("open"))?;
            }
            Some(version) if version > SCHEMA_VERSION => {
                return Err(VectorError::backend(
                    "open",
                    format!(
                        "the vector tables are at schema version {version}, newer than this \
                         Kestrel's {SCHEMA_VERSION}: upgrade Kestrel"
                    ),
                ));
            }
            Some(_) => {}
        }
        register_functions(&conn).map_err(backend("open"))?;
        Ok(SqliteVectorStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// The database file (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Runs `f` on the connection, on the blocking pool.
    async fn with_conn<R: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<R, VectorError> + Send + 'static,
    ) -> Result<R, VectorError> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut conn)
        })
        .await
        .map_err(|e| VectorError::backend(operation, e))?
    }
}

fn metric_code(metric: Metric) -> i64 {
    match metric {
        Metric::Cosine => 0,
        Metric::Euclidean => 1,
        Metric::DotProduct => 2,
    }
}

fn metric_from_code(code: i64) -> Metric {
    match code {
        1 => Metric::Euclidean,
        2 => Metric::DotProduct,
        _ => Metric::Cosine,
    }
}

fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

thread_local! {
    /// The row being scored, decoded: one buffer per thread instead of one per row.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The SQL functions the queries use: `kestrel_vec_score(embedding, query, metric)` and
/// `kestrel_regexp(pattern, text)`.
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("kestrel_vec_score", 3, flags, |ctx| {
        let query = ctx.get_or_create_aux(1, |value| -> Result<(Vec<f32>, f32), String> {
            let bytes = value.as_blob().map_err(|e| e.to_string())?;
            let query = decode(bytes);
            let norm = super::norm(&query);
            Ok((query, norm))
        })?;
        let metric = metric_from_code(ctx.get::<i64>(2)?);
        let ValueRef::Blob(bytes) = ctx.get_raw(0) else {
            return Err(rusqlite::Error::UserFunctionError(
                "kestrel_vec_score: the embedding is not a blob".into(),
            ));
        };
        if bytes.len() != query.0.len() * 4 {
            return Err(rusqlite::Error::UserFunctionError(
                format!(
                    "kestrel_vec_score: a stored vector has {} dimensions, the query {}",
                    bytes.len() / 4,
                    query.0.len()
                )
                .into(),
            ));
        }
        let score = SCRATCH.with(|scratch| {
            let mut row = scratch.borrow_mut();
            row.clear();
            row.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            metric.score(&query.0, query.1, &row)
        });
        Ok(f64::from(score))
    })?;
    conn.create_scalar_function("kestrel_regexp", 2, flags, |ctx| {
        let regex = ctx.get_or_create_aux(0, |value| -> Result<regex::Regex, String> {
            let pattern = value.as_str().map_err(|e| e.to_string())?;
            regex::RegexBuilder::new(pattern)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| e.to_string())
        })?;
        Ok(match ctx.get_raw(1) {
            ValueRef::Text(text) => std::str::from_utf8(text).is_ok_and(|t| regex.is_match(t)),
            _ => false,
        })
    })?;
    Ok(())
}

fn index_info(conn: &Connection, name: &str) -> Result<(usize, Metric), VectorError> {
    let row: Option<(i64, String)> = conn
        .query_row(
            "SELECT dimension, metric FROM kestrel_rag_indexes WHERE name = ?1",
            [name],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(backend("read index"))?;
    let (dimension, metric) = row.ok_or_else(|| VectorError::IndexNotFound {
        index: name.to_owned(),
    })?;
    let metric = Metric::parse(&metric).ok_or_else(|| {
        VectorError::backend("read index", format!("unknown metric {metric:?} stored"))
    })?;
    Ok((usize::try_from(dimension).unwrap_or(0), metric))
}

fn parse_metadata(text: &str) -> Result<Metadata, VectorError> {
    serde_json::from_str(text).map_err(|e| VectorError::backend("read metadata", e))
}

/// A selector as a condition, with its parameters numbered from `first_param`.
fn selector_sql(selector: &Selector, first_param: usize) -> (String, Vec<SqlValue>) {
    match selector {
        Selector::Ids(ids) => (
            format!("vector_id IN (SELECT value FROM json_each(?{first_param}))"),
            vec![SqlValue::Text(
                serde_json::Value::from(ids.clone()).to_string(),
            )],
        ),
        Selector::Filter(filter) => {
            let compiled = filter::compile(filter.root(), first_param);
            (compiled.sql, compiled.params)
        }
    }
}

#[async_trait]
impl VectorStore for SqliteVectorStore {
    async fn create_index(&self, request: CreateIndex) -> Result<(), VectorError> {
        request.check()?;
        self.with_conn("create_index", move |conn| {
            let tx = conn.transaction().map_err(backend("create_index"))?;
            match index_info(&tx, &request.index_name) {
                Ok((dimension, metric))
                    if dimension == request.dimension && metric == request.metric =>
                {
                    Ok(())
                }
                Ok((dimension, metric)) => Err(VectorError::IndexExists {
                    index: request.index_name.clone(),
                    existing_dimension: dimension,
                    existing_metric: metric,
                    dimension: request.dimension,
                    metric: request.metric,
                }),
                Err(VectorError::IndexNotFound { .. }) => {
                    tx.execute(
                        "INSERT INTO kestrel_rag_indexes (name, dimension, metric) VALUES (?1, ?2, ?3)",
                        params![
                            request.index_name,
                            request.dimension as i64,
                            request.metric.as_str()
                        ],
                    )
                    .map_err(backend("create_index"))?;
                    tx.commit().map_err(backend("create_index"))
                }
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn list_indexes(&self) -> Result<Vec<String>, VectorError> {
        self.with_conn("list_indexes", |conn| {
            let mut statement = conn
                .prepare("SELECT name FROM kestrel_rag_indexes ORDER BY name")
                .map_err(backend("list_indexes"))?;
            let names = statement
                .query_map([], |row| row.get(0))
                .map_err(backend("list_indexes"))?
                .collect::<Result<Vec<String>, _>>()
                .map_err(backend("list_indexes"))?;
            Ok(names)
        })
        .await
    }

    async fn describe_index(&self, index_name: &str) -> Result<IndexStats, VectorError> {
        let name = index_name.to_owned();
        self.with_conn("describe_index", move |conn| {
            let (dimension, metric) = index_info(conn, &name)?;
            let count: i64 = conn
                .query_row(
                    "SELECT count(*) FROM kestrel_rag_vectors WHERE index_name = ?1",
                    [&name],
                    |row| row.get(0),
                )
                .map_err(backend("describe_index"))?;
            Ok(IndexStats {
                dimension,
                count: u64::try_from(count).unwrap_or(0),
                metric,
            })
        })
        .await
    }

    async fn delete_index(&self, index_name: &str) -> Result<(), VectorError> {
        check_index_name(index_name)?;
        let name = index_name.to_owned();
        self.with_conn("delete_index", move |conn| {
            let tx = conn.transaction().map_err(backend("delete_index"))?;
            let deleted = tx
                .execute("DELETE FROM kestrel_rag_indexes WHERE name = ?1", [&name])
                .map_err(backend("delete_index"))?;
            if deleted == 0 {
                return Err(VectorError::IndexNotFound { index: name });
            }
            tx.execute(
                "DELETE FROM kestrel_rag_vectors WHERE index_name = ?1",
                [&name],
            )
            .map_err(backend("delete_index"))?;
            tx.commit().map_err(backend("delete_index"))
        })
        .await
    }

    async fn upsert(&self, request: Upsert) -> Result<Vec<String>, VectorError> {
        check_index_name(&request.index_name)?;
        self.with_conn("upsert", move |conn| {
            let tx = conn.transaction().map_err(backend("upsert"))?;
            let index_name = request.index_name.clone();
            let delete_filter = request.delete_filter.clone();
            let (dimension, metric) = index_info(&tx, &index_name)?;
            let records = request.into_records(dimension, metric)?;
            if let Some(filter) = delete_filter.filter(|f| !f.is_empty()) {
                let compiled = filter::compile(filter.root(), 2);
                let sql = format!(
                    "DELETE FROM kestrel_rag_vectors WHERE index_name = ?1 AND {}",
                    compiled.sql
                );
                let mut params = vec![SqlValue::Text(index_name.clone())];
                params.extend(compiled.params);
                tx.execute(&sql, params_from_iter(params))
                    .map_err(backend("upsert"))?;
            }
            let mut ids = Vec::with_capacity(records.len());
            {
                let mut statement = tx
                    .prepare_cached(
                        "INSERT INTO kestrel_rag_vectors (index_name, vector_id, embedding, metadata) \
                         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (index_name, vector_id) DO UPDATE \
                         SET embedding = excluded.embedding, metadata = excluded.metadata",
                    )
                    .map_err(backend("upsert"))?;
                for record in records {
                    let metadata = serde_json::to_string(&record.metadata)
                        .map_err(|e| VectorError::backend("upsert", e))?;
                    statement
                        .execute(params![
                            index_name,
                            record.id,
                            encode(&record.vector),
                            metadata
                        ])
                        .map_err(backend("upsert"))?;
                    ids.push(record.id);
                }
            }
            tx.commit().map_err(backend("upsert"))?;
            Ok(ids)
        })
        .await
    }

    async fn query(&self, query: VectorQuery) -> Result<Vec<QueryResult>, VectorError> {
        check_index_name(&query.index_name)?;
        self.with_conn("query", move |conn| {
            let (dimension, metric) = index_info(conn, &query.index_name)?;
            query.check(dimension, metric)?;
            let top_k = i64::try_from(query.top_k).unwrap_or(i64::MAX);
            let filter = query.filter.as_ref().filter(|f| !f.is_empty());
            let columns = if query.include_vector {
                "vector_id, metadata, embedding"
            } else {
                "vector_id, metadata, NULL"
            };
            let (sql, mut params) = match &query.query_vector {
                Some(vector) => {
                    let params = vec![
                        SqlValue::Text(query.index_name.clone()),
                        SqlValue::Blob(encode(vector)),
                        SqlValue::Integer(metric_code(metric)),
                        SqlValue::Real(query.min_score.map_or(f64::NEG_INFINITY, f64::from)),
                        SqlValue::Integer(top_k),
                    ];
                    let condition = filter.map(|f| filter::compile(f.root(), 6));
                    let sql = format!(
                        "SELECT {columns}, score FROM (SELECT vector_id, metadata, embedding, \
                         kestrel_vec_score(embedding, ?2, ?3) AS score FROM kestrel_rag_vectors \
                         WHERE index_name = ?1 AND {}) WHERE score >= ?4 \
                         ORDER BY score DESC, vector_id LIMIT ?5",
                        condition.as_ref().map_or("1", |c| c.sql.as_str())
                    );
                    let mut params = params;
                    if let Some(condition) = condition {
                        params.extend(condition.params);
                    }
                    (sql, params)
                }
                None => {
                    let params = vec![
                        SqlValue::Text(query.index_name.clone()),
                        SqlValue::Integer(top_k),
                    ];
                    let condition = filter.map(|f| filter::compile(f.root(), 3));
                    let sql = format!(
                        "SELECT {columns}, 0.0 FROM kestrel_rag_vectors WHERE index_name = ?1 \
                         AND {} ORDER BY vector_id LIMIT ?2",
                        condition.as_ref().map_or("1", |c| c.sql.as_str())
                    );
                    let mut params = params;
                    if let Some(condition) = condition {
                        params.extend(condition.params);
                    }
                    (sql, params)
                }
            };
            let mut statement = conn.prepare_cached(&sql).map_err(backend("query"))?;
            let rows = statement
                .query_map(params_from_iter(params.drain(..)), |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<Vec<u8>>>(2)?,
                        row.get::<_, f64>(3)?,
                    ))
                })
                .map_err(backend("query"))?;
            let mut results = Vec::new();
            for row in rows {
                let (id, metadata, embedding, score) = row.map_err(backend("query"))?;
                results.push(QueryResult {
                    id,
                    score: score as f32,
                    metadata: parse_metadata(&metadata)?,
                    vector: embedding.map(|bytes| decode(&bytes)),
                    document: None,
                });
            }
            Ok(results)
        })
        .await
    }

    async fn update(
        &self,
        index_name: &str,
        selector: Selector,
        update: VectorUpdate,
    ) -> Result<u64, VectorError> {
        selector.check()?;
        check_index_name(index_name)?;
        let name = index_name.to_owned();
        self.with_conn("update", move |conn| {
            let tx = conn.transaction().map_err(backend("update"))?;
            let (dimension, metric) = index_info(&tx, &name)?;
            update.check(&name, dimension, metric)?;
            let metadata = update
                .metadata
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| VectorError::backend("update", e))?;
            let (condition, selector_params) = selector_sql(&selector, 4);
            let sql = format!(
                "UPDATE kestrel_rag_vectors SET embedding = coalesce(?2, embedding), \
                 metadata = coalesce(?3, metadata) WHERE index_name = ?1 AND {condition}"
            );
            let mut params = vec![
                SqlValue::Text(name.clone()),
                update
                    .vector
                    .as_deref()
                    .map_or(SqlValue::Null, |v| SqlValue::Blob(encode(v))),
                metadata.map_or(SqlValue::Null, SqlValue::Text),
            ];
            params.extend(selector_params);
            let changed = tx
                .execute(&sql, params_from_iter(params))
                .map_err(backend("update"))?;
            tx.commit().map_err(backend("update"))?;
            Ok(changed as u64)
        })
        .await
    }

    async fn delete(&self, index_name: &str, selector: Selector) -> Result<u64, VectorError> {
        selector.check()?;
        check_index_name(index_name)?;
        let name = index_name.to_owned();
        self.with_conn("delete", move |conn| {
            let tx = conn.transaction().map_err(backend("delete"))?;
            index_info(&tx, &name)?;
            let (condition, selector_params) = selector_sql(&selector, 2);
            let sql =
                format!("DELETE FROM kestrel_rag_vectors WHERE index_name = ?1 AND {condition}");
            let mut params = vec![SqlValue::Text(name.clone())];
            params.extend(selector_params);
            let deleted = tx
                .execute(&sql, params_from_iter(params))
                .map_err(backend("delete"))?;
            tx.commit().map_err(backend("delete"))?;
            Ok(deleted as u64)
        })
        .await
    }
}
