//! OpenAI tokens, for the strategies that measure in them (token, semantic-markdown): the
//! encoding named by `encodingName` or `modelName` (mapped as Mastra's `js-tiktoken` maps
//! model names), and the special-token rules of `allowedSpecial` and `disallowedSpecial`.
//! The vocabularies come from `tiktoken-rs`, embedded in the binary and loaded once.

use std::collections::HashSet;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::Tokenizer as Encoding;

use super::{ChunkError, ChunkOptions};

/// Mastra's default encoding.
pub const DEFAULT_ENCODING: &str = "cl100k_base";

/// Special tokens (`<|endoftext|>`...) named in `allowedSpecial` or `disallowedSpecial`:
/// `"all"`, or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecialTokens {
    /// Every special token of the encoding.
    All,
    /// These.
    Only(Vec<String>),
}

impl<'de> Deserialize<'de> for SpecialTokens {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Expect;
        impl<'de> Visitor<'de> for Expect {
            type Value = SpecialTokens;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"all\" or a list of special tokens")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                if value == "all" {
                    Ok(SpecialTokens::All)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(value), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut tokens = Vec::new();
                while let Some(token) = seq.next_element::<String>()? {
                    tokens.push(token);
                }
                Ok(SpecialTokens::Only(tokens))
            }
        }
        deserializer.deserialize_any(Expect)
    }
}

/// An encoding with the special-token rules of the options.
pub(crate) struct Tokenizer {
    bpe: &'static CoreBPE,
    /// Special tokens encoded as such.
    allowed: HashSet<String>,
    /// Special tokens refused in the text.
    disallowed: Vec<String>,
}

/// The encoding `js-tiktoken` gives a model (exact names only, as it does).
fn encoding_for_model(model: &str) -> Option<&'static str> {
    Some(match model {
        "gpt2" => "gpt2",
        "code-cushman-001" | "code-cushman-002" | "code-davinci-001" | "code-davinci-002"
        | "cushman-codex" | "davinci-codex" | "davinci-002" | "text-davinci-002"
        | "text-davinci-003" => "p50k_base",
        "code-davinci-edit-001" | "text-davinci-edit-001" => "p50k_edit",
        "ada"
        | "babbage"
        | "babbage-002"
        | "code-search-ada-code-001"
        | "code-search-babbage-code-001"
        | "curie"
        | "davinci"
        | "text-ada-001"
        | "text-babbage-001"
        | "text-curie-001"
        | "text-davinci-001"
        | "text-search-ada-doc-001"
        | "text-search-babbage-doc-001"
        | "text-search-curie-doc-001"
        | "text-search-davinci-doc-001"
        | "text-similarity-ada-001"
        | "text-similarity-babbage-001"
        | "text-similarity-curie-001"
        | "text-similarity-davinci-001" => "r50k_base",
        "gpt-3.5-turbo-instruct-0914"
        | "gpt-3.5-turbo-instruct"
        | "gpt-3.5-turbo-16k-0613"
        | "gpt-3.5-turbo-16k"
        | "gpt-3.5-turbo-0613"
        | "gpt-3.5-turbo-0301"
        | "gpt-3.5-turbo"
        | "gpt-4-32k-0613"
        | "gpt-4-32k-0314"
        | "gpt-4-32k"
        | "gpt-4-0613"
        | "gpt-4-0314"
        | "gpt-4"
        | "gpt-3.5-turbo-1106"
        | "gpt-35-turbo"
        | "gpt-4-1106-preview"
        | "gpt-4-vision-preview"
        | "gpt-3.5-turbo-0125"
        | "gpt-4-turbo"
        | "gpt-4-turbo-2024-04-09"
        | "gpt-4-turbo-preview"
        | "gpt-4-0125-preview"
        | "text-embedding-ada-002"
        | "text-embedding-3-small"
        | "text-embedding-3-large" => "cl100k_base",
        "gpt-4o"
        | "gpt-4o-2024-05-13"
        | "gpt-4o-2024-08-06"
        | "gpt-4o-2024-11-20"
        | "gpt-4o-mini-2024-07-18"
        | "gpt-4o-mini"
        | "gpt-4o-search-preview"
        | "gpt-4o-search-preview-2025-03-11"
        | "gpt-4o-mini-search-preview"
        | "gpt-4o-mini-search-preview-2025-03-11"
        | "gpt-4o-audio-preview"
        | "gpt-4o-audio-preview-2024-12-17"
        | "gpt-4o-audio-preview-2024-10-01"
        | "gpt-4o-mini-audio-preview"
        | "gpt-4o-mini-audio-preview-2024-12-17"
        | "o1"
        | "o1-2024-12-17"
        | "o1-mini"
        | "o1-mini-2024-09-12"
        | "o1-preview"
        | "o1-preview-2024-09-12"
        | "o1-pro"
        | "o1-pro-2025-03-19"
        | "o3"
        | "o3-2025-04-16"
        | "o3-mini"
        | "o3-mini-2025-01-31"
        | "o4-mini"
        | "o4-mini-2025-04-16"
        | "chatgpt-4o-latest"
        | "gpt-4o-realtime"
        | "gpt-4o-realtime-preview-2024-10-01"
        | "gpt-4o-realtime-preview-2024-12-17"
        | "gpt-4o-mini-realtime-preview"
        | "gpt-4o-mini-realtime-preview-2024-12-17"
        | "gpt-4.1"
        | "gpt-4.1-2025-04-14"
        | "gpt-4.1-mini"
        | "gpt-4.1-mini-2025-04-14"
        | "gpt-4.1-nano"
        | "gpt-4.1-nano-2025-04-14"
        | "gpt-4.5-preview"
        | "gpt-4.5-preview-2025-02-27"
        | "gpt-5"
        | "gpt-5-2025-08-07"
        | "gpt-5-nano"
        | "gpt-5-nano-2025-08-07"
        | "gpt-5-mini"
        | "gpt-5-mini-2025-08-07"
        | "gpt-5-chat-latest" => "o200k_base",
        _ => return None,
    })
}

/// The vocabulary of an encoding name.
fn encoding(name: &str) -> Option<Encoding> {
    Some(match name {
        "gpt2" => Encoding::Gpt2,
        "r50k_base" => Encoding::R50kBase,
        "p50k_base" => Encoding::P50kBase,
        "p50k_edit" => Encoding::P50kEdit,
        "cl100k_base" => Encoding::Cl100kBase,
        "o200k_base" => Encoding::O200kBase,
        _ => return None,
    })
}

impl Tokenizer {
    /// The tokenizer the options name (`modelName` first, as Mastra), with their special-token
    /// rules.
    pub(crate) fn from_options(options: &ChunkOptions) -> Result<Self, ChunkError> {
        let unknown = |option: &'static str, name: &str| ChunkError::UnknownEncoding {
            option,
            name: name.to_owned(),
        };
        let name = match &options.model_name {
            Some(model) => encoding_for_model(model).ok_or_else(|| unknown("modelName", model))?,
            None => options.encoding_name.as_deref().unwrap_or(DEFAULT_ENCODING),
        };
        let kind = encoding(name).ok_or_else(|| unknown("encodingName", name))?;
        let bpe = tiktoken_rs::bpe_for_tokenizer(kind)
            .map_err(|e| unknown("encodingName", &e.to_string()))?;
        let specials: Vec<String> = bpe
            .special_tokens()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let allowed: HashSet<String> = match &options.allowed_special {
            Some(SpecialTokens::All) => specials.iter().cloned().collect(),
            Some(SpecialTokens::Only(tokens)) => tokens.iter().cloned().collect(),
            None => HashSet::new(),
        };
        let mut disallowed: Vec<String> = match &options.disallowed_special {
            Some(SpecialTokens::Only(tokens)) => tokens.clone(),
            Some(SpecialTokens::All) | None => specials
                .into_iter()
                .filter(|s| !allowed.contains(s))
                .collect(),
        };
        // The longest first, so the error names the token as found.
        disallowed.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Ok(Self {
            bpe,
            allowed,
            disallowed,
        })
    }

    /// `text`'s tokens; an error when it holds a disallowed special token.
    pub(crate) fn encode(&self, text: &str) -> Result<Vec<u32>, ChunkError> {
        // The first disallowed token in the text, as js-tiktoken reports it.
        let found = self
            .disallowed
            .iter()
            .filter(|token| !token.is_empty())
            .filter_map(|token| text.find(token.as_str()).map(|at| (at, token)))
            .min_by_key(|(at, _)| *at);
        if let Some((_, token)) = found {
            return Err(ChunkError::SpecialToken {
                token: token.clone(),
            });
        }
        let allowed: HashSet<&str> = self.allowed.iter().map(String::as_str).collect();
        self.bpe
            .encode(text, &allowed)
            .map(|(tokens, _)| tokens)
            .map_err(|e| ChunkError::Tokenizer {
                message: e.to_string(),
            })
    }

    /// How many tokens `text` is.
    pub(crate) fn count(&self, text: &str) -> Result<usize, ChunkError> {
        self.encode(text).map(|tokens| tokens.len())
    }

    /// `tokens` as text; a character cut between two tokens becomes U+FFFD (as a
    /// `TextDecoder` does).
    pub(crate) fn decode(&self, tokens: &[u32]) -> Result<String, ChunkError> {
        self.bpe
            .decode_bytes(tokens)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| ChunkError::Tokenizer {
                message: e.to_string(),
            })
    }
}
