//! The extractors' options: Mastra's `extract` parameter object, checked once.
//!
//! Each extractor is `true` (Mastra's defaults), `false` (off; Mastra would run it anyway) or an
//! object of its options, in Mastra's camelCase names; `schema` is always an object. The JSON
//! form is read by [`ExtractOptions::from_json`] (and by `ChunkOptions`' `extract` field), which
//! refuses an unknown extractor or option and an impossible value by name; in Rust, start from
//! [`ExtractOptions::new`] and add extractors.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ExtractError;
use super::prompts::has_placeholder;

/// How many model calls the extractors make at once, unless `concurrency` says otherwise.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Mastra's default `nodes` (title), `questions` and `keywords`.
pub const DEFAULT_COUNT: usize = 5;

/// Mastra's `extract` parameter (`ExtractParams`): which extractors add metadata to the chunks,
/// and how. See the [module documentation](super).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExtractOptions {
    /// `documentTitle`: one title per document (chunks sharing a `docId`).
    pub title: Option<TitleOptions>,
    /// `sectionSummary`, `prevSectionSummary`, `nextSectionSummary`.
    pub summary: Option<SummaryOptions>,
    /// `questionsThisExcerptCanAnswer`.
    pub questions: Option<QuestionsOptions>,
    /// `excerptKeywords`.
    pub keywords: Option<KeywordsOptions>,
    /// An object of your schema, spread into the metadata or under `metadataKey`.
    pub schema: Option<SchemaOptions>,
    /// At most this many model calls at once (Kestrel's own option; Mastra makes every call of
    /// an extractor at once). Default [`DEFAULT_CONCURRENCY`].
    pub concurrency: usize,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        Self {
            title: None,
            summary: None,
            questions: None,
            keywords: None,
            schema: None,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// Options of the title extractor (Mastra's `TitleExtractorsArgs`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct TitleOptions {
    /// How many of a document's first chunks give title candidates (default 5).
    #[serde(default = "default_count")]
    pub nodes: usize,
    /// The prompt for one chunk's candidate (with `{context}`); default Mastra's.
    #[serde(default)]
    pub node_template: Option<String>,
    /// The prompt combining the candidates (with `{context}`); default Mastra's.
    #[serde(default)]
    pub combine_template: Option<String>,
}

impl Default for TitleOptions {
    fn default() -> Self {
        Self {
            nodes: DEFAULT_COUNT,
            node_template: None,
            combine_template: None,
        }
    }
}

/// Which summaries a chunk gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub enum SummaryKind {
    /// Its own: `sectionSummary`.
    #[serde(rename = "self")]
    Own,
    /// The previous chunk's: `prevSectionSummary`.
    #[serde(rename = "prev")]
    Prev,
    /// The next chunk's: `nextSectionSummary`.
    #[serde(rename = "next")]
    Next,
}

/// Options of the summary extractor (Mastra's `SummaryExtractArgs`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct SummaryOptions {
    /// Which summaries each chunk gets (default `["self"]`).
    #[serde(default = "default_summaries")]
    pub summaries: Vec<SummaryKind>,
    /// The prompt (with `{context}`); default Mastra's.
    #[serde(default)]
    pub prompt_template: Option<String>,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        Self {
            summaries: default_summaries(),
            prompt_template: None,
        }
    }
}

/// Options of the questions extractor (Mastra's `QuestionAnswerExtractArgs`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct QuestionsOptions {
    /// How many questions to ask for (default 5).
    #[serde(default = "default_count")]
    pub questions: usize,
    /// The prompt (with `{context}`, and `{numQuestions}`); default Mastra's.
    #[serde(default)]
    pub prompt_template: Option<String>,
    /// Kept but unused, as in Mastra 2.6.4 (LlamaIndex's meaning: the questions are for the
    /// embedding only, not for the model reading the chunk).
    #[serde(default)]
    pub embedding_only: bool,
}

impl Default for QuestionsOptions {
    fn default() -> Self {
        Self {
            questions: DEFAULT_COUNT,
            prompt_template: None,
            embedding_only: false,
        }
    }
}

/// Options of the keyword extractor (Mastra's `KeywordExtractArgs`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct KeywordsOptions {
    /// At most this many keywords (default 5).
    #[serde(default = "default_count")]
    pub keywords: usize,
    /// The prompt (with `{context}`, and `{maxKeywords}`); default Mastra's.
    #[serde(default)]
    pub prompt_template: Option<String>,
}

impl Default for KeywordsOptions {
    fn default() -> Self {
        Self {
            keywords: DEFAULT_COUNT,
            prompt_template: None,
        }
    }
}

/// Options of the schema extractor (Mastra's `SchemaExtractArgs`, with a JSON schema where
/// Mastra takes a Zod schema).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// The JSON schema of what to extract from each chunk.
    pub schema: Value,
    /// The system instructions (default Mastra's "Extract structured data from the provided
    /// text.").
    #[serde(default)]
    pub instructions: Option<String>,
    /// The metadata key the object goes under; without one, its fields are spread into the
    /// metadata (so the schema must describe an object).
    #[serde(default)]
    pub metadata_key: Option<String>,
}

fn default_count() -> usize {
    DEFAULT_COUNT
}

fn default_summaries() -> Vec<SummaryKind> {
    vec![SummaryKind::Own]
}

impl ExtractOptions {
    /// No extractor yet; add them with [`ExtractOptions::title`] and the others.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the title extractor.
    pub fn title(mut self, options: TitleOptions) -> Self {
        self.title = Some(options);
        self
    }

    /// Adds the summary extractor.
    pub fn summary(mut self, options: SummaryOptions) -> Self {
        self.summary = Some(options);
        self
    }

    /// Adds the questions extractor.
    pub fn questions(mut self, options: QuestionsOptions) -> Self {
        self.questions = Some(options);
        self
    }

    /// Adds the keyword extractor.
    pub fn keywords(mut self, options: KeywordsOptions) -> Self {
        self.keywords = Some(options);
        self
    }

    /// Adds the schema extractor.
    pub fn schema(mut self, options: SchemaOptions) -> Self {
        self.schema = Some(options);
        self
    }

    /// Makes at most `calls` model calls at once.
    pub fn concurrency(mut self, calls: usize) -> Self {
        self.concurrency = calls;
        self
    }

    /// Options from Mastra's JSON `extract` object (plus Kestrel's `concurrency`), checked.
    pub fn from_json(value: &Value) -> Result<Self, ExtractError> {
        let Value::Object(map) = value else {
            return Err(invalid(
                "extract",
                "must be an object of extractors (title, summary, questions, keywords, schema)",
            ));
        };
        let mut options = Self::default();
        for (key, value) in map {
            match key.as_str() {
                "title" => options.title = toggle(key, value)?,
                "summary" => options.summary = toggle(key, value)?,
                "questions" => options.questions = toggle(key, value)?,
                "keywords" => options.keywords = toggle(key, value)?,
                "schema" => options.schema = Some(parse(key, value)?),
                "concurrency" => options.concurrency = parse(key, value)?,
                _ => {
                    return Err(invalid(
                        key,
                        "not an extractor (title, summary, questions, keywords, schema) nor \
                         'concurrency'",
                    ));
                }
            }
        }
        options.check()?;
        Ok(options)
    }

    /// Refuses what no extractor can do: zero counts, templates without `{context}`, an empty
    /// `summaries`, a schema that does not compile (or, without `metadataKey`, that does not
    /// describe an object).
    pub fn check(&self) -> Result<(), ExtractError> {
        if self.concurrency == 0 {
            return Err(invalid("concurrency", "must be at least 1"));
        }
        if let Some(title) = &self.title {
            at_least_one("title.nodes", title.nodes)?;
            template("title.nodeTemplate", title.node_template.as_deref())?;
            template("title.combineTemplate", title.combine_template.as_deref())?;
        }
        if let Some(summary) = &self.summary {
            if summary.summaries.is_empty() {
                return Err(invalid(
                    "summary.summaries",
                    "must name at least one of 'self', 'prev', 'next'",
                ));
            }
            template("summary.promptTemplate", summary.prompt_template.as_deref())?;
        }
        if let Some(questions) = &self.questions {
            at_least_one("questions.questions", questions.questions)?;
            template(
                "questions.promptTemplate",
                questions.prompt_template.as_deref(),
            )?;
        }
        if let Some(keywords) = &self.keywords {
            at_least_one("keywords.keywords", keywords.keywords)?;
            template(
                "keywords.promptTemplate",
                keywords.prompt_template.as_deref(),
            )?;
        }
        if let Some(schema) = &self.schema {
            schema.check()?;
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for ExtractOptions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_json(&value).map_err(serde::de::Error::custom)
    }
}

impl TitleOptions {
    /// Takes title candidates from a document's first `chunks` chunks.
    pub fn nodes(mut self, chunks: usize) -> Self {
        self.nodes = chunks;
        self
    }

    /// Asks for each candidate with `template` (`{context}`: the chunk).
    pub fn node_template(mut self, template: impl Into<String>) -> Self {
        self.node_template = Some(template.into());
        self
    }

    /// Combines the candidates with `template` (`{context}`: the candidates).
    pub fn combine_template(mut self, template: impl Into<String>) -> Self {
        self.combine_template = Some(template.into());
        self
    }
}

impl SummaryOptions {
    /// Gives each chunk these summaries.
    pub fn summaries(mut self, kinds: impl IntoIterator<Item = SummaryKind>) -> Self {
        self.summaries = kinds.into_iter().collect();
        self
    }

    /// Asks with `template` (`{context}`: the chunk).
    pub fn prompt_template(mut self, template: impl Into<String>) -> Self {
        self.prompt_template = Some(template.into());
        self
    }
}

impl QuestionsOptions {
    /// Asks for `count` questions.
    pub fn questions(mut self, count: usize) -> Self {
        self.questions = count;
        self
    }

    /// Asks with `template` (`{context}`: the chunk; `{numQuestions}`).
    pub fn prompt_template(mut self, template: impl Into<String>) -> Self {
        self.prompt_template = Some(template.into());
        self
    }
}

impl KeywordsOptions {
    /// Asks for at most `count` keywords.
    pub fn keywords(mut self, count: usize) -> Self {
        self.keywords = count;
        self
    }

    /// Asks with `template` (`{context}`: the chunk; `{maxKeywords}`).
    pub fn prompt_template(mut self, template: impl Into<String>) -> Self {
        self.prompt_template = Some(template.into());
        self
    }
}

impl SchemaOptions {
    /// Extracts an object of `schema` (a JSON schema) from each chunk.
    pub fn new(schema: Value) -> Self {
        Self {
            schema,
            instructions: None,
            metadata_key: None,
        }
    }

    /// Sets the system instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Puts the object under `key` rather than spreading its fields.
    pub fn metadata_key(mut self, key: impl Into<String>) -> Self {
        self.metadata_key = Some(key.into());
        self
    }

    fn check(&self) -> Result<(), ExtractError> {
        if !self.schema.is_object() {
            return Err(invalid("schema.schema", "must be a JSON schema object"));
        }
        if let Err(e) = jsonschema::validator_for(&self.schema) {
            return Err(invalid(
                "schema.schema",
                format!("is not a valid JSON schema: {e}"),
            ));
        }
        match self.metadata_key.as_deref() {
            Some("") => Err(invalid("schema.metadataKey", "must not be empty")),
            Some(_) => Ok(()),
            None => match self.schema.get("type") {
                Some(Value::String(kind)) if kind != "object" => Err(invalid(
                    "schema.metadataKey",
                    format!(
                        "is needed for a schema of type {kind:?}: without it the answer's fields \
                         are spread into the metadata, so the schema must describe an object"
                    ),
                )),
                _ => Ok(()),
            },
        }
    }
}

fn invalid(option: &str, message: impl Into<String>) -> ExtractError {
    ExtractError::InvalidOptions {
        option: option.to_owned(),
        message: message.into(),
    }
}

/// An extractor given as `true`, `false` or an object of its options.
fn toggle<T: DeserializeOwned + Default>(
    name: &str,
    value: &Value,
) -> Result<Option<T>, ExtractError> {
    match value {
        Value::Bool(true) => Ok(Some(T::default())),
        Value::Bool(false) | Value::Null => Ok(None),
        Value::Object(_) => parse(name, value).map(Some),
        _ => Err(invalid(name, "must be true, false or an object of options")),
    }
}

/// An option's value; a model (`llm`) cannot be given in JSON.
fn parse<T: DeserializeOwned>(name: &str, value: &Value) -> Result<T, ExtractError> {
    if let Value::Object(map) = value
        && map.contains_key("llm")
    {
        return Err(invalid(
            &format!("{name}.llm"),
            "a model is not given in the options: every extractor uses the model passed to \
             `extract` (or `chunk_and_extract`)",
        ));
    }
    serde_json::from_value(value.clone()).map_err(|e| invalid(name, e.to_string()))
}

fn at_least_one(option: &str, count: usize) -> Result<(), ExtractError> {
    if count == 0 {
        return Err(invalid(option, "must be at least 1"));
    }
    Ok(())
}

fn template(option: &str, template: Option<&str>) -> Result<(), ExtractError> {
    match template {
        Some(template) if !has_placeholder(template, "context") => Err(invalid(
            option,
            "must include {context}, where the chunk goes",
        )),
        _ => Ok(()),
    }
}
