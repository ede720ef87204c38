//! Completeness: the share of the input's words (nouns, verbs, topics, terms) the output
//! covers (Mastra's `createCompletenessScorer`).
//!
//! Mastra extracts the elements with the `compromise` NLP library, whose part-of-speech
//! tagger also rewrites verbs to their infinitive in place (`running` becomes `run`, `is`
//! becomes `be`). Kestrel does not carry an English tagger: its elements are the text's
//! words (diacritics removed, lowercased, split at anything not a letter or digit), with the
//! forms of *to be* as `be`. On text whose verbs are not inflected the two agree; the
//! fixture cases where compromise's tagger changes the result are listed in the parity test.

use std::collections::BTreeSet;

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

/// Scores the share of the input's elements found in the output's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completeness;

impl Completeness {
    /// The scorer.
    pub fn new() -> Self {
        Self
    }
}

/// `str.normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase()`, for the Latin
/// letters with diacritics (the common case): each such letter folded to its base.
fn fold(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'à'..='å' | 'À'..='Å' => 'a',
            'ç' | 'Ç' => 'c',
            'è'..='ë' | 'È'..='Ë' => 'e',
            'ì'..='ï' | 'Ì'..='Ï' => 'i',
            'ñ' | 'Ñ' => 'n',
            'ò'..='ö' | 'Ò'..='Ö' => 'o',
            'ù'..='ü' | 'Ù'..='Ü' => 'u',
            'ý' | 'ÿ' | 'Ý' => 'y',
            other => other,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The elements of `text`: its words as Mastra cleans them, each once, in order.
pub fn elements(text: &str) -> Vec<String> {
    let folded = fold(text.trim());
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for word in folded.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit())) {
        if word.is_empty() {
            continue;
        }
        let word = match word {
            "is" | "am" | "are" | "was" | "were" | "been" | "being" => "be",
            w => w,
        };
        if seen.insert(word.to_owned()) {
            out.push(word.to_owned());
        }
    }
    out
}

/// Mastra's coverage: an element of `original` is covered by an equal one of `simplified`
/// (elements of three letters or fewer), or by one containing it or contained in it with a
/// length ratio above 0.6.
fn coverage(original: &[String], simplified: &[String]) -> f64 {
    if original.is_empty() {
        return if simplified.is_empty() { 1.0 } else { 0.0 };
    }
    let covered = original
        .iter()
        .filter(|e| {
            simplified.iter().any(|s| {
                if e.chars().count() <= 3 {
                    return *e == s;
                }
                let (longer, shorter) = if e.len() > s.len() {
                    (e.as_str(), s.as_str())
                } else {
                    (s.as_str(), e.as_str())
                };
                longer.contains(shorter)
                    && shorter.chars().count() as f64 / longer.chars().count() as f64 > 0.6
            })
        })
        .count();
    covered as f64 / original.len() as f64
}

#[async_trait]
impl Scorer for Completeness {
    fn id(&self) -> &str {
        "completeness-scorer"
    }

    fn name(&self) -> &str {
        "Completeness Scorer"
    }

    fn description(&self) -> &str {
        "Extracts the words of the input and the output and scores the share of the input's the output covers."
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let input = elements(&run.input_text());
        let output = elements(&run.output_text());
        let missing: Vec<&String> = input.iter().filter(|e| !output.contains(e)).collect();
        let score = coverage(&input, &output);
        Ok(ScoreResult::new(run.run_id, score).preprocess(json!({
            "inputElements": input,
            "outputElements": output,
            "missingElements": missing,
            "elementCounts": {"input": input.len(), "output": output.len()},
        })))
    }
}
