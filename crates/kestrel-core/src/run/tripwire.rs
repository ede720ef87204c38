//! Why a processor stopped a run ([`crate::processor`]): what the stopped run's state, its
//! `tripwire` event and its result carry.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a run was stopped by a processor: the payload of the `tripwire` event, and what a
/// stopped run's result and stored state carry.
///
/// Its JSON is Mastra's: `{ reason, retry?, metadata?, processorId? }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tripwire {
    /// Why, in the processor's words (shown to the user by chat UIs).
    pub reason: String,
    /// Whether the processor asked the model to try again (the run ends anyway once the
    /// agent's `max_processor_retries` are spent, or when it allows none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
    /// What the processor attached (the matched rule, a score...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The processor that stopped the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor_id: Option<String>,
}

impl Tripwire {
    /// A tripwire with a reason only.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            retry: false,
            metadata: None,
            processor_id: None,
        }
    }
}

impl std::fmt::Display for Tripwire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.processor_id {
            Some(id) => write!(f, "blocked by processor {id:?}: {}", self.reason),
            None => write!(f, "blocked: {}", self.reason),
        }
    }
}
