//! The vector indexes of [`super::InMemoryStorage`]: records by id in named indexes of one
//! dimension each, queried by cosine similarity.

use crate::storage::VectorStore;
use async_trait::async_trait;

use std::collections::BTreeMap;

use super::{InMemoryStorage, State, VectorIndex};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{VectorMatch, VectorQuery, VectorRecord};

/// Creates index `name` (see [`crate::VectorStore::create_index`]).
pub(super) fn create_index(state: &mut State, name: &str, dimension: usize) -> Result<()> {
    codec::check_id("index", name)?;
    codec::check_dimension(dimension)?;
    match state.indexes.get(name) {
        Some(index) if index.dimension == dimension => Ok(()),
        Some(index) => Err(StorageError::IndexExists {
            index: name.to_owned(),
            existing: index.dimension,
            requested: dimension,
        }),
        None => {
            state.indexes.insert(
                name.to_owned(),
                VectorIndex {
                    dimension,
                    vectors: BTreeMap::new(),
                },
            );
            Ok(())
        }
    }
}

/// Inserts or replaces records by id.
pub(super) fn upsert(state: &mut State, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
    let dimension = state.index(index)?.dimension;
    for record in &vectors {
        codec::check_vector(index, dimension, &record.vector)?;
    }
    let target = state
        .indexes
        .get_mut(index)
        .ok_or_else(|| StorageError::IndexNotFound {
            index: index.to_owned(),
        })?;
    for record in vectors {
        let record = VectorRecord {
            metadata: codec::normalize_map(record.metadata),
            ..record
        };
        target.vectors.insert(record.id.clone(), record);
    }
    Ok(())
}

/// The `top_k` records most similar to the query's vector, within its filter.
pub(super) fn query(state: &State, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
    let target = state.index(index)?;
    codec::check_vector(index, target.dimension, &query.vector)?;
    let wanted = |record: &VectorRecord, key: &str, want: &Option<String>| {
        want.is_none() || codec::meta_str(&record.metadata, key).as_ref() == want.as_ref()
    };
    let mut top = codec::TopK::new(query.top_k);
    for record in target.vectors.values() {
        if wanted(record, "thread_id", &query.filter.thread_id)
            && wanted(record, "resource_id", &query.filter.resource_id)
        {
            top.push(VectorMatch {
                id: record.id.clone(),
                score: codec::cosine(&query.vector, &record.vector),
                metadata: record.metadata.clone(),
            });
        }
    }
    Ok(top.into_vec())
}

/// Deletes records by id; returns how many there were.
pub(super) fn delete(state: &mut State, index: &str, ids: &[String]) -> Result<u64> {
    state.index(index)?;
    let mut deleted = 0;
    if let Some(target) = state.indexes.get_mut(index) {
        for id in ids {
            deleted += u64::from(target.vectors.remove(id).is_some());
        }
    }
    Ok(deleted)
}

#[async_trait]
impl VectorStore for InMemoryStorage {
    async fn create_index(&self, name: &str, dimension: usize) -> Result<()> {
        create_index(&mut self.state(), name, dimension)
    }

    async fn index_dimension(&self, name: &str) -> Result<Option<usize>> {
        Ok(self.state().indexes.get(name).map(|i| i.dimension))
    }

    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()> {
        upsert(&mut self.state(), index, vectors)
    }

    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>> {
        self::query(&self.state(), index, query)
    }

    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64> {
        delete(&mut self.state(), index, ids)
    }
}
