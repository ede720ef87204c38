//! What every strategy shares: sizes in UTF-16 units (JavaScript's `String.length`, as Mastra
//! measures), splitting on a separator (kept or not), and merging pieces into chunks of at
//! most `maxSize` with an overlap made of whole pieces.

use regex::Regex;
use serde_json::{Map, Value};

use super::{Chunk, ChunkError, SeparatorPosition};

/// The size of `text` as Mastra measures it: UTF-16 code units.
pub fn size(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Whitespace as JavaScript's `trim` sees it (no U+0085; U+FEFF included).
pub(crate) fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// `text` without the whitespace JavaScript's `trim` removes.
pub(crate) fn trim_js(text: &str) -> &str {
    text.trim_matches(is_js_space)
}

/// The rules shared by the strategies, from the options.
#[derive(Debug, Clone)]
pub struct Splitter {
    /// The largest chunk.
    pub max_size: usize,
    /// How much of a chunk's end the next repeats.
    pub overlap: usize,
    /// Where kept separators go (`None`: separators are dropped).
    pub separator_position: Option<SeparatorPosition>,
    /// Whether chunks carry `startIndex`.
    pub add_start_index: bool,
    /// Whether merged chunks are trimmed.
    pub strip_whitespace: bool,
}

/// A separator, compiled: a pattern, or nothing (cut between characters).
pub(crate) enum Separator {
    /// Between every two characters.
    Chars,
    /// Where the pattern matches.
    Pattern(Regex),
}

impl Separator {
    /// `separator`, a regular expression when `is_regex`, else literal text.
    pub(crate) fn new(separator: &str, is_regex: bool) -> Result<Self, ChunkError> {
        if separator.is_empty() {
            return Ok(Self::Chars);
        }
        let pattern = if is_regex {
            separator.to_owned()
        } else {
            regex::escape(separator)
        };
        Regex::new(&pattern)
            .map(Self::Pattern)
            .map_err(|e| ChunkError::InvalidSeparator {
                separator: separator.to_owned(),
                message: e.to_string(),
            })
    }

    /// Whether it occurs in `text` (cutting between characters always does).
    pub(crate) fn occurs_in(&self, text: &str) -> bool {
        match self {
            Self::Chars => true,
            Self::Pattern(regex) => regex.is_match(text),
        }
    }

    /// `text` cut where the separator occurs, the separators dropped or kept at `position`;
    /// empty pieces are left out.
    pub(crate) fn split<'t>(
        &self,
        text: &'t str,
        position: Option<SeparatorPosition>,
    ) -> Vec<&'t str> {
        let regex = match self {
            Self::Chars => {
                return text
                    .char_indices()
                    .map(|(i, c)| &text[i..i + c.len_utf8()])
                    .collect();
            }
            Self::Pattern(regex) => regex,
        };
        let Some(position) = position else {
            return regex.split(text).filter(|s| !s.is_empty()).collect();
        };
        let mut pieces = Vec::new();
        // Where the current piece starts (with `Start`, the separator before it included).
        let mut start = 0;
        for found in regex.find_iter(text) {
            match position {
                SeparatorPosition::End => {
                    pieces.push(&text[start..found.end()]);
                    start = found.end();
                }
                SeparatorPosition::Start => {
                    pieces.push(&text[start..found.start()]);
                    start = found.start();
                }
            }
        }
        pieces.push(&text[start..]);
        pieces.retain(|s| !s.is_empty());
        pieces
    }
}

impl Splitter {
    /// `pieces` joined with `separator` into chunks of at most `max_size` where they allow
    /// it; each chunk after the first starts with the last whole pieces of the one before, at
    /// most `overlap` of them (fewer when the next piece would not fit).
    pub(crate) fn merge(&self, pieces: &[&str], separator: &str) -> Vec<String> {
        self.merge_with(pieces, |_| separator)
    }

    /// [`Splitter::merge`] with the text joining piece `i` to piece `i - 1` given by `joiner(i)`
    /// (a regular expression's pieces are joined with the text they were cut at).
    pub(crate) fn merge_with<'t>(
        &self,
        pieces: &[&'t str],
        joiner: impl Fn(usize) -> &'t str,
    ) -> Vec<String> {
        let mut chunks = Vec::new();
        // The chunk being built: pieces `first..next`, `total` long joined.
        let mut first = 0;
        let mut total = 0;
        for (next, &piece) in pieces.iter().enumerate() {
            let piece_size = size(piece);
            let joined = size(joiner(next));
            if first < next && total + piece_size + joined > self.max_size {
                if let Some(chunk) = self.join(&pieces[first..next], first, &joiner) {
                    chunks.push(chunk);
                }
                if self.overlap > 0 {
                    // The last whole pieces that fit in the overlap...
                    let mut start = next;
                    let mut kept_size = 0;
                    while start > first {
                        let earlier = size(pieces[start - 1]);
                        if kept_size + earlier > self.overlap {
                            break;
                        }
                        let link = if start < next { size(joiner(start)) } else { 0 };
                        kept_size += earlier + link;
                        start -= 1;
                    }
                    // ...fewer while the next piece would not fit after them.
                    while start < next && kept_size + piece_size + joined > self.max_size {
                        let link = if start + 1 < next {
                            size(joiner(start + 1))
                        } else {
                            0
                        };
                        kept_size -= size(pieces[start]) + link;
                        start += 1;
                    }
                    first = start;
                    total = kept_size;
                } else {
                    first = next;
                    total = 0;
                }
            }
            total += piece_size + if first < next { joined } else { 0 };
        }
        if let Some(chunk) = self.join(&pieces[first..], first, &joiner) {
            chunks.push(chunk);
        }
        chunks
    }

    /// `pieces` (the first being piece `offset` of the whole list) joined, trimmed when
    /// asked; `None` when nothing is left.
    fn join<'t>(
        &self,
        pieces: &[&'t str],
        offset: usize,
        joiner: &impl Fn(usize) -> &'t str,
    ) -> Option<String> {
        let mut joined = String::new();
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                joined.push_str(joiner(offset + i));
            }
            joined.push_str(piece);
        }
        let text = if self.strip_whitespace {
            trim_js(&joined).to_owned()
        } else {
            joined
        };
        (!text.is_empty()).then_some(text)
    }

    /// The chunks of `text`, each with `metadata` and, when asked, its `startIndex`: where it
    /// is found in `text`, searching from just before the previous chunk's end (its overlap),
    /// `-1` when it is not found as is (a chunk joined with a dropped separator).
    pub(crate) fn chunks(
        &self,
        text: &str,
        pieces: Vec<String>,
        metadata: &Map<String, Value>,
    ) -> Vec<Chunk> {
        let mut index: i64 = 0;
        let mut previous: i64 = 0;
        pieces
            .into_iter()
            .map(|piece| {
                let mut metadata = metadata.clone();
                if self.add_start_index {
                    let from = (index + previous - self.overlap as i64).max(0);
                    index = find_from(text, &piece, from as usize);
                    metadata.insert("startIndex".to_owned(), index.into());
                    previous = size(&piece) as i64;
                }
                Chunk {
                    text: piece,
                    metadata,
                }
            })
            .collect()
    }
}

/// Where `needle` is in `text` at or after `from` (both in UTF-16 units), `-1` when it is not
/// (JavaScript's `indexOf`).
fn find_from(text: &str, needle: &str, from: usize) -> i64 {
    // The byte where UTF-16 offset `from` falls (the end when it is past it).
    let mut units = 0;
    let mut start = text.len();
    for (byte, c) in text.char_indices() {
        if units >= from {
            start = byte;
            break;
        }
        units += c.len_utf16();
    }
    match text[start..].find(needle) {
        Some(found) => (size(&text[..start + found])) as i64,
        None => -1,
    }
}
