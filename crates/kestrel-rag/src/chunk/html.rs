//! The html strategy: one chunk per section of an HTML page, a section being what follows a
//! header element (`headers` or `sections`: `[["h1", "Header 1"], ["h2", "Header 2"]]`) up to
//! the next one. Each chunk's metadata holds its header's text under the header's name
//! (`{"Header 2": "Counts"}`) and the header's `xpath` (`/html[1]/body[1]/h2[2]`); the header's
//! own text is not in the chunk, and text before the first header is left out, as in
//! Mastra. With `headers`, consecutive sections under the same header text are joined with
//! `"  \n"` unless `returnEachLine`. With `maxSize`, each section is cut further by the
//! recursive strategy (`overlap`, `addStartIndex`... apply to it).
//!
//! Where Mastra 2.6.4 goes wrong, this does not copy it: Mastra's text gives every element's
//! text twice (the element's, then each child's again), runs table cells together, returns
//! the sections grouped by tag (every `h1`, then every `h2`) instead of in page order, gives
//! a section everything after its header among its siblings (so a header nested in a later
//! `div` has its text in both sections), and numbers every `xpath` step `[1]` in sections
//! mode. Here the page is parsed by html5ever (as a browser parses it), each text belongs
//! once to the nearest header before it in page order, block elements and table rows make
//! lines, cells are separated by a space, whitespace is collapsed (kept in `pre`), scripts,
//! styles and the head are left out, and sections without text are dropped.

use scraper::{ElementRef, Html, Node};
use serde_json::{Map, Value};

/// A header element to cut at and the metadata key its text goes under.
pub(crate) struct Rules<'a> {
    /// `(tag, name)` pairs: `("h2", "Header 2")`.
    pub headers: &'a [(String, String)],
    /// Join consecutive sections with the same header text (the `headers` mode without
    /// `returnEachLine`).
    pub aggregate: bool,
}

/// A section: its header and its text, line by line.
struct Section {
    /// The metadata key.
    name: String,
    /// The header's text.
    header: String,
    xpath: String,
    lines: Vec<String>,
    /// The line being written.
    line: String,
    /// Whether the line being written is preformatted (kept as is).
    pre: bool,
}

impl Section {
    fn new(name: String) -> Self {
        Self {
            name,
            header: String::new(),
            xpath: String::new(),
            lines: Vec::new(),
            line: String::new(),
            pre: false,
        }
    }

    fn break_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let line = if self.pre {
            line.trim_end().to_owned()
        } else {
            line.trim().to_owned()
        };
        if !line.is_empty() {
            self.lines.push(line);
        }
    }

    /// Appends `text`, its whitespace collapsed unless `pre`.
    fn push(&mut self, text: &str, pre: bool) {
        if pre {
            self.pre = true;
            for (i, part) in text.split('\n').enumerate() {
                if i > 0 {
                    self.break_line();
                    self.pre = true;
                }
                self.line.push_str(part);
            }
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                if !self.line.is_empty() && !self.line.ends_with(' ') {
                    self.line.push(' ');
                }
            } else {
                self.line.push(c);
            }
        }
    }

    fn space(&mut self) {
        if !self.line.is_empty() && !self.line.ends_with(char::is_whitespace) {
            self.line.push(' ');
        }
    }
}

/// Elements whose text is not the page's text.
const SKIPPED: [&str; 8] = [
    "head", "script", "style", "noscript", "template", "title", "iframe", "object",
];

/// Elements that start and end a line.
const BLOCKS: [&str; 37] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "caption",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "html",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tr",
];

fn is_block(tag: &str) -> bool {
    BLOCKS.contains(&tag) || matches!(tag, "ul" | "thead" | "tbody" | "tfoot" | "br")
}

/// The walk through the page: the sections so far and where the walk is.
struct Walk<'r> {
    rules: &'r Rules<'r>,
    sections: Vec<Section>,
    /// The `xpath` steps of the elements the walk is in (`html[1]`, `body[1]`).
    path: Vec<String>,
    /// How many `pre` elements the walk is in.
    pre: usize,
}

impl Walk<'_> {
    /// The metadata key of `tag` when it is a header.
    fn header_name(&self, tag: &str) -> Option<String> {
        self.rules
            .headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(tag))
            .map(|(_, name)| name.clone())
    }

    /// Whether the walk goes into an element (not into skipped ones nor headers).
    fn enters(&self, tag: &str) -> bool {
        !SKIPPED.contains(&tag) && self.header_name(tag).is_none()
    }

    /// An element starts; `step` is its `xpath` step, `text` its text (read only for
    /// headers).
    fn open(&mut self, tag: &str, step: String, text: impl FnOnce() -> String) {
        if SKIPPED.contains(&tag) {
            return;
        }
        if let Some(name) = self.header_name(tag) {
            if let Some(section) = self.sections.last_mut() {
                section.break_line();
            }
            let mut header = Section::new(name);
            header.push(&text(), false);
            header.header = std::mem::take(&mut header.line).trim().to_owned();
            header.xpath = format!("/{}/{step}", self.path.join("/"));
            if self.path.is_empty() {
                header.xpath = format!("/{step}");
            }
            self.sections.push(header);
            return;
        }
        self.path.push(step);
        if tag == "pre" {
            self.pre += 1;
        }
        if let Some(section) = self.sections.last_mut() {
            if is_block(tag) {
                section.break_line();
            } else if matches!(tag, "td" | "th") {
                section.space();
            }
        }
    }

    /// An element the walk went into ends.
    fn close(&mut self, tag: &str) {
        self.path.pop();
        if tag == "pre" {
            self.pre = self.pre.saturating_sub(1);
        }
        if is_block(tag)
            && let Some(section) = self.sections.last_mut()
        {
            section.break_line();
            section.pre = false;
        }
    }

    fn text(&mut self, text: &str) {
        let pre = self.pre > 0;
        if let Some(section) = self.sections.last_mut() {
            section.push(text, pre);
        }
    }
}

/// `html`'s sections, each as its text and metadata.
pub(crate) fn split(html: &str, rules: &Rules<'_>) -> Vec<(String, Map<String, Value>)> {
    let document = Html::parse_document(html);
    let mut walk = Walk {
        rules,
        sections: Vec::new(),
        path: Vec::new(),
        pre: 0,
    };
    let root = document.tree.root();
    let mut node = root;
    'walk: loop {
        let mut descend = true;
        match node.value() {
            Node::Element(element) => {
                let tag = element.name();
                // Its `xpath` step: its position among its siblings of the same tag.
                let index = 1 + node
                    .prev_siblings()
                    .filter(|s| s.value().as_element().is_some_and(|e| e.name() == tag))
                    .count();
                descend = walk.enters(tag);
                walk.open(tag, format!("{tag}[{index}]"), || {
                    ElementRef::wrap(node)
                        .map(|e| e.text().collect::<String>())
                        .unwrap_or_default()
                });
            }
            Node::Text(text) => walk.text(text),
            _ => {}
        }
        if descend && let Some(child) = node.first_child() {
            node = child;
            continue;
        }
        // Leave `node`, and its ancestors while they have no next sibling.
        loop {
            if let Node::Element(element) = node.value()
                && walk.enters(element.name())
            {
                walk.close(element.name());
            }
            if node.id() == root.id() {
                break 'walk;
            }
            if let Some(next) = node.next_sibling() {
                node = next;
                break;
            }
            match node.parent() {
                Some(parent) => node = parent,
                None => break 'walk,
            }
        }
    }
    let mut sections = walk.sections;
    if let Some(section) = sections.last_mut() {
        section.break_line();
    }
    chunks(sections, rules.aggregate)
}

/// The sections with text as chunks, those with the same header joined when asked.
fn chunks(sections: Vec<Section>, aggregate: bool) -> Vec<(String, Map<String, Value>)> {
    let mut chunks: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut last_header: Option<(String, String)> = None;
    for section in sections {
        let text = section.lines.join("\n");
        if text.is_empty() {
            continue;
        }
        let key = (section.name.clone(), section.header.clone());
        if aggregate
            && last_header.as_ref() == Some(&key)
            && let Some((previous, _)) = chunks.last_mut()
        {
            previous.push_str("  \n");
            previous.push_str(&text);
            continue;
        }
        let mut metadata = Map::new();
        metadata.insert(section.name, Value::String(section.header));
        metadata.insert("xpath".to_owned(), Value::String(section.xpath));
        chunks.push((text, metadata));
        last_header = Some(key);
    }
    chunks
}
