//! Embedders for tests, with no network and no model file: [`HashEmbedder`] (vectors from
//! the words of a text) and [`ScriptedEmbedder`] (fixed vectors, injected errors, recorded
//! calls).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use super::{EmbedError, Embedder, check_embeddings, normalize};

/// A deterministic embedder **for tests**: no model, no network, same text → same vector.
///
/// Each lowercased word of the text, and each of its character trigrams, is hashed into one of
/// `dimension` buckets with a sign; the sums are L2-normalised. Texts that share words get
/// similar vectors, so recall tests behave plausibly, but there is no understanding of meaning
/// ("car" and "automobile" are unrelated). Use a real embedder in production.
///
/// Provider `hash`, model id `hash-<dimension>`.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dimension: usize,
    model_id: String,
}

impl HashEmbedder {
    /// An embedder of `dimension` (at least 1) dimensions.
    pub fn new(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        Self {
            dimension,
            model_id: format!("hash-{dimension}"),
        }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimension];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add(&mut vector, word.as_bytes(), 1.0);
            let padded: Vec<char> = format!(" {word} ").chars().collect();
            for trigram in padded.windows(3) {
                let trigram: String = trigram.iter().collect();
                self.add(&mut vector, trigram.as_bytes(), 0.25);
            }
        }
        normalize(&mut vector);
        vector
    }

    fn add(&self, vector: &mut [f32], feature: &[u8], weight: f32) {
        let hash = fnv1a(feature);
        let bucket = (hash % self.dimension as u64) as usize;
        let sign = if (hash >> 63) == 0 { 1.0 } else { -1.0 };
        if let Some(slot) = vector.get_mut(bucket) {
            *slot += sign * weight;
        }
    }
}

impl Default for HashEmbedder {
    /// 64 dimensions.
    fn default() -> Self {
        Self::new(64)
    }
}

/// 64-bit FNV-1a: stable across platforms and releases (unlike `std`'s hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[async_trait::async_trait]
impl Embedder for HashEmbedder {
    fn provider(&self) -> &str {
        "hash"
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| self.vector(text)).collect())
    }
}

/// An embedder **for tests** that returns scripted vectors, fails on demand and records its
/// calls.
///
/// A text with a vector set by [`ScriptedEmbedder::with_vector`] gets that vector (checked
/// against the dimension like a provider's answer, so a wrong length is a
/// [`EmbedError::DimensionMismatch`]); any other text gets its [`HashEmbedder`] vector. Errors
/// queued with [`ScriptedEmbedder::fail_next`] are returned by the next calls, one per call.
///
/// ```
/// use kestrel_core::embedding::{EmbedError, Embedder, ScriptedEmbedder};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let embedder = ScriptedEmbedder::new(3).with_vector("hello", vec![1.0, 0.0, 0.0]);
/// assert_eq!(embedder.embed_one("hello").await.unwrap(), vec![1.0, 0.0, 0.0]);
///
/// let bad = ScriptedEmbedder::new(3).with_vector("oops", vec![1.0, 0.0]);
/// assert!(matches!(
///     bad.embed_one("oops").await,
///     Err(EmbedError::DimensionMismatch { expected: 3, actual: 2, .. })
/// ));
/// assert_eq!(bad.calls(), vec![vec!["oops".to_string()]]);
/// # }
/// ```
#[derive(Debug)]
pub struct ScriptedEmbedder {
    hash: HashEmbedder,
    model_id: String,
    vectors: HashMap<String, Vec<f32>>,
    failures: Mutex<VecDeque<EmbedError>>,
    calls: Mutex<Vec<Vec<String>>>,
}

impl ScriptedEmbedder {
    /// A scripted embedder of `dimension` dimensions (provider `scripted`, model id
    /// `scripted-<dimension>`).
    pub fn new(dimension: usize) -> Self {
        let hash = HashEmbedder::new(dimension);
        Self {
            model_id: format!("scripted-{}", hash.dimension),
            hash,
            vectors: HashMap::new(),
            failures: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// Returns `vector` for `text`.
    pub fn with_vector(mut self, text: impl Into<String>, vector: Vec<f32>) -> Self {
        self.vectors.insert(text.into(), vector);
        self
    }

    /// Makes the next call (after any failures already queued) fail with `error`.
    pub fn fail_next(&self, error: EmbedError) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(error);
    }

    /// The batches received so far, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait::async_trait]
impl Embedder for ScriptedEmbedder {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.hash.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(texts.to_vec());
        let failure = self
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if let Some(error) = failure {
            return Err(error);
        }
        let vectors: Vec<Vec<f32>> = texts
            .iter()
            .map(|text| {
                self.vectors
                    .get(text)
                    .cloned()
                    .unwrap_or_else(|| self.hash.vector(text))
            })
            .collect();
        check_embeddings(
            self.provider(),
            &self.model_id,
            texts.len(),
            self.dimension(),
            &vectors,
        )?;
        Ok(vectors)
    }
}
