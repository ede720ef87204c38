//! Vector stores: named indexes of embeddings with metadata, queried by similarity.
//!
//! [`VectorStore`] is Mastra's vector store contract (`MastraVector`) in Rust: create, list,
//! describe and delete indexes; upsert vectors with ids and metadata; query the `top_k`
//! nearest with a metadata [`Filter`] (Mastra's MongoDB-style language) and a minimum score;
//! update and delete by id or by filter. The request types deserialize from the same
//! camelCase JSON as Mastra's (`{"indexName": "docs", "queryVector": [...], "topK": 5}`),
//! which is what the server's `/api/vector` routes take.
//!
//! Backends, each checked by the same suite ([`crate::testing`], feature `testing`):
//!
//! - [`memory::InMemoryVectorStore`]: exact search over contiguous `f32` rows; for tests and
//!   small corpora.
//! - [`sqlite::SqliteVectorStore`] (feature `sqlite`): exact search inside a SQLite database
//!   file (the same file as Kestrel's storage, if you like), distances computed by a SQL
//!   function written in Rust, filters compiled to SQLite's JSON functions.
//! - [`pgvector::PgVectorStore`] (feature `pgvector`): PostgreSQL with pgvector, in Mastra's
//!   table layout and scores (an index is shareable with a Mastra app), HNSW or IVFFlat
//!   indexes, filters compiled to SQL with bound values.
//!
//! Scores are Mastra's: cosine similarity for `cosine` (1 is the same direction),
//! `1 / (1 + distance)` for `euclidean`, the dot product for `dotproduct`; results come
//! highest score first, ties by id.

pub mod filter;
pub mod memory;
mod metric;
#[cfg(feature = "pgvector")]
pub mod pgvector;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use filter::{Filter, FilterError};
pub use metric::{Metric, norm};

/// Metadata stored with a vector: a JSON object.
pub type Metadata = Map<String, Value>;

/// The largest `top_k` a query may ask for.
pub const MAX_TOP_K: usize = 10_000;
/// The largest dimension an index may have (pgvector's limit for `vector`).
pub const MAX_DIMENSION: usize = 16_000;
/// The longest index name, so that PostgreSQL's `<name>_vector_idx` stays within its
/// 63-byte identifiers.
pub const MAX_INDEX_NAME_LEN: usize = 52;
/// The longest vector id, in bytes.
pub const MAX_ID_LEN: usize = 512;
/// The default `top_k` (Mastra's).
pub const DEFAULT_TOP_K: usize = 10;

/// The approximate-nearest-neighbour index a backend builds, where it builds one (pgvector).
/// The in-memory and SQLite stores always search exactly.
///
/// Deserializes from Mastra's `indexConfig`: `{"type": "hnsw", "hnsw": {"m": 16,
/// "efConstruction": 64}}`, `{"type": "ivfflat", "ivf": {"lists": 100}}`, `{"type": "flat"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IndexConfig {
    /// The kind of index; `None` is the backend's default (HNSW on pgvector).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<IndexKind>,
    /// HNSW parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hnsw: Option<HnswConfig>,
    /// IVFFlat parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ivf: Option<IvfConfig>,
}

impl IndexConfig {
    /// No ANN index: every query is an exact scan.
    pub fn flat() -> IndexConfig {
        IndexConfig {
            kind: Some(IndexKind::Flat),
            ..IndexConfig::default()
        }
    }

    /// An HNSW index with these parameters.
    pub fn hnsw(m: u32, ef_construction: u32) -> IndexConfig {
        IndexConfig {
            kind: Some(IndexKind::Hnsw),
            hnsw: Some(HnswConfig { m, ef_construction }),
            ivf: None,
        }
    }

    /// An IVFFlat index with `lists` lists (`None`: Mastra's rule, `max(100, min(4000,
    /// 2·√rows))`).
    pub fn ivfflat(lists: Option<u32>) -> IndexConfig {
        IndexConfig {
            kind: Some(IndexKind::IvfFlat),
            hnsw: None,
            ivf: lists.map(|lists| IvfConfig { lists }),
        }
    }
}

/// The kind of approximate-nearest-neighbour index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// No index: exact scans.
    Flat,
    /// Hierarchical navigable small worlds.
    Hnsw,
    /// Inverted lists of flat vectors.
    #[serde(rename = "ivfflat")]
    IvfFlat,
}

/// HNSW build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HnswConfig {
    /// Connections per node (pgvector's default 16).
    pub m: u32,
    /// Candidates kept while building (pgvector's default 64).
    pub ef_construction: u32,
}

impl Default for HnswConfig {
    fn default() -> Self {
        HnswConfig {
            m: 16,
            ef_construction: 64,
        }
    }
}

/// IVFFlat build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IvfConfig {
    /// The number of inverted lists.
    pub lists: u32,
}

/// What `create_index` creates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateIndex {
    /// The index's name: a letter or `_`, then letters, digits or `_`, at most
    /// [`MAX_INDEX_NAME_LEN`] bytes (it names a table on PostgreSQL).
    pub index_name: String,
    /// The length of every vector, 1 to [`MAX_DIMENSION`].
    pub dimension: usize,
    /// How similarity is measured.
    #[serde(default)]
    pub metric: Metric,
    /// The ANN index, where the backend builds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_config: Option<IndexConfig>,
}

impl CreateIndex {
    /// An index of `dimension`, cosine, with the backend's default ANN index.
    pub fn new(index_name: impl Into<String>, dimension: usize) -> CreateIndex {
        CreateIndex {
            index_name: index_name.into(),
            dimension,
            metric: Metric::Cosine,
            index_config: None,
        }
    }

    /// Sets the metric.
    pub fn metric(mut self, metric: Metric) -> CreateIndex {
        self.metric = metric;
        self
    }

    /// Sets the ANN index configuration.
    pub fn index_config(mut self, config: IndexConfig) -> CreateIndex {
        self.index_config = Some(config);
        self
    }

    /// Checks the name and dimension.
    pub fn check(&self) -> Result<(), VectorError> {
        check_index_name(&self.index_name)?;
        if self.dimension == 0 || self.dimension > MAX_DIMENSION {
            return Err(VectorError::invalid(
                "dimension",
                format!(
                    "must be between 1 and {MAX_DIMENSION}, got {}",
                    self.dimension
                ),
            ));
        }
        if let Some(IndexConfig {
            hnsw: Some(hnsw), ..
        }) = self.index_config
            && (!(2..=100).contains(&hnsw.m) || !(4..=1000).contains(&hnsw.ef_construction))
        {
            return Err(VectorError::invalid(
                "indexConfig.hnsw",
                "m must be 2 to 100 and efConstruction 4 to 1000",
            ));
        }
        if let Some(IndexConfig { ivf: Some(ivf), .. }) = self.index_config
            && !(1..=32_768).contains(&ivf.lists)
        {
            return Err(VectorError::invalid(
                "indexConfig.ivf.lists",
                "must be 1 to 32768",
            ));
        }
        Ok(())
    }
}

/// An index's shape and size (Mastra's `describeIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexStats {
    /// The length of every vector.
    pub dimension: usize,
    /// How many vectors it holds.
    pub count: u64,
    /// How similarity is measured.
    pub metric: Metric,
}

/// Vectors to insert or replace (Mastra's `upsert`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upsert {
    /// The index.
    pub index_name: String,
    /// The vectors, each of the index's dimension.
    pub vectors: Vec<Vec<f32>>,
    /// One metadata object per vector, or none at all (each then gets `{}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata: Vec<Metadata>,
    /// One id per vector, or none at all (each then gets a new UUID). An existing id is
    /// replaced; when an id repeats, the last one wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Vectors matching this filter are deleted first, in the same transaction (to replace a
    /// document's old chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_filter: Option<Filter>,
}

impl Upsert {
    /// An empty upsert into `index_name`.
    pub fn new(index_name: impl Into<String>) -> Upsert {
        Upsert {
            index_name: index_name.into(),
            ..Upsert::default()
        }
    }

    /// Adds a vector with its id and metadata.
    pub fn vector(mut self, id: impl Into<String>, vector: Vec<f32>, metadata: Metadata) -> Upsert {
        // Keep the parallel lists aligned: earlier vectors without metadata get `{}`.
        self.metadata.resize(self.vectors.len(), Metadata::new());
        self.ids.resize_with(self.vectors.len(), new_id);
        self.vectors.push(vector);
        self.metadata.push(metadata);
        self.ids.push(id.into());
        self
    }

    /// Deletes the vectors matching `filter` before upserting.
    pub fn delete_first(mut self, filter: Filter) -> Upsert {
        self.delete_filter = Some(filter);
        self
    }

    /// Checks the request against an index of `dimension` and `metric`, and returns the rows
    /// to write: ids given or generated, metadata given or `{}`.
    pub fn into_records(
        self,
        dimension: usize,
        metric: Metric,
    ) -> Result<Vec<VectorRecord>, VectorError> {
        let count = self.vectors.len();
        if !self.metadata.is_empty() && self.metadata.len() != count {
            return Err(VectorError::invalid(
                "metadata",
                format!(
                    "has {} entries for {count} vectors (give one per vector, or none)",
                    self.metadata.len()
                ),
            ));
        }
        if !self.ids.is_empty() && self.ids.len() != count {
            return Err(VectorError::invalid(
                "ids",
                format!(
                    "has {} entries for {count} vectors (give one per vector, or none)",
                    self.ids.len()
                ),
            ));
        }
        let mut metadata = self.metadata.into_iter();
        let mut ids = self.ids.into_iter();
        let mut records = Vec::with_capacity(count);
        for (position, vector) in self.vectors.into_iter().enumerate() {
            check_vector(&self.index_name, dimension, metric, &vector, position)?;
            let id = ids.next().unwrap_or_else(new_id);
            check_id(&id)?;
            records.push(VectorRecord {
                id,
                vector,
                metadata: metadata.next().unwrap_or_default(),
            });
        }
        Ok(records)
    }
}

/// One vector as a backend stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorRecord {
    /// Its id.
    pub id: String,
    /// The embedding.
    pub vector: Vec<f32>,
    /// Its metadata.
    pub metadata: Metadata,
}

/// A similarity query (Mastra's `query`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VectorQuery {
    /// The index.
    pub index_name: String,
    /// The query embedding. Without it (and with a filter) the query returns the matching
    /// vectors by id, score 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_vector: Option<Vec<f32>>,
    /// At most this many results, 1 to [`MAX_TOP_K`] (default 10).
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    /// Only vectors whose metadata matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// Return each result's vector.
    #[serde(default)]
    pub include_vector: bool,
    /// Only results scoring at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f32>,
    /// HNSW: candidates examined per query (`hnsw.ef_search`); by default Mastra's rule,
    /// `min(1000, max(top_k, m · top_k))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ef: Option<u32>,
    /// IVFFlat: lists probed per query (`ivfflat.probes`); by default √lists, for recall
    /// (pgvector's own default, 1, loses about a quarter of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
}

fn default_top_k() -> usize {
    DEFAULT_TOP_K
}

impl VectorQuery {
    /// The `top_k` (10 unless set) vectors nearest `vector` in `index_name`.
    pub fn new(index_name: impl Into<String>, vector: Vec<f32>) -> VectorQuery {
        VectorQuery {
            index_name: index_name.into(),
            query_vector: Some(vector),
            top_k: DEFAULT_TOP_K,
            filter: None,
            include_vector: false,
            min_score: None,
            ef: None,
            probes: None,
        }
    }

    /// The vectors matching `filter`, by id, without a query vector.
    pub fn by_filter(index_name: impl Into<String>, filter: Filter) -> VectorQuery {
        VectorQuery {
            query_vector: None,
            filter: Some(filter),
            ..VectorQuery::new(index_name, Vec::new())
        }
    }

    /// Sets `top_k`.
    pub fn top_k(mut self, top_k: usize) -> VectorQuery {
        self.top_k = top_k;
        self
    }

    /// Sets the filter.
    pub fn filter(mut self, filter: Filter) -> VectorQuery {
        self.filter = Some(filter);
        self
    }

    /// Returns vectors with the results.
    pub fn include_vector(mut self, include: bool) -> VectorQuery {
        self.include_vector = include;
        self
    }

    /// Keeps only results scoring at least `min_score`.
    pub fn min_score(mut self, min_score: f32) -> VectorQuery {
        self.min_score = Some(min_score);
        self
    }

    /// HNSW: examines `ef` candidates per query (`hnsw.ef_search`, 1 to 1000) instead of
    /// Mastra's rule; more is slower and finds more of the true nearest.
    pub fn ef(mut self, ef: u32) -> VectorQuery {
        self.ef = Some(ef);
        self
    }

    /// IVFFlat: probes `probes` lists per query (`ivfflat.probes`) instead of √lists.
    pub fn probes(mut self, probes: u32) -> VectorQuery {
        self.probes = Some(probes);
        self
    }

    /// Checks `top_k`, the score bound and the query vector against an index of `dimension`
    /// and `metric`.
    pub fn check(&self, dimension: usize, metric: Metric) -> Result<(), VectorError> {
        if self.top_k == 0 || self.top_k > MAX_TOP_K {
            return Err(VectorError::invalid(
                "topK",
                format!("must be between 1 and {MAX_TOP_K}, got {}", self.top_k),
            ));
        }
        if self.min_score.is_some_and(|score| !score.is_finite()) {
            return Err(VectorError::invalid("minScore", "must be a finite number"));
        }
        match &self.query_vector {
            Some(vector) => {
                check_vector(&self.index_name, dimension, metric, vector, 0).map_err(|error| {
                    match error {
                        VectorError::InvalidRequest { message, .. } => {
                            VectorError::invalid("queryVector", message)
                        }
                        other => other,
                    }
                })
            }
            None if self.filter.as_ref().is_some_and(|f| !f.is_empty()) => Ok(()),
            None => Err(VectorError::invalid(
                "queryVector",
                "give a query vector, a filter, or both",
            )),
        }
    }
}

/// A query result (Mastra's `QueryResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryResult {
    /// The vector's id.
    pub id: String,
    /// Its score (see the [module docs](self)); 0 for a query without a vector.
    pub score: f32,
    /// Its metadata.
    pub metadata: Metadata,
    /// The vector, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
    /// The chunk's text, when the store keeps it apart from the metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
}

/// Which vectors an update or delete applies to.
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// These ids (unknown ids are skipped).
    Ids(Vec<String>),
    /// Every vector whose metadata matches; an empty filter is refused, so a mistake never
    /// deletes a whole index.
    Filter(Filter),
}

impl Selector {
    /// One id.
    pub fn id(id: impl Into<String>) -> Selector {
        Selector::Ids(vec![id.into()])
    }

    /// Refuses an empty filter and over-long ids.
    pub fn check(&self) -> Result<(), VectorError> {
        match self {
            Selector::Ids(ids) => ids.iter().try_for_each(|id| check_id(id)),
            Selector::Filter(filter) if filter.is_empty() => Err(VectorError::invalid(
                "filter",
                "an empty filter would select every vector; delete the index instead",
            )),
            Selector::Filter(_) => Ok(()),
        }
    }
}

/// What an update changes (Mastra's `updateVector`'s `update`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VectorUpdate {
    /// A new vector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
    /// New metadata, replacing the old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl VectorUpdate {
    /// Checks that something changes and that the vector fits the index.
    pub fn check(&self, index: &str, dimension: usize, metric: Metric) -> Result<(), VectorError> {
        if self.vector.is_none() && self.metadata.is_none() {
            return Err(VectorError::invalid(
                "update",
                "give a vector, metadata or both",
            ));
        }
        if let Some(vector) = &self.vector {
            check_vector(index, dimension, metric, vector, 0)?;
        }
        Ok(())
    }
}

/// Why a vector store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// No index of that name.
    #[error("vector index {index:?} does not exist")]
    IndexNotFound {
        /// The name asked for.
        index: String,
    },
    /// An index of that name exists with another dimension or metric.
    #[error(
        "vector index {index:?} exists with dimension {existing_dimension} and metric {existing_metric}; \
         asked for dimension {dimension} and metric {metric}"
    )]
    IndexExists {
        /// The index.
        index: String,
        /// Its dimension.
        existing_dimension: usize,
        /// Its metric.
        existing_metric: Metric,
        /// The dimension asked for.
        dimension: usize,
        /// The metric asked for.
        metric: Metric,
    },
    /// A vector's length is not the index's dimension.
    #[error("vector {position} has {actual} dimensions; index {index:?} has {expected}")]
    DimensionMismatch {
        /// The index.
        index: String,
        /// The index's dimension.
        expected: usize,
        /// The vector's length.
        actual: usize,
        /// The vector's position in the request.
        position: usize,
    },
    /// The filter is not valid.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// A field of the request is not valid.
    #[error("invalid {field}: {message}")]
    InvalidRequest {
        /// The field, in Mastra's camelCase.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The backend failed (connection, I/O, SQL).
    #[error("vector store {operation} failed: {source}")]
    Backend {
        /// The operation.
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl VectorError {
    /// An invalid request field.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> VectorError {
        VectorError::InvalidRequest {
            field,
            message: message.into(),
        }
    }

    /// A backend failure.
    pub fn backend(
        operation: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> VectorError {
        VectorError::Backend {
            operation,
            source: source.into(),
        }
    }

    /// Whether the caller's request is at fault (as opposed to the backend).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, VectorError::Backend { .. })
    }
}

/// Checks an index name: a letter or `_`, then letters, digits or `_`, at most
/// [`MAX_INDEX_NAME_LEN`] bytes.
pub fn check_index_name(name: &str) -> Result<(), VectorError> {
    let mut chars = name.chars();
    let valid_start = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !valid_start
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.len() > MAX_INDEX_NAME_LEN
    {
        return Err(VectorError::invalid(
            "indexName",
            format!(
                "{name:?} is not a valid index name: use a letter or '_' then letters, digits \
                 or '_', at most {MAX_INDEX_NAME_LEN} characters"
            ),
        ));
    }
    Ok(())
}

/// Checks a vector id: 1 to [`MAX_ID_LEN`] bytes, no control characters.
pub fn check_id(id: &str) -> Result<(), VectorError> {
    if id.is_empty() || id.len() > MAX_ID_LEN || id.chars().any(char::is_control) {
        return Err(VectorError::invalid(
            "ids",
            format!(
                "{:?} is not a valid vector id: 1 to {MAX_ID_LEN} bytes, no control characters",
                id.chars().take(64).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// Checks a vector's length and values; a cosine index also refuses the zero vector, which
/// has no direction.
pub fn check_vector(
    index: &str,
    dimension: usize,
    metric: Metric,
    vector: &[f32],
    position: usize,
) -> Result<(), VectorError> {
    if vector.len() != dimension {
        return Err(VectorError::DimensionMismatch {
            index: index.to_owned(),
            expected: dimension,
            actual: vector.len(),
            position,
        });
    }
    if let Some(at) = vector.iter().position(|x| !x.is_finite()) {
        return Err(VectorError::invalid(
            "vectors",
            format!("vector {position} has a value that is not a finite number at {at}"),
        ));
    }
    if metric == Metric::Cosine && vector.iter().all(|x| *x == 0.0) {
        return Err(VectorError::invalid(
            "vectors",
            format!("vector {position} is all zeros, which has no cosine similarity"),
        ));
    }
    Ok(())
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Mastra's vector store contract. Every method checks its input and fails with a typed
/// [`VectorError`]; nothing is written when a request is refused.
#[async_trait]
pub trait VectorStore: Send + Sync {
    /// Creates an index. Creating an existing index with the same dimension and metric is a
    /// no-op (its vectors are kept); another dimension or metric is
    /// [`VectorError::IndexExists`].
    async fn create_index(&self, request: CreateIndex) -> Result<(), VectorError>;

    /// The names of the indexes, sorted.
    async fn list_indexes(&self) -> Result<Vec<String>, VectorError>;

    /// An index's dimension, vector count and metric.
    async fn describe_index(&self, index_name: &str) -> Result<IndexStats, VectorError>;

    /// Deletes an index and its vectors.
    async fn delete_index(&self, index_name: &str) -> Result<(), VectorError>;

    /// Inserts or replaces vectors; returns their ids in request order. All or nothing.
    async fn upsert(&self, request: Upsert) -> Result<Vec<String>, VectorError>;

    /// The `top_k` best-scoring vectors that match the filter, highest score first (ties by
    /// id); without a query vector, the matching vectors by id.
    async fn query(&self, query: VectorQuery) -> Result<Vec<QueryResult>, VectorError>;

    /// Updates the selected vectors; returns how many were updated.
    async fn update(
        &self,
        index_name: &str,
        selector: Selector,
        update: VectorUpdate,
    ) -> Result<u64, VectorError>;

    /// Deletes the selected vectors; returns how many were deleted.
    async fn delete(&self, index_name: &str, selector: Selector) -> Result<u64, VectorError>;
}

/// A shared vector store handle.
pub type SharedVectorStore = std::sync::Arc<dyn VectorStore>;
