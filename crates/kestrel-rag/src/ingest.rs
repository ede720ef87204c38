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

/// The metadata key holding a chunk's file, relative to the folder ingested.
pub const SOURCE_KEY: &str = "source";
/// The metadata key holding the sha256 of the file a chunk came from.
pub const SOURCE_HASH_KEY: &str = "sourceHash";
/// The metadata key holding a chunk's position in its file.
pub const CHUNK_KEY: &str = "chunk";
/// The file extensions [`ingest_paths`] reads from folders.
pub const DEFAULT_EXTENSIONS: &[&str] = &["md", "markdown", "mdx", "txt", "html", "htm", "json"];
/// The largest file [`ingest_paths`] reads (bigger ones are reported, not read).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How [`ingest_paths`] reads and cuts files.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// The chunking for every file; `None` picks by kind: Markdown's strategy for Markdown,
    /// recursive for the rest, both at 1000 characters with 100 of overlap (all-MiniLM-L6-v2
    /// reads 256 tokens, about 1000 characters).
    pub chunking: Option<crate::chunk::ChunkOptions>,
    /// How chunks are embedded.
    pub embed: EmbedOptions,
    /// The extensions read from folders (files named explicitly are always read).
    pub extensions: Vec<String>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            chunking: None,
            embed: EmbedOptions::default(),
            extensions: DEFAULT_EXTENSIONS.iter().map(|e| (*e).to_owned()).collect(),
        }
    }
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// Chunked, embedded and stored (its old chunks replaced): this many chunks.
    Ingested(usize),
    /// Unchanged since it was last ingested.
    Unchanged,
    /// Could not be ingested; nothing of it changed in the index.
    Failed(String),
}

/// Progress of [`ingest_paths`], reported after each file.
#[derive(Debug, Clone)]
pub struct IngestProgress<'a> {
    /// Files done so far.
    pub done: usize,
    /// Files in all.
    pub total: usize,
    /// The file just done (its `source`).
    pub source: &'a str,
    /// What happened to it.
    pub outcome: &'a FileOutcome,
}

/// What [`ingest_paths`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// Each file's `source` and outcome, in the order read.
    pub files: Vec<(String, FileOutcome)>,
}

impl IngestReport {
    /// Files ingested (changed or new).
    pub fn ingested(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::Ingested(_)))
    }

    /// Files skipped as unchanged.
    pub fn unchanged(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::Unchanged))
    }

    /// Files that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, FileOutcome::Failed(_)))
    }

    /// Chunks stored.
    pub fn chunks(&self) -> usize {
        self.files
            .iter()
            .map(|(_, o)| match o {
                FileOutcome::Ingested(n) => *n,
                _ => 0,
            })
            .sum()
    }

    fn count(&self, f: impl Fn(&FileOutcome) -> bool) -> usize {
        self.files.iter().filter(|(_, o)| f(o)).count()
    }
}

/// The files under `paths` to read: each file named, and the files with one of `extensions`
/// in each folder (recursively; hidden entries, `node_modules` and `target` skipped), sorted,
/// each with its `source`: its path relative to the folder it was found in (prefixed by the
/// folder's name), or the file's name.
pub fn collect_files(
    paths: &[std::path::PathBuf],
    extensions: &[String],
) -> std::io::Result<Vec<(std::path::PathBuf, String)>> {
    let mut files = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path)?;
        if metadata.is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.push((path.clone(), name));
        } else {
            let root_name = path
                .canonicalize()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut found = Vec::new();
            walk(path, extensions, &mut found)?;
            found.sort();
            for file in found {
                let relative = file.strip_prefix(path).unwrap_or(&file);
                let source = std::path::Path::new(&root_name)
                    .join(relative)
                    .to_string_lossy()
                    .replace('\\', "/");
                files.push((file, source));
            }
        }
    }
    Ok(files)
}

fn walk(
    dir: &std::path::Path,
    extensions: &[String],
    found: &mut Vec<std::path::PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" || name == "target" {
            continue;
        }
        let file_type = entry.file_type()?;
        let path = entry.path();
        if file_type.is_dir() {
            walk(&path, extensions, found)?;
        } else if file_type.is_file()
            && path
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase())
                .is_some_and(|e| extensions.iter().any(|x| x.eq_ignore_ascii_case(&e)))
        {
            found.push(path);
        }
    }
    Ok(())
}

fn chunking_for(source: &str, options: &IngestOptions) -> crate::chunk::ChunkOptions {
    options.chunking.clone().unwrap_or_else(|| {
        let extension = source
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        let base = if matches!(extension.as_str(), "md" | "markdown" | "mdx") {
            crate::chunk::ChunkOptions::markdown()
        } else {
            crate::chunk::ChunkOptions::recursive()
        };
        base.max_size(1000).overlap(100)
    })
}

fn document_for(source: &str, text: String) -> crate::document::Document {
    let extension = source
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "md" | "markdown" | "mdx" => crate::document::Document::from_markdown(text),
        "html" | "htm" => crate::document::Document::from_html(text),
        "json" => crate::document::Document::from_json(text),
        _ => crate::document::Document::from_text(text),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Ingests files and folders into `index_name` (created for `embedder` if missing), one
/// file at a time, resumably: a file whose content is unchanged since it was last ingested
/// is skipped, and a changed file's chunks replace its old ones in one write, so an
/// interrupted ingest leaves every file either as it was or fully updated. Each chunk's
/// metadata has `source`, `sourceHash`, `chunk` and `text`; its id is `<source>#<chunk>`.
///
/// A file that cannot be read or cut is reported in the [`IngestReport`] and the others go
/// on; an embedder or store failure stops the ingest.
pub async fn ingest_paths(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    paths: &[std::path::PathBuf],
    options: &IngestOptions,
    mut progress: impl FnMut(IngestProgress<'_>),
) -> Result<IngestReport, RagError> {
    ensure_index(store, index_name, embedder).await?;
    let files = collect_files(paths, &options.extensions)
        .map_err(|e| VectorError::invalid("paths", e.to_string()))?;
    let total = files.len();
    let mut report = IngestReport::default();
    for (done, (path, source)) in files.into_iter().enumerate() {
        let outcome = ingest_file(store, index_name, embedder, &path, &source, options).await?;
        progress(IngestProgress {
            done: done + 1,
            total,
            source: &source,
            outcome: &outcome,
        });
        report.files.push((source, outcome));
    }
    Ok(report)
}

/// Ingests documents given as `(source, text)` (texts compiled into a program, say), with
/// the same rules as [`ingest_paths`]: unchanged sources skipped, changed ones replaced.
pub async fn ingest_texts(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    documents: &[(&str, &str)],
    options: &IngestOptions,
    mut progress: impl FnMut(IngestProgress<'_>),
) -> Result<IngestReport, RagError> {
    ensure_index(store, index_name, embedder).await?;
    let mut report = IngestReport::default();
    for (done, (source, text)) in documents.iter().enumerate() {
        let outcome = ingest_bytes(
            store,
            index_name,
            embedder,
            source,
            text.as_bytes().to_vec(),
            options,
        )
        .await?;
        progress(IngestProgress {
            done: done + 1,
            total: documents.len(),
            source,
            outcome: &outcome,
        });
        report.files.push(((*source).to_owned(), outcome));
    }
    Ok(report)
}

async fn ingest_file(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    path: &std::path::Path,
    source: &str,
    options: &IngestOptions,
) -> Result<FileOutcome, RagError> {
    let bytes = match std::fs::metadata(path) {
        Ok(metadata) if metadata.len() > MAX_FILE_BYTES => {
            return Ok(FileOutcome::Failed(format!(
                "larger than {} MiB",
                MAX_FILE_BYTES / 1024 / 1024
            )));
        }
        Ok(_) => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => return Ok(FileOutcome::Failed(e.to_string())),
        },
        Err(e) => return Ok(FileOutcome::Failed(e.to_string())),
    };
    ingest_bytes(store, index_name, embedder, source, bytes, options).await
}

async fn ingest_bytes(
    store: &dyn VectorStore,
    index_name: &str,
    embedder: &dyn Embedder,
    source: &str,
    bytes: Vec<u8>,
    options: &IngestOptions,
) -> Result<FileOutcome, RagError> {
    let hash = sha256_hex(&bytes);
    let mine = crate::vector::Filter::parse(serde_json::json!({ SOURCE_KEY: source }))
        .map_err(VectorError::from)?;
    let existing = store
        .query(crate::vector::VectorQuery::by_filter(index_name, mine.clone()).top_k(1))
        .await?;
    if existing
        .first()
        .and_then(|r| r.metadata.get(SOURCE_HASH_KEY))
        .and_then(Value::as_str)
        == Some(hash.as_str())
    {
        return Ok(FileOutcome::Unchanged);
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(FileOutcome::Failed("not UTF-8 text".to_owned()));
    };
    let chunking = chunking_for(source, options);
    let document = document_for(source, text)
        .with(SOURCE_KEY, source)
        .with(SOURCE_HASH_KEY, hash.as_str());
    let chunks = match document.chunk(&chunking) {
        Ok(chunks) => chunks,
        Err(e) => return Ok(FileOutcome::Failed(e.to_string())),
    };
    let chunks: Vec<Chunk> = chunks
        .into_iter()
        .filter(|c| !c.text.trim().is_empty())
        .enumerate()
        .map(|(i, mut chunk)| {
            chunk.metadata.insert(CHUNK_KEY.to_owned(), Value::from(i));
            chunk
        })
        .collect();
    let ids = (0..chunks.len()).map(|i| format!("{source}#{i}")).collect();
    upsert_chunks_with(
        store,
        index_name,
        embedder,
        &chunks,
        ids,
        Some(mine),
        &options.embed,
    )
    .await?;
    Ok(FileOutcome::Ingested(chunks.len()))
}
