//! A document to chunk: its text, what kind of text it is, and metadata every chunk carries.

use serde_json::{Map, Value};

use crate::chunk::{Chunk, ChunkError, ChunkOptions};

/// What kind of text a [`Document`] holds (some strategies only fit some kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DocumentKind {
    /// Plain text.
    Text,
    /// Markdown.
    Markdown,
    /// HTML.
    Html,
    /// JSON.
    Json,
}

/// A document: Mastra's `MDocument`. Build it with [`Document::from_text`] (or the Markdown,
/// HTML and JSON forms), then cut it with [`Document::chunk`].
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    text: String,
    kind: DocumentKind,
    metadata: Map<String, Value>,
}

impl Document {
    fn new(text: impl Into<String>, kind: DocumentKind) -> Self {
        Self {
            text: text.into(),
            kind,
            metadata: Map::new(),
        }
    }

    /// A plain-text document.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self::new(text, DocumentKind::Text)
    }

    /// A Markdown document.
    pub fn from_markdown(text: impl Into<String>) -> Self {
        Self::new(text, DocumentKind::Markdown)
    }

    /// An HTML document.
    pub fn from_html(text: impl Into<String>) -> Self {
        Self::new(text, DocumentKind::Html)
    }

    /// A JSON document (its text; it is parsed when a JSON strategy cuts it).
    pub fn from_json(text: impl Into<String>) -> Self {
        Self::new(text, DocumentKind::Json)
    }

    /// Sets the metadata every chunk starts from (a source, a language...).
    pub fn metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.metadata = metadata;
        self
    }

    /// Adds one metadata entry.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Its text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// What kind of text it is.
    pub fn kind(&self) -> DocumentKind {
        self.kind
    }

    /// Its metadata.
    pub fn meta(&self) -> &Map<String, Value> {
        &self.metadata
    }

    /// Cuts it into chunks as `options` say; each chunk carries the document's metadata (and
    /// what the strategy adds, such as `startIndex`).
    pub fn chunk(&self, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
        crate::chunk::chunk(self, options)
    }
}
