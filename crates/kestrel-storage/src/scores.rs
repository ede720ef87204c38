//! Scores as every backend keeps them: what a save checks, and the columns the SQL backends
//! store beside the record's JSON.
//!
//! **What is stored.** Each record exactly as saved (read back equal). Its id, scorer id,
//! run id and entity must be non-empty text without NUL (PostgreSQL text cannot hold one)
//! and at most [`MAX_SCORE_ID_BYTES`] bytes; a record that breaks this is refused with the
//! field named. Listings are newest first (ties: the larger id first), on every backend.
//!
//! **Pending scorings** ([`PendingScore`]) are checked alike and kept as JSON beside their id
//! and time; completing one stores its score and forgets it in one transaction.

use kestrel_core::store::{PendingScore, ScoreRecord, ScoreSource, ScoreStoreError};

use crate::error::{Result, StorageError};

/// The longest id (of the score, scorer, run or entity) a score may have, in bytes.
pub const MAX_SCORE_ID_BYTES: usize = 512;

/// A storage error as the score store's.
pub(crate) fn score_err(error: StorageError) -> ScoreStoreError {
    ScoreStoreError::Backend(error.to_string())
}

/// A record's columns, checked, and its JSON (the memory backend only checks).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) struct EncodedScore {
    pub id: String,
    pub scorer_id: String,
    pub run_id: String,
    pub entity_type: String,
    pub entity_id: String,
    pub source: &'static str,
    pub experiment_id: Option<String>,
    pub created_at: i64,
    pub record: String,
}

/// The wire name of a source.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn source_name(source: ScoreSource) -> &'static str {
    match source {
        ScoreSource::Live => "LIVE",
        ScoreSource::Test => "TEST",
    }
}

fn check_id(argument: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(StorageError::invalid(argument, "must not be empty"));
    }
    if value.len() > MAX_SCORE_ID_BYTES {
        return Err(StorageError::invalid(
            argument,
            format!("is {} bytes, at most {MAX_SCORE_ID_BYTES}", value.len()),
        ));
    }
    if value.contains('\0') {
        return Err(StorageError::invalid(argument, "must not contain NUL"));
    }
    Ok(())
}

impl EncodedScore {
    /// `score` checked and encoded.
    pub(crate) fn new(score: &ScoreRecord) -> Result<Self> {
        check_id("id", &score.id)?;
        check_id("scorerId", &score.scorer_id)?;
        check_id("runId", &score.run_id)?;
        check_id("entityType", &score.entity_type)?;
        check_id("entityId", &score.entity_id)?;
        if let Some(experiment) = &score.experiment_id {
            check_id("experimentId", experiment)?;
        }
        if score.score.is_some_and(|s| !s.is_finite()) {
            return Err(StorageError::invalid("score", "must be a finite number"));
        }
        let record = serde_json::to_string(score)
            .map_err(|e| StorageError::invalid("score", format!("cannot be encoded: {e}")))?;
        Ok(Self {
            id: score.id.clone(),
            scorer_id: score.scorer_id.clone(),
            run_id: score.run_id.clone(),
            entity_type: score.entity_type.clone(),
            entity_id: score.entity_id.clone(),
            source: source_name(score.source),
            experiment_id: score.experiment_id.clone(),
            created_at: i64::try_from(score.created_at).unwrap_or(i64::MAX),
            record,
        })
    }
}

/// A stored record's JSON read back.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode(json: &str) -> Result<ScoreRecord> {
    serde_json::from_str(json).map_err(|e| StorageError::corrupt("score", e))
}

/// A pending scoring's columns, checked, and its JSON (the memory backend only checks).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) struct EncodedPending {
    pub id: String,
    pub created_at: i64,
    pub record: String,
}

impl EncodedPending {
    /// `pending` checked and encoded.
    pub(crate) fn new(pending: &PendingScore) -> Result<Self> {
        check_id("id", &pending.id)?;
        check_id("scorerId", &pending.scorer_id)?;
        check_id("runId", &pending.run_id)?;
        check_id("entityType", &pending.entity_type)?;
        check_id("entityId", &pending.entity_id)?;
        let record = serde_json::to_string(pending).map_err(|e| {
            StorageError::invalid("pendingScore", format!("cannot be encoded: {e}"))
        })?;
        Ok(Self {
            id: pending.id.clone(),
            created_at: i64::try_from(pending.created_at).unwrap_or(i64::MAX),
            record,
        })
    }
}

/// A stored pending scoring's JSON read back.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_pending(json: &str) -> Result<PendingScore> {
    serde_json::from_str(json).map_err(|e| StorageError::corrupt("pending score", e))
}
