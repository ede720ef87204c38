//! Tone: how steady the answer's sentiment is, or how close it is to a reference tone
//! (Mastra's `createToneScorer`, through the `sentiment` package's AFINN-165 and emoji
//! ratings).

use std::collections::HashMap;
use std::sync::OnceLock;

use async_trait::async_trait;
use kestrel_core::eval::{ScoreResult, Scorer, ScorerError, ScorerRun};
use serde_json::json;

use crate::js;

/// Scores the output's tone: with a reference, `1 − |comparative(output) −
/// comparative(reference)|`; without, `1 − the variance of its sentences' comparatives`
/// (never below 0). The input is not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tone {
    /// The tone to compare with (a sample text).
    pub reference_tone: Option<String>,
}

impl Tone {
    /// Scores the output's steadiness.
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares with `reference`'s tone instead.
    pub fn reference_tone(mut self, reference: impl Into<String>) -> Self {
        self.reference_tone = Some(reference.into());
        self
    }
}

fn ratings() -> &'static HashMap<String, i32> {
    static RATINGS: OnceLock<HashMap<String, i32>> = OnceLock::new();
    RATINGS.get_or_init(|| {
        let mut all: HashMap<String, i32> =
            serde_json::from_str(include_str!("../../data/afinn-165.json")).unwrap_or_default();
        let emoji: HashMap<String, i32> =
            serde_json::from_str(include_str!("../../data/emoji-sentiment.json"))
                .unwrap_or_default();
        all.extend(emoji);
        all
    })
}

const NEGATORS: [&str; 12] = [
    "cant", "can't", "dont", "don't", "doesnt", "doesn't", "not", "non", "wont", "won't", "isnt",
    "isn't",
];

/// `sentiment`'s tokens: lowercased, its punctuation turned to spaces, runs of two or more
/// spaces made one, split at single spaces.
fn tokens(text: &str) -> Vec<String> {
    let lowered = js::lower(text);
    let spaced: String = lowered
        .chars()
        .map(|c| match c {
            '\n' | '.' | ',' | '/' | '#' | '!' | '?' | '$' | '%' | '^' | '&' | '*' | ';' | ':'
            | '{' | '}' | '=' | '_' | '`' | '"' | '~' | '(' | ')' => ' ',
            other => other,
        })
        .collect();
    // `/\s\s+/g` → " ": only runs of two or more.
    let chars: Vec<char> = spaced.chars().collect();
    let mut collapsed = String::with_capacity(spaced.len());
    let mut i = 0;
    while i < chars.len() {
        if js::is_space(chars[i]) {
            let start = i;
            while i < chars.len() && js::is_space(chars[i]) {
                i += 1;
            }
            if i - start >= 2 {
                collapsed.push(' ');
            } else {
                collapsed.push(chars[start]);
            }
        } else {
            collapsed.push(chars[i]);
            i += 1;
        }
    }
    js::trim(&collapsed).split(' ').map(str::to_owned).collect()
}

/// `sentiment.analyze(text).comparative`: the sum of the tokens' ratings (a rating negated
/// after a negator) over the number of tokens.
pub fn comparative(text: &str) -> f64 {
    let tokens = tokens(text);
    let ratings = ratings();
    let mut score = 0i64;
    for (i, token) in tokens.iter().enumerate() {
        let Some(&rating) = ratings.get(token) else {
            continue;
        };
        let negated = i > 0 && NEGATORS.contains(&tokens[i - 1].as_str());
        score += i64::from(if negated { -rating } else { rating });
    }
    if tokens.is_empty() {
        0.0
    } else {
        score as f64 / tokens.len() as f64
    }
}

/// `text.match(/[^.!?]+[.!?]+/g)`: the sentences that end with `.`, `!` or `?`.
fn sentences(text: &str) -> Vec<&str> {
    let end = |c: char| matches!(c, '.' | '!' | '?');
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| !end(c)) {
        rest = &rest[start..];
        let Some(stop) = rest.find(end) else {
            break;
        };
        let after = rest[stop..]
            .find(|c: char| !end(c))
            .map_or(rest.len(), |n| stop + n);
        out.push(&rest[..after]);
        rest = &rest[after..];
    }
    out
}

#[async_trait]
impl Scorer for Tone {
    fn id(&self) -> &str {
        "tone-scorer"
    }

    fn name(&self) -> &str {
        "Tone Scorer"
    }

    fn description(&self) -> &str {
        "Analyzes the tone and sentiment of agent responses using sentiment analysis. Can compare against a reference tone or evaluate sentiment stability."
    }

    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError> {
        let answer = run.output_text();
        if let Some(reference) = &self.reference_tone {
            let response = comparative(&answer);
            let wanted = comparative(reference);
            let difference = (response - wanted).abs();
            let score = (1.0 - difference).max(0.0);
            return Ok(ScoreResult::new(run.run_id, score).preprocess(json!({
                "score": score,
                "responseSentiment": response,
                "referenceSentiment": wanted,
                "difference": difference,
            })));
        }
        let mut parts = sentences(&answer);
        if parts.is_empty() {
            parts.push(&answer);
        }
        let values: Vec<f64> = parts.iter().map(|s| comparative(s)).collect();
        let n = values.len() as f64;
        let average = values.iter().sum::<f64>() / n;
        let variance = values.iter().map(|v| (v - average).powi(2)).sum::<f64>() / n;
        let score = (1.0 - variance).max(0.0);
        Ok(ScoreResult::new(run.run_id, score).preprocess(json!({
            "score": score,
            "avgSentiment": average,
            "sentimentVariance": variance,
        })))
    }
}
