//! The token limiter: as an input processor it trims the oldest messages until the context
//! fits; as an output processor it cuts (or stops) an answer past its budget as it streams.

use std::sync::OnceLock;

use async_trait::async_trait;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::ModelEvent;
use kestrel_core::processor::{
    InputStepArgs, OutputStreamArgs, Phases, Processor, ProcessorError, ProcessorPhase,
};
use serde_json::{Value, json};
use tiktoken_rs::CoreBPE;

/// What happens to an answer past the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitStrategy {
    /// Cut it at the budget and drop the rest (the default).
    #[default]
    Truncate,
    /// Stop the run with a tripwire.
    Abort,
}

/// What the budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CountMode {
    /// The whole answer of a step (the default).
    #[default]
    Cumulative,
    /// Each streamed part on its own.
    Part,
}

/// A token budget; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct TokenLimiter {
    max_tokens: usize,
    strategy: LimitStrategy,
    count_mode: CountMode,
}

/// The tokenizer (OpenAI's o200k_base, embedded), loaded once.
fn tokenizer() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(bpe) => Some(bpe),
        Err(error) => {
            tracing::warn!(%error, "the o200k_base tokenizer failed to load; tokens are estimated at 4 bytes each");
            None
        }
    })
    .as_ref()
}

/// The tokens of `text` (o200k_base; 4 bytes a token if the tokenizer could not load).
pub fn count_tokens(text: &str) -> usize {
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

/// The longest prefix of `text` of at most `tokens` tokens.
fn prefix_of(text: &str, tokens: usize) -> String {
    match tokenizer() {
        Some(bpe) => {
            let encoded = bpe.encode_ordinary(text);
            let kept = &encoded[..tokens.min(encoded.len())];
            bpe.decode(kept).unwrap_or_default()
        }
        None => {
            let mut end = (tokens * 4).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_owned()
        }
    }
}

fn message_tokens(message: &Message) -> usize {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Reasoning { text } => count_tokens(text),
            Part::ToolCall {
                tool_name, args, ..
            } => count_tokens(tool_name) + count_tokens(&args.to_string()),
            Part::ToolResult {
                tool_name, result, ..
            } => {
                count_tokens(tool_name)
                    + match result {
                        Value::String(s) => count_tokens(s),
                        other => count_tokens(&other.to_string()),
                    }
            }
        })
        .sum()
}

impl TokenLimiter {
    /// A budget of `max_tokens`, truncating, counted over the whole answer.
    pub fn new(max_tokens: usize) -> Self {
        Self {
            max_tokens,
            strategy: LimitStrategy::Truncate,
            count_mode: CountMode::Cumulative,
        }
    }

    /// What happens to an answer past the budget.
    pub fn strategy(mut self, strategy: LimitStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// What the budget counts.
    pub fn count_mode(mut self, mode: CountMode) -> Self {
        self.count_mode = mode;
        self
    }
}

/// The tokens an answer's stream has used so far.
#[derive(Default)]
struct Used {
    tokens: usize,
    cut: bool,
}

#[async_trait]
impl Processor for TokenLimiter {
    fn id(&self) -> &str {
        "token-limiter"
    }

    fn name(&self) -> Option<&str> {
        Some("Token limiter")
    }

    fn description(&self) -> Option<&str> {
        Some("Trims the context to a token budget, or cuts answers past one")
    }

    fn phases(&self) -> Phases {
        Phases::of(&[ProcessorPhase::InputStep, ProcessorPhase::OutputStream])
    }

    async fn process_input_step(&self, args: &mut InputStepArgs<'_>) -> Result<(), ProcessorError> {
        let system: usize = args.system.iter().map(|s| count_tokens(s)).sum();
        let mut sizes: Vec<usize> = args.messages.iter().map(message_tokens).collect();
        let mut total = system + sizes.iter().sum::<usize>();
        if total <= self.max_tokens {
            return Ok(());
        }
        // The oldest go first; the newest message always stays, and no tool result is left
        // without the call it answers.
        let mut removed = 0;
        while total > self.max_tokens && args.messages.len() > 1 {
            args.messages.remove(0);
            total -= sizes.remove(0);
            removed += 1;
            while args.messages.len() > 1 && args.messages[0].role == Role::Tool {
                args.messages.remove(0);
                total -= sizes.remove(0);
                removed += 1;
            }
        }
        args.cx.decide(
            "trim",
            Some(
                json!({"removedMessages": removed, "tokens": total, "maxTokens": self.max_tokens}),
            ),
        );
        if total > self.max_tokens {
            tracing::warn!(
                run_id = args.cx.run_id,
                tokens = total,
                max = self.max_tokens,
                "the newest message alone is past the token limiter's budget"
            );
        }
        Ok(())
    }

    async fn process_output_stream(
        &self,
        args: &mut OutputStreamArgs<'_>,
    ) -> Result<(), ProcessorError> {
        let Some(ModelEvent::TextDelta { text }) = args.part.as_ref() else {
            return Ok(());
        };
        let used: &mut Used = args.state.get_or_default();
        if used.cut {
            *args.part = None;
            return Ok(());
        }
        let part_tokens = count_tokens(text);
        // Cumulatively, the answer's tokens are counted whole (a text split in parts counts
        // at least as many tokens as whole): the parts' sum while it is under the budget,
        // the exact count of the answer so far once it is not.
        let (fits, whole) = match self.count_mode {
            CountMode::Part => (part_tokens <= self.max_tokens, None),
            CountMode::Cumulative if used.tokens + part_tokens <= self.max_tokens => (true, None),
            CountMode::Cumulative => {
                let whole = format!("{}{text}", args.text);
                let exact = count_tokens(&whole);
                (exact <= self.max_tokens, Some((whole, exact)))
            }
        };
        if fits {
            used.tokens = match &whole {
                Some((_, exact)) => *exact,
                None => used.tokens + part_tokens,
            };
            return Ok(());
        }
        match self.strategy {
            LimitStrategy::Abort => Err(ProcessorError::abort(format!(
                "the answer is longer than {} tokens",
                self.max_tokens
            ))
            .with_metadata(json!({"maxTokens": self.max_tokens}))),
            LimitStrategy::Truncate => {
                let kept = match &whole {
                    // The budget's worth of the whole answer, less what was already sent.
                    Some((whole, _)) => prefix_of(whole, self.max_tokens)
                        .strip_prefix(args.text)
                        .map(str::to_owned)
                        .unwrap_or_default(),
                    None => prefix_of(text, self.max_tokens),
                };
                if self.count_mode == CountMode::Cumulative {
                    used.cut = true;
                    used.tokens = self.max_tokens;
                }
                *args.part = (!kept.is_empty()).then_some(ModelEvent::TextDelta { text: kept });
                args.cx
                    .decide("truncate", Some(json!({"maxTokens": self.max_tokens})));
                Ok(())
            }
        }
    }
}
