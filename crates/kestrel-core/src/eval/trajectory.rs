//! What a run did, step by step, and what it was expected to do: the shapes trajectory
//! scorers compare (Mastra's `Trajectory` and `TrajectoryExpectation`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a step of a trajectory was (Mastra's span types, on the wire as theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    /// A tool call.
    ToolCall,
    /// A tool of an MCP server.
    McpToolCall,
    /// A model call.
    ModelGeneration,
    /// A (sub-)agent's run.
    AgentRun,
    /// A workflow's run.
    WorkflowRun,
    /// A workflow's step.
    WorkflowStep,
    /// A workflow's branch.
    WorkflowConditional,
    /// Steps run side by side.
    WorkflowParallel,
    /// A loop.
    WorkflowLoop,
    /// A sleep.
    WorkflowSleep,
    /// A wait for an event.
    WorkflowWaitEvent,
    /// A processor's run.
    ProcessorRun,
}

impl StepKind {
    /// The fields of a step of this kind that an expected step may pin (Mastra's
    /// comparable fields: a tool call's arguments, result and success...).
    pub fn comparable_fields(self) -> &'static [&'static str] {
        match self {
            Self::ToolCall => &["toolArgs", "toolResult", "success"],
            Self::McpToolCall => &["toolArgs", "toolResult", "mcpServer", "success"],
            Self::ModelGeneration => &[
                "modelId",
                "promptTokens",
                "completionTokens",
                "finishReason",
            ],
            Self::AgentRun => &["agentId"],
            Self::WorkflowStep => &["stepId", "status", "output"],
            Self::WorkflowRun => &["workflowId", "status"],
            Self::WorkflowConditional => &["conditionCount", "selectedSteps"],
            Self::WorkflowParallel => &["branchCount", "parallelSteps"],
            Self::WorkflowLoop => &["loopType", "totalIterations"],
            Self::WorkflowSleep => &["sleepDurationMs", "sleepType"],
            Self::WorkflowWaitEvent => &["eventName", "eventReceived"],
            Self::ProcessorRun => &["processorId"],
        }
    }
}

/// One step a run took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrajectoryStep {
    /// What it was.
    pub step_type: StepKind,
    /// The tool's, agent's or step's name.
    pub name: String,
    /// How long it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The steps inside it (a sub-agent's tool calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<TrajectoryStep>,
    /// What it carries beside (`toolArgs`, `toolResult`, `success`, `modelId`...).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl TrajectoryStep {
    /// A step of `step_type` named `name`.
    pub fn new(step_type: StepKind, name: impl Into<String>) -> Self {
        Self {
            step_type,
            name: name.into(),
            duration_ms: None,
            children: Vec::new(),
            fields: Map::new(),
        }
    }

    /// A tool call of `name` with `args`.
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Self::new(StepKind::ToolCall, name).field("toolArgs", args)
    }

    /// Sets a field (`toolResult`, `success`...).
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_owned(), value.into());
        self
    }

    /// The field `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trajectory {
    /// Its steps, in order.
    pub steps: Vec<TrajectoryStep>,
    /// How long it took in all, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_duration_ms: Option<f64>,
}

impl Trajectory {
    /// A trajectory of `steps`.
    pub fn new(steps: Vec<TrajectoryStep>) -> Self {
        Self {
            steps,
            total_duration_ms: None,
        }
    }

    /// The tool calls of an agent's messages, in order, each with its arguments, result and
    /// success.
    pub fn from_messages(messages: &[crate::message::Message]) -> Self {
        use crate::message::Part;
        let mut steps: Vec<TrajectoryStep> = Vec::new();
        for part in messages.iter().flat_map(|m| &m.parts) {
            match part {
                Part::ToolCall {
                    tool_call_id,
                    tool_name,
                    args,
                } => steps.push(
                    TrajectoryStep::tool_call(tool_name.clone(), args.clone())
                        .field("toolCallId", tool_call_id.clone()),
                ),
                Part::ToolResult {
                    tool_call_id,
                    result,
                    is_error,
                    ..
                } => {
                    if let Some(step) = steps
                        .iter_mut()
                        .rev()
                        .find(|s| s.get("toolCallId").and_then(Value::as_str) == Some(tool_call_id))
                    {
                        step.fields.insert("toolResult".into(), result.clone());
                        step.fields.insert("success".into(), Value::Bool(!is_error));
                    }
                }
                _ => {}
            }
        }
        Self::new(steps)
    }
}

/// How an expected path is compared with the actual one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// Step for step, position by position.
    Strict,
    /// The expected steps in this order, others allowed between (the default).
    #[default]
    Relaxed,
    /// The expected steps present, in any order.
    Unordered,
}

/// A step a run is expected to take: its name, and optionally its kind and the comparable
/// fields it must carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedStep {
    /// The name to match.
    pub name: String,
    /// The kind to match, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_type: Option<StepKind>,
    /// Fields to match (`toolArgs`...), compared as JSON.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl ExpectedStep {
    /// A step named `name`, of any kind.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            step_type: None,
            fields: Map::new(),
        }
    }

    /// A tool call of `name`.
    pub fn tool_call(name: impl Into<String>) -> Self {
        Self {
            step_type: Some(StepKind::ToolCall),
            ..Self::named(name)
        }
    }

    /// Requires a field.
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_owned(), value.into());
        self
    }

    /// Whether `actual` is this step: same name, same kind when one is given, and the given
    /// comparable fields equal as JSON.
    pub fn matches(&self, actual: &TrajectoryStep) -> bool {
        if actual.name != self.name {
            return false;
        }
        let Some(kind) = self.step_type else {
            return true;
        };
        if actual.step_type != kind {
            return false;
        }
        kind.comparable_fields().iter().all(|field| {
            self.fields
                .get(*field)
                .is_none_or(|want| actual.get(field) == Some(want))
        })
    }
}

/// The path a run is expected to take (a dataset item's `expectedTrajectory`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedTrajectory {
    /// The expected steps.
    pub steps: Vec<ExpectedStep>,
    /// How they are compared (the scorer's default when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<Ordering>,
    /// Whether a step may repeat without penalty (the scorer's default when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_repeated_steps: Option<bool>,
}

impl ExpectedTrajectory {
    /// These steps, compared as the scorer says.
    pub fn new(steps: Vec<ExpectedStep>) -> Self {
        Self {
            steps,
            ordering: None,
            allow_repeated_steps: None,
        }
    }
}
