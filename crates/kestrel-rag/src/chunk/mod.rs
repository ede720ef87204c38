//! Cutting a [`Document`] into chunks with Mastra's strategies.
//!
//! [`ChunkOptions`] is Mastra's `chunk()` parameter object: it deserializes from the same
//! camelCase JSON (`{"strategy": "recursive", "maxSize": 300, "overlap": 50}`) and refuses an
//! option its strategy does not take, naming it. In Rust, start from a strategy's
//! constructor ([`ChunkOptions::recursive`], [`ChunkOptions::token`]...) and set what differs
//! from Mastra's defaults (`maxSize` 4000, `overlap` 200).
//!
//! Which strategy for which document:
//!
//! - [`recursive`]: any text; separators tried in turn (`"\n\n"`, `"\n"`, `" "`, `""`), the
//!   pieces merged up to `maxSize`. With `language`, Markdown's or LaTeX's separators.
//! - [`character`]: one separator; pieces larger than `maxSize` are cut.
//! - [`token`]: sizes in OpenAI tokens (`encodingName`, `modelName`), for an embedding
//!   model's token limit.
//! - [`sentence`]: whole sentences joined up to a target size, with a sentence overlap.
//! - [`markdown`]: Markdown's separators, or one chunk per section with `headers`.
//! - [`semantic_markdown`]: Markdown sections joined while their tokens stay under
//!   `joinThreshold`.
//! - `latex`: the recursive strategy with LaTeX's separators.
//! - [`html`]: one chunk per section under `headers` (or `sections`) elements.
//! - [`json`]: JSON documents cut into smaller JSON objects that keep their paths.
//!
//! Shared parts: [`split`] (sizes in UTF-16 units, splitting on a separator, merging pieces
//! into chunks with an overlap) and [`tokens`] (encodings and special tokens).

pub mod character;
pub mod html;
pub mod json;
pub mod markdown;
pub mod recursive;
pub mod semantic_markdown;
pub mod sentence;
pub mod split;
pub mod token;
pub mod tokens;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::document::Document;

pub use tokens::SpecialTokens;

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
    /// The strategy needs an option that was not given (`maxSize` for sentence and json,
    /// `headers` or `sections` for html).
    #[error("the {strategy} strategy needs '{option}'")]
    MissingOption {
        /// The strategy.
        strategy: &'static str,
        /// The option (or the options, one of which is needed).
        option: &'static str,
    },
    /// `encodingName` or `modelName` names no encoding Mastra knows.
    #[error(
        "'{option}': no tiktoken encoding for {name:?} (encodings: gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base; model names as js-tiktoken knows them, e.g. gpt-4o)"
    )]
    UnknownEncoding {
        /// `encodingName` or `modelName`.
        option: &'static str,
        /// The name given.
        name: String,
    },
    /// The text holds a special token (`<|endoftext|>`) that `allowedSpecial` does not allow.
    #[error("The text contains a special token that is not allowed: {token}")]
    SpecialToken {
        /// The token.
        token: String,
    },
    /// The tokenizer failed.
    #[error("the tokenizer failed: {message}")]
    Tokenizer {
        /// Its complaint.
        message: String,
    },
    /// The json strategy's document is not JSON.
    #[error("the document is not valid JSON: {message}")]
    InvalidJson {
        /// The parser's complaint.
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

/// Declares [`Strategy`] from one table: variant, Mastra's name, documentation.
macro_rules! strategies {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// How a document is cut.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        #[non_exhaustive]
        pub enum Strategy {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Strategy {
            /// Every strategy.
            pub const ALL: &[Strategy] = &[$(Self::$variant,)*];

            /// Its name in Mastra's options.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

strategies! {
    /// Separators tried in turn, pieces merged up to `maxSize` ([`recursive`]).
    Recursive => "recursive",
    /// One separator, oversized pieces cut ([`character`]).
    Character => "character",
    /// Windows of `maxSize` tokens ([`token`]).
    Token => "token",
    /// Markdown's syntax, or one chunk per section with `headers` ([`markdown`]).
    Markdown => "markdown",
    /// One chunk per section under header elements ([`html`]).
    Html => "html",
    /// Smaller JSON objects that keep their paths ([`json`]).
    Json => "json",
    /// LaTeX's syntax: the recursive strategy with LaTeX's separators.
    Latex => "latex",
    /// Whole sentences up to a target size ([`sentence`]).
    Sentence => "sentence",
    /// Markdown sections joined by token counts ([`semantic_markdown`]).
    SemanticMarkdown => "semantic-markdown",
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
    /// The largest chunk, in UTF-16 units (tokens for `token`; JSON text for `json`), default
    /// 4000. Required by `sentence` and `json`.
    #[serde(default)]
    pub max_size: Option<usize>,
    /// How much of a chunk's end the next one repeats, in UTF-16 units (tokens for `token`),
    /// default 200 (0 for `sentence`).
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
    /// metadata keys (`"Header 2"`). `html`: one chunk per section, these header tags
    /// (`"h2"`) setting these keys.
    #[serde(default)]
    pub headers: Option<Vec<(String, String)>>,
    /// `html`: one chunk per section under these header tags, never joined.
    #[serde(default)]
    pub sections: Option<Vec<(String, String)>>,
    /// `markdown` with `headers`: leave the header lines out of the chunks (default yes).
    #[serde(default)]
    pub strip_headers: Option<bool>,
    /// `markdown` and `html` with `headers`: one chunk per line (per section for `html`).
    #[serde(default)]
    pub return_each_line: Option<bool>,
    /// `token`, `semantic-markdown`: the tiktoken encoding (default `cl100k_base`).
    #[serde(default)]
    pub encoding_name: Option<String>,
    /// `token`, `semantic-markdown`: the model whose encoding to use (`gpt-4o`: `o200k_base`).
    #[serde(default)]
    pub model_name: Option<String>,
    /// `token`, `semantic-markdown`: special tokens encoded as such (default none).
    #[serde(default)]
    pub allowed_special: Option<SpecialTokens>,
    /// `token`, `semantic-markdown`: special tokens refused in the text (default all but the
    /// allowed ones).
    #[serde(default)]
    pub disallowed_special: Option<SpecialTokens>,
    /// `sentence`: kept but unused, as in Mastra. `json`: a partial group is emitted only
    /// when at least this large (default `max(maxSize - 200, 50)`).
    #[serde(default)]
    pub min_size: Option<usize>,
    /// `sentence`: a chunk closes once it is this large (default 80% of `maxSize`).
    #[serde(default)]
    pub target_size: Option<usize>,
    /// `sentence`: what ends a sentence (default `.`, `!`, `?`).
    #[serde(default)]
    pub sentence_enders: Option<Vec<String>>,
    /// `sentence`: cut a sentence longer than `maxSize` at words (default yes).
    #[serde(default)]
    pub fallback_to_words: Option<bool>,
    /// `sentence`: cut a sentence (or word) longer than `maxSize` at characters (default yes).
    #[serde(default)]
    pub fallback_to_characters: Option<bool>,
    /// `json`: write non-ASCII characters as `\uXXXX` (default yes).
    #[serde(default)]
    pub ensure_ascii: Option<bool>,
    /// `json`: turn arrays into objects keyed by index (default no).
    #[serde(default)]
    pub convert_lists: Option<bool>,
    /// `semantic-markdown`: sections are joined while their tokens stay under this (default
    /// 500).
    #[serde(default)]
    pub join_threshold: Option<usize>,
    /// After chunking, a language model adds metadata to each chunk (Mastra's `extract`):
    /// cut with [`Document::chunk_and_extract`], which takes the model. [`Document::chunk`]
    /// refuses options with `extract`.
    #[serde(default)]
    pub extract: Option<crate::extract::ExtractOptions>,
}

impl ChunkOptions {
    /// `strategy` with Mastra's defaults.
    pub fn new(strategy: Strategy) -> Self {
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
            sections: None,
            strip_headers: None,
            return_each_line: None,
            encoding_name: None,
            model_name: None,
            allowed_special: None,
            disallowed_special: None,
            min_size: None,
            target_size: None,
            sentence_enders: None,
            fallback_to_words: None,
            fallback_to_characters: None,
            ensure_ascii: None,
            convert_lists: None,
            join_threshold: None,
            extract: None,
        }
    }

    /// The recursive strategy with Mastra's defaults.
    pub fn recursive() -> Self {
        Self::new(Strategy::Recursive)
    }

    /// The character strategy with Mastra's defaults.
    pub fn character() -> Self {
        Self::new(Strategy::Character)
    }

    /// The token strategy with Mastra's defaults (`cl100k_base`).
    pub fn token() -> Self {
        Self::new(Strategy::Token)
    }

    /// The markdown strategy with Mastra's defaults.
    pub fn markdown() -> Self {
        Self::new(Strategy::Markdown)
    }

    /// The html strategy: give [`ChunkOptions::header`]s or [`ChunkOptions::section`]s.
    pub fn html() -> Self {
        Self::new(Strategy::Html)
    }

    /// The json strategy, with the `maxSize` it needs.
    pub fn json(max_size: usize) -> Self {
        Self::new(Strategy::Json).max_size(max_size)
    }

    /// The LaTeX strategy with Mastra's defaults.
    pub fn latex() -> Self {
        Self::new(Strategy::Latex)
    }

    /// The sentence strategy, with the `maxSize` it needs.
    pub fn sentence(max_size: usize) -> Self {
        Self::new(Strategy::Sentence).max_size(max_size)
    }

    /// The semantic-markdown strategy with Mastra's defaults.
    pub fn semantic_markdown() -> Self {
        Self::new(Strategy::SemanticMarkdown)
    }

    /// `markdown`, `html`: one chunk per section, `marker` (`"##"`, `"h2"`) setting the
    /// metadata key `name`.
    pub fn header(mut self, marker: impl Into<String>, name: impl Into<String>) -> Self {
        self.headers
            .get_or_insert_with(Vec::new)
            .push((marker.into(), name.into()));
        self
    }

    /// `html`: one chunk per section, the header tag `tag` (`"h2"`) setting the metadata key
    /// `name`.
    pub fn section(mut self, tag: impl Into<String>, name: impl Into<String>) -> Self {
        self.sections
            .get_or_insert_with(Vec::new)
            .push((tag.into(), name.into()));
        self
    }

    /// Options from Mastra's JSON parameter object.
    pub fn from_json(options: &Value) -> Result<Self, ChunkError> {
        serde_json::from_value(options.clone()).map_err(|e| ChunkError::InvalidOptions {
            strategy: options
                .get("strategy")
                .and_then(Value::as_str)
                .and_then(|s| Strategy::ALL.iter().find(|k| k.as_str() == s))
                .map_or("chunk", |k| k.as_str()),
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

    /// `token`, `semantic-markdown`: counts with the tiktoken encoding `name` (`o200k_base`).
    pub fn encoding(mut self, name: impl Into<String>) -> Self {
        self.encoding_name = Some(name.into());
        self
    }

    /// `token`, `semantic-markdown`: counts with `model`'s encoding (`gpt-4o`).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model_name = Some(model.into());
        self
    }

    /// `token`, `semantic-markdown`: encodes these special tokens as such.
    pub fn allow_special(mut self, tokens: SpecialTokens) -> Self {
        self.allowed_special = Some(tokens);
        self
    }

    /// `sentence`: closes a chunk once it is `size` large.
    pub fn target_size(mut self, size: usize) -> Self {
        self.target_size = Some(size);
        self
    }

    /// `sentence`: what ends a sentence.
    pub fn sentence_enders<I, S>(mut self, enders: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.sentence_enders = Some(enders.into_iter().map(Into::into).collect());
        self
    }

    /// `json`: writes non-ASCII characters as they are (not as `\uXXXX`).
    pub fn keep_unicode(mut self) -> Self {
        self.ensure_ascii = Some(false);
        self
    }

    /// `json`: turns arrays into objects keyed by index.
    pub fn convert_lists(mut self) -> Self {
        self.convert_lists = Some(true);
        self
    }

    /// `semantic-markdown`: joins sections while their tokens stay under `tokens`.
    pub fn join_threshold(mut self, tokens: usize) -> Self {
        self.join_threshold = Some(tokens);
        self
    }

    /// After chunking, has a model add metadata as `options` say (cut with
    /// [`Document::chunk_and_extract`]).
    pub fn extract(mut self, options: crate::extract::ExtractOptions) -> Self {
        self.extract = Some(options);
        self
    }

    /// Refuses the options `strategy` does not take (the ones every strategy takes, sizes,
    /// separator position, start index and whitespace, are not checked here).
    fn check_only(&self, allowed: &[&str]) -> Result<(), ChunkError> {
        let given = [
            ("separators", self.separators.is_some()),
            ("separator", self.separator.is_some()),
            ("isSeparatorRegex", self.is_separator_regex.is_some()),
            ("language", self.language.is_some()),
            ("headers", self.headers.is_some()),
            ("sections", self.sections.is_some()),
            ("stripHeaders", self.strip_headers.is_some()),
            ("returnEachLine", self.return_each_line.is_some()),
            ("encodingName", self.encoding_name.is_some()),
            ("modelName", self.model_name.is_some()),
            ("allowedSpecial", self.allowed_special.is_some()),
            ("disallowedSpecial", self.disallowed_special.is_some()),
            ("minSize", self.min_size.is_some()),
            ("targetSize", self.target_size.is_some()),
            ("sentenceEnders", self.sentence_enders.is_some()),
            ("fallbackToWords", self.fallback_to_words.is_some()),
            (
                "fallbackToCharacters",
                self.fallback_to_characters.is_some(),
            ),
            ("ensureAscii", self.ensure_ascii.is_some()),
            ("convertLists", self.convert_lists.is_some()),
            ("joinThreshold", self.join_threshold.is_some()),
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

    /// The options `strategy` takes besides the shared ones (Mastra's validation schemas).
    fn own_options(&self) -> &'static [&'static str] {
        const TOKENS: [&str; 4] = [
            "encodingName",
            "modelName",
            "allowedSpecial",
            "disallowedSpecial",
        ];
        match self.strategy {
            Strategy::Recursive => &["separators", "isSeparatorRegex", "language"],
            Strategy::Character => &["separator", "isSeparatorRegex"],
            Strategy::Token => &TOKENS,
            Strategy::Markdown => &["headers", "stripHeaders", "returnEachLine"],
            Strategy::Html => &["headers", "sections", "returnEachLine"],
            Strategy::Json => &["minSize", "ensureAscii", "convertLists"],
            Strategy::Latex => &[],
            Strategy::Sentence => &[
                "minSize",
                "targetSize",
                "sentenceEnders",
                "fallbackToWords",
                "fallbackToCharacters",
            ],
            Strategy::SemanticMarkdown => &[
                "joinThreshold",
                "encodingName",
                "modelName",
                "allowedSpecial",
                "disallowedSpecial",
            ],
        }
    }

    /// `maxSize`, required.
    fn required_max_size(&self) -> Result<usize, ChunkError> {
        self.max_size
            .filter(|&size| size > 0)
            .ok_or(ChunkError::MissingOption {
                strategy: self.strategy.as_str(),
                option: "maxSize",
            })
    }

    /// The sizes and the merging rules every strategy shares, checked.
    fn splitter(&self) -> Result<split::Splitter, ChunkError> {
        self.splitter_with_overlap(self.overlap.unwrap_or(DEFAULT_OVERLAP))
    }

    fn splitter_with_overlap(&self, overlap: usize) -> Result<split::Splitter, ChunkError> {
        let max_size = self.max_size.unwrap_or(DEFAULT_MAX_SIZE);
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

/// Cuts `document` as `options` say, refusing `extract` (which needs a model).
pub(crate) fn chunk(document: &Document, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
    if options.extract.is_some() {
        return Err(ChunkError::InvalidOptions {
            strategy: options.strategy.as_str(),
            message: "'extract' needs a language model: cut with Document::chunk_and_extract"
                .to_owned(),
        });
    }
    cut(document, options)
}

/// Cuts `document` as `options` say, leaving `extract` to the caller.
pub(crate) fn cut(document: &Document, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
    options.check_only(options.own_options())?;
    let text = document.text();
    let pieces = match options.strategy {
        Strategy::Markdown if options.headers.is_some() => {
            return Ok(with_metadata(markdown_sections(text, options), document));
        }
        Strategy::Html => return html_chunks(document, options),
        Strategy::Json => {
            let max_size = options.required_max_size()?;
            let rules = json::Rules {
                max_size,
                min_size: options
                    .min_size
                    .unwrap_or_else(|| max_size.saturating_sub(200).max(50)),
                ensure_ascii: options.ensure_ascii.unwrap_or(true),
                convert_lists: options.convert_lists.unwrap_or(false),
            };
            let metadata = document.meta();
            return Ok(json::split(text, &rules)?
                .into_iter()
                .map(|text| Chunk {
                    text,
                    metadata: metadata.clone(),
                })
                .collect());
        }
        Strategy::SemanticMarkdown => return semantic_markdown_chunks(document, options),
        Strategy::Sentence => {
            let max_size = options.required_max_size()?;
            // Mastra checks the overlap against `maxSize` capped below it: never refused.
            let overlap = options.overlap.unwrap_or(0);
            let mut splitter = options.splitter_with_overlap(overlap.min(max_size - 1))?;
            splitter.overlap = overlap;
            let enders = options.sentence_enders.clone().unwrap_or_else(|| {
                sentence::DEFAULT_SENTENCE_ENDERS
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect()
            });
            let rules = sentence::Rules {
                max_size,
                target_size: options.target_size.unwrap_or(max_size * 4 / 5),
                overlap,
                enders: &enders,
                fallback_to_words: options.fallback_to_words.unwrap_or(true),
                fallback_to_characters: options.fallback_to_characters.unwrap_or(true),
            };
            let chunks = sentence::split(text, &rules);
            return Ok(splitter.chunks(text, chunks, document.meta()));
        }
        Strategy::Token => {
            let splitter = options.splitter()?;
            let tokenizer = tokens::Tokenizer::from_options(options)?;
            let chunks = token::split(text, &tokenizer, &splitter)?;
            return Ok(splitter.chunks(text, chunks, document.meta()));
        }
        Strategy::Recursive => recursive::split(text, options, &options.splitter()?)?,
        Strategy::Character => character::split(text, options, &options.splitter()?)?,
        Strategy::Markdown | Strategy::Latex => {
            let language = if options.strategy == Strategy::Latex {
                Language::Latex
            } else {
                Language::Markdown
            };
            recursive::split(
                text,
                &options.clone().language(language),
                &options.splitter()?,
            )?
        }
    };
    Ok(options.splitter()?.chunks(text, pieces, document.meta()))
}

/// Pieces with metadata of their own, each with the document's first.
fn with_metadata(pieces: Vec<(String, Map<String, Value>)>, document: &Document) -> Vec<Chunk> {
    pieces
        .into_iter()
        .map(|(text, own)| {
            let mut metadata = document.meta().clone();
            metadata.extend(own);
            Chunk { text, metadata }
        })
        .collect()
}

/// The markdown strategy with `headers`: sections; sizes and overlap do not apply.
fn markdown_sections(text: &str, options: &ChunkOptions) -> Vec<(String, Map<String, Value>)> {
    markdown::split_headers(
        text,
        &markdown::HeaderOptions {
            headers: options.headers.as_deref().unwrap_or_default(),
            return_each_line: options.return_each_line.unwrap_or(false),
            strip_headers: options.strip_headers.unwrap_or(true),
        },
    )
}

/// The html strategy: sections, cut further with `maxSize`.
fn html_chunks(document: &Document, options: &ChunkOptions) -> Result<Vec<Chunk>, ChunkError> {
    let (headers, aggregate) = match (&options.headers, &options.sections) {
        (Some(headers), _) if !headers.is_empty() => {
            (headers, !options.return_each_line.unwrap_or(false))
        }
        (_, Some(sections)) if !sections.is_empty() => {
            // Mastra builds its recursive splitter from the options in this mode, whether
            // `maxSize` is given or not: a too-large overlap is refused either way.
            options.splitter()?;
            (sections, false)
        }
        _ => {
            return Err(ChunkError::MissingOption {
                strategy: "html",
                option: "headers' or 'sections",
            });
        }
    };
    let splitter = options.max_size.map(|_| options.splitter()).transpose()?;
    let mut sections = html::split(document.text(), &html::Rules { headers, aggregate });
    // Mastra sets a header whose text is `#TITLE#` to the document's `Title`.
    let title = document.meta().get("Title").cloned();
    for (_, metadata) in &mut sections {
        for (key, value) in metadata.clone() {
            if value.as_str() == Some("#TITLE#") {
                match &title {
                    Some(title) => metadata.insert(key, title.clone()),
                    None => metadata.remove(&key),
                };
            }
        }
    }
    let Some(splitter) = splitter else {
        return Ok(with_metadata(sections, document));
    };
    let recursive = ChunkOptions::recursive();
    let mut chunks = Vec::new();
    for (text, own) in sections {
        let mut metadata = document.meta().clone();
        metadata.extend(own);
        let pieces = recursive::split(&text, &recursive, &splitter)?;
        chunks.extend(splitter.chunks(&text, pieces, &metadata));
    }
    Ok(chunks)
}

/// The semantic-markdown strategy, each chunk with its `tokenCount`.
fn semantic_markdown_chunks(
    document: &Document,
    options: &ChunkOptions,
) -> Result<Vec<Chunk>, ChunkError> {
    // Checked as Mastra checks them, though unused.
    let splitter = options.splitter()?;
    let tokenizer = tokens::Tokenizer::from_options(options)?;
    let rules = semantic_markdown::Rules {
        tokenizer: &tokenizer,
        join_threshold: options
            .join_threshold
            .unwrap_or(semantic_markdown::DEFAULT_JOIN_THRESHOLD),
        strip_whitespace: splitter.strip_whitespace,
    };
    semantic_markdown::split(document.text(), &rules)?
        .into_iter()
        .map(|text| {
            let mut metadata = document.meta().clone();
            metadata.insert("tokenCount".to_owned(), rules.count(&text)?.into());
            Ok(Chunk { text, metadata })
        })
        .collect()
}
