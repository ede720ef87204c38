//! Reranking query results by how well each one answers the query, as judged by a model.
//!
//! Mastra's `rerank`: each result gets a semantic score from a [`RelevanceScorer`] (0 to 1),
//! and its final score weighs that with the vector score and the result's position:
//! `semantic · 0.4 + vector · 0.4 + position · 0.2` by default ([`RerankWeights`]), position
//! being `1 - index / count`. [`ModelRelevanceScorer`] asks a language model through
//! structured output (`{"score": 0.8}`), so it works on the local model under its grammar.

use std::sync::Arc;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use kestrel_core::message::Message;
use kestrel_core::model::{LanguageModel, ModelRequest, ModelSettings, ResponseFormat, generate};
use serde_json::{Value, json};

use crate::vector::QueryResult;

/// Why reranking failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RerankError {
    /// The weights do not add up to 1.
    #[error("rerank weights must add up to 1, got {sum}")]
    Weights {
        /// Their sum.
        sum: f32,
    },
    /// The scorer failed.
    #[error("relevance scoring failed: {0}")]
    Scorer(String),
}

/// Scores how relevant a text is to a query, from 0 (not at all) to 1 (answers it).
#[async_trait]
pub trait RelevanceScorer: Send + Sync {
    /// The relevance of `text` to `query`, in `[0, 1]`.
    async fn relevance(&self, query: &str, text: &str) -> Result<f32, RerankError>;
}

/// How the final score weighs its parts; they must add up to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankWeights {
    /// The scorer's relevance (default 0.4).
    pub semantic: f32,
    /// The vector store's score (default 0.4).
    pub vector: f32,
    /// The original position (default 0.2).
    pub position: f32,
}

impl Default for RerankWeights {
    fn default() -> Self {
        RerankWeights {
            semantic: 0.4,
            vector: 0.4,
            position: 0.2,
        }
    }
}

/// A reranker: a scorer, weights, and how many results to keep.
#[derive(Clone)]
pub struct Reranker {
    scorer: Arc<dyn RelevanceScorer>,
    weights: RerankWeights,
    top_k: Option<usize>,
    max_concurrency: usize,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("weights", &self.weights)
            .field("top_k", &self.top_k)
            .finish_non_exhaustive()
    }
}

/// One reranked result and its score's parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Reranked {
    /// The result (its `score` is the vector store's).
    pub result: QueryResult,
    /// The final score.
    pub score: f32,
    /// The scorer's relevance.
    pub semantic: f32,
    /// The position score.
    pub position: f32,
}

impl Reranker {
    /// Reranks with `scorer` and the default weights, keeping as many results as it gets.
    pub fn new(scorer: Arc<dyn RelevanceScorer>) -> Reranker {
        Reranker {
            scorer,
            weights: RerankWeights::default(),
            top_k: None,
            max_concurrency: 4,
        }
    }

    /// Reranks with a language model as the scorer ([`ModelRelevanceScorer`]).
    pub fn with_model(model: Arc<dyn LanguageModel>) -> Reranker {
        Reranker::new(Arc::new(ModelRelevanceScorer::new(model)))
    }

    /// Sets the weights.
    pub fn weights(mut self, weights: RerankWeights) -> Reranker {
        self.weights = weights;
        self
    }

    /// Keeps the best `top_k` results.
    pub fn top_k(mut self, top_k: usize) -> Reranker {
        self.top_k = Some(top_k.max(1));
        self
    }

    /// Scores at most this many results at once (default 4).
    pub fn max_concurrency(mut self, max: usize) -> Reranker {
        self.max_concurrency = max.max(1);
        self
    }

    /// Reranks `results` for `query`: best first, at most `top_k` (the reranker's, else the
    /// argument). A result's text is its metadata's `text`; results without one get a
    /// semantic score of 0, as in Mastra.
    pub async fn rerank(
        &self,
        query: &str,
        results: Vec<QueryResult>,
        top_k: usize,
    ) -> Result<Vec<Reranked>, RerankError> {
        let weights = self.weights;
        let sum = weights.semantic + weights.vector + weights.position;
        if (sum - 1.0).abs() > 1e-4 {
            return Err(RerankError::Weights { sum });
        }
        let count = results.len().max(1) as f32;
        let scorer = &self.scorer;
        let mut reranked: Vec<Reranked> = futures::stream::iter(results.into_iter().enumerate())
            .map(|(index, result)| async move {
                let semantic = match result.metadata.get(crate::ingest::TEXT_KEY) {
                    Some(Value::String(text)) => scorer.relevance(query, text).await?,
                    _ => 0.0,
                };
                let position = 1.0 - index as f32 / count;
                let score = weights.semantic * semantic
                    + weights.vector * result.score
                    + weights.position * position;
                Ok::<_, RerankError>(Reranked {
                    result,
                    score,
                    semantic,
                    position,
                })
            })
            .buffered(self.max_concurrency)
            .try_collect()
            .await?;
        reranked.sort_by(|a, b| b.score.total_cmp(&a.score));
        reranked.truncate(self.top_k.unwrap_or(top_k));
        Ok(reranked)
    }
}

/// Mastra's relevance judge's instructions.
const INSTRUCTIONS: &str =
    "You are a specialized agent for evaluating the relevance of text to queries.
Your task is to rate how well a text passage answers a given query.
Give a number between 0 and 1, where:
1.0 = Perfectly relevant, directly answers the query
0.0 = Completely irrelevant
Consider:
- Direct relevance to the question
- Completeness of information
- Quality and specificity";

/// A [`RelevanceScorer`] that asks a language model for `{"score": <0..1>}`.
pub struct ModelRelevanceScorer {
    model: Arc<dyn LanguageModel>,
}

impl ModelRelevanceScorer {
    /// A scorer on `model`.
    pub fn new(model: Arc<dyn LanguageModel>) -> ModelRelevanceScorer {
        ModelRelevanceScorer { model }
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
            "required": ["score"],
            "additionalProperties": false
        })
    }
}

#[async_trait]
impl RelevanceScorer for ModelRelevanceScorer {
    async fn relevance(&self, query: &str, text: &str) -> Result<f32, RerankError> {
        let request = ModelRequest {
            messages: vec![
                Message::system(INSTRUCTIONS),
                Message::user(format!(
                    "Rate the relevance of the text to the query.\n\nQuery: {query}\n\nText: {text}"
                )),
            ]
            .into(),
            response_format: Some(ResponseFormat::Json {
                schema: ModelRelevanceScorer::schema(),
                name: Some("relevance".to_owned()),
            }),
            settings: ModelSettings {
                temperature: Some(0.0),
                max_output_tokens: Some(32),
                ..ModelSettings::default()
            },
            ..ModelRequest::default()
        };
        let response = generate(self.model.as_ref(), request)
            .await
            .map_err(|e| RerankError::Scorer(e.to_string()))?;
        let value: Value = serde_json::from_str(response.text.trim()).map_err(|e| {
            RerankError::Scorer(format!(
                "the model's answer is not JSON ({e}): {}",
                response.text
            ))
        })?;
        match value.get("score").and_then(Value::as_f64) {
            Some(score) if (0.0..=1.0).contains(&score) => Ok(score as f32),
            _ => Err(RerankError::Scorer(format!(
                "the model's answer has no score between 0 and 1: {}",
                response.text
            ))),
        }
    }
}
