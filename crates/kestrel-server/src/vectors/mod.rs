//! Vector stores over HTTP, under Mastra's routes: the stores given to [`crate::Server::vector`]
//! by name, each a [`VectorStore`] (in memory, SQLite, pgvector...), and the embedders given to
//! [`crate::Server::embedder`].
//!
//! - `POST /vector/{vector_name}/create-index` `{indexName, dimension, metric?, indexConfig?}`
//!   → `{success: true}` (an index of that name with another dimension or metric: 409);
//! - `POST /vector/{vector_name}/upsert` `{indexName, vectors, metadata?, ids?, deleteFilter?}`
//!   → `{ids}`;
//! - `POST /vector/{vector_name}/query` `{indexName, queryVector, topK?, filter?,
//!   includeVector?, minScore?, ef?, probes?}` → `[{id, score, metadata, vector?, document?}]`;
//! - `GET /vector/{vector_name}/indexes` → the index names; `GET` and `DELETE
//!   /vector/{vector_name}/indexes/{index_name}` → `{dimension, count, metric}`, `{success}`;
//! - `GET /vectors` → `{vectors: [{id, name, type, description?}]}`; `GET /embedders` →
//!   `{embedders: [{id, provider, name, description, dimensions, maxInputTokens}]}`.
//!
//! The handlers parse the body, call the store once and map its [`VectorError`]: an unknown
//! store or index is 404, an index that exists with another shape 409, a request the store
//! refuses 422 (`dimension_mismatch`, `invalid_filter`, `invalid_vector`, `invalid_body`), a
//! failing backend 500 (its error is logged, not sent). Everything a caller sends is bounded
//! by the body schemas the document shows (counts, lengths, name patterns, value ranges) and by
//! the port itself (`topK`, the filter's size and depth).

mod bodies;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kestrel_core::embedding::SharedEmbedder;
use kestrel_rag::vector::{MAX_INDEX_NAME_LEN, SharedVectorStore, check_index_name};
use kestrel_rag::{
    CreateIndex, Filter, FilterError, Upsert, VectorError, VectorQuery, VectorStore,
};
use serde_json::{Map, Value};

use crate::openapi::{Doc, Routes};
use crate::wire::Body;
use crate::{ApiError, AppState};
use bodies::{
    CreateIndexBody, EmbedderInfo, EmbedderList, Hit, IndexDescription, MAX_VALUE, QueryBody,
    SUCCESS, Success, UpsertBody, Upserted, VectorInfo, VectorList,
};

type Shared = State<Arc<AppState>>;

const TAG: &str = "vectors";

/// The longest vector store name.
const MAX_STORE_NAME_LEN: usize = 64;

pub(crate) fn routes() -> Routes<Arc<AppState>> {
    Routes::new()
        .get(
            "/vectors",
            list_vectors,
            Doc::json(TAG, "List the vector stores").returns::<VectorList>(),
        )
        .get(
            "/embedders",
            list_embedders,
            Doc::json(TAG, "List the embedding models").returns::<EmbedderList>(),
        )
        .post(
            "/vector/{vector_name}/create-index",
            create_index,
            Doc::json(
                TAG,
                "Create an index (one of the same dimension and metric is kept as it is)",
            )
            .body::<CreateIndexBody>()
            .returns::<Success>()
            .conflict("An index of that name exists with another dimension or metric"),
        )
        .post(
            "/vector/{vector_name}/upsert",
            upsert,
            Doc::json(TAG, "Insert or replace vectors; answers their ids")
                .body::<UpsertBody>()
                .returns::<Upserted>(),
        )
        .post(
            "/vector/{vector_name}/query",
            query,
            Doc::json(
                TAG,
                "The vectors nearest a query vector, best first, among those whose metadata matches the filter",
            )
            .body::<QueryBody>()
            .returns::<Vec<Hit>>(),
        )
        .get(
            "/vector/{vector_name}/indexes",
            list_indexes,
            Doc::json(TAG, "List the store's indexes, by name").returns::<Vec<String>>(),
        )
        .get(
            "/vector/{vector_name}/indexes/{index_name}",
            describe_index,
            Doc::json(TAG, "Describe an index: its dimension, vector count and metric")
                .returns::<IndexDescription>(),
        )
        .delete(
            "/vector/{vector_name}/indexes/{index_name}",
            delete_index,
            Doc::json(TAG, "Delete an index and its vectors").returns::<Success>(),
        )
}

/// A vector store the server serves, with what `GET /api/vectors` says of it. Made from an
/// `Arc` of a store (its type named after the store's: `memory`, `sqlite`, `pgvector`, or the
/// type's own name), or with [`ServedVectorStore::new`] for a store already shared as
/// `Arc<dyn VectorStore>`.
#[derive(Clone)]
pub struct ServedVectorStore {
    store: SharedVectorStore,
    kind: String,
    description: Option<String>,
}

impl ServedVectorStore {
    /// `store`, listed with type `kind` (`memory`, `sqlite`, `pgvector`...).
    pub fn new(store: SharedVectorStore, kind: impl Into<String>) -> Self {
        Self {
            store,
            kind: kind.into(),
            description: None,
        }
    }

    /// What `GET /api/vectors` says the store holds.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

impl<S: VectorStore + 'static> From<Arc<S>> for ServedVectorStore {
    fn from(store: Arc<S>) -> Self {
        let name = std::any::type_name::<S>();
        let name = name.split('<').next().unwrap_or(name);
        let name = name.rsplit("::").next().unwrap_or(name);
        let kind = match name {
            "InMemoryVectorStore" => "memory",
            "SqliteVectorStore" => "sqlite",
            "PgVectorStore" => "pgvector",
            other => other,
        };
        Self::new(store, kind)
    }
}

impl fmt::Debug for ServedVectorStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServedVectorStore")
            .field("kind", &self.kind)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// An embedding model `GET /api/embedders` lists (Mastra lists the models its router knows;
/// a Kestrel server lists the ones it is given).
#[derive(Debug, Clone)]
pub struct ServedEmbedder {
    embedder: SharedEmbedder,
    description: String,
    max_input_tokens: usize,
}

impl ServedEmbedder {
    /// `embedder`, which takes texts of at most `max_input_tokens` tokens.
    pub fn new(embedder: SharedEmbedder, max_input_tokens: usize) -> Self {
        Self {
            embedder,
            description: String::new(),
            max_input_tokens,
        }
    }

    /// What the listing says of the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// Why `name` cannot name a vector store (it is a path segment), if it cannot.
pub(crate) fn store_name_problem(name: &str) -> Option<&'static str> {
    let valid = !name.is_empty()
        && name.len() <= MAX_STORE_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (!valid).then_some("use 1 to 64 letters, digits, '_' or '-' (it is a path segment)")
}

/// Refuses (403) a caller whose token is pinned to a resource on every vector route: indexes
/// belong to no resource, so such a token would read and write past its own.
pub(crate) async fn unpinned_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let pinned = request
        .extensions()
        .get::<crate::auth::Caller>()
        .is_some_and(|caller| caller.resource.is_some());
    if pinned {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a token pinned to a resource cannot use the vector routes",
        )
        .into_response();
    }
    next.run(request).await
}

/// The store `name` names, or 404 naming the ones there are.
fn store<'a>(state: &'a AppState, name: &str) -> Result<&'a SharedVectorStore, ApiError> {
    if let Some(served) = state.vectors.get(name) {
        return Ok(&served.store);
    }
    let known = if state.vectors.is_empty() {
        "this server serves none (Server::vector)".to_owned()
    } else {
        let names: Vec<&str> = state.vectors.keys().map(String::as_str).collect();
        format!("this server serves {}", names.join(", "))
    };
    Err(ApiError::not_found(format!(
        "vector store {name:?} not found: {known}"
    )))
}

/// An index named in a path: a name no index can have is not found (the path is not a body
/// to refuse).
fn path_index(name: &str) -> Result<(), ApiError> {
    check_index_name(name).map_err(|_| {
        ApiError::not_found(format!(
            "vector index {name:?} does not exist (index names are a letter or '_', then \
             letters, digits or '_', at most {MAX_INDEX_NAME_LEN} characters)"
        ))
    })
}

/// A store's refusal as the caller reads it; a backend's failure is logged, not sent.
fn vector_error(error: VectorError) -> ApiError {
    let code = match &error {
        VectorError::IndexNotFound { .. } => {
            return ApiError::not_found(error.to_string());
        }
        VectorError::IndexExists { .. } => {
            return ApiError::new(StatusCode::CONFLICT, "index_exists", error.to_string());
        }
        VectorError::DimensionMismatch { .. } => "dimension_mismatch",
        VectorError::Filter(_) => "invalid_filter",
        VectorError::InvalidRequest {
            field: "vectors" | "queryVector",
            ..
        } => "invalid_vector",
        error if error.is_client_error() => "invalid_body",
        _ => return ApiError::internal(&error),
    };
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, error.to_string())
}

/// A filter from a body (`field` names it in errors).
fn filter(field: &str, filter: Option<Map<String, Value>>) -> Result<Option<Filter>, ApiError> {
    filter
        .map(|filter| {
            Filter::parse(Value::Object(filter)).map_err(|FilterError { path, message }| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_filter",
                    format!("invalid {field} at {path}: {message}"),
                )
            })
        })
        .transpose()
}

/// Refuses a value past [`MAX_VALUE`] (the schema's bound; `f32` itself would take more).
fn check_values<'a>(
    field: &str,
    vectors: impl IntoIterator<Item = &'a Vec<f32>>,
) -> Result<(), ApiError> {
    for (position, vector) in vectors.into_iter().enumerate() {
        if let Some(at) = vector.iter().position(|x| f64::from(x.abs()) > MAX_VALUE) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_vector",
                format!(
                    "{field}: vector {position} has {} at {at}; values are at most {MAX_VALUE:e} \
                     in magnitude",
                    vector[at]
                ),
            ));
        }
    }
    Ok(())
}

// --- Handlers.

async fn list_vectors(State(state): Shared) -> Json<VectorList> {
    let vectors = state
        .vectors
        .iter()
        .map(|(name, served)| VectorInfo {
            id: name.clone(),
            name: name.clone(),
            kind: served.kind.clone(),
            description: served.description.clone(),
        })
        .collect();
    Json(VectorList { vectors })
}

async fn list_embedders(State(state): Shared) -> Json<EmbedderList> {
    let embedders = state
        .embedders
        .iter()
        .map(|served| {
            let embedder = &served.embedder;
            EmbedderInfo {
                id: format!("{}/{}", embedder.provider(), embedder.model_id()),
                provider: embedder.provider().to_owned(),
                name: embedder.model_id().to_owned(),
                description: served.description.clone(),
                dimensions: embedder.dimension(),
                max_input_tokens: served.max_input_tokens,
            }
        })
        .collect();
    Json(EmbedderList { embedders })
}

async fn create_index(
    State(state): Shared,
    Path(vector_name): Path<String>,
    Body(body): Body<CreateIndexBody>,
) -> Result<Json<Success>, ApiError> {
    let store = store(&state, &vector_name)?;
    let CreateIndexBody {
        index_name,
        dimension,
        metric,
        index_config,
    } = body;
    let mut request = CreateIndex::new(index_name, dimension as usize).metric(metric);
    if let Some(config) = index_config {
        request = request.index_config(config.into());
    }
    store.create_index(request).await.map_err(vector_error)?;
    Ok(SUCCESS)
}

async fn upsert(
    State(state): Shared,
    Path(vector_name): Path<String>,
    Body(body): Body<UpsertBody>,
) -> Result<Json<Upserted>, ApiError> {
    let store = store(&state, &vector_name)?;
    check_values("vectors", &body.vectors)?;
    let request = Upsert {
        index_name: body.index_name,
        vectors: body.vectors,
        metadata: body.metadata,
        ids: body.ids,
        delete_filter: filter("deleteFilter", body.delete_filter)?,
    };
    let ids = store.upsert(request).await.map_err(vector_error)?;
    Ok(Json(Upserted { ids }))
}

async fn query(
    State(state): Shared,
    Path(vector_name): Path<String>,
    Body(body): Body<QueryBody>,
) -> Result<Json<Vec<Hit>>, ApiError> {
    let store = store(&state, &vector_name)?;
    check_values("queryVector", [&body.query_vector])?;
    let mut request = VectorQuery::new(body.index_name, body.query_vector)
        .top_k(body.top_k as usize)
        .include_vector(body.include_vector);
    if let Some(filter) = filter("filter", body.filter)? {
        request = request.filter(filter);
    }
    request.min_score = body.min_score;
    request.ef = body.ef;
    request.probes = body.probes;
    let results = store.query(request).await.map_err(vector_error)?;
    Ok(Json(results.into_iter().map(Hit::from).collect()))
}

async fn list_indexes(
    State(state): Shared,
    Path(vector_name): Path<String>,
) -> Result<Json<Vec<String>>, ApiError> {
    let store = store(&state, &vector_name)?;
    let indexes = store.list_indexes().await.map_err(vector_error)?;
    Ok(Json(indexes))
}

async fn describe_index(
    State(state): Shared,
    Path((vector_name, index_name)): Path<(String, String)>,
) -> Result<Json<IndexDescription>, ApiError> {
    let store = store(&state, &vector_name)?;
    path_index(&index_name)?;
    let stats = store
        .describe_index(&index_name)
        .await
        .map_err(vector_error)?;
    Ok(Json(IndexDescription {
        dimension: stats.dimension,
        count: stats.count,
        metric: stats.metric,
    }))
}

async fn delete_index(
    State(state): Shared,
    Path((vector_name, index_name)): Path<(String, String)>,
) -> Result<Json<Success>, ApiError> {
    let store = store(&state, &vector_name)?;
    path_index(&index_name)?;
    store
        .delete_index(&index_name)
        .await
        .map_err(vector_error)?;
    Ok(SUCCESS)
}

/// The stores by name, as the router serves them.
pub(crate) type VectorStores = BTreeMap<String, ServedVectorStore>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_listed_with_its_kind() {
        let memory = ServedVectorStore::from(Arc::new(kestrel_rag::InMemoryVectorStore::new()));
        assert_eq!(memory.kind, "memory");
        let shared: SharedVectorStore = Arc::new(kestrel_rag::InMemoryVectorStore::new());
        let custom = ServedVectorStore::new(shared, "pgvector").description("docs");
        assert_eq!(
            (custom.kind.as_str(), custom.description.as_deref()),
            ("pgvector", Some("docs"))
        );
    }

    #[test]
    fn store_names_are_path_segments() {
        assert_eq!(store_name_problem("default"), None);
        assert_eq!(store_name_problem("pg-vector_2"), None);
        for bad in ["", "a/b", "a b", "..", &"x".repeat(65)] {
            assert!(store_name_problem(bad).is_some(), "{bad:?}");
        }
    }
}
