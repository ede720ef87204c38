//! Keyword coverage: the share of the input's keywords the output repeats (Mastra's
//! `createKeywordCoverageScorer`, through `keyword-extractor`'s English stop words).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

use crate::js;

/// Scores the share of the input's keywords found among the output's (1 when the input has
/// none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeywordCoverage;

impl KeywordCoverage {
    /// The scorer.
    pub fn new() -> Self {
        Self
    }
}

fn stop_words() -> &'static BTreeSet<&'static str> {
    static WORDS: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| {
        include_str!("../../data/stopwords-en.txt")
            .lines()
            .filter(|l| !l.is_empty())
            .collect()
    })
}

/// Whether `word` holds `http://` or `https://` (keyword-extractor keeps such words whole).
fn is_url(word: &str) -> bool {
    word.contains("http://") || word.contains("https://")
}

/// `<...>` tags removed (keyword-extractor's `/(<([^>]+)>)/gi`).
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        match after.find('>') {
            Some(close) if close > 0 => {
                out.push_str(&rest[..open]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The keywords of `text`: its words without punctuation, numbers and English stop words,
/// lowercased, each once (keyword-extractor with `remove_digits`, `return_changed_case` and
/// `remove_duplicates`).
pub fn keywords(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let stripped = strip_tags(text);
    let text = js::trim(&stripped);
    if text.is_empty() {
        return out;
    }
    for raw in text.split(js::is_space) {
        let mut word: String = if is_url(raw) {
            raw.to_owned()
        } else {
            let trimmed = raw.strip_prefix('\'').unwrap_or(raw);
            let trimmed = trimmed.strip_suffix('\'').unwrap_or(trimmed);
            trimmed
                .chars()
                .filter(|c| {
                    !matches!(
                        c,
                        '.' | ','
                            | ';'
                            | '!'
                            | '?'
                            | '('
                            | ')'
                            | ':'
                            | '"'
                            | '\u{201C}'
                            | '\u{201D}'
                            | '\u{2018}'
                            | '\u{2019}'
                    )
                })
                .collect()
        };
        if js::len16(&word) == 1 {
            word.retain(|c| !matches!(c, '_' | '@' | '&' | '#'));
        }
        if !word.is_empty() && word.chars().all(|c| c.is_ascii_digit()) {
            word.clear();
        }
        if word.is_empty() {
            continue;
        }
        let low = js::lower(&word);
        if !stop_words().contains(low.as_str()) {
            // A link keeps its case.
            out.insert(if is_url(&word) { word } else { low });
        }
    }
    out
}

#[async_trait]
impl Scorer for KeywordCoverage {
    fn id(&self) -> &str {
        "keyword-coverage-scorer"
    }

    fn name(&self) -> &str {
        "Keyword Coverage Scorer"
    }

    fn description(&self) -> &str {
        "Extracts keywords from the input and the output and scores the share of the input's the output covers."
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let reference = keywords(&run.input_text());
        let response = keywords(&run.output_text());
        let matched = reference.intersection(&response).count();
        let total = reference.len();
        let score = if total == 0 {
            1.0
        } else {
            matched as f64 / total as f64
        };
        Ok(ScoreResult::new(run.run_id, score)
            .preprocess(json!({
                "referenceKeywords": reference,
                "responseKeywords": response,
            }))
            .analyze(json!({
                "totalKeywordsLength": total,
                "matchedKeywordsLength": matched,
            })))
    }
}
