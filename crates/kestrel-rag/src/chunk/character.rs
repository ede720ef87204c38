//! The character strategy: cut on one separator; a piece larger than `maxSize` is cut between
//! characters into pieces of at most `maxSize`, each repeating up to `overlap` of the one
//! before. Pieces are never merged (as Mastra does).

use super::split::{Separator, Splitter};
use super::{ChunkError, ChunkOptions};

/// The default separator: a blank line.
pub const DEFAULT_SEPARATOR: &str = "\n\n";

/// `text`'s chunks by the character strategy.
pub(crate) fn split(
    text: &str,
    options: &ChunkOptions,
    splitter: &Splitter,
) -> Result<Vec<String>, ChunkError> {
    let raw = options.separator.as_deref().unwrap_or(DEFAULT_SEPARATOR);
    let separator = Separator::new(raw, options.is_separator_regex.unwrap_or(false))?;
    let mut chunks = Vec::new();
    for piece in separator.split(text, splitter.separator_position) {
        cut_to_size(piece, splitter, &mut chunks);
    }
    Ok(chunks)
}

/// `piece` as is when it fits, else cut between characters.
fn cut_to_size(piece: &str, splitter: &Splitter, chunks: &mut Vec<String>) {
    // Each character's byte offset and the UTF-16 size of the text before it (and the ends).
    let mut bytes = Vec::with_capacity(piece.len() + 1);
    let mut units = Vec::with_capacity(piece.len() + 1);
    let mut total = 0;
    for (byte, c) in piece.char_indices() {
        bytes.push(byte);
        units.push(total);
        total += c.len_utf16();
    }
    bytes.push(piece.len());
    units.push(total);
    if total <= splitter.max_size {
        chunks.push(piece.to_owned());
        return;
    }
    let last = bytes.len() - 1;
    let mut start = 0;
    while start < last {
        // As many characters as fit (at least one).
        let mut end = start;
        while end < last && units[end + 1] - units[start] <= splitter.max_size {
            end += 1;
        }
        if end == start {
            end += 1;
        }
        chunks.push(piece[bytes[start]..bytes[end]].to_owned());
        if end >= last {
            break;
        }
        // The next starts as far back as the overlap allows.
        let mut next = end;
        while splitter.overlap > 0
            && next > start
            && units[end] - units[next - 1] <= splitter.overlap
        {
            next -= 1;
        }
        start = (start + 1).max(next);
    }
}
