//! Token counting with a real tokenizer: OpenAI's `o200k_base` BPE (GPT-4o, GPT-4.1, GPT-5,
//! o-series), through the `tiktoken-rs` crate, whose vocabulary is embedded in the binary (no
//! download, no network).
//!
//! Other providers' tokenizers differ by some percent; observational memory's thresholds are
//! budgets, not hard limits, so one good tokenizer for every model is enough. The vocabulary is
//! loaded once per process, on first use (a fraction of a second in release builds).
//!
//! A message counts the tokens of its text and reasoning, of each tool call's name and JSON
//! arguments, and of each tool result's name and JSON value (a string result counts as its
//! text). Formatting tokens a provider adds around messages are not counted.

use std::sync::OnceLock;

use kestrel_core::message::{Message, Part};
use kestrel_storage::StoredMessage;
use serde_json::Value;
use tiktoken_rs::CoreBPE;

/// The tokenizer, loaded on first use; `None` if its embedded data failed to load (then counts
/// fall back to an estimate of one token per four bytes, and a warning is logged once).
fn tokenizer() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(bpe) => Some(bpe),
        Err(error) => {
            tracing::warn!(
                %error,
                "the o200k_base tokenizer failed to load; token counts are estimated (4 bytes per token)"
            );
            None
        }
    })
    .as_ref()
}

/// The number of `o200k_base` tokens of `text`. Special-token markers such as
/// `<|endoftext|>` count as ordinary text.
///
/// ```
/// assert_eq!(kestrel_memory::count_tokens("hello world"), 2);
/// ```
pub fn count_tokens(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

/// The tokens of a message's parts (see the [module docs](self) for what counts).
pub fn parts_tokens(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Reasoning { text } => count_tokens(text),
            Part::ToolCall {
                tool_name, args, ..
            } => count_tokens(tool_name) + value_tokens(args),
            Part::ToolResult {
                tool_name, result, ..
            } => count_tokens(tool_name) + value_tokens(result),
        })
        .sum()
}

/// The tokens of a message: its text plus its tool calls' arguments and tool results.
pub fn message_tokens(message: &Message) -> usize {
    parts_tokens(&message.parts)
}

/// The tokens of a stored message, as [`message_tokens`].
pub fn stored_message_tokens(message: &StoredMessage) -> usize {
    parts_tokens(&message.parts)
}

/// A JSON value's tokens: a string as its text, anything else as compact JSON.
fn value_tokens(value: &Value) -> usize {
    match value {
        Value::String(text) => count_tokens(text),
        Value::Null => 0,
        other => count_tokens(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use kestrel_core::message::{Message, Part, Role};
    use serde_json::json;

    use super::{count_tokens, message_tokens};

    #[test]
    fn counts_are_o200k_tokens() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
        // Special-token text is ordinary text, never an error.
        assert!(count_tokens("<|endoftext|>") > 1);
    }

    #[test]
    fn messages_count_text_tool_args_and_results() {
        let call = Message {
            id: "m".into(),
            role: Role::Assistant,
            parts: vec![
                Part::Text {
                    text: "hello world".into(),
                },
                Part::ToolCall {
                    tool_call_id: "c1".into(),
                    tool_name: "echo".into(),
                    args: json!({"text": "hello world"}),
                },
                Part::ToolResult {
                    tool_call_id: "c1".into(),
                    tool_name: "echo".into(),
                    result: json!("hello world"),
                    is_error: false,
                    denied: false,
                },
            ],
        };
        let expected = 2
            + count_tokens("echo")
            + count_tokens(r#"{"text":"hello world"}"#)
            + count_tokens("echo")
            + 2;
        assert_eq!(message_tokens(&call), expected);
    }
}
