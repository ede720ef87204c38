//! [`VectorQueryTool`]: Mastra's `createVectorQueryTool`, a tool an agent calls to search an
//! index.
//!
//! The model gives `queryText` (and `topK`, and with [`VectorQueryToolBuilder::enable_filter`]
//! a `filter` as JSON text); the tool embeds the text, queries the index and answers
//! `{"relevantContext": [metadata...], "sources": [{"id", "metadata", "vector", "score",
//! "document"}]}` — Mastra's output, `document` being the chunk's text. With a
//! [`Reranker`] the results are reordered by a model's judgement first.
//!
//! Every option can be overridden per call from the request context, under Mastra's keys:
//! `indexName`, `vectorStoreName`, `topK`, `filter`, `includeVectors`, `includeSources`. A
//! failure (bad filter, missing index, embedder down) is a tool error the model reads, not an
//! empty answer.
//!
//! ```
//! use std::sync::Arc;
//! use kestrel_core::embedding::HashEmbedder;
//! use kestrel_rag::{InMemoryVectorStore, VectorQueryTool};
//!
//! let tool = VectorQueryTool::builder(
//!     "docs-store",
//!     Arc::new(InMemoryVectorStore::new()),
//!     "docs",
//!     Arc::new(HashEmbedder::new(64)),
//! )
//! .enable_filter(true)
//! .build();
//! assert_eq!(kestrel_core::tool::Tool::id(&tool), "VectorQuery docs-store docs Tool");
//! ```

use std::collections::BTreeMap;

use async_trait::async_trait;
use kestrel_core::embedding::SharedEmbedder;
use kestrel_core::tool::{Tool, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::embed::embed;
use crate::ingest::TEXT_KEY;
use crate::rerank::Reranker;
use crate::vector::{Filter, QueryResult, SharedVectorStore, VectorQuery};

/// Mastra's default description.
pub const DEFAULT_DESCRIPTION: &str =
    "Access the knowledge base to find information needed to answer user questions.";
/// `topK` when neither the call nor the request context gives one (Mastra's).
pub const DEFAULT_TOP_K: usize = 10;

const QUERY_TEXT_DESCRIPTION: &str = "The text query to search for in the vector database.
- ALWAYS provide a non-empty query string
- Must contain the user's question or search terms
- If the user's query is about a specific topic, use that topic as the queryText";
const TOP_K_DESCRIPTION: &str = "How many matching documents to return (default 10; 3 focuses on the best \
matches, 20 gives more context).";
const FILTER_DESCRIPTION: &str = "JSON-formatted criteria on the documents' metadata, e.g. \
'{\"category\": \"health\"}'. Use \"{}\" for no filtering. MUST be a valid, complete JSON object.";

/// A tool that searches a vector index (build it with [`VectorQueryTool::builder`]).
pub struct VectorQueryTool {
    id: String,
    description: String,
    stores: BTreeMap<String, SharedVectorStore>,
    default_store: String,
    index_name: String,
    embedder: SharedEmbedder,
    enable_filter: bool,
    include_vectors: bool,
    include_sources: bool,
    max_top_k: usize,
    reranker: Option<Reranker>,
    input_schema: Value,
    output_schema: Value,
}

/// Builds a [`VectorQueryTool`].
pub struct VectorQueryToolBuilder {
    tool: VectorQueryTool,
}

impl VectorQueryTool {
    /// A tool on `index_name` in `store` (called `store_name`), embedding queries with
    /// `embedder` (the one the index was filled with).
    pub fn builder(
        store_name: impl Into<String>,
        store: SharedVectorStore,
        index_name: impl Into<String>,
        embedder: SharedEmbedder,
    ) -> VectorQueryToolBuilder {
        let store_name = store_name.into();
        let index_name = index_name.into();
        let mut stores = BTreeMap::new();
        stores.insert(store_name.clone(), store);
        VectorQueryToolBuilder {
            tool: VectorQueryTool {
                id: format!("VectorQuery {store_name} {index_name} Tool"),
                description: DEFAULT_DESCRIPTION.to_owned(),
                stores,
                default_store: store_name,
                index_name,
                embedder,
                enable_filter: false,
                include_vectors: false,
                include_sources: true,
                max_top_k: 50,
                reranker: None,
                input_schema: Value::Null,
                output_schema: output_schema(),
            },
        }
    }
}

impl VectorQueryToolBuilder {
    /// Sets the tool's id (default `VectorQuery <store> <index> Tool`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.tool.id = id.into();
        self
    }

    /// Sets the description the model reads.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.tool.description = description.into();
        self
    }

    /// Lets the model filter on metadata (a `filter` input, JSON text).
    pub fn enable_filter(mut self, enable: bool) -> Self {
        self.tool.enable_filter = enable;
        self
    }

    /// Returns the vectors in `sources` (default off).
    pub fn include_vectors(mut self, include: bool) -> Self {
        self.tool.include_vectors = include;
        self
    }

    /// Returns `sources` (default on).
    pub fn include_sources(mut self, include: bool) -> Self {
        self.tool.include_sources = include;
        self
    }

    /// The most results one call returns, whatever `topK` the model asks (default 50).
    pub fn max_top_k(mut self, max: usize) -> Self {
        self.tool.max_top_k = max.max(1);
        self
    }

    /// Reranks the results with a model's judgement.
    pub fn reranker(mut self, reranker: Reranker) -> Self {
        self.tool.reranker = Some(reranker);
        self
    }

    /// Another store a call may pick with the request context's `vectorStoreName`.
    pub fn store(mut self, name: impl Into<String>, store: SharedVectorStore) -> Self {
        self.tool.stores.insert(name.into(), store);
        self
    }

    /// The tool.
    pub fn build(mut self) -> VectorQueryTool {
        self.tool.input_schema = input_schema(self.tool.enable_filter);
        self.tool
    }
}

fn input_schema(enable_filter: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "queryText": {"type": "string", "description": QUERY_TEXT_DESCRIPTION},
            "topK": {"type": "integer", "description": TOP_K_DESCRIPTION}
        },
        "required": ["queryText"]
    });
    if enable_filter {
        schema["properties"]["filter"] =
            json!({"type": "string", "description": FILTER_DESCRIPTION});
    }
    schema
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "relevantContext": {"type": "array", "items": {"type": "object"}},
            "sources": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "metadata": {"type": "object"},
                        "vector": {"type": "array", "items": {"type": "number"}},
                        "score": {"type": "number"},
                        "document": {"type": "string"}
                    },
                    "required": ["id", "metadata", "vector", "score", "document"]
                }
            }
        },
        "required": ["relevantContext", "sources"]
    })
}

/// Mastra's `coerce.number()` and its fallback: numbers and numeric strings above 0, else
/// the default.
fn coerce_top_k(value: Option<&Value>) -> Option<usize> {
    let number = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (number.is_finite() && number >= 1.0).then_some(number as usize)
}

fn as_bool(value: Option<Value>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A filter given as JSON text (the model's way) or as an object (the request context's).
fn parse_filter(value: &Value) -> Result<Option<Filter>, ToolError> {
    let filter = match value {
        Value::Null => return Ok(None),
        Value::String(text) if text.trim().is_empty() => return Ok(None),
        Value::String(text) => Filter::from_json_str(text),
        other => Filter::parse(other.clone()),
    }
    .map_err(|e| ToolError::new(format!("invalid filter: {e}")))?;
    Ok((!filter.is_empty()).then_some(filter))
}

fn to_source(result: &QueryResult, include_vectors: bool) -> Value {
    let document = result
        .document
        .clone()
        .or_else(|| {
            result
                .metadata
                .get(TEXT_KEY)
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    json!({
        "id": result.id,
        "metadata": result.metadata,
        "vector": if include_vectors { result.vector.clone().unwrap_or_default() } else { Vec::new() },
        "score": result.score,
        "document": document,
    })
}

#[async_trait]
impl Tool for VectorQueryTool {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(&self.output_schema)
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let request = ctx.request_context();
        let query_text = input
            .get("queryText")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .ok_or_else(|| ToolError::new("queryText must be a non-empty string"))?;
        let index_name = request
            .get_str("indexName")
            .unwrap_or_else(|| self.index_name.clone());
        let store_name = request
            .get_str("vectorStoreName")
            .unwrap_or_else(|| self.default_store.clone());
        let store = self.stores.get(&store_name).ok_or_else(|| {
            ToolError::new(format!(
                "no vector store named {store_name:?} (known: {})",
                self.stores.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        let top_k = coerce_top_k(request.get("topK").as_ref())
            .or_else(|| coerce_top_k(input.get("topK")))
            .unwrap_or(DEFAULT_TOP_K)
            .min(self.max_top_k);
        // A filter from the request context applies even where the model may not filter.
        let filter = match request.get("filter") {
            Some(filter) => parse_filter(&filter)?,
            None if self.enable_filter => {
                input.get("filter").map(parse_filter).transpose()?.flatten()
            }
            None => None,
        };
        let include_vectors =
            as_bool(request.get("includeVectors")).unwrap_or(self.include_vectors);
        let include_sources =
            as_bool(request.get("includeSources")).unwrap_or(self.include_sources);
        let vector = embed(self.embedder.as_ref(), query_text)
            .await
            .map_err(|e| ToolError::new(format!("embedding the query failed: {e}")))?;
        let mut query = VectorQuery::new(&index_name, vector)
            .top_k(top_k)
            .include_vector(include_vectors);
        query.filter = filter;
        let mut results = store
            .query(query)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        if let Some(reranker) = &self.reranker {
            results = reranker
                .rerank(query_text, results, top_k)
                .await
                .map_err(|e| ToolError::new(e.to_string()))?
                .into_iter()
                .map(|reranked| QueryResult {
                    score: reranked.score,
                    ..reranked.result
                })
                .collect();
        }
        let relevant_context: Vec<Value> = results
            .iter()
            .map(|r| Value::Object(r.metadata.clone()))
            .collect();
        let sources: Vec<Value> = if include_sources {
            results
                .iter()
                .map(|r| to_source(r, include_vectors))
                .collect()
        } else {
            Vec::new()
        };
        Ok(json!({"relevantContext": relevant_context, "sources": sources}))
    }
}
