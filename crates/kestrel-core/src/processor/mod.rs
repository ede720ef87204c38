//! Processors: code that sees and may change what goes into the model and what comes out of
//! it, on every run of an agent — and may stop the run (a tripwire).
//!
//! A [`Processor`] has Mastra's hooks, each with a no-op default:
//!
//! | hook | when | may |
//! |---|---|---|
//! | [`process_input`](Processor::process_input) | once, before a new run's first step (before memory stores the input) | change the input messages |
//! | [`process_input_step`](Processor::process_input_step) | before every model call | change that call's messages, system text, tools and tool choice |
//! | [`process_output_stream`](Processor::process_output_stream) | on every part the model streams | change or drop the part |
//! | [`process_output_step`](Processor::process_output_step) | after every model call, before anything of it is stored or streamed | change the text; ask for a retry |
//! | [`process_output_result`](Processor::process_output_result) | on the answer that ends the run, after the step hooks | change the final text; ask for a retry |
//! | [`process_tool_result`](Processor::process_tool_result) | after each tool call, before its result is streamed or stored | change the result |
//! | [`process_api_error`](Processor::process_api_error) | when the model call fails | ask to call again |
//!
//! Any hook may stop the run with [`ProcessorError::abort`]: the run ends with a `tripwire`
//! event and the finish reason `tripwire` ([`Tripwire`]), and `generate` returns
//! [`AgentError::Tripwire`](crate::definition::AgentError::Tripwire) — a blocked run is never
//! a successful result a caller could mistake for an answer. [`ProcessorError::retry`] from
//! an output hook asks the model again with the reason as feedback, up to the agent's
//! `max_processor_retries` (then it is a tripwire). A processor that fails
//! ([`ProcessorError::Failed`]) fails the run: a guardrail that cannot check lets nothing
//! through.
//!
//! **Hold-back.** While an agent has output processors, a step's streamed parts are held
//! until its output hooks accepted them, then released (as the hooks left them): text a
//! guardrail rejects never reaches a client. Without output processors nothing is held.
//!
//! Agents take processors in two ordered pipelines
//! ([`AgentBuilder::input_processor`](crate::agent::AgentBuilder::input_processor) runs the
//! input hooks, [`AgentBuilder::output_processor`](crate::agent::AgentBuilder::output_processor)
//! the output, tool result and error hooks); workflows run one as a step
//! ([`crate::workflow::ProcessorStep`]). Each hook a processor runs is a `processor_run` span
//! of the run's trace, and what it reports with [`ProcessorContext::decide`] is a
//! `processor-decision` event.
//!
//! ```
//! use kestrel_core::processor::{InputArgs, Processor, ProcessorError};
//!
//! /// Refuses inputs that shout.
//! struct NoShouting;
//!
//! #[async_trait::async_trait]
//! impl Processor for NoShouting {
//!     fn id(&self) -> &str {
//!         "no-shouting"
//!     }
//!
//!     async fn process_input(&self, args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
//!         let text: String = args.messages.iter().map(|m| m.text()).collect();
//!         if text.len() > 3 && text == text.to_uppercase() {
//!             return Err(ProcessorError::abort("please do not shout"));
//!         }
//!         Ok(())
//!     }
//! }
//! ```

mod args;
mod pipeline;
mod tripwire;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use args::{
    ApiErrorArgs, Decision, InputArgs, InputStepArgs, OutputResultArgs, OutputStepArgs,
    OutputStreamArgs, ProcessorContext, StreamState, ToolResultArgs,
};
pub use pipeline::{Pipeline, retry_feedback};
pub use tripwire::{ProcessorError, ProcessorFailure, Stopped, Tripwire};

/// One of a processor's hooks. Its JSON (and the names of `GET /api/processors`) is Mastra's:
/// `input`, `inputStep`, `outputStream`, `outputStep`, `outputResult`, `toolResult`, and
/// `apiError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ProcessorPhase {
    /// [`Processor::process_input`].
    Input,
    /// [`Processor::process_input_step`].
    InputStep,
    /// [`Processor::process_output_stream`].
    OutputStream,
    /// [`Processor::process_output_step`].
    OutputStep,
    /// [`Processor::process_output_result`].
    OutputResult,
    /// [`Processor::process_tool_result`].
    ToolResult,
    /// [`Processor::process_api_error`].
    ApiError,
}

impl ProcessorPhase {
    /// Every phase, in the order a run meets them.
    pub const ALL: [ProcessorPhase; 7] = [
        Self::Input,
        Self::InputStep,
        Self::OutputStream,
        Self::OutputStep,
        Self::OutputResult,
        Self::ToolResult,
        Self::ApiError,
    ];

    /// The wire name (`inputStep`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::InputStep => "inputStep",
            Self::OutputStream => "outputStream",
            Self::OutputStep => "outputStep",
            Self::OutputResult => "outputResult",
            Self::ToolResult => "toolResult",
            Self::ApiError => "apiError",
        }
    }

    /// The phase of a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl std::fmt::Display for ProcessorPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hooks a processor implements: the runtime calls only these (so a processor that
/// declares none of the stream hooks costs nothing per streamed part), and `GET
/// /api/processors` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Phases(u8);

impl Phases {
    /// No hook.
    pub const NONE: Phases = Phases(0);
    /// Every hook (the default: a processor that does not say is asked everything).
    pub const ALL: Phases = Phases(0x7f);

    /// The set of `phases`.
    pub fn of(phases: &[ProcessorPhase]) -> Self {
        Phases(phases.iter().fold(0, |bits, p| bits | p.bit()))
    }

    /// Whether `phase` is in the set.
    pub fn contains(self, phase: ProcessorPhase) -> bool {
        self.0 & phase.bit() != 0
    }

    /// Whether the set holds any of `other`'s phases.
    pub fn intersects(self, other: Phases) -> bool {
        self.0 & other.0 != 0
    }

    /// The phases, in [`ProcessorPhase::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = ProcessorPhase> {
        ProcessorPhase::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }
}

impl std::ops::BitOr for Phases {
    type Output = Phases;

    fn bitor(self, rhs: Phases) -> Phases {
        Phases(self.0 | rhs.0)
    }
}

impl From<ProcessorPhase> for Phases {
    fn from(phase: ProcessorPhase) -> Self {
        Phases(phase.bit())
    }
}

/// Code that sees (and may change, or stop) what goes into an agent's model and what comes
/// out. See the [module docs](self) for when each hook runs.
#[async_trait]
pub trait Processor: Send + Sync {
    /// A short, unique id (`regex-filter`, `pii-detector`...): it names the processor in
    /// tripwires, spans and routes.
    fn id(&self) -> &str;

    /// A human-readable name.
    fn name(&self) -> Option<&str> {
        None
    }

    /// What it does.
    fn description(&self) -> Option<&str> {
        None
    }

    /// The hooks it implements (by default all: say which, and the others cost nothing).
    fn phases(&self) -> Phases {
        Phases::ALL
    }

    /// Before a new run's first step: the run's input messages, before memory stores them.
    async fn process_input(&self, _args: &mut InputArgs<'_>) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// Before every model call: what this call sends (the run's conversation is unchanged).
    async fn process_input_step(
        &self,
        _args: &mut InputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// On every part the model streams: change it, or drop it (`*args.part = None`).
    async fn process_output_stream(
        &self,
        _args: &mut OutputStreamArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// After every model call, before its text is stored or released to the stream.
    async fn process_output_step(
        &self,
        _args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// On the answer that ends the run (a step without tool calls), after the step hooks.
    async fn process_output_result(
        &self,
        _args: &mut OutputResultArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// After each tool call, before its result is streamed, stored or shown to the model.
    async fn process_tool_result(
        &self,
        _args: &mut ToolResultArgs<'_>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    /// When the model call fails: set `args.retry` to call it again (within the agent's
    /// `max_processor_retries`), abort to end the run with a tripwire instead of an error.
    async fn process_api_error(&self, _args: &mut ApiErrorArgs<'_>) -> Result<(), ProcessorError> {
        Ok(())
    }
}

/// A shared processor.
pub type SharedProcessor = Arc<dyn Processor>;

/// Values that can be given as a processor: any [`Processor`], or one already shared.
pub trait IntoProcessor {
    /// The shared processor.
    fn into_processor(self) -> SharedProcessor;
}

impl<P: Processor + 'static> IntoProcessor for P {
    fn into_processor(self) -> SharedProcessor {
        Arc::new(self)
    }
}

impl IntoProcessor for SharedProcessor {
    fn into_processor(self) -> SharedProcessor {
        self
    }
}
