//! The semantic-markdown strategy: the document cut at its headings (`#` to `######`, outside
//! code fences), then, from the deepest level up, each section joined to the one before it
//! while their tokens together stay under `joinThreshold` (default 500) and the one before is
//! no deeper. A chunk is a heading line and its content (joined sections keep their own
//! headings), with its token count as `tokenCount`. `maxSize` and `overlap` are checked but
//! not used, as in Mastra.

use super::ChunkError;
use super::split::{is_js_space, size, trim_js};
use super::tokens::Tokenizer;

/// Mastra's default `joinThreshold`.
pub const DEFAULT_JOIN_THRESHOLD: usize = 500;

/// A heading and what follows it up to the next.
struct Section {
    title: String,
    content: String,
    depth: usize,
    /// Its tokens (the sum of the parts, once joined).
    tokens: usize,
}

/// What the strategy needs beyond the tokenizer.
pub(crate) struct Rules<'a> {
    /// Counts tokens.
    pub tokenizer: &'a Tokenizer,
    /// Sections are joined while their tokens stay under this.
    pub join_threshold: usize,
    /// Texts are trimmed before they are counted.
    pub strip_whitespace: bool,
}

impl Rules<'_> {
    /// The tokens of `text`, trimmed first when asked.
    pub(crate) fn count(&self, text: &str) -> Result<usize, ChunkError> {
        self.tokenizer.count(if self.strip_whitespace {
            trim_js(text)
        } else {
            text
        })
    }
}

/// `line`'s depth and title when it is a heading: one to six `#`, spaces or tabs, then a
/// title that starts with a non-space and is at most 1025 long.
fn heading(line: &str) -> Option<(usize, &str)> {
    let depth = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&depth) {
        return None;
    }
    let rest = &line[depth..];
    let title = rest.trim_start_matches([' ', '\t']);
    if title.len() == rest.len() {
        return None;
    }
    let first = title.chars().next()?;
    if is_js_space(first) || size(title) > 1025 {
        return None;
    }
    Some((depth, title))
}

/// `text`'s chunks by the semantic-markdown strategy.
pub(crate) fn split(text: &str, rules: &Rules<'_>) -> Result<Vec<String>, ChunkError> {
    if trim_js(text).is_empty() {
        return Ok(Vec::new());
    }
    let sections = merge(sections(text, rules)?, rules)?;
    Ok(sections
        .into_iter()
        .map(|s| {
            if s.title.is_empty() {
                s.content
            } else {
                format!("{} {}\n{}", "#".repeat(s.depth), s.title, s.content)
            }
        })
        .collect())
}

/// `text` cut at its headings.
fn sections(text: &str, rules: &Rules<'_>) -> Result<Vec<Section>, ChunkError> {
    let mut sections = Vec::new();
    let mut content = String::new();
    let mut title = "";
    let mut depth = 0;
    let mut in_code = false;
    let mut close = |title: &str, depth: usize, content: &str| -> Result<(), ChunkError> {
        let content = trim_js(content);
        sections.push(Section {
            title: title.to_owned(),
            content: content.to_owned(),
            depth,
            tokens: rules.count(content)?,
        });
        Ok(())
    };
    for line in text.split('\n') {
        if line.starts_with("```") || line.starts_with("~~~") {
            in_code = !in_code;
        }
        match heading(line).filter(|_| !in_code) {
            Some((level, text)) => {
                if !trim_js(&content).is_empty() || (!title.is_empty() && depth > 0) {
                    close(title, depth, &content)?;
                }
                content.clear();
                depth = level;
                title = text;
            }
            None => {
                content.push_str(line);
                content.push('\n');
            }
        }
    }
    // A last heading without content is left out (as in Mastra).
    if !trim_js(&content).is_empty() {
        close(title, depth, &content)?;
    }
    Ok(sections)
}

/// Sections joined to the one before them, deepest first, while under the threshold.
fn merge(mut sections: Vec<Section>, rules: &Rules<'_>) -> Result<Vec<Section>, ChunkError> {
    let deepest = sections.iter().map(|s| s.depth).max().unwrap_or(0);
    for depth in (1..=deepest).rev() {
        let mut j = 1;
        while j < sections.len() {
            if sections[j].depth != depth {
                j += 1;
                continue;
            }
            let heading = format!("\n\n{} {}", "#".repeat(depth), sections[j].title);
            let heading_tokens = rules.tokenizer.count(&format!("{heading}\n"))?;
            let (before, after) = sections.split_at_mut(j);
            let (Some(previous), Some(current)) = (before.last_mut(), after.first()) else {
                break;
            };
            let merged = previous.tokens + current.tokens + heading_tokens;
            if merged < rules.join_threshold && previous.depth <= current.depth {
                previous.content.push_str(&heading);
                previous.content.push('\n');
                previous.content.push_str(&current.content);
                previous.tokens = merged;
                sections.remove(j);
            } else {
                j += 1;
            }
        }
    }
    Ok(sections)
}
