//! The bodies of decisions on stopped runs, resumes and thread aborts.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The body of approve / decline.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DecisionBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub tool_call_id: String,
    /// The waiting call's fingerprint, as the run gave it: a decision on another call under
    /// the same id is refused.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    pub fingerprint: Option<String>,
    /// Why the call was declined (the model reads it).
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_REASON_LEN))]
    pub reason: Option<String>,
}

/// The body of `resume-stream`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub run_id: String,
    #[serde(default, deserialize_with = "crate::wire::opt_id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub tool_call_id: Option<String>,
    /// The waiting call's fingerprint, as the run gave it.
    #[serde(default)]
    #[schemars(length(max = crate::wire::MAX_ID_LEN))]
    pub fingerprint: Option<String>,
    pub resume_data: Value,
}

/// The body of `threads/abort`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadBody {
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub resource_id: String,
    #[serde(deserialize_with = "crate::wire::id")]
    #[schemars(length(min = 1, max = crate::wire::MAX_ID_LEN), pattern(crate::wire::ID_PATTERN))]
    pub thread_id: String,
}
