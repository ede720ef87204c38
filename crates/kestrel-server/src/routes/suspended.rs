//! What `GET /agents/{id}/suspended-runs` answers: Kestrel's waiting calls with Mastra's
//! fields beside them.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A page of an agent's runs waiting for a person, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct SuspendedRunsPage {
    /// This page's runs.
    pub(super) runs: Vec<SuspendedRunInfo>,
    /// How many runs match in all.
    pub(super) total: u64,
}

/// A run waiting for a person.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SuspendedRunInfo {
    /// The run's id.
    pub(super) run_id: String,
    /// Always `suspended` (Mastra's).
    #[schemars(extend("const" = "suspended"))]
    pub(super) status: &'static str,
    /// Its thread; `null` for a run without memory.
    pub(super) thread_id: Option<String>,
    /// Its resource; `null` for a run without memory.
    pub(super) resource_id: Option<String>,
    /// The calls it waits on, in the model's order.
    pub(super) tool_calls: Vec<SuspendedCall>,
    /// When it stopped.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub(super) suspended_at: chrono::DateTime<chrono::Utc>,
}

/// A call a suspended run waits on: Kestrel's waiting call, and Mastra's `requiresApproval`
/// and `suspendPayload`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SuspendedCall {
    /// The call, and what it waits for.
    #[serde(flatten)]
    pub(super) call: kestrel_core::agent::WaitingCall,
    /// Whether it waits for a person's approval.
    pub(super) requires_approval: bool,
    /// What its tool passed to `suspend`, when it suspended itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) suspend_payload: Option<Value>,
}

impl From<kestrel_core::agent::WaitingCall> for SuspendedCall {
    fn from(call: kestrel_core::agent::WaitingCall) -> Self {
        use kestrel_core::agent::Waiting;
        let suspend_payload = match &call.waiting {
            Waiting::Resume { payload } => Some(payload.clone()),
            _ => None,
        };
        Self {
            requires_approval: call.waiting == Waiting::Approval,
            suspend_payload,
            call,
        }
    }
}
