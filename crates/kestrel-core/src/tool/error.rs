//! Tool errors: what a tool's `execute` returns, and why a tool call failed.

use std::fmt;

/// The error a tool's `execute` returns.
///
/// Any `std::error::Error` converts into it with `?`, and [`ToolError::new`] makes one from a
/// message. The model sees the message as the failed result of its call.
pub struct ToolError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// Set when the tool suspended itself rather than failed.
    stop: Option<Stop>,
}

/// Why a tool call stops the run instead of giving a result.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The tool suspended itself with this payload.
    Suspend(serde_json::Value),
    /// A delegated sub-agent's run waits for decisions (a [`crate::run::Waiting::SubAgent`]).
    SubAgent(crate::run::Waiting),
    /// A delegated sub-agent's run was paused.
    SubAgentPaused,
    /// A processor stopped a delegated sub-agent's run: the delegating run stops with it.
    Tripwire(Box<crate::processor::Tripwire>),
}

impl Stop {
    /// What stopped the call, in a word (for its span).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Suspend(_) => "suspended",
            Self::SubAgent(_) => "sub-agent waits",
            Self::SubAgentPaused => "sub-agent paused",
            Self::Tripwire(_) => "tripwire",
        }
    }
}

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
            stop: None,
        }
    }

    /// Not an error: the tool asks to stop the run until it is resumed (see
    /// [`crate::tool::ToolContext::suspend`]).
    pub(crate) fn suspension(payload: serde_json::Value) -> Self {
        Self::stop("the tool suspended the run", Stop::Suspend(payload))
    }

    /// Not an error: the call stops the run (a suspension, or a sub-agent that waits).
    pub(crate) fn stop(message: &str, stop: Stop) -> Self {
        Self {
            message: message.into(),
            source: None,
            stop: Some(stop),
        }
    }

    /// Whether the tool suspended itself (see [`crate::tool::ToolContext::suspend`]).
    pub fn is_suspension(&self) -> bool {
        matches!(self.stop, Some(Stop::Suspend(_)))
    }

    /// The payload of a suspension (`Err(self)` for any other error): for layers that run
    /// tools themselves and stop the way they do (a workflow's tool step suspends the step).
    pub fn into_suspension(mut self) -> Result<serde_json::Value, Self> {
        match self.stop.take() {
            Some(Stop::Suspend(payload)) => Ok(payload),
            stop => {
                self.stop = stop;
                Err(self)
            }
        }
    }

    /// Why the call stops the run, when it does.
    pub(crate) fn into_stop(mut self) -> Result<Stop, Self> {
        match self.stop.take() {
            Some(stop) => Ok(stop),
            None => Err(self),
        }
    }

    /// The message the model will see.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, when the error came from one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolError")
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self {
            message: error.to_string(),
            source: Some(Box::new(error)),
            stop: None,
        }
    }
}

/// Why a tool call failed. Its text is what the model reads as the failed result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallError {
    /// The model called a tool the agent does not have.
    #[error("Tool {name:?} not found. Available tools: {}", available.join(", "))]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The agent's tool names.
        available: Vec<String>,
    },
    /// The model's argument text is not valid JSON.
    #[error("Invalid JSON arguments for tool {tool:?}: {error}. Arguments received: {input}")]
    InvalidJson {
        /// The tool.
        tool: String,
        /// The parser's message.
        error: String,
        /// The text received.
        input: String,
    },
    /// The arguments do not match the tool's input schema.
    #[error("Invalid input for tool {tool:?}: {}", errors.join("; "))]
    InvalidInput {
        /// The tool.
        tool: String,
        /// One message per violation, each naming the offending path.
        errors: Vec<String>,
    },
    /// The tool's `execute` returned an error.
    #[error("{message}")]
    Execution {
        /// The tool.
        tool: String,
        /// The tool's message.
        message: String,
    },
    /// The tool panicked.
    #[error("Tool {tool:?} failed unexpectedly (it panicked)")]
    Panicked {
        /// The tool.
        tool: String,
    },
    /// The tool's output could not be serialised.
    #[error("Tool {tool:?} returned output that could not be serialised: {error}")]
    InvalidOutput {
        /// The tool.
        tool: String,
        /// The serialiser's message.
        error: String,
    },
}
