//! OpenAI embeddings (`POST {base_url}/embeddings`), which also serves every OpenAI-compatible
//! embeddings endpoint (Ollama, vLLM, LM Studio, llama.cpp server, text-embeddings-inference...).
//!
//! The request is `{"model", "input": [texts...], "encoding_format": "float"}` (plus
//! `"dimensions"` when asked for, see [`OpenAiEmbeddings::with_dimensions`]); the answer's
//! `data[].embedding` vectors are put back in `index` order and checked: one per text, each of
//! the model's dimension. Large inputs are sent in batches of
//! [`OpenAiEmbeddings::DEFAULT_BATCH_SIZE`] texts, one after the other. Retries (429, 5xx,
//! connection errors, with backoff honouring `Retry-After`), timeouts and typed errors are
//! those of the chat providers, configured by the same [`HttpConfig`].
//!
//! # Dimensions
//!
//! Known OpenAI models have a known dimension: `text-embedding-3-small` 1536,
//! `text-embedding-3-large` 3072, `text-embedding-ada-002` 1536. Any other model learns its
//! dimension from its first answer ([`Embedder::dimension`] is `0` until then) unless one is set
//! with [`OpenAiEmbeddings::with_expected_dimension`]; every later answer must match it.
//!
//! # Environment
//!
//! [`EmbedderRegistry::from_env`](crate::embedding::EmbedderRegistry::from_env) registers:
//!
//! | provider | variables | default base URL |
//! | --- | --- | --- |
//! | `openai` | `OPENAI_API_KEY`, `OPENAI_BASE_URL` | `https://api.openai.com/v1` |
//! | `ollama` | `OLLAMA_BASE_URL` (no key) | `http://127.0.0.1:11434/v1` |
//! | `<name>` | `KESTREL_OPENAI_COMPATIBLE_<NAME>_BASE_URL`, `..._API_KEY` | (required) |
//!
//! These are the variables of the chat providers (see [`crate::providers`]), so one endpoint
//! serves both chat and embeddings. The OpenAI key is required at the default base URL:
//! resolving `openai/...` without it fails with
//! [`UnknownEmbedder::MissingCredentials`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::HttpConfig;
use super::http::{HttpClient, SharedClient, json_error_message, truncate};
use crate::abort::AbortSignal;
use crate::embedding::{
    EmbedError, Embedder, EmbedderRegistry, SharedEmbedder, UnknownEmbedder, check_embeddings,
};
use crate::model::{ModelError, Usage};

/// OpenAI's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The dimension of a known OpenAI embedding model.
pub fn known_dimension(model_id: &str) -> Option<usize> {
    match model_id {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        _ => None,
    }
}

/// Vectors with the tokens they cost, from [`OpenAiEmbeddings::embed_with_usage`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embeddings {
    /// One vector per text, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens read, summed over the batches (`input_tokens`; no output tokens).
    pub usage: Usage,
}

/// An embedding model served over the OpenAI embeddings API.
///
/// ```no_run
/// use kestrel_core::embedding::Embedder;
/// use kestrel_core::providers::HttpConfig;
/// use kestrel_core::providers::openai_embeddings::OpenAiEmbeddings;
///
/// # async fn run() -> Result<(), kestrel_core::embedding::EmbedError> {
/// let openai = OpenAiEmbeddings::openai("text-embedding-3-small", "sk-...");
/// assert_eq!(openai.dimension(), 1536);
///
/// // Any OpenAI-compatible server, e.g. Ollama; the dimension is learned from the first answer.
/// let ollama = OpenAiEmbeddings::new(
///     "ollama",
///     "nomic-embed-text",
///     HttpConfig::new("http://127.0.0.1:11434/v1"),
/// );
/// let vectors = ollama.embed(&["hello".to_string()]).await?;
/// assert_eq!(ollama.dimension(), vectors[0].len());
/// # Ok(())
/// # }
/// ```
pub struct OpenAiEmbeddings {
    model_id: String,
    http: HttpClient,
    /// The expected dimension; `0` until learned.
    dimension: AtomicUsize,
    /// Sent as `dimensions` (text-embedding-3 models can shorten their vectors).
    requested_dimensions: Option<usize>,
    batch_size: usize,
}

impl std::fmt::Debug for OpenAiEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddings")
            .field("provider", &self.http.provider())
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension())
            .field("requested_dimensions", &self.requested_dimensions)
            .field("batch_size", &self.batch_size)
            .field("config", self.http.config())
            .finish()
    }
}

impl OpenAiEmbeddings {
    /// Texts per request unless changed with [`OpenAiEmbeddings::with_batch_size`]. OpenAI
    /// accepts up to 2048 inputs and 300,000 tokens per request; 128 texts stay under the token
    /// limit up to about 2,300 tokens per text.
    pub const DEFAULT_BATCH_SIZE: usize = 128;

    /// The model `model_id` of `provider` (the name shown in errors and by
    /// [`Embedder::provider`]). The API key, if any, is sent as a bearer token.
    pub fn new(
        provider: impl Into<String>,
        model_id: impl Into<String>,
        config: HttpConfig,
    ) -> Self {
        let model_id = model_id.into();
        let auth = config
            .api_key
            .as_ref()
            .map(|key| vec![("authorization", format!("Bearer {key}"))])
            .unwrap_or_default();
        Self {
            dimension: AtomicUsize::new(known_dimension(&model_id).unwrap_or(0)),
            model_id,
            http: HttpClient::new(provider, config, auth),
            requested_dimensions: None,
            batch_size: Self::DEFAULT_BATCH_SIZE,
        }
    }

    /// An OpenAI model at the default base URL.
    pub fn openai(model_id: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self::new(
            "openai",
            model_id,
            HttpConfig::new(DEFAULT_BASE_URL).with_api_key(api_key),
        )
    }

    /// Asks the server for vectors of `dimensions` (sent as `dimensions`; OpenAI's
    /// text-embedding-3 models support it) and expects that length.
    pub fn with_dimensions(mut self, dimensions: usize) -> Self {
        self.requested_dimensions = Some(dimensions);
        self.dimension = AtomicUsize::new(dimensions);
        self
    }

    /// Expects vectors of `dimension` without asking for it (for a model of another server
    /// whose size is known, so that [`Embedder::dimension`] is right before the first call).
    pub fn with_expected_dimension(mut self, dimension: usize) -> Self {
        self.dimension = AtomicUsize::new(dimension);
        self
    }

    /// Sends at most `batch_size` (at least 1) texts per request.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Shares `client` with other embedders built from the same settings (the registry's
    /// factories do this so that their embedders share one connection pool).
    pub(crate) fn with_shared_client(mut self, client: SharedClient) -> Self {
        self.http = self.http.share(client);
        self
    }

    /// Embeds `texts` and reports the tokens used. `abort` cancels the call between and during
    /// requests ([`ModelError::Cancelled`]).
    pub async fn embed_with_usage(
        &self,
        texts: &[String],
        abort: &AbortSignal,
    ) -> Result<Embeddings, EmbedError> {
        let mut out = Embeddings {
            vectors: Vec::with_capacity(texts.len()),
            usage: Usage::default(),
        };
        for batch in texts.chunks(self.batch_size) {
            let (vectors, usage) = self.embed_batch(batch, abort).await?;
            out.vectors.extend(vectors);
            out.usage.add(&usage);
        }
        Ok(out)
    }

    fn request_body(&self, texts: &[String]) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        body.insert("input".into(), json!(texts));
        body.insert("encoding_format".into(), json!("float"));
        if let Some(dimensions) = self.requested_dimensions {
            body.insert("dimensions".into(), json!(dimensions));
        }
        Value::Object(body)
    }

    async fn embed_batch(
        &self,
        texts: &[String],
        abort: &AbortSignal,
    ) -> Result<(Vec<Vec<f32>>, Usage), EmbedError> {
        let body = self.request_body(texts);
        let answer = self.http.post_json("/embeddings", &body, abort).await?;
        let (vectors, usage) = self.parse(answer)?;
        let expected = self.dimension.load(Ordering::Acquire);
        let dimension = check_embeddings(
            self.http.provider(),
            &self.model_id,
            texts.len(),
            expected,
            &vectors,
        )?;
        if expected == 0 {
            // First answer: remember its dimension. A concurrent first call may have learned
            // one already; the check above used ours, the next calls use whichever won.
            let _ =
                self.dimension
                    .compare_exchange(0, dimension, Ordering::AcqRel, Ordering::Acquire);
        }
        Ok((vectors, usage))
    }

    /// The vectors of an answer in `index` order, and its usage.
    fn parse(&self, answer: Value) -> Result<(Vec<Vec<f32>>, Usage), EmbedError> {
        let provider = self.http.provider();
        let protocol = |message: String, answer: &Value| {
            EmbedError::Model(ModelError::Protocol {
                provider: provider.to_string(),
                message,
                line: Some(truncate(&answer.to_string(), 300)),
            })
        };
        if answer.get("data").is_none()
            && let Some(message) = json_error_message(&answer)
        {
            return Err(EmbedError::Model(ModelError::Other {
                provider: provider.to_string(),
                message: format!("the embeddings answer is an error: {message}"),
            }));
        }
        let wire: WireAnswer = match serde_json::from_value(answer.clone()) {
            Ok(wire) => wire,
            Err(e) => {
                return Err(protocol(
                    format!("unexpected embeddings answer: {e}"),
                    &answer,
                ));
            }
        };
        let count = wire.data.len();
        let indexed = wire.data.iter().filter(|item| item.index.is_some()).count();
        let vectors = if indexed == 0 {
            // Some compatible servers omit `index`; the array order is then the input order.
            wire.data.into_iter().map(|item| item.embedding).collect()
        } else if indexed == count {
            let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
            for item in wire.data {
                let index = item.index.unwrap_or(usize::MAX);
                match slots.get_mut(index) {
                    Some(slot @ None) => *slot = Some(item.embedding),
                    Some(Some(_)) => {
                        return Err(protocol(format!("index {index} appears twice"), &answer));
                    }
                    None => {
                        return Err(protocol(
                            format!("index {index} is out of range for {count} embedding(s)"),
                            &answer,
                        ));
                    }
                }
            }
            // `count` distinct indices in `0..count`: every slot is filled.
            slots.into_iter().flatten().collect()
        } else {
            return Err(protocol(
                "some embeddings have an index and others do not".into(),
                &answer,
            ));
        };
        let usage = wire
            .usage
            .map(|u| {
                let mut usage = Usage::new(u.prompt_tokens, 0);
                usage.total_tokens = u.total_tokens.unwrap_or(u.prompt_tokens);
                usage
            })
            .unwrap_or_default();
        Ok((vectors, usage))
    }
}

#[derive(Deserialize)]
struct WireAnswer {
    data: Vec<WireEmbedding>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireEmbedding {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbeddings {
    fn provider(&self) -> &str {
        self.http.provider()
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension.load(Ordering::Acquire)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let embeddings = self.embed_with_usage(texts, &AbortSignal::new()).await?;
        tracing::debug!(
            provider = %self.http.provider(),
            model = %self.model_id,
            texts = texts.len(),
            input_tokens = embeddings.usage.input_tokens,
            "embedded"
        );
        Ok(embeddings.vectors)
    }
}

// ---------------------------------------------------------------------------------------------
// Registration from the environment

/// Prefix of the variables that name custom OpenAI-compatible endpoints.
const CUSTOM_PREFIX: &str = "KESTREL_OPENAI_COMPATIBLE";

/// The providers with an embeddings endpoint: name, variable prefix, default base URL, whether
/// a key is needed at that URL.
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("openai", "OPENAI", DEFAULT_BASE_URL, true),
    ("ollama", "OLLAMA", "http://127.0.0.1:11434/v1", false),
];

/// A provider's base URL and key as read from the environment.
#[derive(Clone)]
struct Endpoint {
    base_url: String,
    api_key: Option<String>,
    /// The key variable to report when resolving, if the key is needed but unset.
    missing_key: Option<String>,
}

// The registry's constructors that know the built-in providers live here, beside them, so
// that the embedding module never names the providers module (which builds on it).
impl EmbedderRegistry {
    /// The built-in providers, configured from the process environment (see this module's
    /// documentation for the variables).
    pub fn from_env() -> Self {
        Self::from_env_with(|key| std::env::var(key).ok().filter(|v| !v.is_empty()))
    }

    /// Like [`EmbedderRegistry::from_env`] but reading variables through `env` (for tests).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let mut registry = Self::empty();
        register_builtin(&mut registry, &env);
        registry
    }
}

/// Registers `openai`, `ollama` and the custom OpenAI-compatible endpoints configured in `env`.
fn register_builtin(registry: &mut EmbedderRegistry, env: &impl Fn(&str) -> Option<String>) {
    let var = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    for &(name, prefix, default_url, needs_key) in BUILTIN {
        let key_variable = format!("{prefix}_API_KEY");
        let api_key = var(&key_variable);
        let custom_url = var(&format!("{prefix}_BASE_URL"))
            .filter(|url| url.trim_end_matches('/') != default_url.trim_end_matches('/'));
        let missing_key =
            (needs_key && api_key.is_none() && custom_url.is_none()).then_some(key_variable);
        let endpoint = Endpoint {
            base_url: custom_url.unwrap_or_else(|| default_url.to_string()),
            api_key,
            missing_key,
        };
        register_endpoint(registry, name, endpoint);
    }
    // `vars_os`: `vars` panics on a variable that is not valid Unicode.
    let process_vars = std::env::vars_os().filter_map(|(key, _)| key.into_string().ok());
    for name in custom_endpoint_names(&var, process_vars) {
        let stem = format!("{CUSTOM_PREFIX}_{name}");
        let Some(base_url) = var(&format!("{stem}_BASE_URL")) else {
            continue;
        };
        let endpoint = Endpoint {
            base_url,
            api_key: var(&format!("{stem}_API_KEY")),
            missing_key: None,
        };
        register_endpoint(
            registry,
            &name.to_ascii_lowercase().replace('_', "-"),
            endpoint,
        );
    }
}

fn register_endpoint(registry: &mut EmbedderRegistry, name: &str, endpoint: Endpoint) {
    let provider = name.to_string();
    let client = SharedClient::default();
    registry.register(
        name,
        move |model_id: &str, spec: &str| -> Result<SharedEmbedder, UnknownEmbedder> {
            if let Some(variable) = &endpoint.missing_key {
                return Err(UnknownEmbedder::MissingCredentials {
                    spec: spec.to_string(),
                    variable: variable.clone(),
                });
            }
            let config = HttpConfig::new(endpoint.base_url.clone())
                .with_optional_api_key(endpoint.api_key.clone());
            let embedder = OpenAiEmbeddings::new(provider.clone(), model_id, config)
                .with_shared_client(client.clone());
            Ok(Arc::new(embedder))
        },
    );
}

/// Custom endpoint names in variable form (`MY_VLLM`): those listed in
/// `KESTREL_OPENAI_COMPATIBLE`, plus those found among `process_vars` as
/// `KESTREL_OPENAI_COMPATIBLE_<NAME>_BASE_URL` (the same rules as the chat providers).
fn custom_endpoint_names(
    var: &impl Fn(&str) -> Option<String>,
    process_vars: impl Iterator<Item = String>,
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    if let Some(list) = var(CUSTOM_PREFIX) {
        names.extend(
            list.split(',')
                .map(|name| name.trim().to_ascii_uppercase().replace('-', "_"))
                .filter(|name| !name.is_empty()),
        );
    }
    let prefix = format!("{CUSTOM_PREFIX}_");
    names.extend(process_vars.filter_map(|key| {
        let name = key.strip_prefix(&prefix)?.strip_suffix("_BASE_URL")?;
        (!name.is_empty()).then(|| name.to_string())
    }));
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::HashMap;

    use super::*;

    fn registry(vars: &[(&str, &str)]) -> EmbedderRegistry {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EmbedderRegistry::from_env_with(move |key| vars.get(key).cloned())
    }

    #[test]
    fn known_models_have_their_dimension_and_others_learn_it() {
        let registry = registry(&[("OPENAI_API_KEY", "sk-test")]);
        let small = registry.resolve("openai/text-embedding-3-small").unwrap();
        assert_eq!(
            (small.provider(), small.model_id(), small.dimension()),
            ("openai", "text-embedding-3-small", 1536)
        );
        let large = registry.resolve("openai/text-embedding-3-large").unwrap();
        assert_eq!(large.dimension(), 3072);
        assert_eq!(
            registry
                .resolve("openai/text-embedding-ada-002")
                .unwrap()
                .dimension(),
            1536
        );
        assert_eq!(
            registry
                .resolve("ollama/nomic-embed-text")
                .unwrap()
                .dimension(),
            0
        );
        let shortened =
            OpenAiEmbeddings::openai("text-embedding-3-large", "k").with_dimensions(256);
        assert_eq!(shortened.dimension(), 256);
        assert_eq!(shortened.request_body(&["a".into()])["dimensions"], 256);
    }

    #[test]
    fn the_openai_key_is_needed_only_at_the_default_url() {
        let error = registry(&[])
            .resolve("openai/text-embedding-3-small")
            .err()
            .unwrap();
        assert_eq!(
            error,
            UnknownEmbedder::MissingCredentials {
                spec: "openai/text-embedding-3-small".into(),
                variable: "OPENAI_API_KEY".into(),
            }
        );
        let proxied = registry(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        assert!(proxied.resolve("openai/text-embedding-3-small").is_ok());
    }

    #[test]
    fn custom_endpoints_are_registered_from_the_list() {
        let registry = registry(&[
            ("KESTREL_OPENAI_COMPATIBLE", "my-tei"),
            (
                "KESTREL_OPENAI_COMPATIBLE_MY_TEI_BASE_URL",
                "http://127.0.0.1:8080/v1",
            ),
        ]);
        assert!(registry.providers().contains(&"my-tei".to_string()));
        let embedder = registry.resolve("my-tei/bge-small-en").unwrap();
        assert_eq!(embedder.provider(), "my-tei");
        assert_eq!(embedder.model_id(), "bge-small-en");
    }
}
