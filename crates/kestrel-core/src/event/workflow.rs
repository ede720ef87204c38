//! The payloads of a workflow run's events (`from: "WORKFLOW"`), with Mastra's field names, so
//! a workflow streams what `@mastra/client-js` reads.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a workflow run stands (Mastra's run statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowStatus {
    /// Created, not started.
    Pending,
    /// Running.
    Running,
    /// Ended with an output.
    Success,
    /// Ended with an error.
    Failed,
    /// Stopped at a step that waits for resume data.
    Suspended,
    /// Sleeping until a time.
    Waiting,
    /// Canceled.
    Canceled,
    /// Stopped by a processor's tripwire (in a processor step, or an agent step whose
    /// agent's processor stopped it).
    Tripwire,
}

impl WorkflowStatus {
    /// Every status.
    pub const ALL: [WorkflowStatus; 8] = [
        Self::Pending,
        Self::Running,
        Self::Success,
        Self::Failed,
        Self::Suspended,
        Self::Waiting,
        Self::Canceled,
        Self::Tripwire,
    ];

    /// Its name (also its JSON form): `"suspended"`…
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Failed => "failed",
            Self::Suspended => "suspended",
            Self::Waiting => "waiting",
            Self::Canceled => "canceled",
            Self::Tripwire => "tripwire",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the run has ended (success, failed, canceled, tripwire).
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            Self::Success | Self::Failed | Self::Canceled | Self::Tripwire
        )
    }
}

/// Where one step of a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// Running.
    Running,
    /// Ended with an output.
    Success,
    /// Ended with an error.
    Failed,
    /// Waiting for resume data.
    Suspended,
    /// Sleeping.
    Waiting,
    /// Ended the run early with its value (stored as `success`).
    Bailed,
    /// Not run (a branch arm whose condition was false).
    Skipped,
    /// Canceled with its run.
    Canceled,
}

/// Payload of `workflow-start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStartPayload {
    /// The workflow.
    pub workflow_id: String,
}

/// A step's error, as events and results carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepErrorInfo {
    /// What went wrong.
    pub message: String,
    /// The kind of error (`"Error"` for a step's own, `"TripWire"` for a processor's stop).
    pub name: String,
    /// The tripwire, when a processor stopped the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// (Boxed: a run's future holds a failure across its awaits.)
    pub tripwire: Option<Box<crate::run::Tripwire>>,
}

/// Payload of the step events: `workflow-step-start`, `workflow-step-result`,
/// `workflow-step-suspended` and `workflow-step-waiting`. Each event has the fields of the
/// ones before it in the step's life: a result repeats the start's fields and adds its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStepPayload {
    /// The step's id (Mastra copies `id` here at run level).
    pub step_name: String,
    /// The step's id (prefixed by its parents' ids in a nested workflow: `outer.inner`).
    pub id: String,
    /// This execution of the step (a resume is a new one); none for a loop's or a foreach's
    /// container step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_call_id: Option<String>,
    /// Where the step stands.
    pub status: StepStatus,
    /// The step's input (shared with the step's result: an event does not copy it).
    #[serde(default)]
    pub payload: Arc<Value>,
    /// When the step first started (milliseconds since the Unix epoch).
    pub started_at: u64,
    /// The step's output (a result; shared with the step's result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Arc<Value>>,
    /// When the step ended (a result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// Why it failed (a failed result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepErrorInfo>,
    /// What the step suspended with (a suspension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_payload: Option<Value>,
    /// When it suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<u64>,
    /// The data it was resumed with (a resumed step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_payload: Option<Value>,
    /// When it was resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<u64>,
    /// Loop steps: `{iterationCount}` (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Payload of `workflow-step-output`: what a step wrote through its writer (`from: "USER"`),
/// or, for an agent step, each of the agent's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStepOutputPayload {
    /// The step that wrote it.
    pub step_name: String,
    /// What it wrote.
    pub output: Value,
    /// The workflow run.
    pub run_id: String,
}

/// Payload of `workflow-step-progress`: one iteration of a foreach ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStepProgressPayload {
    /// The foreach step.
    pub step_name: String,
    /// The foreach step.
    pub id: String,
    /// Iterations ended so far.
    pub completed_count: usize,
    /// Iterations in all.
    pub total_count: usize,
    /// The iteration that ended.
    pub current_index: usize,
    /// How it ended.
    pub iteration_status: StepStatus,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_output: Option<Value>,
}

/// A payload with no fields (`workflow-canceled`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyPayload {}

/// The model usage of a workflow run, summed over its agent steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// Prompt tokens read from a provider's cache.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to a provider's cache.
    pub cache_creation_input_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
}

impl WorkflowUsage {
    /// Adds one model call's (or run's) usage.
    pub fn add(&mut self, usage: &crate::model::Usage) {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.total_tokens += usage.total_tokens;
        self.reasoning_tokens += usage.reasoning_tokens.unwrap_or(0);
        self.cached_input_tokens += usage.cached_input_tokens.unwrap_or(0);
    }

    /// Adds another run's usage.
    pub fn add_all(&mut self, other: &WorkflowUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// `output` of `workflow-finish`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowFinishOutput {
    /// The run's model usage.
    pub usage: WorkflowUsage,
}

/// Payload of `workflow-finish`: the run ended, or stopped (suspended, canceled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowFinishPayload {
    /// How the run ended (or stopped).
    pub workflow_status: WorkflowStatus,
    /// `{}`, or for a failed run `{error, errorMessage}`.
    pub metadata: Value,
    /// The run's usage.
    pub output: WorkflowFinishOutput,
    /// The run's output (a successful run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_workflow_result: Option<Value>,
}
