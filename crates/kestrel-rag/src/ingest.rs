//! From chunks to an index: embed them and upsert them, the index checked against the
//! embedder first.
//!
//! ```
//! use kestrel_core::embedding::HashEmbedder;
//! use kestrel_rag::{ChunkOptions, Document, InMemoryVectorStore, ingest};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kestrel_rag::RagError> {
//! let store = InMemoryVectorStore::new();
//! let embedder = HashEmbedder::new(64);
//! let chunks = Document::from_text("Kestrels hover over fields. They hunt voles.")
//!     .with("source", "notes.txt")
//!     .chunk(&ChunkOptions::recursive().max_size(40).overlap(0))?;
//! let ids = ingest::upsert_chunks(&store, "notes", &embedder, &chunks, &Default::default()).await?;
//! assert_eq!(ids.len(), chunks.len());
//! # Ok(())
//! # }
//! ```

use kestrel_core::embedding::{EmbedError, Embedder, dimension_of};
use serde_json::Value;

use crate::chunk::{Chunk, ChunkError};
use crate::embed::{EmbedOptions, embed_many};
use crate::vector::{CreateIndex, Metric, Upsert, VectorError, VectorStore};

/// The metadata key a chunk's text is stored under (Mastra's convention, which its vector
/// query tool and rerankers read).
pub const TEXT_KEY: &str = "text";

/// Why retrieval-augmented generation failed: chunking, embedding or the vector store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RagError {
    /// Chunking failed.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// Embedding failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The vector store failed.
    #[error(transparent)]
    Vector(#[from] VectorError),
    /// The index holds vectors of another size than the embedder makes.
    #[error(
        "index {index:?} holds {index_dimension}-dimension vectors but {embedder} makes \
         {embedder_dimension}: use the embedder the index was made with, or another index"
    )]
    DimensionMismatch {
        /// The index.
        index: String,
        /// Its dimension.
        index_dimension: usize,
        /// The embedder, `provider/model`.
        embedder: String,
        /// The embedder's dimension.
        embedder_dimension: usize,
    },
}

fn embedder_name(embedder: &dyn Embedder) -> String {
    format!("{}/{}", embedder.provider(), embedder.model_id())
}

/// Creates `index_name` for `embedder`'s vectors if it does not exist (cosine), or checks
/// that its dimension is the embedder's. Returns the dimension.
pub async fn ensure_index(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
) -> Result<usize, RagError> {
    let dimension = dimension_of(embedder).await?;
    match store.describe_index(index_name).await {
        Ok(stats) if stats.dimension == dimension => Ok(dimension),
        Ok(stats) => Err(RagError::DimensionMismatch {
            index: index_name.to_owned(),
            index_dimension: stats.dimension,
            embedder: embedder_name(embedder),
            embedder_dimension: dimension,
        }),
        Err(VectorError::IndexNotFound { .. }) => {
            store
                .create_index(CreateIndex::new(index_name, dimension).metric(Metric::Cosine))
                .await?;
            Ok(dimension)
        }
        Err(e) => Err(e.into()),
    }
}

/// Checks that an existing index fits the embedder (without creating anything).
pub async fn check_index(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
) -> Result<(), RagError> {
    let stats = store.describe_index(index_name).await?;
    let dimension = dimension_of(embedder).await?;
    if stats.dimension != dimension {
        return Err(RagError::DimensionMismatch {
            index: index_name.to_owned(),
            index_dimension: stats.dimension,
            embedder: embedder_name(embedder),
            embedder_dimension: dimension,
        });
    }
    Ok(())
}

/// Embeds `chunks` and upserts them into `index_name` (created if missing), each with its
/// metadata plus its text under [`TEXT_KEY`]; ids are new UUIDs. Returns the ids.
pub async fn upsert_chunks(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    chunks: &[Chunk],
    options: &EmbedOptions,
) -> Result<Vec<String>, RagError> {
    upsert_chunks_with(
        store,
        index_name,
        embedder,
        chunks,
        Vec::new(),
        None,
        options,
    )
    .await
}

/// [`upsert_chunks`] with the ids to use (one per chunk, or none for new UUIDs) and a filter
/// whose vectors are deleted in the same write (a document's previous chunks).
pub async fn upsert_chunks_with(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    chunks: &[Chunk],
    ids: Vec<String>,
    replace: Option<crate::vector::Filter>,
    options: &EmbedOptions,
) -> Result<Vec<String>, RagError> {
    ensure_index(store, index_name, embedder).await?;
    let texts: Vec<String> = chunks.iter().map(|c| c.text.clone()).collect();
    let vectors = embed_many(embedder, &texts, options).await?;
    let metadata = chunks
        .iter()
        .map(|chunk| {
            let mut metadata = chunk.metadata.clone();
            metadata.insert(TEXT_KEY.to_owned(), Value::String(chunk.text.clone()));
            metadata
        })
        .collect();
    let ids = store
        .upsert(Upsert {
            index_name: index_name.to_owned(),
            vectors,
            metadata,
            ids,
            delete_filter: replace,
        })
        .await?;
    Ok(ids)
}
