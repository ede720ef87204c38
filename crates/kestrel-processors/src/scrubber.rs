//! The system prompt scrubber: an answer that repeats the agent's instructions (a prompt
//! extraction that worked) is blocked, redacted, or let through with a warning.
//!
//! It looks for the instructions' sentences (of at least `min_words` words) in the answer,
//! ignoring case and whitespace: a paraphrase passes, a copy does not.

use async_trait::async_trait;
use kestrel_core::processor::{OutputStepArgs, Phases, Processor, ProcessorError, ProcessorPhase};
use regex::{Regex, RegexBuilder};
use serde_json::json;

/// What the scrubber does with a leak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScrubStrategy {
    /// Stop the run with a tripwire (the default).
    #[default]
    Block,
    /// Replace each leaked sentence with `[SYSTEM PROMPT REDACTED]`.
    Redact,
    /// Let it through; report a `warn` decision and log it.
    Warn,
}

/// See the [module docs](self). An output processor.
#[derive(Debug, Clone)]
pub struct SystemPromptScrubber {
    strategy: ScrubStrategy,
    min_words: usize,
}

impl Default for SystemPromptScrubber {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemPromptScrubber {
    /// Blocks answers that repeat a sentence of six words or more of the system text.
    pub fn new() -> Self {
        Self {
            strategy: ScrubStrategy::Block,
            min_words: 6,
        }
    }

    /// What to do with a leak.
    pub fn strategy(mut self, strategy: ScrubStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The fewest words a repeated sentence must have to count (default 6, at least 3).
    pub fn min_words(mut self, words: usize) -> Self {
        self.min_words = words.max(3);
        self
    }

    /// One pattern per sentence of `system` long enough to count: its words, in order, any
    /// whitespace between, any case.
    fn sentences(&self, system: &[String]) -> Vec<Regex> {
        system
            .iter()
            .flat_map(|text| text.split(['\n', '.', '!', '?', ';']))
            .filter_map(|sentence| {
                let words: Vec<String> = sentence.split_whitespace().map(regex::escape).collect();
                if words.len() < self.min_words {
                    return None;
                }
                RegexBuilder::new(&words.join(r"\s+"))
                    .case_insensitive(true)
                    .build()
                    .ok()
            })
            .collect()
    }
}

#[async_trait]
impl Processor for SystemPromptScrubber {
    fn id(&self) -> &str {
        "system-prompt-scrubber"
    }

    fn name(&self) -> Option<&str> {
        Some("System prompt scrubber")
    }

    fn description(&self) -> Option<&str> {
        Some("Stops answers that repeat the agent's instructions")
    }

    fn phases(&self) -> Phases {
        ProcessorPhase::OutputStep.into()
    }

    async fn process_output_step(
        &self,
        args: &mut OutputStepArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let leaked: Vec<Regex> = self
            .sentences(args.system)
            .into_iter()
            .filter(|pattern| pattern.is_match(args.text))
            .collect();
        if leaked.is_empty() {
            return Ok(());
        }
        let detail = json!({"sentences": leaked.len()});
        match self.strategy {
            ScrubStrategy::Block => Err(ProcessorError::abort(
                "the answer repeats the system prompt",
            )
            .with_metadata(detail)),
            ScrubStrategy::Redact => {
                let mut text = args.text.clone();
                for pattern in &leaked {
                    text = pattern
                        .replace_all(&text, "[SYSTEM PROMPT REDACTED]")
                        .into_owned();
                }
                *args.text = text;
                args.cx.decide("redact", Some(detail));
                Ok(())
            }
            ScrubStrategy::Warn => {
                tracing::warn!(
                    run_id = args.cx.run_id,
                    "an answer repeats the system prompt"
                );
                args.cx.decide("warn", Some(detail));
                Ok(())
            }
        }
    }
}
