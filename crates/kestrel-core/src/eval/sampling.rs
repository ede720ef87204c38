//! Which live runs a scorer scores.
//!
//! The choice is Mastra's, bit for bit: the SHA-256 of the run's trace id (its run id when
//! it was not traced), its first six bytes read big-endian as a fraction of 2^48, compared
//! with the rate. So every scorer at one rate picks the same runs, on every instance, and a
//! run scored again (after a restart) makes the same choice.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which live runs a scorer scores.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ScoreSampling {
    /// Every run (Mastra's `{type: 'none'}`: no sampling).
    #[default]
    None,
    /// This share of runs, from 0 to 1.
    Ratio {
        /// The share.
        rate: f64,
    },
}

impl ScoreSampling {
    /// A share of runs (clamped to 0–1; NaN scores none).
    pub fn ratio(rate: f64) -> Self {
        Self::Ratio {
            rate: if rate.is_nan() {
                0.0
            } else {
                rate.clamp(0.0, 1.0)
            },
        }
    }

    /// Whether the run with trace id `trace_id` (else run id `run_id`) is scored.
    pub fn samples(self, trace_id: Option<&str>, run_id: &str) -> bool {
        match self {
            Self::None => true,
            Self::Ratio { rate } if rate >= 1.0 => true,
            Self::Ratio { rate } if rate.is_nan() || rate <= 0.0 => false,
            Self::Ratio { rate } => sample_fraction(trace_id.unwrap_or(run_id)) < rate,
        }
    }
}

/// Where `id` falls in 0–1 for sampling: the first six bytes of its SHA-256, big-endian, over
/// 2^48.
pub fn sample_fraction(id: &str) -> f64 {
    let digest = Sha256::digest(id.as_bytes());
    let mut high = 0u64;
    for byte in digest.iter().take(6) {
        high = (high << 8) | u64::from(*byte);
    }
    high as f64 / (1u64 << 48) as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn fractions_are_mastras() {
        // From @mastra/evals' rule, computed by Node (compat-tests/eval-fixtures).
        let golden = [
            ("0af7651916cd43dd8448eb211c80319c", 0.08580714096926556),
            ("run-1", 0.30624127292746905),
            ("a", 0.791374270522379),
            ("", 0.8894159948913369),
        ];
        for (id, want) in golden {
            assert_eq!(sample_fraction(id), want, "{id}");
        }
    }

    #[test]
    fn the_rate_decides_and_the_trace_id_wins() {
        let half = ScoreSampling::ratio(0.5);
        assert!(half.samples(Some("0af7651916cd43dd8448eb211c80319c"), "a"));
        assert!(!half.samples(None, "a"));
        assert!(ScoreSampling::None.samples(None, "a"));
        assert!(!ScoreSampling::ratio(0.0).samples(None, "0af7651916cd43dd8448eb211c80319c"));
        assert!(ScoreSampling::ratio(7.0).samples(None, "a"));
        assert!(!ScoreSampling::ratio(f64::NAN).samples(None, "a"));
        let json = serde_json::to_value(ScoreSampling::ratio(0.25)).unwrap();
        assert_eq!(json, serde_json::json!({"type": "ratio", "rate": 0.25}));
        let none: ScoreSampling =
            serde_json::from_value(serde_json::json!({"type": "none"})).unwrap();
        assert_eq!(none, ScoreSampling::None);
    }
}
