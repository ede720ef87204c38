//! Metadata extractors: after chunking, a language model adds metadata to each chunk
//! (Mastra's `chunk({..., extract})` and `MDocument.extractMetadata`).
//!
//! Five extractors, each writing Mastra's keys:
//!
//! | extractor   | writes                                                               |
//! |-------------|----------------------------------------------------------------------|
//! | `schema`    | your schema's object, spread into the metadata or under `metadataKey` |
//! | `summary`   | `sectionSummary`, `prevSectionSummary`, `nextSectionSummary`          |
//! | `questions` | `questionsThisExcerptCanAnswer`                                       |
//! | `keywords`  | `excerptKeywords`                                                     |
//! | `title`     | `documentTitle`                                                       |
//!
//! They run in that order, as in Mastra, one after the other: each shows the model a chunk as
//! Mastra does, its metadata (what the extractors before wrote included) above its text
//! ([`prompts::context`]), in Mastra's prompt templates and agent instructions (followed by a
//! sentence saying what the JSON answer holds). Within an extractor the calls run at most
//! [`ExtractOptions::concurrency`] at a time.
//!
//! Every call asks for a JSON object through Kestrel's structured output (a
//! [`ResponseFormat::Json`] schema, and [`structured_outcome`] to parse and validate the
//! answer): no free text is parsed, and the local model answers under its JSON grammar. The
//! object's strings become Mastra's string values: keywords joined with `", "`, questions
//! numbered on one line (`"1. …? 2. …?"`), summaries on one line.
//!
//! The title is one per document: chunks whose metadata share a `docId` get one title, from
//! candidates of the group's first `nodes` chunks combined into one; a chunk without a `docId` is
//! its own document (Mastra's rule).
//!
//! ```
//! # use kestrel_core::model::LanguageModel;
//! # async fn run(model: &dyn LanguageModel) -> Result<(), kestrel_rag::ExtractError> {
//! use kestrel_rag::{ChunkOptions, Document, ExtractOptions, KeywordsOptions, SummaryOptions};
//!
//! let options = ChunkOptions::recursive().max_size(500).overlap(50).extract(
//!     ExtractOptions::new()
//!         .summary(SummaryOptions::default())
//!         .keywords(KeywordsOptions::default().keywords(3)),
//! );
//! let document = Document::from_text("Kestrels hover over fields...").with("docId", "kestrels");
//! let chunks = document.chunk_and_extract(&options, model).await?;
//! println!("{}", chunks[0].metadata["excerptKeywords"]);
//! # Ok(())
//! # }
//! ```
//!
//! Where Kestrel differs from Mastra 2.6.4:
//!
//! - a model failure fails the extraction with an [`ExtractError`] naming the extractor and
//!   the chunk (Mastra's keyword and schema extractors write an empty value and log);
//! - `title.nodes` limits the chunks asked for candidates (Mastra reads it, then asks every
//!   chunk);
//! - `false` turns an extractor off (Mastra runs it with its defaults);
//! - a chunk whose text is blank is sent to no extractor: it gets empty `documentTitle`,
//!   `questionsThisExcerptCanAnswer` and `excerptKeywords` (Mastra judges blankness with the
//!   metadata lines included, so it sends such a chunk when it has metadata);
//! - one model serves every extractor (no per-extractor `llm`), and the counts are bounds in
//!   the schema (`maxItems`), so an answer with more keywords or questions than asked is an
//!   [`ExtractError::InvalidOutput`].

mod options;
pub mod prompts;

use std::collections::HashMap;
use std::fmt;

use futures::{StreamExt, TryStreamExt};
use kestrel_core::message::Message;
use kestrel_core::model::{
    FinishReason, LanguageModel, ModelError, ModelRequest, ResponseFormat, generate,
};
use kestrel_core::run::{StructuredOutcome, StructuredOutput, structured_outcome};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::chunk::{Chunk, ChunkError};

pub use options::{
    DEFAULT_CONCURRENCY, DEFAULT_COUNT, ExtractOptions, KeywordsOptions, QuestionsOptions,
    SchemaOptions, SummaryKind, SummaryOptions, TitleOptions,
};

/// The title extractor's key.
pub const DOCUMENT_TITLE: &str = "documentTitle";
/// The summary extractor's key for the chunk's own summary.
pub const SECTION_SUMMARY: &str = "sectionSummary";
/// The summary extractor's key for the previous chunk's summary.
pub const PREV_SECTION_SUMMARY: &str = "prevSectionSummary";
/// The summary extractor's key for the next chunk's summary.
pub const NEXT_SECTION_SUMMARY: &str = "nextSectionSummary";
/// The questions extractor's key.
pub const QUESTIONS_THIS_EXCERPT_CAN_ANSWER: &str = "questionsThisExcerptCanAnswer";
/// The keyword extractor's key.
pub const EXCERPT_KEYWORDS: &str = "excerptKeywords";

/// One of the extractors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Extractor {
    /// `documentTitle`.
    Title,
    /// `sectionSummary` and its neighbours'.
    Summary,
    /// `questionsThisExcerptCanAnswer`.
    Questions,
    /// `excerptKeywords`.
    Keywords,
    /// Your schema's object.
    Schema,
}

impl Extractor {
    /// Its name in Mastra's `extract` options.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Title => "title",
            Self::Summary => "summary",
            Self::Questions => "questions",
            Self::Keywords => "keywords",
            Self::Schema => "schema",
        }
    }
}

impl fmt::Display for Extractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why metadata could not be extracted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// An option is unknown or impossible (`option` is its path: `questions.questions`).
    #[error("invalid extract option '{option}': {message}")]
    InvalidOptions {
        /// The option's path in Mastra's `extract` object.
        option: String,
        /// What is wrong.
        message: String,
    },
    /// The model call failed. For the title, `chunk` is the chunk asked for a candidate, or the
    /// document's first chunk for the combined title.
    #[error("the {extractor} extractor's model call for chunk {chunk} failed: {source}")]
    Model {
        /// The extractor.
        extractor: Extractor,
        /// The chunk's index.
        chunk: usize,
        /// The model's error.
        #[source]
        source: ModelError,
    },
    /// The model's answer is not the JSON object asked for (not JSON, not matching the schema,
    /// or cut short).
    #[error(
        "the {extractor} extractor's answer for chunk {chunk} is not the JSON asked for: {message}"
    )]
    InvalidOutput {
        /// The extractor.
        extractor: Extractor,
        /// The chunk's index.
        chunk: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The document could not be chunked ([`crate::Document::chunk_and_extract`]).
    #[error(transparent)]
    Chunk(#[from] ChunkError),
}

/// Adds the metadata `options` ask for to each chunk, asking `model`; the chunks come back in
/// their order, with their text unchanged. See the [module documentation](self).
pub async fn extract(
    mut chunks: Vec<Chunk>,
    options: &ExtractOptions,
    model: &dyn LanguageModel,
) -> Result<Vec<Chunk>, ExtractError> {
    options.check()?;
    let calls = Calls {
        model,
        concurrency: options.concurrency,
    };
    if let Some(schema) = &options.schema {
        calls.schema(&mut chunks, schema).await?;
    }
    if let Some(summary) = &options.summary {
        calls.summary(&mut chunks, summary).await?;
    }
    if let Some(questions) = &options.questions {
        calls.questions(&mut chunks, questions).await?;
    }
    if let Some(keywords) = &options.keywords {
        calls.keywords(&mut chunks, keywords).await?;
    }
    if let Some(title) = &options.title {
        calls.title(&mut chunks, title).await?;
    }
    Ok(chunks)
}

/// One question to the model about one chunk.
struct Ask {
    chunk: usize,
    prompt: String,
}

/// What an extractor asks with: its system instructions and the JSON it wants back.
struct Spec {
    extractor: Extractor,
    instructions: String,
    output: StructuredOutput,
}

/// The model, and how many calls may run at once.
struct Calls<'a> {
    model: &'a dyn LanguageModel,
    concurrency: usize,
}

impl Calls<'_> {
    /// Asks every question, at most `concurrency` at once; the answers in the questions' order.
    async fn all(&self, spec: &Spec, asks: Vec<Ask>) -> Result<Vec<(usize, Value)>, ExtractError> {
        futures::stream::iter(asks)
            .map(|ask| self.one(spec, ask))
            .buffered(self.concurrency)
            .try_collect()
            .await
    }

    /// Asks one question and returns the validated object.
    async fn one(&self, spec: &Spec, ask: Ask) -> Result<(usize, Value), ExtractError> {
        let Spec {
            extractor,
            instructions,
            output,
        } = spec;
        let request = ModelRequest {
            messages: vec![
                Message::system(instructions.as_str()),
                Message::user(ask.prompt),
            ]
            .into(),
            response_format: Some(ResponseFormat::Json {
                schema: output.schema.clone(),
                name: output.name.clone(),
            }),
            ..ModelRequest::default()
        };
        let response =
            generate(self.model, request)
                .await
                .map_err(|source| ExtractError::Model {
                    extractor: *extractor,
                    chunk: ask.chunk,
                    source,
                })?;
        let reason = response.finish_reason.unwrap_or(FinishReason::Unknown);
        let invalid = |message| ExtractError::InvalidOutput {
            extractor: *extractor,
            chunk: ask.chunk,
            message,
        };
        match structured_outcome(Some(output), reason, &response.text) {
            StructuredOutcome::Object(value) => Ok((ask.chunk, value)),
            StructuredOutcome::Failed(message) | StructuredOutcome::Warned(message) => {
                Err(invalid(message))
            }
            StructuredOutcome::None => Err(invalid(format!(
                "the model stopped ({reason}) before finishing its answer"
            ))),
        }
    }

    async fn schema(
        &self,
        chunks: &mut [Chunk],
        options: &SchemaOptions,
    ) -> Result<(), ExtractError> {
        let spec = Spec {
            extractor: Extractor::Schema,
            instructions: options
                .instructions
                .clone()
                .unwrap_or_else(|| prompts::SCHEMA_INSTRUCTIONS.to_owned()),
            output: output(options.schema.clone(), "extracted_metadata"),
        };
        // The chunk as the model sees it is the whole message, as in Mastra.
        let asks = contexts(chunks)
            .into_iter()
            .enumerate()
            .filter_map(|(chunk, context)| {
                Some(Ask {
                    chunk,
                    prompt: context?,
                })
            })
            .collect();
        for (chunk, value) in self.all(&spec, asks).await? {
            match (&options.metadata_key, value) {
                (Some(key), value) => write(chunks, chunk, key, value),
                (None, Value::Object(fields)) => {
                    for (key, value) in fields {
                        write(chunks, chunk, &key, value);
                    }
                }
                (None, _) => {
                    return Err(ExtractError::InvalidOutput {
                        extractor: Extractor::Schema,
                        chunk,
                        message: "the answer is not an object, so its fields cannot be spread \
                                  into the metadata (set metadataKey)"
                            .to_owned(),
                    });
                }
            }
        }
        Ok(())
    }

    async fn summary(
        &self,
        chunks: &mut [Chunk],
        options: &SummaryOptions,
    ) -> Result<(), ExtractError> {
        #[derive(Deserialize)]
        struct Answer {
            summary: String,
        }
        let wants = |kind| options.summaries.contains(&kind);
        let (own, prev, next) = (
            wants(SummaryKind::Own),
            wants(SummaryKind::Prev),
            wants(SummaryKind::Next),
        );
        let count = chunks.len();
        // A chunk's summary is asked for only when some chunk gets it.
        let needed = |i: usize| own || (prev && i + 1 < count) || (next && i > 0);
        let template = options
            .prompt_template
            .as_deref()
            .unwrap_or(prompts::SUMMARY_TEMPLATE);
        let spec = Spec {
            extractor: Extractor::Summary,
            instructions: prompts::instructions(
                prompts::SUMMARY_INSTRUCTIONS,
                prompts::SUMMARY_JSON,
            ),
            output: output(
                object_schema(
                    "summary",
                    json!({"type": "string", "description": "The summary, in prose."}),
                ),
                "section_summary",
            ),
        };
        let asks = contexts(chunks)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| needed(*i))
            .filter_map(|(chunk, context)| {
                Some(Ask {
                    chunk,
                    prompt: prompts::format(template, &[("context", &context?)]),
                })
            })
            .collect();
        let mut summaries = vec![String::new(); count];
        for (chunk, value) in self.all(&spec, asks).await? {
            let answer: Answer = answer(Extractor::Summary, chunk, value)?;
            if let Some(slot) = summaries.get_mut(chunk) {
                *slot = prompts::one_line(&answer.summary);
            }
        }
        for (i, chunk) in chunks.iter_mut().enumerate() {
            let mut write = |key: &str, summary: Option<&String>| {
                if let Some(summary) = summary.filter(|s| !s.is_empty()) {
                    chunk
                        .metadata
                        .insert(key.to_owned(), summary.clone().into());
                }
            };
            if prev && i > 0 {
                write(PREV_SECTION_SUMMARY, summaries.get(i - 1));
            }
            if next {
                write(NEXT_SECTION_SUMMARY, summaries.get(i + 1));
            }
            if own {
                write(SECTION_SUMMARY, summaries.get(i));
            }
        }
        Ok(())
    }

    async fn questions(
        &self,
        chunks: &mut [Chunk],
        options: &QuestionsOptions,
    ) -> Result<(), ExtractError> {
        #[derive(Deserialize)]
        struct Answer {
            questions: Vec<String>,
        }
        let count = options.questions.to_string();
        let template = options
            .prompt_template
            .as_deref()
            .unwrap_or(prompts::QUESTIONS_TEMPLATE);
        let spec = Spec {
            extractor: Extractor::Questions,
            instructions: prompts::instructions(
                prompts::QUESTIONS_INSTRUCTIONS,
                prompts::QUESTIONS_JSON,
            ),
            output: output(
                object_schema(
                    "questions",
                    string_list(
                        options.questions,
                        "One question per item, without a number or a label.",
                    ),
                ),
                "questions",
            ),
        };
        let asks = self.asks_or_empty(chunks, QUESTIONS_THIS_EXCERPT_CAN_ANSWER, |context| {
            prompts::format(template, &[("context", context), ("numQuestions", &count)])
        });
        for (chunk, value) in self.all(&spec, asks).await? {
            let answer: Answer = answer(Extractor::Questions, chunk, value)?;
            let numbered: Vec<String> = items(&answer.questions)
                .enumerate()
                .map(|(n, question)| format!("{}. {question}", n + 1))
                .collect();
            write(
                chunks,
                chunk,
                QUESTIONS_THIS_EXCERPT_CAN_ANSWER,
                numbered.join(" ").into(),
            );
        }
        Ok(())
    }

    async fn keywords(
        &self,
        chunks: &mut [Chunk],
        options: &KeywordsOptions,
    ) -> Result<(), ExtractError> {
        #[derive(Deserialize)]
        struct Answer {
            keywords: Vec<String>,
        }
        let count = options.keywords.to_string();
        let template = options
            .prompt_template
            .as_deref()
            .unwrap_or(prompts::KEYWORDS_TEMPLATE);
        let spec = Spec {
            extractor: Extractor::Keywords,
            instructions: prompts::instructions(
                prompts::KEYWORDS_INSTRUCTIONS,
                prompts::KEYWORDS_JSON,
            ),
            output: output(
                object_schema(
                    "keywords",
                    string_list(
                        options.keywords,
                        "One keyword or key phrase per item, without a label.",
                    ),
                ),
                "keywords",
            ),
        };
        let asks = self.asks_or_empty(chunks, EXCERPT_KEYWORDS, |context| {
            prompts::format(template, &[("context", context), ("maxKeywords", &count)])
        });
        for (chunk, value) in self.all(&spec, asks).await? {
            let answer: Answer = answer(Extractor::Keywords, chunk, value)?;
            let keywords: Vec<String> = items(&answer.keywords).collect();
            write(chunks, chunk, EXCERPT_KEYWORDS, keywords.join(", ").into());
        }
        Ok(())
    }

    async fn title(
        &self,
        chunks: &mut [Chunk],
        options: &TitleOptions,
    ) -> Result<(), ExtractError> {
        #[derive(Deserialize)]
        struct Answer {
            title: String,
        }
        let contexts = contexts(chunks);
        // The documents, in the order of their first chunk: chunks sharing a `docId`, or one
        // chunk alone. A blank chunk gets an empty title and is no document's.
        let mut documents: Vec<Vec<usize>> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for (i, (chunk, context)) in chunks.iter_mut().zip(&contexts).enumerate() {
            if context.is_none() {
                chunk.metadata.insert(DOCUMENT_TITLE.to_owned(), "".into());
                continue;
            }
            match doc_id(&chunk.metadata) {
                Some(id) => {
                    let document = *by_id.entry(id).or_insert_with(|| {
                        documents.push(Vec::new());
                        documents.len() - 1
                    });
                    if let Some(members) = documents.get_mut(document) {
                        members.push(i);
                    }
                }
                None => documents.push(vec![i]),
            }
        }
        let title_schema = |description: &str| {
            object_schema(
                "title",
                json!({"type": "string", "description": description}),
            )
        };
        let node_template = options
            .node_template
            .as_deref()
            .unwrap_or(prompts::TITLE_NODE_TEMPLATE);
        let candidates = Spec {
            extractor: Extractor::Title,
            instructions: prompts::instructions(
                prompts::TITLE_NODE_INSTRUCTIONS,
                prompts::TITLE_JSON,
            ),
            output: output(
                title_schema("A title candidate for the context."),
                "title_candidate",
            ),
        };
        let asks = documents
            .iter()
            .flat_map(|members| members.iter().take(options.nodes))
            .map(|&chunk| Ask {
                chunk,
                prompt: prompts::format(
                    node_template,
                    &[("context", contexts[chunk].as_deref().unwrap_or_default())],
                ),
            })
            .collect();
        let mut candidate: HashMap<usize, String> = HashMap::new();
        for (chunk, value) in self.all(&candidates, asks).await? {
            let answer: Answer = answer(Extractor::Title, chunk, value)?;
            candidate.insert(chunk, answer.title.trim().to_owned());
        }
        let combine_template = options
            .combine_template
            .as_deref()
            .unwrap_or(prompts::TITLE_COMBINE_TEMPLATE);
        let combine = Spec {
            extractor: Extractor::Title,
            instructions: prompts::instructions(
                prompts::TITLE_COMBINE_INSTRUCTIONS,
                prompts::TITLE_JSON,
            ),
            output: output(title_schema("The document's title."), "document_title"),
        };
        let asks = documents
            .iter()
            .filter_map(|members| {
                let first = *members.first()?;
                let candidates: Vec<&str> = members
                    .iter()
                    .take(options.nodes)
                    .map(|i| candidate.get(i).map_or("", String::as_str))
                    .collect();
                Some(Ask {
                    chunk: first,
                    prompt: prompts::format(
                        combine_template,
                        &[("context", &candidates.join(", "))],
                    ),
                })
            })
            .collect();
        let mut titles: HashMap<usize, String> = HashMap::new();
        for (chunk, value) in self.all(&combine, asks).await? {
            let answer: Answer = answer(Extractor::Title, chunk, value)?;
            titles.insert(chunk, answer.title.trim().to_owned());
        }
        for members in &documents {
            let title = members.first().and_then(|first| titles.get(first));
            for &i in members {
                write(
                    chunks,
                    i,
                    DOCUMENT_TITLE,
                    title.cloned().unwrap_or_default().into(),
                );
            }
        }
        Ok(())
    }

    /// The questions for the chunks with content; a blank chunk gets `key` set to `""` instead
    /// (Mastra's questions and keyword extractors).
    fn asks_or_empty(
        &self,
        chunks: &mut [Chunk],
        key: &str,
        prompt: impl Fn(&str) -> String,
    ) -> Vec<Ask> {
        let mut asks = Vec::new();
        for (chunk, context) in contexts(chunks).into_iter().enumerate() {
            match context {
                Some(context) => asks.push(Ask {
                    chunk,
                    prompt: prompt(&context),
                }),
                None => write(chunks, chunk, key, "".into()),
            }
        }
        asks
    }
}

/// Each chunk as the model is shown it; none for a chunk without text, which is not sent.
fn contexts(chunks: &[Chunk]) -> Vec<Option<String>> {
    chunks
        .iter()
        .map(|chunk| {
            (!chunk.text.trim().is_empty()).then(|| prompts::context(&chunk.text, &chunk.metadata))
        })
        .collect()
}

/// Writes `key` in chunk `index`'s metadata (the indexes come from the chunks).
fn write(chunks: &mut [Chunk], index: usize, key: &str, value: Value) {
    if let Some(chunk) = chunks.get_mut(index) {
        chunk.metadata.insert(key.to_owned(), value);
    }
}

/// Structured output asking for `schema`, strictly.
fn output(schema: Value, name: &str) -> StructuredOutput {
    let mut output = StructuredOutput::new(schema);
    output.name = Some(name.to_owned());
    output
}

/// An object with one required property.
fn object_schema(property: &str, schema: Value) -> Value {
    json!({
        "type": "object",
        "properties": {property: schema},
        "required": [property],
        "additionalProperties": false,
    })
}

/// A list of at most `most` strings (the bound also keeps a local model's list finite).
fn string_list(most: usize, description: &str) -> Value {
    json!({
        "type": "array",
        "items": {"type": "string"},
        "maxItems": most,
        "description": description,
    })
}

/// The validated object as the extractor's answer type.
fn answer<T: DeserializeOwned>(
    extractor: Extractor,
    chunk: usize,
    value: Value,
) -> Result<T, ExtractError> {
    serde_json::from_value(value).map_err(|e| ExtractError::InvalidOutput {
        extractor,
        chunk,
        message: e.to_string(),
    })
}

/// A list's items on one line each, blank ones left out.
fn items(list: &[String]) -> impl Iterator<Item = String> {
    list.iter()
        .map(|item| prompts::one_line(item))
        .filter(|item| !item.is_empty())
}

/// The `docId` grouping a chunk with others for the title, when it has one JavaScript would
/// call truthy (not `""`, `0`, `false` or `null`), as text (so `1` and `"1"` are one document).
fn doc_id(metadata: &Map<String, Value>) -> Option<String> {
    match metadata.get("docId")? {
        Value::Null | Value::Bool(false) => None,
        Value::String(id) if id.is_empty() => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(id) => Some(id.clone()),
        other => Some(other.to_string()),
    }
}
