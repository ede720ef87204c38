//! The vector indexes of [`PostgresStorage`]: fixed-dimension indexes, upserts, exact cosine
//! queries (scored in Rust) and deletes.

use crate::storage::VectorStore;
use async_trait::async_trait;

use futures::TryStreamExt;
use sqlx::postgres::PgConnection;

use super::{PostgresStorage, err, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{VectorMatch, VectorQuery, VectorRecord};

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
impl VectorStore for PostgresStorage {
    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        self.bounded("create_index", async move {
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
        })
        .await
    }

    async fn index_dimension(&self, name: &str) -> Result<Option<usize>> {
        self.bounded("index_dimension", async move {
            const OP: &str = "index_dimension";
            let mut conn = self.conn(OP).await?;
            match index_dimension(&mut conn, name, OP).await {
                Ok(dimension) => Ok(Some(dimension)),
                Err(StorageError::IndexNotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        self.bounded("upsert_vectors", async move {
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
        })
        .await
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        self.bounded("query_vectors", async move {
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
        })
        .await
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        self.bounded("delete_vectors", async move {
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
        })
        .await
    }
}
