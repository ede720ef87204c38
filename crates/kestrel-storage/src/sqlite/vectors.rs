//! The vector indexes of [`SqliteStorage`]: fixed-dimension indexes, upserts, exact cosine
//! queries and deletes.

use crate::storage::VectorStore;
use async_trait::async_trait;

use rusqlite::{Connection, params, params_from_iter};

use super::conn::Cost;
use super::{SHORT_BATCH, SqliteStorage, begin, err, json_ids, optional_row, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{VectorMatch, VectorQuery, VectorRecord};

fn index_dimension(conn: &Connection, index: &str, operation: &'static str) -> Result<usize> {
    let dimension: Option<i64> =
        optional_row(conn, sql::INDEX_DIMENSION, [index], |r| r.get(0), operation)?;
    let dimension = dimension.ok_or_else(|| StorageError::IndexNotFound {
        index: index.to_owned(),
    })?;
    usize::try_from(dimension).map_err(|e| StorageError::corrupt("index dimension", e))
}

#[async_trait]
impl VectorStore for SqliteStorage {
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
