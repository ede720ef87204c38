//! A document to chunk: its text, what kind of text it is, and metadata every chunk carries.

use serde_json::{Map, Value};

use kestrel_core::model::LanguageModel;

use crate::chunk::{Chunk, ChunkError, ChunkOptions};
use crate::extract::ExtractError;

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
/// HTML and JSON forms), then cut it with [`Document::chunk`] (or, to have a model add
/// metadata to the chunks, [`Document::chunk_and_extract`]).
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

    /// Cuts it as `options` say, then, when `options.extract` is set, has `model` add
    /// metadata to each chunk ([`mod@crate::extract`]): Mastra's `chunk({..., extract})`.
    /// Without `extract`, the same chunks as [`Document::chunk`].
    pub async fn chunk_and_extract(
        &self,
        options: &ChunkOptions,
        model: &dyn LanguageModel,
    ) -> Result<Vec<Chunk>, ExtractError> {
        if let Some(extract) = &options.extract {
            extract.check()?;
        }
        let chunks = crate::chunk::cut(self, options)?;
        match &options.extract {
            Some(extract) => crate::extract::extract(chunks, extract, model).await,
            None => Ok(chunks),
        }
    }
}
