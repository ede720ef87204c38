//! Observational memory's notes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Scope;

/// A dated note condensed from messages by observational memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// Its id.
    pub id: String,
    /// The thread or resource it belongs to.
    pub scope: Scope,
    /// The note.
    pub text: String,
    /// When it was observed.
    pub created_at: DateTime<Utc>,
    /// The last message seq (of `source_thread_id`) it covers.
    pub observed_up_to_seq: Option<i64>,
    /// The thread its messages came from.
    pub source_thread_id: Option<String>,
}

/// An observation to add.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewObservation {
    /// Its id; a fresh UUID when `None`.
    pub id: Option<String>,
    /// The note.
    pub text: String,
    /// When it was observed; now when `None`.
    pub created_at: Option<DateTime<Utc>>,
    /// The last message seq it covers.
    pub observed_up_to_seq: Option<i64>,
    /// The thread its messages came from.
    pub source_thread_id: Option<String>,
}

impl NewObservation {
    /// An observation holding `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}
