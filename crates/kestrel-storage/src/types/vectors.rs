//! Vectors in named indexes, and queries over them.

use serde::{Deserialize, Serialize};

use super::Metadata;

/// A vector to store in an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorRecord {
    /// Its id in the index.
    pub id: String,
    /// The embedding; its length must be the index's dimension.
    pub vector: Vec<f32>,
    /// Metadata; the string values of `thread_id`, `resource_id` and `message_id` are indexed
    /// for [`VectorFilter`] and for cascades.
    pub metadata: Metadata,
}

/// Restricts a vector query; `None` fields do not filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VectorFilter {
    /// Only vectors whose metadata `thread_id` is this.
    pub thread_id: Option<String>,
    /// Only vectors whose metadata `resource_id` is this.
    pub resource_id: Option<String>,
}

/// A nearest-neighbour query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VectorQuery {
    /// The query embedding.
    pub vector: Vec<f32>,
    /// At most this many matches.
    pub top_k: u32,
    /// The filter.
    pub filter: VectorFilter,
}

/// A query result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorMatch {
    /// The vector's id.
    pub id: String,
    /// Cosine similarity in [-1, 1] (0 when either vector is zero).
    pub score: f32,
    /// The vector's metadata.
    pub metadata: Metadata,
}
