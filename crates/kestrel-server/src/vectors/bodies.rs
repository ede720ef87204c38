//! What the vector routes take and answer: the bodies, as their schemas say (Mastra's fields,
//! then Kestrel's), each bounded where a caller could otherwise make the server or the store
//! hold or compute without end, and the answers in Mastra's shapes.

use axum::Json;
use kestrel_rag::Metric;
use kestrel_rag::vector::{
    DEFAULT_TOP_K, HnswConfig, IndexConfig, IndexKind, IvfConfig, MAX_DIMENSION,
    MAX_INDEX_NAME_LEN, MAX_TOP_K, QueryResult,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most vectors one upsert writes.
pub(super) const MAX_UPSERT_VECTORS: usize = 10_000;
/// The largest magnitude of a vector's value: with at most [`MAX_DIMENSION`] values, every
/// score (dot products, norms, distances in `f32`) stays finite.
pub(super) const MAX_VALUE: f64 = 1e15;
/// The longest vector id, in characters: at most the port's 512 bytes in any script.
pub(super) const MAX_VECTOR_ID_LEN: usize = 128;
/// The index names the port takes (it names a table on PostgreSQL).
const INDEX_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";

/// `POST /vector/{vector_name}/create-index`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CreateIndexBody {
    /// The index's name: a letter or `_`, then letters, digits or `_`.
    #[schemars(length(min = 1, max = MAX_INDEX_NAME_LEN), pattern(INDEX_NAME_PATTERN))]
    pub(super) index_name: String,
    /// The length of every vector.
    #[serde(deserialize_with = "count")]
    #[schemars(range(min = 1, max = MAX_DIMENSION))]
    pub(super) dimension: u32,
    /// How similarity is measured (default `cosine`).
    #[serde(default)]
    #[schemars(schema_with = "metric_schema")]
    pub(super) metric: Metric,
    /// The approximate-nearest-neighbour index, where the store builds one (pgvector:
    /// `{"type": "hnsw", "hnsw": {"m": 16, "efConstruction": 64}}`, `{"type": "ivfflat",
    /// "ivf": {"lists": 100}}`, `{"type": "flat"}`); the other stores search exactly.
    #[serde(default)]
    pub(super) index_config: Option<IndexConfigBody>,
}

/// `indexConfig`: what `kestrel_rag`'s `IndexConfig` reads, counts also written `16.0`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct IndexConfigBody {
    /// The kind of index (default: the store's, HNSW on pgvector).
    #[serde(rename = "type", default)]
    pub(super) kind: Option<IndexKindName>,
    /// HNSW's parameters.
    #[serde(default)]
    pub(super) hnsw: Option<HnswBody>,
    /// IVFFlat's parameters.
    #[serde(default)]
    pub(super) ivf: Option<IvfBody>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum IndexKindName {
    /// No index: exact scans.
    Flat,
    /// Hierarchical navigable small worlds.
    Hnsw,
    /// Inverted lists of flat vectors.
    #[serde(rename = "ivfflat")]
    IvfFlat,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct HnswBody {
    /// Connections per node.
    #[serde(deserialize_with = "count")]
    #[schemars(range(min = 2, max = 100))]
    pub(super) m: u32,
    /// Candidates kept while building.
    #[serde(deserialize_with = "count")]
    #[schemars(range(min = 4, max = 1000))]
    pub(super) ef_construction: u32,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct IvfBody {
    /// The number of inverted lists.
    #[serde(deserialize_with = "count")]
    #[schemars(range(min = 1, max = 32_768))]
    pub(super) lists: u32,
}

impl From<IndexConfigBody> for IndexConfig {
    fn from(body: IndexConfigBody) -> Self {
        IndexConfig {
            kind: body.kind.map(|kind| match kind {
                IndexKindName::Flat => IndexKind::Flat,
                IndexKindName::Hnsw => IndexKind::Hnsw,
                IndexKindName::IvfFlat => IndexKind::IvfFlat,
            }),
            hnsw: body.hnsw.map(|hnsw| HnswConfig {
                m: hnsw.m,
                ef_construction: hnsw.ef_construction,
            }),
            ivf: body.ivf.map(|ivf| IvfConfig { lists: ivf.lists }),
        }
    }
}

/// A count, written as JSON Schema's `integer` allows it (`3`, or `3.0`).
pub(super) fn count<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    crate::wire::opt_count(deserializer)?
        .ok_or_else(|| serde::de::Error::custom("expected a whole number, not null"))
}

/// `POST /vector/{vector_name}/upsert`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct UpsertBody {
    /// The index.
    #[schemars(length(min = 1, max = MAX_INDEX_NAME_LEN), pattern(INDEX_NAME_PATTERN))]
    pub(super) index_name: String,
    /// The vectors, each of the index's dimension.
    #[schemars(schema_with = "vectors_schema")]
    pub(super) vectors: Vec<Vec<f32>>,
    /// One metadata object per vector, or none (each then gets `{}`).
    #[serde(default)]
    #[schemars(length(max = MAX_UPSERT_VECTORS))]
    pub(super) metadata: Vec<Map<String, Value>>,
    /// One id per vector, or none (each then gets a new UUID); an existing id is replaced.
    #[serde(default)]
    #[schemars(schema_with = "ids_schema")]
    pub(super) ids: Vec<String>,
    /// Vectors whose metadata matches this filter are deleted first, in the same write (to
    /// replace a document's old chunks).
    #[serde(default)]
    pub(super) delete_filter: Option<Map<String, Value>>,
}

/// `POST /vector/{vector_name}/query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct QueryBody {
    /// The index.
    #[schemars(length(min = 1, max = MAX_INDEX_NAME_LEN), pattern(INDEX_NAME_PATTERN))]
    pub(super) index_name: String,
    /// The query embedding, of the index's dimension.
    #[schemars(schema_with = "vector_schema")]
    pub(super) query_vector: Vec<f32>,
    /// At most this many results.
    #[serde(default = "default_top_k", deserialize_with = "count")]
    #[schemars(range(min = 1, max = MAX_TOP_K))]
    pub(super) top_k: u32,
    /// Only vectors whose metadata matches (Mastra's MongoDB-style filter:
    /// `{"category": "guide", "year": {"$gte": 2020}}`).
    #[serde(default)]
    pub(super) filter: Option<Map<String, Value>>,
    /// Answer each result's vector too.
    #[serde(default)]
    pub(super) include_vector: bool,
    /// Only results scoring at least this.
    #[serde(default)]
    #[schemars(range(min = -f32::MAX, max = f32::MAX))]
    pub(super) min_score: Option<f32>,
    /// HNSW (pgvector): candidates examined per query, 1 to 1000 (larger values are 1000).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    pub(super) ef: Option<u32>,
    /// IVFFlat (pgvector): lists probed per query (at most the index's lists).
    #[serde(default, deserialize_with = "crate::wire::opt_count")]
    pub(super) probes: Option<u32>,
}

pub(super) fn default_top_k() -> u32 {
    DEFAULT_TOP_K as u32
}

pub(super) fn metric_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"enum": ["cosine", "euclidean", "dotproduct"]})
}

pub(super) fn vector_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "number", "minimum": -MAX_VALUE, "maximum": MAX_VALUE},
        "minItems": 1,
        "maxItems": MAX_DIMENSION,
    })
}

pub(super) fn vectors_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": vector_schema(generator),
        "maxItems": MAX_UPSERT_VECTORS,
    })
}

pub(super) fn ids_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_VECTOR_ID_LEN,
            "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]*$",
        },
        "maxItems": MAX_UPSERT_VECTORS,
    })
}

// Answers.

/// `{success: true}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Success {
    #[schemars(extend("const" = true))]
    pub(super) success: bool,
}

pub(super) const SUCCESS: Json<Success> = Json(Success { success: true });

/// The ids of the upserted vectors, in request order.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Upserted {
    pub(super) ids: Vec<String>,
}

/// A query's result (Mastra's `QueryResult`).
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Hit {
    /// The vector's id.
    pub(super) id: String,
    /// Its score: cosine similarity, `1 / (1 + distance)` for euclidean, the dot product for
    /// dotproduct.
    pub(super) score: f32,
    /// Its metadata.
    pub(super) metadata: Map<String, Value>,
    /// The vector, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) vector: Option<Vec<f32>>,
    /// The chunk's text, where the store keeps it apart from the metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) document: Option<String>,
}

impl From<QueryResult> for Hit {
    fn from(result: QueryResult) -> Self {
        let QueryResult {
            id,
            score,
            metadata,
            vector,
            document,
        } = result;
        Self {
            id,
            score,
            metadata,
            vector,
            document,
        }
    }
}

/// An index's shape and size (Mastra's `describeIndex`).
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct IndexDescription {
    /// The length of every vector.
    pub(super) dimension: usize,
    /// How many vectors it holds.
    pub(super) count: u64,
    /// How similarity is measured.
    #[schemars(schema_with = "metric_schema")]
    pub(super) metric: Metric,
}

/// The vector stores.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct VectorList {
    pub(super) vectors: Vec<VectorInfo>,
}

/// One vector store.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct VectorInfo {
    /// Its name (what `/vector/{vector_name}` takes).
    pub(super) id: String,
    /// Its name.
    pub(super) name: String,
    /// Its kind: `memory`, `sqlite`, `pgvector`...
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) description: Option<String>,
}

/// The embedding models.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct EmbedderList {
    pub(super) embedders: Vec<EmbedderInfo>,
}

/// One embedding model.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EmbedderInfo {
    /// `provider/model`.
    pub(super) id: String,
    pub(super) provider: String,
    /// The model's id at its provider.
    pub(super) name: String,
    pub(super) description: String,
    /// The length of its vectors (0 while not known: an OpenAI-compatible model of unknown
    /// size learns it from its first answer).
    pub(super) dimensions: usize,
    /// The longest text it takes, in tokens.
    pub(super) max_input_tokens: usize,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kestrel_rag::CreateIndex;

    use super::*;

    /// `indexConfig` takes what `kestrel_rag` reads (counts also as `16.0`), and what it takes
    /// passes `CreateIndex::check`: its schema states the same bounds.
    #[test]
    fn index_configs_are_what_the_port_takes() {
        let accepted = [
            (serde_json::json!({}), IndexConfig::default()),
            (serde_json::json!({"type": null}), IndexConfig::default()),
            (serde_json::json!({"type": "flat"}), IndexConfig::flat()),
            (
                serde_json::json!({"type": "hnsw", "hnsw": {"m": 2, "efConstruction": 1000}}),
                IndexConfig::hnsw(2, 1000),
            ),
            (
                serde_json::json!({"type": "ivfflat", "ivf": {"lists": 32768}, "hnsw": null}),
                IndexConfig::ivfflat(Some(32_768)),
            ),
        ];
        for (value, expected) in accepted {
            let body: IndexConfigBody = serde_json::from_value(value.clone()).unwrap();
            let config = IndexConfig::from(body);
            let read: IndexConfig = serde_json::from_value(value.clone()).unwrap();
            assert_eq!((config, read), (expected, expected), "{value}");
            assert!(
                CreateIndex::new("docs", 3)
                    .index_config(config)
                    .check()
                    .is_ok(),
                "{value}"
            );
        }
        let whole: IndexConfigBody =
            serde_json::from_value(serde_json::json!({"ivf": {"lists": 100.0}})).unwrap();
        assert_eq!(IndexConfig::from(whole).ivf, Some(IvfConfig { lists: 100 }));
        for value in [
            serde_json::json!({"kind": "hnsw"}),
            serde_json::json!({"type": "diskann"}),
            serde_json::json!({"hnsw": {"m": 16}}),
            serde_json::json!({"hnsw": {"m": 16.5, "efConstruction": 64}}),
            serde_json::json!({"ivf": {"lists": 10, "probes": 2}}),
        ] {
            assert!(
                serde_json::from_value::<IndexConfigBody>(value.clone()).is_err(),
                "{value}"
            );
        }
    }
}
