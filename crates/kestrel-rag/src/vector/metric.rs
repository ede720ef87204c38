//! How similarity is measured: the metrics and the distance loops the exact backends run.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How similarity is measured in an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Cosine similarity: the angle between vectors, their lengths ignored. The default.
    #[default]
    Cosine,
    /// Euclidean distance, scored `1 / (1 + distance)`.
    Euclidean,
    /// The dot product (inner product); for normalised vectors it equals cosine similarity.
    #[serde(rename = "dotproduct")]
    DotProduct,
}

impl Metric {
    /// Mastra's name for the metric: `cosine`, `euclidean` or `dotproduct`.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::Euclidean => "euclidean",
            Metric::DotProduct => "dotproduct",
        }
    }

    /// Parses Mastra's name of a metric.
    pub fn parse(name: &str) -> Option<Metric> {
        match name {
            "cosine" => Some(Metric::Cosine),
            "euclidean" => Some(Metric::Euclidean),
            "dotproduct" => Some(Metric::DotProduct),
            _ => None,
        }
    }

    /// The score of `vector` against `query` (both the same length), with `query_norm` the
    /// query's Euclidean norm (used by cosine).
    pub fn score(self, query: &[f32], query_norm: f32, vector: &[f32]) -> f32 {
        match self {
            Metric::Cosine => {
                let (dot, norm) = dot_and_norm(query, vector);
                let denominator = query_norm * norm.sqrt();
                if denominator > 0.0 {
                    dot / denominator
                } else {
                    0.0
                }
            }
            Metric::Euclidean => 1.0 / (1.0 + squared_distance(query, vector).sqrt()),
            Metric::DotProduct => dot_and_norm(query, vector).0,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Eight independent accumulators, so the compiler vectorises the loop.
const LANES: usize = 8;

/// The dot product of `a` and `b`, and the squared norm of `b`.
fn dot_and_norm(a: &[f32], b: &[f32]) -> (f32, f32) {
    let mut dot = [0.0f32; LANES];
    let mut norm = [0.0f32; LANES];
    let chunks_a = a.chunks_exact(LANES);
    let chunks_b = b.chunks_exact(LANES);
    let (tail_a, tail_b) = (chunks_a.remainder(), chunks_b.remainder());
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..LANES {
            dot[lane] += x[lane] * y[lane];
            norm[lane] += y[lane] * y[lane];
        }
    }
    let mut dot_sum: f32 = dot.iter().sum();
    let mut norm_sum: f32 = norm.iter().sum();
    for (x, y) in tail_a.iter().zip(tail_b) {
        dot_sum += x * y;
        norm_sum += y * y;
    }
    (dot_sum, norm_sum)
}

fn squared_distance(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = [0.0f32; LANES];
    let chunks_a = a.chunks_exact(LANES);
    let chunks_b = b.chunks_exact(LANES);
    let (tail_a, tail_b) = (chunks_a.remainder(), chunks_b.remainder());
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..LANES {
            let d = x[lane] - y[lane];
            sum[lane] += d * d;
        }
    }
    let mut total: f32 = sum.iter().sum();
    for (x, y) in tail_a.iter().zip(tail_b) {
        total += (x - y) * (x - y);
    }
    total
}

/// The Euclidean norm of a vector.
pub fn norm(vector: &[f32]) -> f32 {
    dot_and_norm(vector, vector).1.sqrt()
}
