//! Mastra's deterministic code scorers, giving `@mastra/evals`' values on the same inputs
//! (checked against fixtures generated from it: `tests/fixtures/code-scorers.json`).

mod completeness;
mod content_similarity;
mod keyword_coverage;
mod textual_difference;
mod tone;
mod tool_call_accuracy;
mod trajectory_accuracy;

pub use completeness::{Completeness, elements};
pub use content_similarity::{ContentSimilarity, dice};
pub use keyword_coverage::{KeywordCoverage, keywords};
pub use textual_difference::{MAX_LCS_CELLS, TextualDifference};
pub use tone::{Tone, comparative};
pub use tool_call_accuracy::{Expected, ToolCallAccuracy};
pub use trajectory_accuracy::{Comparison, TrajectoryAccuracy, compare};
