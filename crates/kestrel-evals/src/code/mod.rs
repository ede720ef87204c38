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

/// The names [`by_name`] knows, as a list for messages.
pub const NAMES: &str = "content-similarity, textual-difference, keyword-coverage, completeness, \
                         tone, trajectory-accuracy";

/// The code scorer named `name`: its short name (`content-similarity`) or its Mastra id
/// (`code-content-similarity-scorer`...); `None` for any other name. What a CLI's `--scorer`
/// or a server's `scorerIds` pick from.
pub fn by_name(name: &str) -> Option<kestrel_core::eval::SharedScorer> {
    let name = name.strip_suffix("-scorer").unwrap_or(name);
    let name = name.strip_prefix("code-").unwrap_or(name);
    Some(match name {
        "content-similarity" => std::sync::Arc::new(ContentSimilarity::new()),
        "textual-difference" => std::sync::Arc::new(TextualDifference::new()),
        "keyword-coverage" => std::sync::Arc::new(KeywordCoverage::new()),
        "completeness" => std::sync::Arc::new(Completeness::new()),
        "tone" => std::sync::Arc::new(Tone::new()),
        "trajectory-accuracy" => std::sync::Arc::new(TrajectoryAccuracy::new()),
        _ => return None,
    })
}
