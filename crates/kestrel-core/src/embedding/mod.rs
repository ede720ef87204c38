//! Embeddings: turning texts into vectors, for semantic recall.
//!
//! An [`Embedder`] maps a batch of texts to one vector each, all of the same
//! [`Embedder::dimension`]. Embedders resolve from `provider/model` strings through an
//! [`EmbedderRegistry`], the way language models resolve through a
//! [`ModelRegistry`](crate::model::ModelRegistry):
//!
//! - `openai/text-embedding-3-small` (1536 dimensions), `openai/text-embedding-3-large` (3072),
//!   `openai/text-embedding-ada-002` (1536), and any model of an OpenAI-compatible server
//!   (`ollama/nomic-embed-text`, a named `KESTREL_OPENAI_COMPATIBLE_<NAME>` endpoint...): see
//!   [`crate::providers::openai_embeddings`] (feature `openai`);
//! - `local/all-minilm-l6-v2` (384 dimensions), run in-process by the `kestrel-embed-local`
//!   crate, which registers the `local` provider (it is a separate crate so that only its users
//!   compile the inference engine).
//!
//! For tests, [`HashEmbedder`] (deterministic vectors from the words of a text, no model) and
//! [`ScriptedEmbedder`] (fixed vectors per text, injected errors, recorded calls) need no
//! network and no model file.
//!
//! Every embedder checks what it returns: one vector per text, each of the embedder's dimension.
//! A provider that answers otherwise fails with [`EmbedError::CountMismatch`] or
//! [`EmbedError::DimensionMismatch`] rather than handing a wrong vector to a vector index.
//!
//! ```
//! use kestrel_core::embedding::{Embedder, HashEmbedder, cosine_similarity};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kestrel_core::embedding::EmbedError> {
//! let embedder = HashEmbedder::new(64);
//! let vectors = embedder
//!     .embed(&["the cat sat".to_string(), "the cat sat down".to_string()])
//!     .await?;
//! assert_eq!(vectors[0].len(), 64);
//! assert!(cosine_similarity(&vectors[0], &vectors[1]) > 0.5);
//! # Ok(())
//! # }
//! ```

mod registry;
mod scripted;

use std::fmt;
use std::sync::Arc;

use crate::model::ModelError;

pub use registry::{EmbedderFactory, EmbedderRegistry, EmbedderSpec, UnknownEmbedder};
pub use scripted::{HashEmbedder, ScriptedEmbedder};

/// Why embedding failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The call to the provider failed: authentication, rate limit, HTTP error, connection,
    /// timeout, or an answer that does not follow the protocol.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The provider returned a vector whose length is not the embedder's dimension.
    #[error("{provider}/{model}: embedding {index} has {actual} dimensions, expected {expected}")]
    DimensionMismatch {
        /// Provider name.
        provider: String,
        /// Model id.
        model: String,
        /// Position of the offending vector in the batch.
        index: usize,
        /// The embedder's dimension.
        expected: usize,
        /// The length received.
        actual: usize,
    },
    /// The provider returned a different number of vectors than texts were sent.
    #[error("{provider}/{model}: sent {expected} text(s) but received {actual} embedding(s)")]
    CountMismatch {
        /// Provider name.
        provider: String,
        /// Model id.
        model: String,
        /// How many texts were sent.
        expected: usize,
        /// How many vectors came back.
        actual: usize,
    },
    /// The embedder cannot run: its model files are missing or could not be loaded.
    #[error("{provider}/{model}: embedder unavailable: {message}")]
    Unavailable {
        /// Provider name.
        provider: String,
        /// Model id.
        model: String,
        /// Why, and what to do about it.
        message: String,
    },
    /// An in-process model failed while computing embeddings.
    #[error("{provider}/{model}: embedding failed: {message}")]
    Inference {
        /// Provider name.
        provider: String,
        /// Model id.
        model: String,
        /// What went wrong.
        message: String,
    },
}

impl EmbedError {
    /// Whether retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            EmbedError::Model(error) => error.is_retryable(),
            _ => false,
        }
    }
}

/// Turns texts into vectors of a fixed dimension.
///
/// Implementations split large batches as their provider requires, return exactly one vector
/// per text in input order, and check every vector's length (see [`check_embeddings`]).
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// The provider's name, e.g. `openai` or `local`.
    fn provider(&self) -> &str;

    /// The model's id at the provider, e.g. `text-embedding-3-small`.
    fn model_id(&self) -> &str;

    /// The length of every vector this embedder returns.
    ///
    /// `0` means "not known yet": an OpenAI-compatible model of unknown size learns its
    /// dimension from its first answer (see [`dimension_of`], which asks when needed).
    fn dimension(&self) -> usize;

    /// Embeds `texts`: one vector per text, in the same order. An empty batch returns an empty
    /// list without calling the provider.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Embeds one text.
    async fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = self.embed(&[text.to_string()]).await?;
        match vectors.pop() {
            Some(vector) if vectors.is_empty() => Ok(vector),
            _ => Err(EmbedError::CountMismatch {
                provider: self.provider().to_string(),
                model: self.model_id().to_string(),
                expected: 1,
                actual: vectors.len() + 1,
            }),
        }
    }
}

impl fmt::Debug for dyn Embedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider(), self.model_id())
    }
}

/// A shared embedder handle.
pub type SharedEmbedder = Arc<dyn Embedder>;

/// The embedder's dimension, embedding a short probe text first if it is not known yet
/// ([`Embedder::dimension`] is `0`). Use it before creating a vector index.
pub async fn dimension_of(embedder: &dyn Embedder) -> Result<usize, EmbedError> {
    let known = embedder.dimension();
    if known > 0 {
        return Ok(known);
    }
    Ok(embedder.embed_one("dimension probe").await?.len())
}

/// Checks a provider's answer for a batch of `expected_count` texts: as many vectors as texts,
/// each of length `dimension` (any common length when `dimension` is `0`), all finite.
///
/// Returns the dimension of the vectors (`dimension`, or the learned one).
pub fn check_embeddings(
    provider: &str,
    model: &str,
    expected_count: usize,
    dimension: usize,
    vectors: &[Vec<f32>],
) -> Result<usize, EmbedError> {
    if vectors.len() != expected_count {
        return Err(EmbedError::CountMismatch {
            provider: provider.to_string(),
            model: model.to_string(),
            expected: expected_count,
            actual: vectors.len(),
        });
    }
    let expected = match (dimension, vectors.first()) {
        (0, Some(first)) => first.len(),
        (known, _) => known,
    };
    for (index, vector) in vectors.iter().enumerate() {
        if vector.len() != expected || vector.is_empty() {
            return Err(EmbedError::DimensionMismatch {
                provider: provider.to_string(),
                model: model.to_string(),
                index,
                expected,
                actual: vector.len(),
            });
        }
        if vector.iter().any(|x| !x.is_finite()) {
            return Err(EmbedError::Model(ModelError::Protocol {
                provider: provider.to_string(),
                message: format!("embedding {index} contains a value that is not a finite number"),
                line: None,
            }));
        }
    }
    Ok(expected)
}

/// Cosine similarity of two vectors in `[-1, 1]`; `0` when either is zero or their lengths
/// differ.
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    (dot / (aa.sqrt() * bb.sqrt())).clamp(-1.0, 1.0) as f32
}

/// Scales `vector` to unit length (a zero vector is left as is).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn hash_vectors_are_deterministic_normalised_and_word_sensitive() {
        let embedder = HashEmbedder::new(128);
        let v = embedder
            .embed(&texts(&[
                "The cat sat on the mat",
                "the CAT sat on the mat!",
                "Quarterly revenue grew by nine percent",
                "",
            ]))
            .await
            .unwrap();
        assert_eq!(v.len(), 4);
        assert!(v.iter().all(|x| x.len() == 128));
        let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(v[0], v[1], "case and punctuation do not matter");
        assert!(cosine_similarity(&v[0], &v[2]) < 0.5);
        assert!(v[3].iter().all(|x| *x == 0.0), "empty text, zero vector");
        assert_eq!(embedder.embed(&[]).await.unwrap(), Vec::<Vec<f32>>::new());
    }

    #[tokio::test]
    async fn scripted_embedder_scripts_fails_and_records() {
        let embedder = ScriptedEmbedder::new(2).with_vector("a", vec![1.0, 0.0]);
        embedder.fail_next(EmbedError::Unavailable {
            provider: "scripted".into(),
            model: "x".into(),
            message: "down".into(),
        });
        assert!(matches!(
            embedder.embed_one("a").await,
            Err(EmbedError::Unavailable { .. })
        ));
        assert_eq!(embedder.embed_one("a").await.unwrap(), vec![1.0, 0.0]);
        assert_eq!(embedder.embed_one("b").await.unwrap().len(), 2);
        assert_eq!(embedder.calls().len(), 3);
    }

    #[test]
    fn check_embeddings_catches_count_dimension_and_nan() {
        let ok = vec![vec![0.1, 0.2], vec![0.3, 0.4]];
        assert_eq!(check_embeddings("p", "m", 2, 2, &ok).unwrap(), 2);
        assert_eq!(check_embeddings("p", "m", 2, 0, &ok).unwrap(), 2);
        assert!(matches!(
            check_embeddings("p", "m", 3, 2, &ok),
            Err(EmbedError::CountMismatch {
                expected: 3,
                actual: 2,
                ..
            })
        ));
        let error = check_embeddings("p", "m", 2, 3, &ok).unwrap_err();
        assert_eq!(
            error.to_string(),
            "p/m: embedding 0 has 2 dimensions, expected 3"
        );
        let ragged = vec![vec![0.1, 0.2], vec![0.3]];
        assert!(matches!(
            check_embeddings("p", "m", 2, 0, &ragged),
            Err(EmbedError::DimensionMismatch { index: 1, .. })
        ));
        let nan = vec![vec![f32::NAN, 0.0]];
        assert!(matches!(
            check_embeddings("p", "m", 1, 2, &nan),
            Err(EmbedError::Model(ModelError::Protocol { .. }))
        ));
    }

    #[test]
    fn cosine_and_normalize() {
        assert!((cosine_similarity(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine_similarity(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(cosine_similarity(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine_similarity(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
    }

    #[tokio::test]
    async fn the_registry_resolves_registered_providers() {
        let mut registry = EmbedderRegistry::empty();
        registry.register(
            "hash",
            |model: &str, spec: &str| -> Result<SharedEmbedder, UnknownEmbedder> {
                let dimension = model
                    .parse()
                    .map_err(|_| UnknownEmbedder::UnsupportedModel {
                        provider: "hash".into(),
                        model: model.into(),
                        reason: format!("{spec}: the model is a dimension"),
                    })?;
                Ok(Arc::new(HashEmbedder::new(dimension)))
            },
        );
        let embedder = registry.resolve("hash/32").unwrap();
        assert_eq!(embedder.dimension(), 32);
        assert_eq!(format!("{embedder:?}"), "hash/hash-32");
        assert_eq!(dimension_of(embedder.as_ref()).await.unwrap(), 32);
        assert!(matches!(
            registry.resolve("hash/x"),
            Err(UnknownEmbedder::UnsupportedModel { .. })
        ));
        assert!(matches!(
            registry.resolve("hash"),
            Err(UnknownEmbedder::InvalidFormat { .. })
        ));
        let error = registry.resolve("nope/x").err().unwrap();
        assert_eq!(
            error.to_string(),
            "unknown embedding provider \"nope\" in \"nope/x\"; known providers: hash"
        );
        let spec = EmbedderSpec::from("hash/8");
        assert_eq!(spec.resolve(&registry).unwrap().dimension(), 8);
        let object = EmbedderSpec::from(Arc::new(HashEmbedder::new(4)));
        assert_eq!(
            object
                .resolve(&EmbedderRegistry::empty())
                .unwrap()
                .dimension(),
            4
        );
    }
}
