//! Content similarity: how alike the input and the output are, as the Dice coefficient of
//! their character bigrams (Mastra's `createContentSimilarityScorer`, through
//! `string-similarity`'s `compareTwoStrings`).

use std::collections::HashMap;

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

use crate::js;

/// Scores the Dice coefficient of the input's and the output's bigrams (UTF-16 code units,
/// whitespace removed), from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentSimilarity {
    /// Compare lowercased texts (default: yes).
    pub ignore_case: bool,
    /// Collapse runs of whitespace first (default: yes).
    pub ignore_whitespace: bool,
}

impl Default for ContentSimilarity {
    fn default() -> Self {
        Self {
            ignore_case: true,
            ignore_whitespace: true,
        }
    }
}

impl ContentSimilarity {
    /// Case and whitespace ignored.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether case is ignored.
    pub fn ignore_case(mut self, ignore: bool) -> Self {
        self.ignore_case = ignore;
        self
    }

    /// Whether runs of whitespace are collapsed.
    pub fn ignore_whitespace(mut self, ignore: bool) -> Self {
        self.ignore_whitespace = ignore;
        self
    }
}

/// `string-similarity`'s `compareTwoStrings`: the Dice coefficient of the bigrams of UTF-16
/// code units, all whitespace removed.
pub fn dice(first: &str, second: &str) -> f64 {
    let units = |s: &str| -> Vec<u16> {
        s.chars()
            .filter(|c| !js::is_space(*c))
            .collect::<String>()
            .encode_utf16()
            .collect()
    };
    let (a, b) = (units(first), units(second));
    if a == b {
        return 1.0;
    }
    if a.len() < 2 || b.len() < 2 {
        return 0.0;
    }
    let mut bigrams: HashMap<[u16; 2], usize> = HashMap::new();
    for pair in a.windows(2) {
        *bigrams.entry([pair[0], pair[1]]).or_default() += 1;
    }
    let mut shared = 0usize;
    for pair in b.windows(2) {
        if let Some(count) = bigrams.get_mut(&[pair[0], pair[1]])
            && *count > 0
        {
            *count -= 1;
            shared += 1;
        }
    }
    2.0 * shared as f64 / (a.len() + b.len() - 2) as f64
}

#[async_trait]
impl Scorer for ContentSimilarity {
    fn id(&self) -> &str {
        "content-similarity-scorer"
    }

    fn name(&self) -> &str {
        "Content Similarity Scorer"
    }

    fn description(&self) -> &str {
        "Calculates content similarity between input and output messages using string comparison algorithms."
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let mut input = run.input_text();
        let mut output = run.output_text();
        if self.ignore_case {
            input = js::lower(&input);
            output = js::lower(&output);
        }
        if self.ignore_whitespace {
            input = js::collapse_spaces(&input);
            output = js::collapse_spaces(&output);
        }
        let score = dice(&input, &output);
        Ok(ScoreResult::new(run.run_id, score)
            .preprocess(json!({"processedInput": input, "processedOutput": output})))
    }
}
