//! Textual difference: how much of the input survives in the output, as the ratio of their
//! longest common subsequence of UTF-16 code units (Mastra's
//! `createTextualDifferenceScorer`, like Python's `SequenceMatcher.ratio()`).

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

use crate::js;

/// The most cells of the LCS table (input length × output length, in UTF-16 units) the
/// scorer computes: past it the run is refused rather than the process kept busy for
/// minutes (64 million cells take about a tenth of a second).
pub const MAX_LCS_CELLS: usize = 64 * 1024 * 1024;

/// Scores `2 · lcs / (|input| + |output|)`; the preprocess result also gives the confidence
/// (1 − the length difference), the number of words changed and the length difference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextualDifference;

impl TextualDifference {
    /// The scorer.
    pub fn new() -> Self {
        Self
    }
}

fn lcs(a: &[u16], b: &[u16]) -> usize {
    let mut previous = vec![0usize; b.len() + 1];
    let mut current = vec![0usize; b.len() + 1];
    for &x in a {
        for (j, &y) in b.iter().enumerate() {
            current[j + 1] = if x == y {
                previous[j] + 1
            } else {
                previous[j + 1].max(current[j])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// The LCS ratio of `input` and `output` (1 when equal, 0 when either is empty).
fn ratio(input: &[u16], output: &[u16]) -> f64 {
    if input == output {
        return 1.0;
    }
    if input.is_empty() || output.is_empty() {
        return 0.0;
    }
    2.0 * lcs(input, output) as f64 / (input.len() + output.len()) as f64
}

/// Words changed: Mastra's greedy count of words of the longer text without a match.
fn changes(input: &str, output: &str) -> usize {
    let (a, b) = (js::collapse_spaces(input), js::collapse_spaces(output));
    if a == b {
        if input != output {
            let diff = js::words(input).len().abs_diff(js::words(output).len());
            return if diff == 0 { 1 } else { diff };
        }
        return 0;
    }
    let (a, b) = (js::words(&a), js::words(&b));
    if a.is_empty() {
        return b.len();
    }
    if b.is_empty() {
        return a.len();
    }
    let mut used = vec![false; b.len()];
    let mut matches = 0;
    for word in &a {
        if let Some(j) = (0..b.len()).find(|&j| !used[j] && b[j] == *word) {
            used[j] = true;
            matches += 1;
        }
    }
    a.len().max(b.len()) - matches
}

#[async_trait]
impl Scorer for TextualDifference {
    fn id(&self) -> &str {
        "textual-difference-scorer"
    }

    fn name(&self) -> &str {
        "Textual Difference Scorer"
    }

    fn description(&self) -> &str {
        "Calculate textual difference between input and output using sequence matching algorithms."
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let input = run.input_text();
        let output = run.output_text();
        let a: Vec<u16> = input.encode_utf16().collect();
        let b: Vec<u16> = output.encode_utf16().collect();
        if a.len().saturating_mul(b.len()) > MAX_LCS_CELLS {
            return Err(ScorerError::invalid_run(
                self.id(),
                format!(
                    "the texts are too long to compare ({} × {} UTF-16 units; at most {MAX_LCS_CELLS} cells)",
                    a.len(),
                    b.len()
                ),
            ));
        }
        let score = ratio(&a, &b);
        let longest = a.len().max(b.len());
        let length_diff = if longest > 0 {
            a.len().abs_diff(b.len()) as f64 / longest as f64
        } else {
            0.0
        };
        Ok(ScoreResult::new(run.run_id, score).preprocess(json!({
            "ratio": score,
            "confidence": 1.0 - length_diff,
            "changes": changes(&input, &output),
            "lengthDiff": length_diff,
        })))
    }
}
