//! Embedding many texts: in batches, a few batches at a time, retrying what may succeed.
//!
//! [`embed_many`] is Mastra's `embedMany` over any Kestrel
//! [`Embedder`](kestrel_core::embedding::Embedder): the local MiniLM (the offline default)
//! or an OpenAI-compatible server. Texts go in batches of [`EmbedOptions::batch_size`], at
//! most [`EmbedOptions::max_concurrency`] batches in flight; a batch failing with a
//! retryable error (rate limit, timeout, 5xx) is retried with exponential backoff up to
//! [`EmbedOptions::max_retries`] times. Vectors come back in input order.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kestrel_core::embedding::{EmbedError, Embedder};

/// How [`embed_many`] batches, parallelises and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Texts per call to the embedder (default 64).
    pub batch_size: usize,
    /// Calls in flight at once (default 2).
    pub max_concurrency: usize,
    /// Retries of a call that failed with a retryable error (default 2, Mastra's).
    pub max_retries: u32,
    /// The first retry's delay; each next one doubles it (default 200 ms).
    pub retry_delay: Duration,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            batch_size: 64,
            max_concurrency: 2,
            max_retries: 2,
            retry_delay: Duration::from_millis(200),
        }
    }
}

impl EmbedOptions {
    /// Sets the batch size (at least 1).
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Sets how many calls may be in flight (at least 1).
    pub fn max_concurrency(mut self, max_concurrency: usize) -> Self {
        self.max_concurrency = max_concurrency.max(1);
        self
    }

    /// Sets how many times a retryable failure is retried.
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the first retry's delay.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }
}

/// Embeds one text (with the default retries).
pub async fn embed(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>, EmbedError> {
    let mut vectors = embed_many(embedder, &[text.to_owned()], &EmbedOptions::default()).await?;
    vectors.pop().ok_or_else(|| EmbedError::CountMismatch {
        provider: embedder.provider().to_owned(),
        model: embedder.model_id().to_owned(),
        expected: 1,
        actual: 0,
    })
}

/// Embeds `texts`: one vector per text, in order. Fails with the first error that retries
/// did not cure; an empty list makes no call.
pub async fn embed_many(
    embedder: &dyn Embedder,
    texts: &[String],
    options: &EmbedOptions,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let batch_size = options.batch_size.max(1);
    // Owned batches: a closure over borrowed slices would make the future not `Send`-provable
    // inside async traits (a higher-ranked lifetime the compiler cannot name).
    let owned: Vec<Vec<String>> = texts.chunks(batch_size).map(<[String]>::to_vec).collect();
    let batches: Vec<Vec<Vec<f32>>> = futures::stream::iter(owned)
        .map(|batch| async move { embed_batch(embedder, &batch, options).await })
        .buffered(options.max_concurrency.max(1))
        .try_collect()
        .await?;
    Ok(batches.into_iter().flatten().collect())
}

async fn embed_batch(
    embedder: &dyn Embedder,
    batch: &[String],
    options: &EmbedOptions,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut attempt = 0;
    loop {
        match embedder.embed(batch).await {
            Ok(vectors) => return Ok(vectors),
            Err(error) if error.is_retryable() && attempt < options.max_retries => {
                let delay = options.retry_delay.saturating_mul(1 << attempt.min(16));
                tracing::debug!(
                    attempt,
                    ?delay,
                    error = %error,
                    "embedding failed; retrying"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}
