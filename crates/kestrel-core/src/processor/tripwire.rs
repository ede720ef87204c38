//! How a processor stops a run: a tripwire (Mastra's `abort(reason, { retry, metadata })`), or
//! a failure of the processor itself.

use serde_json::Value;

use super::ProcessorPhase;
pub use crate::run::Tripwire;

/// What a processor's hook returns instead of going on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessorError {
    /// Stop the run with a tripwire (or, with `retry`, ask the model again with the reason as
    /// feedback). Build it with [`ProcessorError::abort`].
    #[error("aborted: {reason}")]
    Abort {
        /// Why.
        reason: String,
        /// Ask the model to try again instead (output step and output result hooks).
        retry: bool,
        /// What to attach to the tripwire.
        metadata: Option<Value>,
    },
    /// The processor itself failed (a judge model unreachable, a bad configuration). The run
    /// fails with it: a guardrail that cannot check does not let the text through.
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
        /// The cause, when there is one.
        #[source]
        source: Option<crate::error::BoxError>,
    },
}

impl ProcessorError {
    /// Stops the run with a tripwire for `reason`.
    pub fn abort(reason: impl Into<String>) -> Self {
        Self::Abort {
            reason: reason.into(),
            retry: false,
            metadata: None,
        }
    }

    /// Asks the model to answer again, with `reason` as feedback (a tripwire once the agent's
    /// `max_processor_retries` are spent).
    pub fn retry(reason: impl Into<String>) -> Self {
        Self::Abort {
            reason: reason.into(),
            retry: true,
            metadata: None,
        }
    }

    /// Attaches metadata to an abort (nothing changes for a failure).
    pub fn with_metadata(mut self, value: Value) -> Self {
        if let Self::Abort { metadata, .. } = &mut self {
            *metadata = Some(value);
        }
        self
    }

    /// The processor failed, for `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
            source: None,
        }
    }

    /// The processor failed, because of `source`.
    pub fn failed_by(
        message: impl Into<String>,
        source: impl Into<crate::error::BoxError>,
    ) -> Self {
        Self::Failed {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

/// A processor's own failure, as a failed run reports it.
#[derive(Debug, thiserror::Error)]
#[error("processor {processor_id:?} failed in its {phase} hook: {message}")]
pub struct ProcessorFailure {
    /// The processor.
    pub processor_id: String,
    /// The hook that failed.
    pub phase: ProcessorPhase,
    /// What went wrong.
    pub message: String,
    /// The cause, when there is one.
    #[source]
    pub source: Option<crate::error::BoxError>,
}

/// How a pipeline's hook ended when it did not go on.
#[derive(Debug)]
pub enum Stopped {
    /// A processor stopped the run (or asked for a retry: see [`Tripwire::retry`]).
    Tripwire(Tripwire),
    /// A processor failed.
    Failed(ProcessorFailure),
}

impl Stopped {
    /// `error` of processor `processor_id` in `phase`.
    pub(crate) fn from_error(
        error: ProcessorError,
        processor_id: &str,
        phase: ProcessorPhase,
    ) -> Self {
        match error {
            ProcessorError::Abort {
                reason,
                retry,
                metadata,
            } => Stopped::Tripwire(Tripwire {
                reason,
                retry,
                metadata,
                processor_id: Some(processor_id.to_owned()),
            }),
            ProcessorError::Failed { message, source } => Stopped::Failed(ProcessorFailure {
                processor_id: processor_id.to_owned(),
                phase,
                message,
                source,
            }),
        }
    }
}
