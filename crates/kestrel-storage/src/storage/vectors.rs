//! Vectors in named, fixed-dimension indexes, queried by exact cosine scan.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{VectorMatch, VectorQuery, VectorRecord};

/// Vectors in named, fixed-dimension indexes, queried by exact cosine scan.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait VectorStore: Send + Sync {
    /// Creates a vector index of dimension `dimension` (at least 1). Idempotent for the same
    /// dimension; another dimension is [`StorageError::IndexExists`](crate::StorageError::IndexExists).
    async fn create_index(&self, name: &str, dimension: usize) -> Result<()>;

    /// The dimension of an index, if it exists.
    async fn index_dimension(&self, name: &str) -> Result<Option<usize>>;

    /// Inserts or replaces vectors by id. A vector of the wrong length is
    /// [`StorageError::DimensionMismatch`](crate::StorageError::DimensionMismatch) and nothing is
    /// written.
    async fn upsert_vectors(&self, index: &str, vectors: Vec<VectorRecord>) -> Result<()>;

    /// The `top_k` vectors most similar to the query (cosine similarity, highest first; ties by
    /// id ascending). An exact scan of the filtered vectors: O(n·dimension), the same results on
    /// every backend.
    async fn query_vectors(&self, index: &str, query: VectorQuery) -> Result<Vec<VectorMatch>>;

    /// Deletes vectors by id; returns how many were deleted.
    async fn delete_vectors(&self, index: &str, ids: &[String]) -> Result<u64>;
}
