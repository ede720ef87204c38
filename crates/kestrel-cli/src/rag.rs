//! What `kestrel rag` and `kestrel dev` share for retrieval: opening the vector store in the
//! database Kestrel already uses, and resolving the embedder.

use std::sync::Arc;

use kestrel::embedding::SharedEmbedder;
use kestrel::rag::VectorError;
use kestrel::rag::vector::SharedVectorStore;
use kestrel::rag::vector::pgvector::{PgVectorOptions, PgVectorStore};
use kestrel::rag::vector::sqlite::SqliteVectorStore;

use crate::dev::Database;

/// The embedder `kestrel rag` and the dev docs index use unless told otherwise: the local
/// all-MiniLM-L6-v2 (offline, 384 dimensions).
pub const DEFAULT_EMBEDDER: &str = "local/all-minilm-l6-v2";

/// Opens the vector store in `db`: the SQLite file's own tables, or pgvector tables in
/// `schema` of the PostgreSQL database (which needs the pgvector extension).
pub async fn open_vector_store(
    db: &Database,
    schema: &str,
) -> Result<SharedVectorStore, VectorError> {
    match db {
        Database::Sqlite(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| VectorError::backend("open", e))?;
            }
            Ok(Arc::new(SqliteVectorStore::open(path).await?))
        }
        Database::Postgres(url) => Ok(Arc::new(
            PgVectorStore::connect(url, PgVectorOptions::default().schema(schema)).await?,
        )),
    }
}

/// Resolves an embedder spec (`provider/model`): the local provider and the
/// OpenAI-compatible ones configured from the environment.
pub fn resolve_embedder(spec: &str) -> Result<SharedEmbedder, String> {
    kestrel::embed_local::registry_from_env()
        .resolve(spec)
        .map_err(|e| e.to_string())
}

/// Whether `spec` names the local embedder (whose model may need pulling first).
pub fn is_local_embedder(spec: &str) -> bool {
    spec.starts_with("local/")
}
