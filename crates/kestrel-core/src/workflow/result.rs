//! What a run leaves: each step's [`StepResult`], and the run's [`WorkflowResult`] (Mastra's
//! `WorkflowResult`, camelCase in JSON).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{StepErrorInfo, StepStatus, WorkflowStatus};

/// One step's result in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// Where it stands (a bailed step is stored as `success`).
    pub status: StepStatus,
    /// Its input.
    pub payload: Value,
    /// Its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What it suspended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_payload: Option<Value>,
    /// The data it was resumed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_payload: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepErrorInfo>,
    /// When it first started (milliseconds since the Unix epoch).
    pub started_at: u64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// When it suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<u64>,
    /// When it was resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<u64>,
}

impl StepResult {
    /// Its output, if it succeeded.
    pub fn success_output(&self) -> Option<&Value> {
        match self.status {
            StepStatus::Success => self.output.as_ref(),
            _ => None,
        }
    }
}

/// How a run ended, or where it stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowResult {
    /// The run's status.
    pub status: WorkflowStatus,
    /// The run.
    pub run_id: String,
    /// The run's input.
    pub input: Value,
    /// Each step's result, by id.
    pub steps: BTreeMap<String, StepResult>,
    /// The top-level steps that ran, in order (parallel arms and branches are not listed).
    pub step_execution_path: Vec<String>,
    /// The output (a successful run: the last step's, or a bail's value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepErrorInfo>,
    /// The steps waiting for resume data, each as its path of ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<Vec<String>>,
    /// What each suspended step suspended with, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub suspend_payload: BTreeMap<String, Value>,
    /// The workflow state at the end.
    pub state: Value,
}
