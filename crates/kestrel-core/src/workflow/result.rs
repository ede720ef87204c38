//! What a run leaves: the run's [`WorkflowResult`] (Mastra's `WorkflowResult`, camelCase in
//! JSON), with each step's [`StepResult`](crate::store::StepResult).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{StepErrorInfo, WorkflowStatus};
use crate::store::StepResults;

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
    pub steps: StepResults,
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
