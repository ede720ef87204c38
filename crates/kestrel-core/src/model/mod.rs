//! Language models: one streaming trait that every provider implements.
//!
//! A [`LanguageModel`] takes a [`ModelRequest`] (messages, tools, tool choice, response format,
//! sampling settings) and yields a stream of [`ModelEvent`]s. Non-streaming generation is derived
//! from the stream by [`generate`]. Providers live in [`crate::providers`]; model strings such as
//! `openai/gpt-5-mini` resolve through a [`ModelRegistry`]. [`ScriptedModel`] replays queued
//! answers for tests.

mod default;
mod error;
mod registry;
mod scripted;

pub use default::{
    ANTHROPIC_DEFAULT, LOCAL_DEFAULT, MODEL_VARIABLE, OPENAI_DEFAULT, default_model, process_env,
};
pub use error::ModelError;
pub use registry::{ModelRegistry, ModelSpec, ProviderFactory, UnknownModel};
pub use scripted::{ScriptStep, ScriptedModel, ScriptedResponse};

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::abort::AbortSignal;

/// A tool as the model sees it: name, description and JSON schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does; the model decides from this when to call it.
    pub description: String,
    /// JSON schema (an object schema) of its input.
    pub input_schema: Value,
    /// Whether the tool serves the agent itself rather than the user's request: an agent
    /// marks its memory's tools (working memory, recall) so. A model that is made to call a
    /// tool is never made to call an auxiliary one: the local engine's call-then-answer first
    /// step neither shows nor offers them, and its [`ToolChoice::Required`] picks among the
    /// other tools. Hosted providers offer them like any other tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auxiliary: bool,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type", content = "toolName")]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// The shape the model's final text must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ResponseFormat {
    /// Free text.
    Text,
    /// A JSON value matching `schema`.
    Json {
        /// The JSON schema the answer must satisfy.
        schema: Value,
        /// A name for the schema (some providers require one).
        name: Option<String>,
    },
}

/// Sampling and length settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSettings {
    /// Sampling temperature; `0` asks for greedy decoding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Upper bound on generated tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Sequences that end generation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Seed for reproducible sampling, where the provider supports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// One call to a model.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The conversation, system messages first. It shares the run's messages rather than
    /// copying them (see [`Transcript`](crate::message::Transcript)); build one from a `Vec`
    /// with `vec![…].into()`.
    pub messages: crate::message::Transcript,
    /// Tools the model may call (shared: an agent's definitions are built once, not per call).
    pub tools: std::sync::Arc<[ToolDefinition]>,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// Shape of the answer, when structured output is asked for.
    pub response_format: Option<ResponseFormat>,
    /// Sampling settings.
    pub settings: ModelSettings,
    /// Cancels the call; providers stop reading and return [`ModelError::Cancelled`].
    pub abort: AbortSignal,
}

/// Why a model (or a run) stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The provider filtered the content.
    ContentFilter,
    /// The model called tools and expects their results.
    ToolCalls,
    /// The run reached its `max_steps` while the model still wanted to call tools.
    MaxSteps,
    /// The run stopped for a human decision or a tool's suspension.
    Suspended,
    /// The run was paused at a step boundary ([`crate::agent::RunHandle::pause`]); it goes on
    /// with [`crate::agent::RunHandle::proceed`].
    Paused,
    /// The run was aborted.
    Abort,
    /// The run failed.
    Error,
    /// A processor stopped the run ([`crate::processor::Tripwire`]).
    Tripwire,
    /// A processor rejected the step's answer and the model is asked again (a step's reason
    /// only, never a run's).
    Retry,
    /// Any other reason the provider gave.
    Other,
    /// The provider gave no reason.
    Unknown,
}

impl FinishReason {
    /// The wire name (`"tool-calls"`, `"stop"`...).
    pub fn as_str(&self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content-filter",
            FinishReason::ToolCalls => "tool-calls",
            FinishReason::MaxSteps => "max-steps",
            FinishReason::Suspended => "suspended",
            FinishReason::Paused => "paused",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Tripwire => "tripwire",
            FinishReason::Retry => "retry",
            FinishReason::Other => "other",
            FinishReason::Unknown => "unknown",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token usage of one call or a whole run.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// `input_tokens + output_tokens`.
    pub total_tokens: u64,
    /// Generated tokens spent on reasoning, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Input tokens served from a prompt cache, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

impl Usage {
    /// Usage with the given input and output counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
            reasoning_tokens: None,
            cached_input_tokens: None,
        }
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0) + b);
            }
        }
        add_opt(&mut self.reasoning_tokens, other.reasoning_tokens);
        add_opt(&mut self.cached_input_tokens, other.cached_input_tokens);
    }
}

/// One event of a model's streamed answer.
///
/// Tool call input streams as `ToolInputStart`, any number of `ToolInputDelta`, `ToolInputEnd`,
/// then one `ToolCall` holding the complete argument text. Calls are identified by `id`, so
/// several calls may interleave. The stream ends with exactly one `Finish`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ModelEvent {
    /// A piece of answer text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of reasoning text.
    ReasoningDelta {
        /// The text.
        text: String,
    },
    /// The model started a tool call.
    ToolInputStart {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A piece of a tool call's JSON argument text.
    ToolInputDelta {
        /// The call id.
        id: String,
        /// The next piece of argument text.
        delta: String,
    },
    /// The model finished a tool call's arguments.
    ToolInputEnd {
        /// The call id.
        id: String,
    },
    /// A complete tool call. `input` is the raw argument text as the model produced it; the
    /// agent parses and validates it.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The complete JSON argument text.
        input: String,
    },
    /// The answer is complete.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
        /// Tokens used by this call.
        usage: Usage,
    },
}

/// The stream a model returns.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A language model that streams its answers.
///
/// Implement this to plug in a provider. The returned stream must end with one
/// [`ModelEvent::Finish`] on success, and should stop promptly with [`ModelError::Cancelled`]
/// when `request.abort` fires.
#[async_trait::async_trait]
pub trait LanguageModel: Send + Sync {
    /// The provider's name, e.g. `openai`.
    fn provider(&self) -> &str;
    /// The model's id at the provider, e.g. `gpt-5-mini`.
    fn model_id(&self) -> &str;
    /// Starts one call and returns its event stream.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;
}

impl fmt::Debug for dyn LanguageModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider(), self.model_id())
    }
}

/// A complete tool call, as collected by [`generate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelToolCall {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The complete JSON argument text.
    pub input: String,
}

/// A complete (non-streamed) answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelResponse {
    /// The answer text.
    pub text: String,
    /// The reasoning text.
    pub reasoning: String,
    /// The tool calls, in the order the model made them.
    pub tool_calls: Vec<ModelToolCall>,
    /// Why the model stopped.
    pub finish_reason: Option<FinishReason>,
    /// Tokens used.
    pub usage: Usage,
}

/// Runs one call to completion and collects its answer.
pub async fn generate(
    model: &dyn LanguageModel,
    request: ModelRequest,
) -> Result<ModelResponse, ModelError> {
    let mut stream = model.stream(request).await?;
    let mut out = ModelResponse::default();
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::TextDelta { text } => out.text.push_str(&text),
            ModelEvent::ReasoningDelta { text } => out.reasoning.push_str(&text),
            ModelEvent::ToolCall { id, name, input } => {
                out.tool_calls.push(ModelToolCall { id, name, input })
            }
            ModelEvent::Finish { reason, usage } => {
                out.finish_reason = Some(reason);
                out.usage = usage;
            }
            ModelEvent::ToolInputStart { .. }
            | ModelEvent::ToolInputDelta { .. }
            | ModelEvent::ToolInputEnd { .. } => {}
        }
    }
    if out.finish_reason.is_none() {
        return Err(ModelError::Protocol {
            provider: model.provider().to_string(),
            message: "stream ended without a finish event".into(),
            line: None,
        });
    }
    Ok(out)
}

/// A shared model handle.
pub type SharedModel = Arc<dyn LanguageModel>;
