//! The markdown strategy. Without `headers`, the recursive strategy with Markdown's
//! separators. With `headers` (`[["#", "Header 1"], ["##", "Header 2"]]`), one chunk per
//! section: the headers above a section become its metadata (`{"Header 1": "Kestrel"}`), the
//! section's lines are joined with `"  \n"`, and `maxSize` and `overlap` do not apply (as in
//! Mastra). Fenced code and table lines never start a section.

use serde_json::{Map, Value};

use super::split::trim_js;

/// What the headers mode needs from the options.
pub(crate) struct HeaderOptions<'a> {
    /// Header markers and the metadata key each sets.
    pub headers: &'a [(String, String)],
    /// One chunk per line (each with its section's metadata).
    pub return_each_line: bool,
    /// Leave header lines out of the chunks (default yes).
    pub strip_headers: bool,
}

/// A line or a run of lines, with the headers above it.
struct Section {
    content: String,
    metadata: Map<String, Value>,
}

/// An open header: its level (how many `#`), metadata key and text.
struct Open {
    level: usize,
    name: String,
}

/// `text` cut at its headers; each chunk's text and the headers above it.
pub(crate) fn split_headers(
    text: &str,
    options: &HeaderOptions<'_>,
) -> Vec<(String, Map<String, Value>)> {
    // The longest markers first: `##` is not a `#` header.
    let mut headers: Vec<&(String, String)> = options.headers.iter().collect();
    headers.sort_by_key(|(marker, _)| std::cmp::Reverse(marker.len()));
    let mut sections: Vec<Section> = Vec::new();
    let mut content: Vec<&str> = Vec::new();
    let mut current: Map<String, Value> = Map::new();
    let mut open: Vec<Open> = Vec::new();
    let mut above: Map<String, Value> = Map::new();
    let mut fence: Option<&str> = None;
    for line in text.split('\n') {
        let stripped = trim_js(line);
        match fence {
            None => {
                if (stripped.starts_with("```") && stripped.matches("```").count() == 1)
                    || stripped.starts_with("~~~")
                {
                    fence = Some(if stripped.starts_with("```") {
                        "```"
                    } else {
                        "~~~"
                    });
                }
            }
            Some(marker) if stripped.starts_with(marker) => fence = None,
            Some(_) => {}
        }
        if fence.is_some() {
            content.push(line);
            continue;
        }
        // A table's lines stay with the section (and leave its headers as they are).
        if stripped.contains('|') {
            content.push(line);
            continue;
        }
        let header = headers.iter().find(|(marker, _)| {
            stripped
                .strip_prefix(marker.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        });
        if let Some((marker, name)) = header {
            if !content.is_empty() {
                sections.push(Section {
                    content: content.join("\n"),
                    metadata: current.clone(),
                });
                content.clear();
            }
            let level = marker.matches('#').count();
            while open.last().is_some_and(|o| o.level >= level) {
                if let Some(closed) = open.pop() {
                    above.remove(&closed.name);
                }
            }
            let data = trim_js(&stripped[marker.len()..]).to_owned();
            open.push(Open {
                level,
                name: name.clone(),
            });
            above.insert(name.clone(), Value::String(data));
            if !options.strip_headers {
                let mut metadata = current.clone();
                metadata.extend(above.clone());
                sections.push(Section {
                    content: line.to_owned(),
                    metadata,
                });
            }
        } else if !stripped.is_empty() || options.return_each_line {
            content.push(line);
            if options.return_each_line {
                sections.push(Section {
                    content: line.to_owned(),
                    metadata: current.clone(),
                });
                content.clear();
            }
        } else if !content.is_empty() {
            sections.push(Section {
                content: content.join("\n"),
                metadata: current.clone(),
            });
            content.clear();
        }
        current = above.clone();
    }
    if !content.is_empty() {
        sections.push(Section {
            content: content.join("\n"),
            metadata: current,
        });
    }
    aggregate(sections, &headers, options.return_each_line)
}

/// Sections with the same headers joined; a header line followed by its own content joined
/// too.
fn aggregate(
    sections: Vec<Section>,
    headers: &[&(String, String)],
    each_line: bool,
) -> Vec<(String, Map<String, Value>)> {
    let is_header = |line: &str| {
        headers
            .iter()
            .any(|(marker, _)| line.starts_with(marker.as_str()))
    };
    if each_line {
        return sections
            .into_iter()
            .flat_map(|section| {
                let metadata = section.metadata;
                section
                    .content
                    .split('\n')
                    .map(trim_js)
                    .filter(|line| !line.is_empty() || is_header(line))
                    .map(|line| (line.to_owned(), metadata.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    let mut chunks: Vec<Section> = Vec::new();
    for section in sections {
        if let Some(last) = chunks.last_mut() {
            let last_line = last.content.rsplit('\n').next().map(trim_js).unwrap_or("");
            let after_header = !last_line.is_empty() && is_header(last_line);
            if last.metadata == section.metadata {
                last.content.push_str("  \n");
                last.content.push_str(&section.content);
                continue;
            }
            if last.metadata.len() < section.metadata.len() && after_header {
                last.content.push_str("  \n");
                last.content.push_str(&section.content);
                last.metadata = section.metadata;
                continue;
            }
        }
        chunks.push(section);
    }
    chunks
        .into_iter()
        .map(|s| (s.content, s.metadata))
        .collect()
}
