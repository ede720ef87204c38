//! Kestrel's built-in processors: the guardrails teams add right after their first agent
//! works. Each is a [`Processor`](kestrel_core::processor::Processor): give it to an agent
//! with `input_processor` (it checks what goes in) or `output_processor` (what comes out:
//! answers, streamed parts, tool results).
//!
//! | processor | checks | strategies |
//! |---|---|---|
//! | [`UnicodeNormalizer`] | input, answers: NFKC, control characters, whitespace | rewrite |
//! | [`RegexFilter`] | input, answers, tool results: rules and presets (secrets, PII, URLs) | block, redact, warn |
//! | [`PiiDetector`] | input, answers, tool results: a deterministic local pass, an optional model pass | block, redact, filter, warn |
//! | [`PromptInjectionDetector`] | input: a model through structured output | block, filter, warn |
//! | [`Moderation`] | input, answers: a model through structured output | block, filter, warn |
//! | [`TokenLimiter`] | input (trims the context), answers (cuts the stream) | truncate, abort |
//! | [`SystemPromptScrubber`] | answers that repeat the system prompt | block, redact, warn |
//! | [`ToolCallFilter`] | remembered tool calls sent to the model | remove |
//!
//! The checks a model makes fail closed: a judge that cannot answer, or answers outside its
//! schema, fails the run ([`ProcessorError::Failed`](kestrel_core::processor::ProcessorError))
//! rather than let unchecked text through. The deterministic ones never call anything.
//! Redactions, warnings and trims are reported as `processor-decision` events; a decision
//! names the rule or the kind of data, never the matched text.
//!
//! ```
//! use kestrel_core::agent::Agent;
//! use kestrel_core::model::{ScriptedModel, ScriptedResponse};
//! use kestrel_processors::{FilterStrategy, Preset, RegexFilter};
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new().respond(ScriptedResponse::text("Use sk-proj-abcdefghijklmnopqrstuvwxyz12"));
//! let agent = Agent::builder("guarded")
//!     .model(Arc::new(model))
//!     .output_processor(RegexFilter::new().preset(Preset::Secrets).strategy(FilterStrategy::Redact))
//!     .build()?;
//! let answer = agent.generate("what is the key?").await?;
//! assert_eq!(answer.text, "Use [REDACTED:openai-api-key]");
//! # Ok(())
//! # }
//! ```

mod classify;
mod injection;
mod moderation;
mod pii;
mod regex_filter;
mod scrubber;
mod text;
mod token_limiter;
mod tool_call_filter;
mod unicode;

pub use classify::ClassifierOutput;
pub use injection::{InjectionStrategy, PromptInjectionDetector};
pub use moderation::{Moderation, ModerationStrategy};
pub use pii::{PiiDetector, PiiStrategy, PiiType, RedactionMethod};
pub use regex_filter::{FilterStrategy, Preset, RegexFilter, RegexFilterError, Rule};
pub use scrubber::{ScrubStrategy, SystemPromptScrubber};
pub use token_limiter::{CountMode, LimitStrategy, TokenLimiter, count_tokens};
pub use tool_call_filter::ToolCallFilter;
pub use unicode::{NormalForm, UnicodeNormalizer};
