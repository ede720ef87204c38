//! The sentence strategy: the text cut into sentences (at `sentenceEnders`, default `.`, `!`
//! and `?`, when whitespace and a capital letter follow and the word before is not an
//! abbreviation such as `Dr.`, an initial or a number), then sentences joined with a space
//! into chunks that close once they reach `targetSize` (default 80% of `maxSize`) or before
//! the next sentence would pass `maxSize`. Each chunk after a closed one starts with the last
//! whole sentences of it that fit in `overlap` (default 0). A sentence longer than `maxSize`
//! is cut at words (`fallbackToWords`), else at characters (`fallbackToCharacters`), else
//! kept whole.
//!
//! One difference from Mastra 2.6.4 (its issue #24128, still present in this strategy): Mastra
//! carries the overlap without checking that the next sentence fits after it, so its chunks
//! pass `maxSize` with a large overlap, and it emits chunks made only of the repeated
//! overlap. Here the overlap drops its first sentences until the next one fits, and a chunk
//! with nothing new is not emitted: no chunk passes `maxSize` unless one sentence does.

use super::split::{is_js_space, size, trim_js};

/// Mastra's sentence enders.
pub const DEFAULT_SENTENCE_ENDERS: [&str; 3] = [".", "!", "?"];

/// Mastra's default `minSize` (kept, unused, as in Mastra).
pub const DEFAULT_MIN_SIZE: usize = 50;

/// The sentence strategy's rules, from the options.
pub(crate) struct Rules<'a> {
    /// The largest chunk.
    pub max_size: usize,
    /// A chunk closes once it is this large.
    pub target_size: usize,
    /// How much of a closed chunk's end the next repeats (whole sentences).
    pub overlap: usize,
    /// What ends a sentence (single characters; longer strings never match, as in Mastra).
    pub enders: &'a [String],
    /// Cut an oversized sentence at words.
    pub fallback_to_words: bool,
    /// Cut an oversized sentence (or word) at characters.
    pub fallback_to_characters: bool,
}

/// `text`'s chunks by the sentence strategy.
pub(crate) fn split(text: &str, rules: &Rules<'_>) -> Vec<String> {
    let sentences = sentences(text, rules.enders);
    group(&sentences, rules)
        .into_iter()
        .filter(|chunk| !trim_js(chunk).is_empty())
        .collect()
}

/// `text`'s sentences, trimmed.
fn sentences<'t>(text: &'t str, enders: &[String]) -> Vec<&'t str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        // Mastra compares one UTF-16 unit with each ender.
        let is_ender =
            c.len_utf16() == 1 && enders.iter().any(|e| e.chars().eq(std::iter::once(c)));
        if !is_ender {
            continue;
        }
        let end = at + c.len_utf8();
        let sentence = &text[start..end];
        if is_boundary(sentence, &text[end..]) {
            sentences.push(trim_js(sentence));
            start = end;
        }
    }
    sentences.push(trim_js(&text[start..]));
    sentences.retain(|s| !s.is_empty());
    sentences
}

/// Whether a sentence ends after `sentence`, `rest` following it.
fn is_boundary(sentence: &str, rest: &str) -> bool {
    if trim_js(rest).is_empty() {
        return true;
    }
    // Whitespace, then a capital letter.
    let after_space = rest.trim_start_matches(is_js_space);
    if after_space.len() == rest.len() || !after_space.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return false;
    }
    let last_word = trim_js(sentence)
        .rsplit(is_js_space)
        .next()
        .unwrap_or_default();
    // The word without its last character (the ender).
    let base = last_word
        .char_indices()
        .next_back()
        .map_or("", |(at, _)| &last_word[..at]);
    !is_abbreviation(base)
}

/// Titles, initials (`A`, `U.S`, `e.g`), numbers and `a.m`/`p.m`.
fn is_abbreviation(word: &str) -> bool {
    if ["Dr", "Mr", "Mrs", "Ms", "Prof", "Sr", "Jr"].contains(&word) {
        return true;
    }
    let initials = |upper: bool| {
        let mut parts = word.split('.');
        parts.all(|part| {
            let mut chars = part.chars();
            matches!((chars.next(), chars.next()), (Some(c), None)
                if if upper { c.is_ascii_uppercase() } else { c.is_ascii_lowercase() })
        })
    };
    if initials(true) || initials(false) {
        return true;
    }
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let lower = word.to_ascii_lowercase();
    matches!(lower.as_str(), "am" | "pm" | "a.m" | "p.m")
}

/// Sentences joined into chunks.
fn group(sentences: &[&str], rules: &Rules<'_>) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    // How many of `current`'s first sentences repeat the chunk before.
    let mut carried = 0;
    let mut current_size = 0;
    for &sentence in sentences {
        let length = size(sentence);
        let separator = usize::from(!current.is_empty());
        if length > rules.max_size {
            if current.len() > carried {
                chunks.push(current.join(" "));
            }
            current.clear();
            carried = 0;
            current_size = 0;
            chunks.extend(oversized(sentence, rules));
            continue;
        }
        if !current.is_empty() && current_size + length + separator > rules.max_size {
            if current.len() > carried {
                chunks.push(current.join(" "));
                current = overlap(&current, rules.overlap);
            }
            // The overlap, less its first sentences until this one fits after it.
            while !current.is_empty() && joined_size(&current) + 1 + length > rules.max_size {
                current.remove(0);
            }
            carried = current.len();
            current_size = joined_size(&current);
        }
        current.push(sentence);
        // Counted with the separator measured before the chunk was closed (as Mastra counts).
        current_size += length + separator;
        if current_size >= rules.target_size {
            chunks.push(current.join(" "));
            current = overlap(&current, rules.overlap);
            carried = current.len();
            current_size = joined_size(&current);
        }
    }
    if current.len() > carried {
        chunks.push(current.join(" "));
    }
    chunks
}

/// The last whole sentences of `chunk` whose length joined is at most `overlap`.
fn overlap<'t>(chunk: &[&'t str], overlap: usize) -> Vec<&'t str> {
    let mut kept = 0;
    let mut total = 0;
    for sentence in chunk.iter().rev() {
        let separator = usize::from(kept > 0);
        if total + size(sentence) + separator > overlap {
            break;
        }
        total += size(sentence) + separator;
        kept += 1;
    }
    chunk[chunk.len() - kept..].to_vec()
}

/// The length of `sentences` joined with spaces.
fn joined_size(sentences: &[&str]) -> usize {
    sentences.iter().map(|s| size(s)).sum::<usize>() + sentences.len().saturating_sub(1)
}

/// A sentence longer than `maxSize`, cut as the fallbacks allow.
fn oversized(sentence: &str, rules: &Rules<'_>) -> Vec<String> {
    if rules.fallback_to_words {
        let words = by_words(sentence, rules);
        if words.len() > 1 {
            return words;
        }
    }
    if rules.fallback_to_characters {
        return by_characters(sentence, rules.max_size);
    }
    vec![sentence.to_owned()]
}

/// `sentence`'s words joined with spaces up to `maxSize`; a longer word is cut at characters
/// when allowed.
fn by_words(sentence: &str, rules: &Rules<'_>) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for word in sentence.split(is_js_space).filter(|w| !w.is_empty()) {
        let fits = if current.is_empty() {
            size(word) <= rules.max_size
        } else {
            size(&current) + 1 + size(word) <= rules.max_size
        };
        if fits {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
            continue;
        }
        if !current.is_empty() {
            chunks.push(std::mem::take(&mut current));
        }
        if size(word) > rules.max_size {
            if rules.fallback_to_characters {
                chunks.extend(by_characters(word, rules.max_size));
            } else {
                chunks.push(word.to_owned());
            }
        } else {
            current.push_str(word);
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// `text` cut between characters into pieces of at most `max_size` (a character larger than
/// that alone).
fn by_characters(text: &str, max_size: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut current_size = 0;
    for c in text.chars() {
        if current_size + c.len_utf16() <= max_size {
            current.push(c);
            current_size += c.len_utf16();
        } else {
            if !current.is_empty() {
                chunks.push(std::mem::take(&mut current));
            }
            current.push(c);
            current_size = c.len_utf16();
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}
