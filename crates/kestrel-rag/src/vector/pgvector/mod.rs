//! [`PgVectorStore`]: PostgreSQL with pgvector, in Mastra's table layout.
//!
//! Each index is a table named after it, as `@mastra/pg`'s `PgVector` makes them:
//! `id SERIAL PRIMARY KEY, vector_id TEXT, embedding vector(dim), metadata JSONB, namespace
//! VARCHAR(255) DEFAULT 'default'`, unique on `(namespace, vector_id)`, with the ANN index
//! `"<name>_vector_idx"`. A Mastra app pointed at the same schema reads and writes the same
//! indexes, with the same scores: cosine `1 - (a <=> b)`, euclidean `1 / (1 + (a <-> b))`,
//! dot product `-(a <#> b)`.
//!
//! Where Kestrel differs from Mastra, it is on purpose:
//!
//! - The default ANN index is HNSW (pgvector's `m = 16, ef_construction = 64`), not IVFFlat
//!   built on an empty table; `IndexConfig::ivfflat` and `IndexConfig::flat` are there.
//! - The query puts `ORDER BY distance LIMIT k` on the table itself, so PostgreSQL uses the
//!   ANN index (Mastra's #14421), and turns on pgvector's iterative scans (0.8+), so a
//!   filtered query still returns `k` rows when `k` match.
//! - IVFFlat probes √lists lists by default (pgvector's 1 loses about a quarter of recall).
//! - Filters are compiled with every field name and value bound as a parameter.
//! - The metric is also kept in the table's comment, so a `flat` index (no ANN index to read
//!   it from) keeps its metric.

mod filter;

use std::time::Duration;

use async_trait::async_trait;
use pgvector::Vector;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use self::filter::Param;
use super::{
    CreateIndex, IndexKind, IndexStats, Metric, QueryResult, Selector, Upsert, VectorError,
    VectorQuery, VectorStore, VectorUpdate, check_index_name,
};

/// The most dimensions pgvector's HNSW and IVFFlat indexes take on `vector` columns.
pub const MAX_INDEXED_DIMENSION: usize = 2_000;
/// Rows per `INSERT` when upserting.
const UPSERT_BATCH: usize = 1_000;

/// How to connect.
#[derive(Debug, Clone)]
pub struct PgVectorOptions {
    schema: String,
    max_connections: u32,
    acquire_timeout: Duration,
}

impl Default for PgVectorOptions {
    fn default() -> Self {
        PgVectorOptions {
            schema: "public".to_owned(),
            max_connections: 8,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

impl PgVectorOptions {
    /// The schema the index tables live in (created if missing; default `public`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The most pooled connections (default 8).
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max;
        self
    }

    /// How long to wait for a pooled connection (default 10 s).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }
}

/// A vector store on PostgreSQL with pgvector; clones share the pool.
#[derive(Debug, Clone)]
pub struct PgVectorStore {
    pool: PgPool,
    schema: String,
    /// pgvector 0.8+: iterative index scans.
    iterative_scans: bool,
}

fn backend(operation: &'static str) -> impl FnOnce(sqlx::Error) -> VectorError {
    move |e| VectorError::backend(operation, e)
}

/// What the catalog says about an index table.
#[derive(Debug)]
struct TableInfo {
    dimension: usize,
    metric: Metric,
    kind: IndexKind,
    hnsw_m: Option<u32>,
    ivf_lists: Option<u32>,
}

const TABLE_INFO: &str = "
SELECT a.atttypmod, idx.amname, idx.opcname, idx.def, obj_description(t.oid, 'pg_class')
FROM pg_class t
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attname = 'embedding' AND a.attnum > 0
    AND NOT a.attisdropped
JOIN pg_type ty ON ty.oid = a.atttypid AND ty.typname = 'vector'
LEFT JOIN LATERAL (
    SELECT am.amname::text AS amname, opc.opcname::text AS opcname,
           pg_get_indexdef(c.oid) AS def
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_am am ON am.oid = c.relam
    JOIN pg_opclass opc ON opc.oid = i.indclass[0]
    WHERE i.indrelid = t.oid AND c.relname = $3
) idx ON TRUE
WHERE n.nspname = $1 AND t.relname = $2 AND t.relkind IN ('r', 'p')";

const LIST_INDEXES: &str = "
SELECT t.relname::text FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = $1 AND t.relkind IN ('r', 'p')
AND EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
    WHERE a.attrelid = t.oid AND a.attname = 'embedding' AND ty.typname = 'vector'
    AND NOT a.attisdropped)
AND EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
    WHERE a.attrelid = t.oid AND a.attname = 'vector_id' AND ty.typname = 'text'
    AND NOT a.attisdropped)
AND EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
    WHERE a.attrelid = t.oid AND a.attname = 'metadata' AND ty.typname = 'jsonb'
    AND NOT a.attisdropped)
ORDER BY t.relname COLLATE \"C\"";

/// A `key='value'` storage parameter from `pg_get_indexdef`'s `WITH (...)`.
fn index_parameter(def: &str, key: &str) -> Option<u32> {
    let with = &def[def.find("WITH (")? + 6..];
    with.split([',', ')']).find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k.trim() == key)
            .then(|| v.trim().trim_matches('\'').parse().ok())
            .flatten()
    })
}

fn metric_comment(metric: Metric) -> String {
    format!("kestrel:metric={metric}")
}

impl PgVectorStore {
    /// Connects to `url`, checks that pgvector is installed (installing it when the role may),
    /// and creates the schema if missing.
    pub async fn connect(
        url: &str,
        options: PgVectorOptions,
    ) -> Result<PgVectorStore, VectorError> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect(url)
            .await
            .map_err(backend("connect"))?;
        PgVectorStore::from_pool(pool, options).await
    }

    /// Uses an existing pool.
    pub async fn from_pool(
        pool: PgPool,
        options: PgVectorOptions,
    ) -> Result<PgVectorStore, VectorError> {
        check_index_name(&options.schema).map_err(|_| {
            VectorError::invalid(
                "schema",
                format!("{:?} is not a valid schema name", options.schema),
            )
        })?;
        let mut version: Option<String> =
            sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                .fetch_optional(&pool)
                .await
                .map_err(backend("connect"))?;
        if version.is_none() {
            let created = sqlx::query("CREATE EXTENSION IF NOT EXISTS vector")
                .execute(&pool)
                .await;
            // Another connection may have created it meanwhile (a unique violation here).
            version =
                sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                    .fetch_optional(&pool)
                    .await
                    .map_err(backend("connect"))?;
            if let (None, Err(e)) = (&version, created) {
                return Err(VectorError::backend(
                    "connect",
                    format!(
                        "pgvector is not installed in this database and could not be \
                         installed ({e}); install it and run CREATE EXTENSION vector as a \
                         superuser"
                    ),
                ));
            }
        }
        let version = version.unwrap_or_default();
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        let iterative_scans = (major, minor) >= (0, 8);
        if !iterative_scans {
            tracing::warn!(
                version,
                "pgvector before 0.8: filtered ANN queries may return fewer than top_k rows"
            );
        }
        sqlx::query(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{}\"",
            options.schema
        ))
        .execute(&pool)
        .await
        .map_err(backend("connect"))?;
        Ok(PgVectorStore {
            pool,
            schema: options.schema,
            iterative_scans,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema-qualified, quoted table of an index (the name checked first).
    fn table(&self, name: &str) -> Result<String, VectorError> {
        check_index_name(name)?;
        Ok(format!("\"{}\".\"{name}\"", self.schema))
    }

    async fn info(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        name: &str,
        operation: &'static str,
    ) -> Result<TableInfo, VectorError> {
        let row = sqlx::query(TABLE_INFO)
            .bind(&self.schema)
            .bind(name)
            .bind(format!("{name}_vector_idx"))
            .fetch_optional(&mut **tx)
            .await
            .map_err(backend(operation))?
            .ok_or_else(|| VectorError::IndexNotFound {
                index: name.to_owned(),
            })?;
        let dimension: i32 = row.try_get(0).map_err(backend(operation))?;
        let method: Option<String> = row.try_get(1).map_err(backend(operation))?;
        let opclass: Option<String> = row.try_get(2).map_err(backend(operation))?;
        let def: Option<String> = row.try_get(3).map_err(backend(operation))?;
        let comment: Option<String> = row.try_get(4).map_err(backend(operation))?;
        let from_opclass = opclass.as_deref().map(|opclass| {
            if opclass.contains("l2") {
                Metric::Euclidean
            } else if opclass.contains("ip") {
                Metric::DotProduct
            } else {
                Metric::Cosine
            }
        });
        let from_comment = comment
            .as_deref()
            .and_then(|c| c.strip_prefix("kestrel:metric="))
            .and_then(Metric::parse);
        let kind = match method.as_deref() {
            Some("hnsw") => IndexKind::Hnsw,
            Some("ivfflat") => IndexKind::IvfFlat,
            _ => IndexKind::Flat,
        };
        let def = def.unwrap_or_default();
        Ok(TableInfo {
            dimension: usize::try_from(dimension).unwrap_or(0),
            metric: from_opclass.or(from_comment).unwrap_or(Metric::Cosine),
            kind,
            hnsw_m: index_parameter(&def, "m"),
            ivf_lists: index_parameter(&def, "lists"),
        })
    }

    async fn begin(
        &self,
        operation: &'static str,
    ) -> Result<Transaction<'static, Postgres>, VectorError> {
        self.pool.begin().await.map_err(backend(operation))
    }

    /// Serialises creating and dropping an index across connections and instances.
    async fn lock(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        name: &str,
        operation: &'static str,
    ) -> Result<(), VectorError> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("kestrel_rag_index:{}.{name}", self.schema))
            .execute(&mut **tx)
            .await
            .map_err(backend(operation))?;
        Ok(())
    }
}

/// A query's statement and what it binds, ready to run (or explain) in a transaction whose
/// search settings are already made.
struct QueryPlan {
    sql: String,
    vector: Option<Vector>,
    min_score: f64,
    params: Vec<Param>,
}

impl QueryPlan {
    fn bind<'q>(
        &self,
        sql: &'q str,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        let query = match &self.vector {
            Some(vector) => sqlx::query(sql).bind(vector.clone()).bind(self.min_score),
            None => sqlx::query(sql),
        };
        bind_params(query, self.params.clone())
    }
}

impl PgVectorStore {
    /// PostgreSQL's plan for a query, as `EXPLAIN` prints it, with the search settings the
    /// query would run with: to check that an ANN index is used.
    pub async fn explain(&self, query: &VectorQuery) -> Result<String, VectorError> {
        const OP: &str = "explain";
        let mut tx = self.begin(OP).await?;
        let plan = self.plan(&mut tx, query, OP).await?;
        let explain = format!("EXPLAIN {}", plan.sql);
        let lines: Vec<String> = plan
            .bind(&explain)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend(OP))?
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<Result<_, _>>()
            .map_err(backend(OP))?;
        tx.rollback().await.map_err(backend(OP))?;
        Ok(lines.join("\n"))
    }

    /// Checks a query, makes its search settings (local to `tx`) and builds its statement.
    async fn plan(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        query: &VectorQuery,
        operation: &'static str,
    ) -> Result<QueryPlan, VectorError> {
        let table = self.table(&query.index_name)?;
        let info = self.info(tx, &query.index_name, operation).await?;
        query.check(info.dimension, info.metric)?;
        // A literal, not a parameter: with `LIMIT $n` the planner guesses a tenth of the table
        // and prefers a sequential scan to the ANN index. `check` bounded it.
        let top_k = query.top_k;
        let filter = query.filter.as_ref().filter(|f| !f.is_empty());
        let embedding = if query.include_vector {
            "embedding AS vec"
        } else {
            "NULL::vector AS vec"
        };
        let Some(vector) = &query.query_vector else {
            let compiled = filter.map(|f| filter::compile(f.root(), 1));
            let sql = format!(
                "SELECT vector_id, metadata, {embedding}, 0::float8 AS score FROM {table} \
                 WHERE namespace = 'default' AND {} ORDER BY vector_id COLLATE \"C\" LIMIT {top_k}",
                compiled.as_ref().map_or("TRUE", |c| c.sql.as_str())
            );
            return Ok(QueryPlan {
                sql,
                vector: None,
                min_score: 0.0,
                params: compiled.map(|c| c.params).unwrap_or_default(),
            });
        };
        let mut settings: Vec<(&str, String)> = Vec::new();
        match info.kind {
            IndexKind::Hnsw => {
                // Mastra's rule: ef_search = min(1000, max(top_k, m · top_k)).
                let m = info.hnsw_m.unwrap_or(16) as usize;
                let ef = query.ef.map_or_else(
                    || (m * top_k).max(top_k).min(1000),
                    |ef| ef.clamp(1, 1000) as usize,
                );
                settings.push(("hnsw.ef_search", ef.to_string()));
                if self.iterative_scans {
                    settings.push(("hnsw.iterative_scan", "strict_order".to_owned()));
                }
            }
            IndexKind::IvfFlat => {
                let lists = info.ivf_lists.unwrap_or(100);
                let probes = query
                    .probes
                    .unwrap_or_else(|| (f64::from(lists).sqrt().ceil() as u32).max(1));
                settings.push(("ivfflat.probes", probes.clamp(1, lists).to_string()));
                if self.iterative_scans && filter.is_some() {
                    settings.push(("ivfflat.iterative_scan", "relaxed_order".to_owned()));
                }
            }
            IndexKind::Flat => {}
        }
        for (key, value) in settings {
            sqlx::query("SELECT set_config($1, $2, true)")
                .bind(key)
                .bind(value)
                .execute(&mut **tx)
                .await
                .map_err(backend(operation))?;
        }
        let distance = format!("embedding {} $1", distance_operator(info.metric));
        let score = score_expression(info.metric, &distance);
        // Ties are broken by id where the scan is exact; an ANN index orders by distance
        // alone (another sort key would keep PostgreSQL from using it).
        let tie_break = if info.kind == IndexKind::Flat {
            ", vector_id COLLATE \"C\""
        } else {
            ""
        };
        let compiled = filter.map(|f| filter::compile(f.root(), 3));
        let sql = format!(
            "SELECT vector_id, metadata, vec, score FROM (\
             SELECT vector_id, metadata, {embedding}, {score}::float8 AS score \
             FROM {table} WHERE namespace = 'default' AND {} \
             ORDER BY {distance}{tie_break} LIMIT {top_k}) AS nearest \
             WHERE score >= $2 ORDER BY score DESC, vector_id COLLATE \"C\"",
            compiled.as_ref().map_or("TRUE", |c| c.sql.as_str())
        );
        Ok(QueryPlan {
            sql,
            vector: Some(Vector::from(vector.clone())),
            min_score: query.min_score.map_or(f64::NEG_INFINITY, f64::from),
            params: compiled.map(|c| c.params).unwrap_or_default(),
        })
    }
}

/// Binds compiled filter parameters in order.
fn bind_params<'q>(
    mut query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    params: Vec<Param>,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    for param in params {
        query = match param {
            Param::Text(text) => query.bind(text),
            Param::TextArray(list) => query.bind(list),
            Param::Float(n) => query.bind(n),
            Param::Json(value) => query.bind(sqlx::types::Json(value)),
        };
    }
    query
}

/// A selector as a condition, parameters numbered from `first_param`.
fn selector_sql(selector: &Selector, first_param: usize) -> (String, Vec<Param>) {
    match selector {
        Selector::Ids(ids) => (
            format!("vector_id = ANY(${first_param}::text[])"),
            vec![Param::TextArray(ids.clone())],
        ),
        Selector::Filter(filter) => {
            let compiled = filter::compile(filter.root(), first_param);
            (compiled.sql, compiled.params)
        }
    }
}

fn distance_operator(metric: Metric) -> &'static str {
    match metric {
        Metric::Cosine => "<=>",
        Metric::Euclidean => "<->",
        Metric::DotProduct => "<#>",
    }
}

fn score_expression(metric: Metric, distance: &str) -> String {
    match metric {
        Metric::Cosine => format!("(1 - ({distance}))"),
        Metric::Euclidean => format!("(1 / (1 + ({distance})))"),
        Metric::DotProduct => format!("(-({distance}))"),
    }
}

fn operator_class(metric: Metric) -> &'static str {
    match metric {
        Metric::Cosine => "vector_cosine_ops",
        Metric::Euclidean => "vector_l2_ops",
        Metric::DotProduct => "vector_ip_ops",
    }
}

#[async_trait]
impl VectorStore for PgVectorStore {
    async fn create_index(&self, request: CreateIndex) -> Result<(), VectorError> {
        const OP: &str = "create_index";
        request.check()?;
        let name = request.index_name.as_str();
        let table = self.table(name)?;
        let config = request.index_config.unwrap_or_default();
        let kind = config.kind.unwrap_or(IndexKind::Hnsw);
        if kind != IndexKind::Flat && request.dimension > MAX_INDEXED_DIMENSION {
            return Err(VectorError::invalid(
                "indexConfig",
                format!(
                    "pgvector's HNSW and IVFFlat indexes take at most {MAX_INDEXED_DIMENSION} \
                     dimensions; use {{\"type\": \"flat\"}} for {}",
                    request.dimension
                ),
            ));
        }
        let mut tx = self.begin(OP).await?;
        self.lock(&mut tx, name, OP).await?;
        match self.info(&mut tx, name, OP).await {
            Ok(info) if info.dimension == request.dimension && info.metric == request.metric => {
                return Ok(());
            }
            Ok(info) => {
                return Err(VectorError::IndexExists {
                    index: name.to_owned(),
                    existing_dimension: info.dimension,
                    existing_metric: info.metric,
                    dimension: request.dimension,
                    metric: request.metric,
                });
            }
            Err(VectorError::IndexNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let unique_name = {
            let mastra = format!("{name}_namespace_vector_id_idx");
            if mastra.len() <= 63 {
                mastra
            } else {
                format!("{name}_ns_vid_idx")
            }
        };
        let mut statements = vec![
            format!(
                "CREATE TABLE {table} (id SERIAL PRIMARY KEY, vector_id TEXT NOT NULL, \
                 embedding vector({}), metadata JSONB DEFAULT '{{}}'::jsonb, \
                 namespace VARCHAR(255) NOT NULL DEFAULT 'default')",
                request.dimension
            ),
            format!("CREATE UNIQUE INDEX \"{unique_name}\" ON {table} (namespace, vector_id)"),
            format!(
                "COMMENT ON TABLE {table} IS '{}'",
                metric_comment(request.metric)
            ),
        ];
        let opclass = operator_class(request.metric);
        match kind {
            IndexKind::Flat => {}
            IndexKind::Hnsw => {
                let hnsw = config.hnsw.unwrap_or_default();
                statements.push(format!(
                    "CREATE INDEX \"{name}_vector_idx\" ON {table} USING hnsw (embedding {opclass}) \
                     WITH (m = {}, ef_construction = {})",
                    hnsw.m, hnsw.ef_construction
                ));
            }
            IndexKind::IvfFlat => {
                // Mastra's rule on an empty table: max(100, min(4000, 2·√0)) = 100.
                let lists = config.ivf.map_or(100, |ivf| ivf.lists);
                statements.push(format!(
                    "CREATE INDEX \"{name}_vector_idx\" ON {table} USING ivfflat (embedding {opclass}) \
                     WITH (lists = {lists})"
                ));
            }
        }
        for statement in statements {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(backend(OP))?;
        }
        tx.commit().await.map_err(backend(OP))
    }

    async fn list_indexes(&self) -> Result<Vec<String>, VectorError> {
        sqlx::query_scalar(LIST_INDEXES)
            .bind(&self.schema)
            .fetch_all(&self.pool)
            .await
            .map_err(backend("list_indexes"))
    }

    async fn describe_index(&self, index_name: &str) -> Result<IndexStats, VectorError> {
        const OP: &str = "describe_index";
        let table = self.table(index_name)?;
        let mut tx = self.begin(OP).await?;
        let info = self.info(&mut tx, index_name, OP).await?;
        let count: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut *tx)
            .await
            .map_err(backend(OP))?;
        Ok(IndexStats {
            dimension: info.dimension,
            count: u64::try_from(count).unwrap_or(0),
            metric: info.metric,
        })
    }

    async fn delete_index(&self, index_name: &str) -> Result<(), VectorError> {
        const OP: &str = "delete_index";
        let table = self.table(index_name)?;
        let mut tx = self.begin(OP).await?;
        self.lock(&mut tx, index_name, OP).await?;
        self.info(&mut tx, index_name, OP).await?;
        sqlx::query(&format!("DROP TABLE {table}"))
            .execute(&mut *tx)
            .await
            .map_err(backend(OP))?;
        tx.commit().await.map_err(backend(OP))
    }

    async fn upsert(&self, request: Upsert) -> Result<Vec<String>, VectorError> {
        const OP: &str = "upsert";
        let table = self.table(&request.index_name)?;
        let mut tx = self.begin(OP).await?;
        let info = self.info(&mut tx, &request.index_name, OP).await?;
        let delete_filter = request.delete_filter.clone();
        let records = request.into_records(info.dimension, info.metric)?;
        if let Some(filter) = delete_filter.filter(|f| !f.is_empty()) {
            let compiled = filter::compile(filter.root(), 1);
            let sql = format!(
                "DELETE FROM {table} WHERE namespace = 'default' AND {}",
                compiled.sql
            );
            bind_params(sqlx::query(&sql), compiled.params)
                .execute(&mut *tx)
                .await
                .map_err(backend(OP))?;
        }
        let ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
        // One row per id (the last wins): ON CONFLICT cannot touch a row twice.
        let mut last = std::collections::HashMap::with_capacity(records.len());
        for (position, record) in records.iter().enumerate() {
            last.insert(record.id.as_str(), position);
        }
        let mut unique: Vec<usize> = last.into_values().collect();
        unique.sort_unstable();
        let sql = format!(
            "INSERT INTO {table} (vector_id, embedding, metadata) \
             SELECT id, embedding, metadata::jsonb FROM UNNEST($1::text[], $2::vector[], $3::text[]) \
             AS u(id, embedding, metadata) \
             ON CONFLICT (namespace, vector_id) DO UPDATE \
             SET embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata"
        );
        for batch in unique.chunks(UPSERT_BATCH) {
            let mut batch_ids = Vec::with_capacity(batch.len());
            let mut vectors = Vec::with_capacity(batch.len());
            let mut metadata = Vec::with_capacity(batch.len());
            for &position in batch {
                let record = &records[position];
                batch_ids.push(record.id.clone());
                vectors.push(Vector::from(record.vector.clone()));
                metadata.push(
                    serde_json::to_string(&record.metadata)
                        .map_err(|e| VectorError::backend(OP, e))?,
                );
            }
            sqlx::query(&sql)
                .bind(batch_ids)
                .bind(vectors)
                .bind(metadata)
                .execute(&mut *tx)
                .await
                .map_err(backend(OP))?;
        }
        tx.commit().await.map_err(backend(OP))?;
        Ok(ids)
    }

    async fn query(&self, query: VectorQuery) -> Result<Vec<QueryResult>, VectorError> {
        const OP: &str = "query";
        let mut tx = self.begin(OP).await?;
        let plan = self.plan(&mut tx, &query, OP).await?;
        let rows = plan
            .bind(&plan.sql)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend(OP))?;
        tx.commit().await.map_err(backend(OP))?;
        rows.into_iter()
            .map(|row| {
                let metadata: Option<sqlx::types::Json<super::Metadata>> =
                    row.try_get(1).map_err(backend(OP))?;
                let vector: Option<Vector> = row.try_get(2).map_err(backend(OP))?;
                let score: f64 = row.try_get(3).map_err(backend(OP))?;
                Ok(QueryResult {
                    id: row.try_get(0).map_err(backend(OP))?,
                    score: score as f32,
                    metadata: metadata.map(|m| m.0).unwrap_or_default(),
                    vector: vector.map(|v| v.to_vec()),
                    document: None,
                })
            })
            .collect()
    }

    async fn update(
        &self,
        index_name: &str,
        selector: Selector,
        update: VectorUpdate,
    ) -> Result<u64, VectorError> {
        const OP: &str = "update";
        selector.check()?;
        let table = self.table(index_name)?;
        let mut tx = self.begin(OP).await?;
        let info = self.info(&mut tx, index_name, OP).await?;
        update.check(index_name, info.dimension, info.metric)?;
        let metadata = update
            .metadata
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| VectorError::backend(OP, e))?;
        let (condition, params) = selector_sql(&selector, 3);
        let sql = format!(
            "UPDATE {table} SET embedding = COALESCE($1, embedding), \
             metadata = COALESCE($2::jsonb, metadata) WHERE namespace = 'default' AND {condition}"
        );
        let done = bind_params(
            sqlx::query(&sql)
                .bind(update.vector.map(Vector::from))
                .bind(metadata),
            params,
        )
        .execute(&mut *tx)
        .await
        .map_err(backend(OP))?;
        tx.commit().await.map_err(backend(OP))?;
        Ok(done.rows_affected())
    }

    async fn delete(&self, index_name: &str, selector: Selector) -> Result<u64, VectorError> {
        const OP: &str = "delete";
        selector.check()?;
        let table = self.table(index_name)?;
        let mut tx = self.begin(OP).await?;
        self.info(&mut tx, index_name, OP).await?;
        let (condition, params) = selector_sql(&selector, 1);
        let sql = format!("DELETE FROM {table} WHERE namespace = 'default' AND {condition}");
        let done = bind_params(sqlx::query(&sql), params)
            .execute(&mut *tx)
            .await
            .map_err(backend(OP))?;
        tx.commit().await.map_err(backend(OP))?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::index_parameter;

    #[test]
    fn index_parameters_are_read_from_the_definition() {
        let def = "CREATE INDEX docs_vector_idx ON public.docs USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='64')";
        assert_eq!(index_parameter(def, "m"), Some(16));
        assert_eq!(index_parameter(def, "ef_construction"), Some(64));
        assert_eq!(index_parameter(def, "lists"), None);
        assert_eq!(index_parameter("CREATE INDEX x ON t (a)", "m"), None);
    }
}
