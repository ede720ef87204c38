//! Kestrel's prebuilt scorers, for `kestrel_core::eval`'s [`Scorer`] trait.
//!
//! - [`code`]: Mastra's deterministic scorers — content similarity, textual difference,
//!   keyword coverage, completeness, tone, tool-call accuracy and trajectory accuracy — with
//!   `@mastra/evals`' values on the same inputs (lengths in UTF-16 code units, JavaScript's
//!   whitespace, the same word lists);
//! - [`experiment`]: datasets (versioned, read from JSON Lines) and experiments that run an
//!   agent over them with chosen scorers, bounded concurrency, retries and progress, and
//!   compare two;
//! - [`llm`]: the LLM judges (answer relevancy, faithfulness, hallucination, toxicity, bias,
//!   context precision and recall, prompt alignment, rubric, summarization), their steps
//!   answered by a judge model through structured output;
//!
//! ```
//! use kestrel_core::eval::{Scorer, ScorerRun};
//! use kestrel_evals::code::ContentSimilarity;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let result = ContentSimilarity::new()
//!     .run(ScorerRun::texts("The quick brown fox", "The quick brown dog"))
//!     .await?;
//! assert_eq!(result.score, Some(0.8));
//! # Ok(())
//! # }
//! ```
//!
//! [`Scorer`]: kestrel_core::eval::Scorer

pub mod code;
pub mod dataset;
pub mod experiment;
mod js;
pub mod llm;
