//! Cutting a [`Document`] into chunks with Mastra's strategies.
//!
//! [`ChunkOptions`] is Mastra's `chunk()` parameter object: it deserializes from the same
//! camelCase JSON (`{"strategy": "recursive", "maxSize": 300, "overlap": 50}`) and refuses an
//! option its strategy does not take, naming it. In Rust, start from
//! [`ChunkOptions::recursive`] or [`ChunkOptions::character`] and set what differs from
//! Mastra's defaults (`maxSize` 4000, `overlap` 200).
//!
//! - [`split`]: what every strategy shares: sizes in UTF-16 units, splitting on a separator,
//!   merging pieces into chunks with an overlap.
//! - [`recursive`]: separators tried in turn (`"\n\n"`, `"\n"`, `" "`, `""`), the pieces
//!   merged up to `maxSize`.
//! - [`character`]: one separator; pieces larger than `maxSize` are cut.

pub mod character;
pub mod markdown;
pub mod recursive;
pub mod split;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::document::Document;

/// Mastra's default `maxSize`.
pub const DEFAULT_MAX_SIZE: usize = 4000;
/// Mastra's default `overlap`.
pub const DEFAULT_OVERLAP: usize = 200;

/// A piece of a document, with the document's metadata and what the strategy adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Its text.
    pub text: String,
    /// The document's metadata, plus `startIndex` (with `addStartIndex`) and the like.
    pub metadata: Map<String, Value>,
}

/// Why a document could not be chunked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The overlap is not smaller than the chunk size.
    #[error("Chunk overlap ({overlap}) must be smaller than chunk size ({max_size}).")]
    OverlapTooLarge {
        /// The overlap asked for (Mastra's default 200 when not given).
        overlap: usize,
        /// The chunk size.
        max_size: usize,
    },
    /// An option the strategy does not take, or a value it refuses.
    #[error("invalid options for the {strategy} strategy: {message}")]
    InvalidOptions {
        /// The strategy.
        strategy: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A separator given as a regular expression does not compile.
    #[error("the separator {separator:?} is not a valid regular expression: {message}")]
    InvalidSeparator {
        /// The separator.
        separator: String,
        /// The regular-expression engine's complaint.
        message: String,
    },
}

/// How a document is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Strategy {
    /// Separators tried in turn, pieces merged up to `maxSize` ([`recursive`]).
    Recursive,
    /// One separator, oversized pieces cut ([`character`]).
    Character,
    /// Markdown's syntax, or one chunk per section with `headers` ([`markdown`]).
    Markdown,
    /// LaTeX's syntax: the recursive strategy with LaTeX's separators.
    Latex,
}

impl Strategy {
    /// Its name in Mastra's options.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recursive => "recursive",
            Self::Character => "character",
            Self::Markdown => "markdown",
            Self::Latex => "latex",
        }
    }
}

/// Where a separator goes when it is kept in the chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeparatorPosition {
    /// At the start of the piece that follows it.
    Start,
    /// At the end of the piece before it.
    End,
}

/// A language whose syntax the recursive strategy cuts along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Language {
    /// Markdown: headers, code fences, rules, then paragraphs, lines and words.
    Markdown,
    /// LaTeX: sections, environments and commands, then paragraphs, lines and words.
    Latex,
}

/// Mastra's `chunk()` parameters (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct ChunkOptions {
    /// The strategy.
    pub strategy: Strategy,
    /// The largest chunk, in UTF-16 units (default 4000).
    #[serde(default)]
    pub max_size: Option<usize>,
    /// How much of a chunk's end the next one repeats, in UTF-16 units (default 200).
    #[serde(default)]
    pub overlap: Option<usize>,
    /// `recursive`: the separators, tried in turn.
    #[serde(default)]
    pub separators: Option<Vec<String>>,
    /// `character`: the separator (default `"\n\n"`).
    #[serde(default)]
    pub separator: Option<String>,
    /// Whether the separators are regular expressions.
    #[serde(default)]
    pub is_separator_regex: Option<bool>,
    /// Keep the separators, at the start or the end of the pieces.
    #[serde(default)]
    pub separator_position: Option<SeparatorPosition>,
    /// Add each chunk's offset in the document (UTF-16 units) as `startIndex`.
    #[serde(default)]
    pub add_start_index: Option<bool>,
    /// Trim whitespace around merged chunks (default yes).
    #[serde(default)]
    pub strip_whitespace: Option<bool>,
    /// `recursive`: cut along a language's syntax (its separators are regular expressions).
    #[serde(default)]
    pub language: Option<Language>,
    /// `markdown`: one chunk per section, these header markers (`"##"`) setting these
    /// metadata keys (`"Header 2"`).
    #[serde(default)]
    pub headers: Option<Vec<(String, String)>>,
    /// `markdown` with `headers`: leave the header lines out of the chunks (default yes).
    #[serde(default)]
    pub strip_headers: Option<bool>,
    /// `markdown` with `headers`: one chunk per line.
    #[serde(default)]
    pub return_each_line: Option<bool>,
}

impl ChunkOptions {
    fn of(strategy: Strategy) -> Self {
        Self {
            strategy,
            max_size: None,
            overlap: None,
            separators: None,
            separator: None,
            is_separator_regex: None,
            separator_position: None,
            add_start_index: None,
            strip_whitespace: None,
            language: None,
            headers: None,
            strip_headers: None,
            return_each_line: None,
        }
    }

    /// The markdown strategy with Mastra's defaults.
    pub fn markdown() -> Self {
        Self::of(Strategy::Markdown)
    }

    /// The LaTeX strategy with Mastra's defaults.
    pub fn latex() -> Self {
        Self::of(Strategy::Latex)
    }

    /// `markdown`: one chunk per section, `marker` (`"##"`) setting the metadata key `name`.
    pub fn header(mut self, marker: impl Into<String>, name: impl Into<String>) -> Self {
        self.headers
            .get_or_insert_with(Vec::new)
            .push((marker.into(), name.into()));
        self
    }

    /// The recursive strategy with Mastra's defaults.
    pub fn recursive() -> Self {
        Self::of(Strategy::Recursive)
    }

    /// The character strategy with Mastra's defaults.
    pub fn character() -> Self {
        Self::of(Strategy::Character)
    }

    /// Options from Mastra's JSON parameter object.
    pub fn from_json(options: &Value) -> Result<Self, ChunkError> {
        serde_json::from_value(options.clone()).map_err(|e| ChunkError::InvalidOptions {
            strategy: options
                .get("strategy")
                .and_then(Value::as_str)
                .and_then(|s| {
                    [
                        Strategy::Recursive,
                        Strategy::Character,
                        Strategy::Markdown,
                        Strategy::Latex,
                    ]
                    .into_iter()
                    .find(|k| k.as_str() == s)
                })
                .map_or("chunk", Strategy::as_str),
            message: e.to_string(),
        })
    }

    /// Sets the largest chunk.
    pub fn max_size(mut self, size: usize) -> Self {
        self.max_size = Some(size);
        self
    }

    /// Sets the overlap.
    pub fn overlap(mut self, overlap: usize) -> Self {
        self.overlap = Some(overlap);
        self
    }

    /// Sets the recursive strategy's separators.
    pub fn separators<I, S>(mut self, separators: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.separators = Some(separators.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the character strategy's separator.
    pub fn separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = Some(separator.into());
        self
    }

    /// Takes the separators as regular expressions.
    pub fn regex_separators(mut self) -> Self {
        self.is_separator_regex = Some(true);
        self
    }

    /// Keeps the separators, at `position`.
    pub fn keep_separator(mut self, position: SeparatorPosition) -> Self {
        self.separator_position = Some(position);
        self
    }

    /// Adds `startIndex` to each chunk's metadata.
    pub fn add_start_index(mut self) -> Self {
        self.add_start_index = Some(true);
        self
    }

    /// Keeps whitespace around merged chunks.
    pub fn keep_whitespace(mut self) -> Self {
        self.strip_whitespace = Some(false);
        self
    }

    /// Cuts along `language`'s syntax (recursive).
    pub fn language(mut self, language: Language) -> Self {
        self.language = Some(language);
        self
    }

    /// Refuses the options `strategy` does not take.
    fn check_only(&self, allowed: &[&str]) -> Result<(), ChunkError> {
        let given = [
            ("separators", self.separators.is_some()),
            ("separator", self.separator.is_some()),
            ("isSeparatorRegex", self.is_separator_regex.is_some()),
            ("language", self.language.is_some()),
            ("headers", self.headers.is_some()),
            ("stripHeaders", self.strip_headers.is_some()),
            ("returnEachLine", self.return_each_line.is_some()),
        ];
        for (name, set) in given {
            if set && !allowed.contains(&name) {
                return Err(ChunkError::InvalidOptions {
                    strategy: self.strategy.as_str(),
                    message: format!("'{name}' is not an option of this strategy"),
                });
            }
        }
        Ok(())
    }

    /// The sizes and the merging rules every strategy shares, checked.
    fn splitter(&self) -> Result<split::Splitter, ChunkError> {
        let max_size = self.max_size.unwrap_or(DEFAULT_MAX_SIZE);
        let overlap = self.overlap.unwrap_or(DEFAULT_OVERLAP);
        if overlap >= max_size {
            return Err(ChunkError::OverlapTooLarge { overlap, max_size });
        }
        Ok(split::Splitter {
            max_size,
            overlap,
            separator_position: self.separator_position,
            add_start_index: self.add_start_index.unwrap_or(false),
            strip_whitespace: self.strip_whitespace.unwrap_or(true),
        })
    }
}

/// Cuts `document` as `options` say.
pub(crate) fn chunk(document: &Document, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
    if options.strategy == Strategy::Markdown
        && let Some(headers) = &options.headers
    {
        // Sections: sizes and overlap do not apply.
        options.check_only(&["headers", "stripHeaders", "returnEachLine"])?;
        let sections = markdown::split_headers(
            document.text(),
            &markdown::HeaderOptions {
                headers,
                return_each_line: options.return_each_line.unwrap_or(false),
                strip_headers: options.strip_headers.unwrap_or(true),
            },
        );
        return Ok(sections
            .into_iter()
            .map(|(text, headers)| {
                let mut metadata = document.meta().clone();
                metadata.extend(headers);
                Chunk { text, metadata }
            })
            .collect());
    }
    let splitter = options.splitter()?;
    let pieces = match options.strategy {
        Strategy::Recursive => {
            options.check_only(&["separators", "isSeparatorRegex", "language"])?;
            recursive::split(document.text(), options, &splitter)?
        }
        Strategy::Character => {
            options.check_only(&["separator", "isSeparatorRegex"])?;
            character::split(document.text(), options, &splitter)?
        }
        Strategy::Markdown => {
            options.check_only(&[])?;
            recursive::split(
                document.text(),
                &options.clone().language(Language::Markdown),
                &splitter,
            )?
        }
        Strategy::Latex => {
            options.check_only(&[])?;
            recursive::split(
                document.text(),
                &options.clone().language(Language::Latex),
                &splitter,
            )?
        }
    };
    Ok(splitter.chunks(document.text(), pieces, document.meta()))
}
