//! The [`Scorer`] trait, the run it scores and what it returns.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trajectory::{ExpectedTrajectory, Trajectory};
use crate::error::BoxError;
use crate::message::{Message, Role};

/// What a scorer scores (Mastra's scorer `type`): it decides the shape of the run's input and
/// output a live run hands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScorerKind {
    /// An agent's turn: the input messages and the answer's messages (the default).
    #[default]
    Agent,
    /// What an agent or workflow did, step by step ([`Trajectory`]).
    Trajectory,
    /// Any JSON input and output (a workflow run, a step, a caller's own data).
    Value,
}

/// The input of an agent's turn, as a scorer sees it (Mastra's `ScorerRunInputForAgent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInput {
    /// The turn's new messages (the user's).
    pub input_messages: Vec<Message>,
    /// Earlier messages memory recalled for the turn.
    #[serde(default)]
    pub remembered_messages: Vec<Message>,
    /// The system prompts the model read.
    #[serde(default)]
    pub system_messages: Vec<String>,
}

/// What went into the scored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScorerInput {
    /// An agent's turn.
    Agent(AgentInput),
    /// Anything else.
    Value(Value),
}

/// What came out of the scored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScorerOutput {
    /// The answer's messages (an agent's turn).
    Messages(Vec<Message>),
    /// What the run did, step by step.
    Trajectory(Trajectory),
    /// Anything else.
    Value(Value),
}

/// One run to score: its input and output, what it should have given, and where it came
/// from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ScorerRun {
    /// The scored run's id (a fresh one for a run scored on its own).
    pub run_id: String,
    /// What went in.
    pub input: ScorerInput,
    /// What came out.
    pub output: ScorerOutput,
    /// The answer it should have given, when known (a dataset item's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<Value>,
    /// The steps it should have taken, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_trajectory: Option<ExpectedTrajectory>,
    /// More the scorer may read (retrieved context, for instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<Value>,
    /// The run's request context, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_context: Option<Value>,
    /// The run's trace, when it was traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The run's span in that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

impl ScorerRun {
    /// A run of `input` giving `output`.
    pub fn new(input: ScorerInput, output: ScorerOutput) -> Self {
        Self {
            run_id: crate::id::new_id(),
            input,
            output,
            ground_truth: None,
            expected_trajectory: None,
            additional_context: None,
            request_context: None,
            trace_id: None,
            span_id: None,
        }
    }

    /// An agent's turn: the user's `input` answered by the assistant's `output`.
    pub fn texts(input: impl Into<String>, output: impl Into<String>) -> Self {
        Self::agent(
            AgentInput {
                input_messages: vec![Message::user(input)],
                ..AgentInput::default()
            },
            vec![Message::assistant(output)],
        )
    }

    /// An agent's turn.
    pub fn agent(input: AgentInput, output: Vec<Message>) -> Self {
        Self::new(ScorerInput::Agent(input), ScorerOutput::Messages(output))
    }

    /// A trajectory, for a trajectory scorer; `input` is the user's text.
    pub fn trajectory(input: impl Into<String>, trajectory: Trajectory) -> Self {
        Self::new(
            ScorerInput::Agent(AgentInput {
                input_messages: vec![Message::user(input)],
                ..AgentInput::default()
            }),
            ScorerOutput::Trajectory(trajectory),
        )
    }

    /// Sets the run id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// Sets the expected answer.
    pub fn ground_truth(mut self, ground_truth: impl Into<Value>) -> Self {
        self.ground_truth = Some(ground_truth.into());
        self
    }

    /// Sets the expected steps.
    pub fn expected_trajectory(mut self, expected: ExpectedTrajectory) -> Self {
        self.expected_trajectory = Some(expected);
        self
    }

    /// Sets the additional context.
    pub fn additional_context(mut self, context: impl Into<Value>) -> Self {
        self.additional_context = Some(context.into());
        self
    }

    /// Links the run to its trace and span.
    pub fn trace(mut self, trace_id: impl Into<String>, span_id: Option<String>) -> Self {
        self.trace_id = Some(trace_id.into());
        self.span_id = span_id;
        self
    }

    /// The input's text as Mastra's code scorers read it: the input messages' texts joined
    /// with `", "` (a value input: its string, or its JSON).
    pub fn input_text(&self) -> String {
        match &self.input {
            ScorerInput::Agent(agent) => join_texts(&agent.input_messages),
            ScorerInput::Value(value) => value_text(value),
        }
    }

    /// The output's text as Mastra's code scorers read it: the answer's messages' texts
    /// joined with `", "` (tool results left out).
    pub fn output_text(&self) -> String {
        match &self.output {
            ScorerOutput::Messages(messages) => {
                join_texts(messages.iter().filter(|m| m.role != Role::Tool))
            }
            ScorerOutput::Trajectory(trajectory) => trajectory
                .steps
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            ScorerOutput::Value(value) => value_text(value),
        }
    }

    /// The tools the output called, in order (from the answer's tool calls, or the
    /// trajectory's tool steps).
    pub fn tool_calls(&self) -> Vec<String> {
        match &self.output {
            ScorerOutput::Messages(messages) => messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter_map(|p| match p {
                    crate::message::Part::ToolCall { tool_name, .. } => Some(tool_name.clone()),
                    _ => None,
                })
                .collect(),
            ScorerOutput::Trajectory(trajectory) => trajectory
                .steps
                .iter()
                .filter(|s| s.step_type == super::trajectory::StepKind::ToolCall)
                .map(|s| s.name.clone())
                .collect(),
            ScorerOutput::Value(_) => Vec::new(),
        }
    }

    /// Whether there is anything to score: an input and an output that are not empty.
    pub(crate) fn emptiness(&self) -> Option<&'static str> {
        let input_empty = match &self.input {
            ScorerInput::Agent(agent) => agent.input_messages.iter().all(is_empty_message),
            ScorerInput::Value(value) => is_empty_value(value),
        };
        if input_empty {
            return Some("the run's input is empty");
        }
        let output_empty = match &self.output {
            ScorerOutput::Messages(messages) => messages.iter().all(is_empty_message),
            ScorerOutput::Trajectory(_) => false,
            ScorerOutput::Value(value) => is_empty_value(value),
        };
        output_empty.then_some("the run's output is empty")
    }
}

fn join_texts<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    messages
        .into_iter()
        .map(Message::text)
        .collect::<Vec<_>>()
        .join(", ")
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Whether a message says nothing: no text but whitespace, and no other part.
fn is_empty_message(message: &Message) -> bool {
    message.parts.iter().all(|part| match part {
        crate::message::Part::Text { text } | crate::message::Part::Reasoning { text } => {
            text.trim().is_empty()
        }
        _ => false,
    })
}

fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// What a scorer returns (Mastra's scorer result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ScoreResult {
    /// The scored run.
    pub run_id: String,
    /// The score, usually from 0 to 1; `None` when the run was not scorable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why, when the scorer says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the run could not be scored, when a step said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_scorable: Option<String>,
    /// What the preprocess step gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_step_result: Option<Value>,
    /// What the analyze step gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyze_step_result: Option<Value>,
    /// The judge's prompt of the preprocess step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_prompt: Option<String>,
    /// The judge's prompt of the analyze step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyze_prompt: Option<String>,
    /// The judge's prompt of the score step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_score_prompt: Option<String>,
    /// The judge's prompt of the reason step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_reason_prompt: Option<String>,
}

impl ScoreResult {
    /// A result of `score` for run `run_id`.
    pub fn new(run_id: impl Into<String>, score: f64) -> Self {
        Self {
            run_id: run_id.into(),
            score: Some(score),
            ..Self::default()
        }
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the preprocess step's result.
    pub fn preprocess(mut self, result: Value) -> Self {
        self.preprocess_step_result = Some(result);
        self
    }

    /// Sets the analyze step's result.
    pub fn analyze(mut self, result: Value) -> Self {
        self.analyze_step_result = Some(result);
        self
    }
}

/// A step of a scorer's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ScorerStep {
    /// Prepares the run (extracts claims, keywords...).
    Preprocess,
    /// Judges what was prepared.
    Analyze,
    /// Turns the analysis into a number.
    GenerateScore,
    /// Explains the number.
    GenerateReason,
}

impl std::fmt::Display for ScorerStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Preprocess => "preprocess",
            Self::Analyze => "analyze",
            Self::GenerateScore => "generateScore",
            Self::GenerateReason => "generateReason",
        })
    }
}

/// Why a scorer gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScorerError {
    /// The run cannot be scored as given (an empty input or output, a missing ground truth).
    #[error("scorer `{scorer}`: {message}")]
    InvalidRun {
        /// The scorer.
        scorer: String,
        /// What is wrong with the run.
        message: String,
    },
    /// A step failed (its function returned an error, its judge failed or answered out of
    /// shape, its score was not a finite number).
    #[error("scorer `{scorer}`: step `{failed_step}` failed (after {completed}): {source}", completed = completed_list(.completed_steps))]
    Step {
        /// The scorer.
        scorer: String,
        /// The step that failed.
        failed_step: ScorerStep,
        /// The steps that finished before it.
        completed_steps: Vec<ScorerStep>,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
}

fn completed_list(steps: &[ScorerStep]) -> String {
    if steps.is_empty() {
        return "no step".to_owned();
    }
    steps
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl ScorerError {
    /// A stable kind for logs and stored failures (`invalid_run`, `step`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidRun { .. } => "invalid_run",
            Self::Step { .. } => "step",
        }
    }

    /// The run is not scorable as given.
    pub fn invalid_run(scorer: &str, message: impl Into<String>) -> Self {
        Self::InvalidRun {
            scorer: scorer.to_owned(),
            message: message.into(),
        }
    }
}

/// Scores runs. Build one with [`create_scorer`](super::create_scorer), take a prebuilt one
/// from `kestrel-evals`, or implement the trait.
#[async_trait]
pub trait Scorer: Send + Sync + std::fmt::Debug {
    /// A unique id (`answer-relevancy-scorer`).
    fn id(&self) -> &str;

    /// A name for people (the id by default).
    fn name(&self) -> &str {
        self.id()
    }

    /// What it measures.
    fn description(&self) -> &str {
        ""
    }

    /// What it scores.
    fn kind(&self) -> ScorerKind {
        ScorerKind::Agent
    }

    /// Whether it asks a model (a judge): callers bound such scorers' concurrency and cost.
    fn uses_judge(&self) -> bool {
        false
    }

    /// Scores `run`.
    async fn run(&self, run: ScorerRun) -> Result<ScoreResult, ScorerError>;
}

/// A scorer shared by agents, workflows and experiments.
pub type SharedScorer = Arc<dyn Scorer>;

/// What [`AgentBuilder::scorer`](crate::agent::AgentBuilder::scorer) and experiments take: a
/// scorer, or one already shared.
pub trait IntoScorer {
    /// The shared scorer.
    fn into_scorer(self) -> SharedScorer;
}

impl<S: Scorer + 'static> IntoScorer for S {
    fn into_scorer(self) -> SharedScorer {
        Arc::new(self)
    }
}

impl IntoScorer for SharedScorer {
    fn into_scorer(self) -> SharedScorer {
        self
    }
}

/// The stored record of `result`, given by `scorer` on the run of `entity_type` `entity_id`
/// that read `input` and gave `output`.
pub fn score_record(
    scorer: &dyn Scorer,
    result: ScoreResult,
    entity_type: &str,
    entity_id: &str,
    source: crate::store::ScoreSource,
    input: Value,
    output: Value,
) -> crate::store::ScoreRecord {
    let mut record = crate::store::ScoreRecord::new(
        scorer.id(),
        serde_json::json!({
            "id": scorer.id(),
            "name": scorer.name(),
            "description": scorer.description(),
        }),
        result.run_id,
        entity_type,
        entity_id,
        source,
        input,
        output,
    );
    record.score = result.score;
    record.reason = result.reason;
    record.not_scorable = result.not_scorable;
    record.preprocess_step_result = result.preprocess_step_result;
    record.analyze_step_result = result.analyze_step_result;
    record.preprocess_prompt = result.preprocess_prompt;
    record.analyze_prompt = result.analyze_prompt;
    record.generate_score_prompt = result.generate_score_prompt;
    record.generate_reason_prompt = result.generate_reason_prompt;
    record
}
