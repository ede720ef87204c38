//! The recursive strategy: cut on the first separator that occurs in the text, merge the
//! pieces up to `maxSize`, and cut a piece still too large with the separators after it.

use super::split::{Separator, Splitter, size};
use super::{ChunkError, ChunkOptions, Language};

/// The default separators: paragraphs, lines, words, characters.
pub const DEFAULT_SEPARATORS: [&str; 4] = ["\n\n", "\n", " ", ""];

/// Markdown's separators (regular expressions): headers, code fences, horizontal rules,
/// then paragraphs, lines, words and characters.
pub const MARKDOWN_SEPARATORS: [&str; 9] = [
    "\n#{1,6} ",
    "```\n",
    "\n\\*\\*\\*+\n",
    "\n---+\n",
    "\n___+\n",
    "\n\n",
    "\n",
    " ",
    "",
];

/// LaTeX's separators (regular expressions): parts, chapters, sections, environments and
/// commands, then paragraphs, lines, words and characters.
pub const LATEX_SEPARATORS: [&str; 12] = [
    "\\\\part\\*?\\{",
    "\\\\chapter\\*?\\{",
    "\\\\section\\*?\\{",
    "\\\\subsection\\*?\\{",
    "\\\\subsubsection\\*?\\{",
    "\\\\begin\\{.*?\\}",
    "\\\\end\\{.*?\\}",
    "\\\\[a-zA-Z]+\\{.*?\\}",
    "\n\n",
    "\n",
    " ",
    "",
];

/// `text`'s chunks by the recursive strategy.
pub(crate) fn split(
    text: &str,
    options: &ChunkOptions,
    splitter: &Splitter,
) -> Result<Vec<String>, ChunkError> {
    let (separators, is_regex): (Vec<String>, bool) = match (&options.separators, options.language)
    {
        (_, Some(Language::Markdown)) => (
            MARKDOWN_SEPARATORS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            true,
        ),
        (_, Some(Language::Latex)) => (
            LATEX_SEPARATORS.iter().map(|s| (*s).to_owned()).collect(),
            true,
        ),
        (Some(separators), None) => (
            separators.clone(),
            options.is_separator_regex.unwrap_or(false),
        ),
        (None, None) => (
            DEFAULT_SEPARATORS.iter().map(|s| (*s).to_owned()).collect(),
            options.is_separator_regex.unwrap_or(false),
        ),
    };
    if separators.is_empty() {
        return Err(ChunkError::InvalidOptions {
            strategy: "recursive",
            message: "'separators' is empty: give at least one (\"\" cuts between characters)"
                .to_owned(),
        });
    }
    let compiled = separators
        .iter()
        .map(|s| Separator::new(s, is_regex))
        .collect::<Result<Vec<_>, _>>()?;
    let mut chunks = Vec::new();
    cut(
        text,
        &separators,
        &compiled,
        is_regex,
        splitter,
        &mut chunks,
    );
    Ok(chunks)
}

/// Cuts `text` with `separators` (the raw texts) and `compiled` (the same, compiled) into
/// `chunks`.
fn cut(
    text: &str,
    separators: &[String],
    compiled: &[Separator],
    is_regex: bool,
    splitter: &Splitter,
    chunks: &mut Vec<String>,
) {
    // The first separator that occurs (the empty one always does); the ones after it are for
    // the pieces still too large. Without any, the last one, alone.
    let chosen = separators
        .iter()
        .zip(compiled)
        .position(|(raw, separator)| raw.is_empty() || separator.occurs_in(text));
    let (index, rest) = match chosen {
        Some(i) if separators[i].is_empty() => (i, 0..0),
        Some(i) => (i, i + 1..separators.len()),
        None => (separators.len().saturating_sub(1), 0..0),
    };
    let (Some(raw), Some(separator)) = (separators.get(index), compiled.get(index)) else {
        // No separators at all: the text is one piece.
        if !text.is_empty() {
            chunks.push(text.to_owned());
        }
        return;
    };
    let pieces = separator.split(text, splitter.separator_position);
    // Kept separators are in the pieces already; dropped ones join the merged pieces again.
    // A pattern's pieces are joined with the text they were cut at (Mastra joins them with
    // the pattern itself, `\s+` and all: a known bug this does not copy).
    let by_gap = is_regex && splitter.separator_position.is_none() && !raw.is_empty();
    let joiner = if splitter.separator_position.is_some() {
        ""
    } else {
        raw.as_str()
    };
    let merge = |fitting: &[&str]| {
        if by_gap {
            splitter.merge_with(fitting, |i| gap(text, fitting, i))
        } else {
            splitter.merge(fitting, joiner)
        }
    };
    let mut fitting: Vec<&str> = Vec::new();
    for piece in pieces {
        if size(piece) < splitter.max_size {
            fitting.push(piece);
            continue;
        }
        if !fitting.is_empty() {
            chunks.extend(merge(&fitting));
            fitting.clear();
        }
        if rest.is_empty() {
            chunks.push(piece.to_owned());
        } else {
            cut(
                piece,
                &separators[rest.clone()],
                &compiled[rest.clone()],
                is_regex,
                splitter,
                chunks,
            );
        }
    }
    if !fitting.is_empty() {
        chunks.extend(merge(&fitting));
    }
}

/// The text of `text` between `pieces[i - 1]` and `pieces[i]` (both slices of it); empty for
/// the first piece.
fn gap<'t>(text: &'t str, pieces: &[&'t str], i: usize) -> &'t str {
    let offset = |piece: &str| piece.as_ptr() as usize - text.as_ptr() as usize;
    let (Some(before), Some(after)) = (i.checked_sub(1).and_then(|b| pieces.get(b)), pieces.get(i))
    else {
        return "";
    };
    text.get(offset(before) + before.len()..offset(after))
        .unwrap_or("")
}
