//! [`LocalEmbedder`]: the [`Embedder`] over [`MiniLm`], loading lazily and computing on
//! blocking threads.

use std::sync::Arc;

use kestrel_core::embedding::{EmbedError, Embedder, check_embeddings};
use kestrel_model_store::ModelStore;
use tokio::sync::OnceCell;

use crate::engine::{DEFAULT_MAX_TOKENS, MiniLm, ModelFiles};
use crate::{DIMENSION, LocalError, MODEL_ID, PROVIDER};

/// Where the model files come from.
#[derive(Debug, Clone)]
enum Location {
    /// These files.
    Files(ModelFiles),
    /// This store (pulling first with `auto_pull`).
    Store(ModelStore),
    /// `ModelStore::from_env()`, opened when the model is loaded.
    Env,
}

/// all-MiniLM-L6-v2 as an [`Embedder`]: provider `local`, model `all-minilm-l6-v2`, 384
/// dimensions, unit-length vectors (so cosine similarity is a dot product).
///
/// Creating one does no I/O. The model is loaded by the first call to
/// [`Embedder::embed`] (or by [`LocalEmbedder::preload`]) on a blocking thread, once; a
/// failed load is reported as [`EmbedError::Unavailable`] and tried again by the next call
/// (e.g. after `kestrel models pull all-minilm-l6-v2`). Texts are embedded on a blocking
/// thread (`tokio::task::spawn_blocking`) in batches of similar length
/// ([`LocalEmbedder::DEFAULT_BATCH_SIZE`] texts), truncated at 256 tokens by default. A call
/// whose future is dropped lets its current computation finish in the background.
///
/// Clones share the loaded model.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    location: Location,
    auto_pull: bool,
    batch_size: usize,
    max_tokens: usize,
    engine: Arc<OnceCell<Arc<MiniLm>>>,
}

impl LocalEmbedder {
    /// Texts per forward pass unless changed with [`LocalEmbedder::with_batch_size`].
    pub const DEFAULT_BATCH_SIZE: usize = 32;

    fn with_location(location: Location) -> Self {
        Self {
            location,
            auto_pull: false,
            batch_size: Self::DEFAULT_BATCH_SIZE,
            max_tokens: DEFAULT_MAX_TOKENS,
            engine: Arc::default(),
        }
    }

    /// The model in the cache of [`ModelStore::from_env`] (`$KESTREL_HOME/models`, else the
    /// user cache directory), where `kestrel models pull all-minilm-l6-v2` puts it.
    pub fn from_env() -> Self {
        Self::with_location(Location::Env)
    }

    /// The model in `store`'s cache.
    pub fn from_store(store: ModelStore) -> Self {
        Self::with_location(Location::Store(store))
    }

    /// The model in these files (e.g. [`ModelFiles::in_dir`] on a copy of the Hugging Face
    /// repository). They are not checksummed.
    pub fn from_files(files: ModelFiles) -> Self {
        Self::with_location(Location::Files(files))
    }

    /// Loads the model from `files` now, reporting a bad file at once rather than at the first
    /// call.
    pub async fn load(files: ModelFiles) -> Result<Self, EmbedError> {
        let embedder = Self::from_files(files);
        embedder.preload().await?;
        Ok(embedder)
    }

    /// With `true`, a model missing from the cache is downloaded when the model is loaded
    /// (about 90 MB, see [`ModelStore::pull`]) instead of failing with "not downloaded yet".
    /// Ignored for [`LocalEmbedder::from_files`].
    pub fn with_auto_pull(mut self, auto_pull: bool) -> Self {
        self.auto_pull = auto_pull;
        self
    }

    /// Embeds at most `batch_size` (at least 1) texts per forward pass.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Truncates texts at `max_tokens` tokens (clamped to `2..=512`; default 256, as
    /// sentence-transformers). Takes effect for a model not loaded yet.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = max_tokens;
        self.engine = Arc::default();
        self
    }

    /// Loads the model now if it is not loaded yet.
    pub async fn preload(&self) -> Result<(), EmbedError> {
        self.engine().await.map(|_| ())
    }

    /// Whether the model is loaded.
    pub fn is_loaded(&self) -> bool {
        self.engine.initialized()
    }

    async fn engine(&self) -> Result<Arc<MiniLm>, EmbedError> {
        let engine = self
            .engine
            .get_or_try_init(|| async {
                let location = self.location.clone();
                let auto_pull = self.auto_pull;
                let max_tokens = self.max_tokens;
                let started = std::time::Instant::now();
                let loaded = tokio::task::spawn_blocking(move || {
                    let files = match location {
                        Location::Files(files) => files,
                        Location::Store(store) => files_of(&store, auto_pull)?,
                        Location::Env => files_of(&ModelStore::from_env()?, auto_pull)?,
                    };
                    let engine = MiniLm::load(&files)?.with_max_tokens(max_tokens)?;
                    if engine.dimension() != DIMENSION {
                        return Err(LocalError::Model(format!(
                            "{} has {} dimensions; all-MiniLM-L6-v2 has {DIMENSION}",
                            files.config.display(),
                            engine.dimension()
                        )));
                    }
                    Ok(Arc::new(engine))
                })
                .await
                .map_err(|e| LocalError::Task(e.to_string()))
                .and_then(|loaded| loaded)
                .map_err(|e| e.into_embed_error(true))?;
                tracing::debug!(elapsed = ?started.elapsed(), "loaded all-MiniLM-L6-v2");
                Ok::<_, EmbedError>(loaded)
            })
            .await?;
        Ok(engine.clone())
    }
}

fn files_of(store: &ModelStore, auto_pull: bool) -> Result<ModelFiles, LocalError> {
    if auto_pull {
        ModelFiles::pull(store)
    } else {
        ModelFiles::from_store(store)
    }
}

/// Embeds `texts` with `engine` in batches of `batch_size` texts of similar length, returning
/// the vectors in input order.
fn embed_sorted(
    engine: &MiniLm,
    texts: &[String],
    batch_size: usize,
) -> Result<Vec<Vec<f32>>, LocalError> {
    // Batching texts of similar length wastes less work on padding.
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts.get(i).map_or(0, String::len));
    let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    for chunk in order.chunks(batch_size) {
        let batch: Vec<&str> = chunk
            .iter()
            .filter_map(|&i| texts.get(i).map(String::as_str))
            .collect();
        let embedded = engine.embed(&batch)?;
        for (&i, vector) in chunk.iter().zip(embedded) {
            if let Some(slot) = vectors.get_mut(i) {
                *slot = vector;
            }
        }
    }
    Ok(vectors)
}

#[async_trait::async_trait]
impl Embedder for LocalEmbedder {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let engine = self.engine().await?;
        let owned = texts.to_vec();
        let batch_size = self.batch_size;
        let vectors =
            tokio::task::spawn_blocking(move || embed_sorted(&engine, &owned, batch_size))
                .await
                .map_err(|e| LocalError::Task(e.to_string()))
                .and_then(|result| result)
                .map_err(|e| e.into_embed_error(false))?;
        check_embeddings(PROVIDER, MODEL_ID, texts.len(), DIMENSION, &vectors)?;
        Ok(vectors)
    }
}
