//! The token strategy: the text encoded with an OpenAI encoding ([`tokens`](super::tokens)),
//! cut every `maxSize` tokens, each window starting `overlap` tokens before the previous one
//! ends, and decoded back (trimmed unless `stripWhitespace` is false). A window that ends
//! inside a character decodes that part as U+FFFD, as Mastra's does.

use super::ChunkError;
use super::split::{Splitter, trim_js};
use super::tokens::Tokenizer;

/// `text`'s chunks by the token strategy.
pub(crate) fn split(
    text: &str,
    tokenizer: &Tokenizer,
    splitter: &Splitter,
) -> Result<Vec<String>, ChunkError> {
    let trim = |s: String| {
        if splitter.strip_whitespace {
            trim_js(&s).to_owned()
        } else {
            s
        }
    };
    let source = if splitter.strip_whitespace {
        trim_js(text)
    } else {
        text
    };
    let tokens = tokenizer.encode(source)?;
    // `splitter` refused `overlap >= maxSize`: every window moves on.
    let step = splitter.max_size - splitter.overlap;
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let end = (start + splitter.max_size).min(tokens.len());
        chunks.push(trim(tokenizer.decode(&tokens[start..end])?));
        if end == tokens.len() {
            break;
        }
        start += step;
    }
    Ok(chunks)
}
