//! The embedded local model: a GGUF file run in-process by llama.cpp (through
//! `kestrel-llama`), as provider `local`.
//!
//! # Model strings
//!
//! `local/<id>` resolves, in this order:
//!
//! 1. `<id>` is a path to a GGUF file when it ends in `.gguf` or contains a path separator:
//!    `local/./models/smollm2.gguf`, `local//opt/models/qwen.gguf` (absolute: note the double
//!    slash). Relative paths are relative to the working directory.
//! 2. Otherwise, if `KESTREL_LOCAL_MODEL_PATH` names a file, that file serves every
//!    `local/<name>`.
//! 3. Otherwise the [`ModelLocator`] given to the provider maps the name to a file. The
//!    built-in provider (in [`crate::model::ModelRegistry::from_env`]) uses
//!    [`ModelStoreLocator`]: the model cache, pulling a catalog model such as `smollm2` on
//!    first use.
//!
//! Nothing is loaded (or downloaded) when a model is created: the first
//! [`LanguageModel::stream`] does that on a blocking thread and caches the engine; models
//! created by the same provider for the same id share one engine.
//!
//! # Behaviour
//!
//! Requests run one at a time per loaded model (see `kestrel_llama::Engine`). Tool calls and
//! structured output are generated under a grammar built from the JSON schemas, so they always
//! parse and validate; a schema feature the grammar cannot enforce fails the call with
//! [`ModelError::InvalidRequest`] naming it. Tool calls stream as `ToolInputStart`,
//! `ToolInputDelta`s, `ToolInputEnd`, then `ToolCall`, with `call_<random>` ids, like the
//! hosted providers.
//!
//! Tiny models (under 300 million parameters, such as SmolLM2-135M) cannot judge whether a
//! tool applies: left to decide they almost never call one. For them
//! [`ToolChoice::Auto`] means *call, then answer*: a tool call
//! is required until a tool result has come back since the last user message, after which the
//! model answers without tools. Larger models decide themselves. See
//! [`LocalModel::with_auto_tool_policy`]. Memory's tools are never that required call, and
//! the call may instead be a direct reply: the model's likelihood of each tool's name is
//! weighed against that of "answer", so small talk gets a text answer. Models under a
//! billion parameters also get a repeat penalty on free text
//! ([`LocalModel::with_repeat_penalty`]): greedy decoding loops without one.
//!
//! The context window defaults to 4096 tokens (about 215 MB resident for SmolLM2-135M): an
//! agent's prompt with its tools listed takes 1,300 to 1,500 of them.
//! [`LocalModel::with_engine_options`] or [`LocalProvider::with_engine_options`] change it.

mod events;
mod provider;
mod request;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use kestrel_llama::LoadError;
/// The engine's settings a [`LocalModel`] takes, named here so that users need not depend on
/// `kestrel-llama` themselves.
pub use kestrel_llama::{AutoToolPolicy, Engine, EngineOptions, RepeatPenalty};
use tokio::sync::OnceCell;

use crate::model::{LanguageModel, ModelError, ModelRequest, ModelStream};

use events::{event_stream, generate_error};
pub use provider::LocalProvider;
use request::engine_request;

/// The provider name.
pub const PROVIDER: &str = "local";

/// The environment variable naming a GGUF file that serves every `local/<name>`.
pub const MODEL_PATH_VARIABLE: &str = "KESTREL_LOCAL_MODEL_PATH";

/// Models with fewer parameters than this get [`SMALL_MODEL_REPEAT_PENALTY`] by default.
const SMALL_MODEL_PARAMETERS: u64 = 1_000_000_000;

/// Models with fewer parameters than this get [`AutoToolPolicy::CallThenAnswer`] by default;
/// larger ones decide. Measured over the 48 prompts of the decision set (BENCHMARKS.md, "Which
/// local model"): SmolLM2-135M left to decide answers in text whatever the prompt, while
/// Qwen2.5-Coder-0.5B decides better than it chooses under call-then-answer.
const CALL_THEN_ANSWER_PARAMETERS: u64 = 300_000_000;

/// The repeat penalty small models get by default: without one SmolLM2-135M's greedy answers
/// looped until the context was full (median 3,500 characters over the demo prompts, the next
/// turn of the thread then overflowing the context); 1.1 over 64 tokens still let one in
/// fourteen run past 2,000 characters, 1.3 over 128 none (BENCHMARKS.md, "The forced first
/// call").
pub const SMALL_MODEL_REPEAT_PENALTY: RepeatPenalty = RepeatPenalty {
    penalty: 1.3,
    last_n: 128,
};

/// Maps a model name (`smollm2` in `local/smollm2`) to a GGUF file.
///
/// Called on a blocking thread the first time a model is used, so it may download. Any
/// closure `Fn(&str) -> Result<PathBuf, String>` is a locator.
pub trait ModelLocator: Send + Sync {
    /// The file for `name`, or why there is none.
    fn locate(&self, name: &str) -> Result<PathBuf, String>;
}

impl<F> ModelLocator for F
where
    F: Fn(&str) -> Result<PathBuf, String> + Send + Sync,
{
    fn locate(&self, name: &str) -> Result<PathBuf, String> {
        self(name)
    }
}

/// The variables [`ModelStoreLocator`] passes on to the model store.
const STORE_VARIABLES: &[&str] = &[
    "KESTREL_HOME",
    "KESTREL_MODEL_CATALOG",
    "KESTREL_HF_ENDPOINT",
    "HF_ENDPOINT",
    "KESTREL_OFFLINE_HUB",
    "KESTREL_PIP",
];

/// The locator the built-in `local` provider uses: the model cache of
/// [`kestrel_model_store::ModelStore`] (`KESTREL_HOME`, else the user cache directory). A
/// catalog model that is not cached yet is pulled (and verified) on first use; progress is
/// logged with `tracing` at `info` level.
#[derive(Debug, Clone, Default)]
pub struct ModelStoreLocator {
    vars: HashMap<String, String>,
}

impl ModelStoreLocator {
    /// A locator configured by the model store's variables (`KESTREL_HOME`,
    /// `KESTREL_HF_ENDPOINT`, `KESTREL_OFFLINE_HUB`, `KESTREL_PIP`, `KESTREL_MODEL_CATALOG`) as
    /// `env` returns them now.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        let vars = STORE_VARIABLES
            .iter()
            .filter_map(|name| env(name).map(|value| (name.to_string(), value)))
            .collect();
        Self { vars }
    }
}

impl ModelLocator for ModelStoreLocator {
    fn locate(&self, name: &str) -> Result<PathBuf, String> {
        let store = kestrel_model_store::ModelStore::from_env_with(|key| {
            self.vars.get(key).map(std::ffi::OsString::from)
        })
        .map_err(|e| e.to_string())?;
        if let Some(path) = store.locate(name).map_err(|e| e.to_string())? {
            return Ok(path);
        }
        tracing::info!(
            model = name,
            cache = %store.dir().display(),
            "local model {name:?} is not cached: pulling it (`kestrel models pull {name}` does this ahead of time)"
        );
        let mut last_phase = None;
        let pulled = store
            .pull(name, |progress| {
                let phase = (progress.source.clone(), progress.phase.clone());
                if last_phase.as_ref() != Some(&phase) {
                    tracing::info!(model = name, source = %progress.source, phase = ?progress.phase, "pulling");
                    last_phase = Some(phase);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(pulled.path)
    }
}

/// Where a [`LocalModel`]'s file comes from.
#[derive(Clone)]
enum Source {
    /// A file.
    Path(PathBuf),
    /// A name for the locator.
    Named {
        name: String,
        locator: Option<Arc<dyn ModelLocator>>,
    },
}

/// A GGUF model run in-process, implementing [`LanguageModel`] as provider `local`.
///
/// ```no_run
/// use std::sync::Arc;
/// use kestrel_core::agent::Agent;
/// use kestrel_core::providers::local::LocalModel;
///
/// let model = LocalModel::from_path("SmolLM2-135M-Instruct.Q4_1.gguf");
/// let agent = Agent::builder("assistant").model(Arc::new(model)).build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LocalModel {
    model_id: String,
    source: Source,
    options: EngineOptions,
    auto_tool_policy: Option<AutoToolPolicy>,
    /// `None`: the default for the model's size.
    repeat_penalty: Option<Option<RepeatPenalty>>,
    engine: Arc<OnceCell<Engine>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("model_id", &self.model_id)
            .field("loaded", &self.engine.initialized())
            .field("options", &self.options)
            .finish()
    }
}

impl LocalModel {
    /// The GGUF file at `path`. Nothing is read until the first call.
    pub fn from_path(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self::with_source(path.display().to_string(), Source::Path(path))
    }

    /// The model `name`, found by `locator` at the first call.
    pub fn named(name: impl Into<String>, locator: Arc<dyn ModelLocator>) -> Self {
        let name = name.into();
        Self::with_source(
            name.clone(),
            Source::Named {
                name,
                locator: Some(locator),
            },
        )
    }

    /// A model over an engine that is already loaded.
    pub fn from_engine(engine: Engine) -> Self {
        let path = engine.info().path.clone();
        let model = Self::from_path(path);
        // A fresh cell holding the engine: `set` cannot fail on it.
        let _ = model.engine.set(engine);
        model
    }

    fn with_source(model_id: String, source: Source) -> Self {
        Self {
            model_id,
            source,
            options: EngineOptions::default(),
            auto_tool_policy: None,
            repeat_penalty: None,
            engine: Arc::new(OnceCell::new()),
        }
    }

    /// Engine options (context size, threads) used when the model is loaded.
    pub fn with_engine_options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// How [`ToolChoice::Auto`] is decided. By default models under 300 million parameters get
    /// [`AutoToolPolicy::CallThenAnswer`] and larger ones [`AutoToolPolicy::ModelDecides`].
    pub fn with_auto_tool_policy(mut self, policy: AutoToolPolicy) -> Self {
        self.auto_tool_policy = Some(policy);
        self
    }

    /// The repeat penalty of free-text answers (never applied inside tool calls or JSON);
    /// `None` turns it off. By default models under a billion parameters get
    /// [`SMALL_MODEL_REPEAT_PENALTY`] and larger ones none.
    pub fn with_repeat_penalty(mut self, penalty: Option<RepeatPenalty>) -> Self {
        self.repeat_penalty = Some(penalty);
        self
    }

    /// Shares the engine cell (used by the provider so that models of one id share an engine).
    fn with_engine_cell(mut self, cell: Arc<OnceCell<Engine>>) -> Self {
        self.engine = cell;
        self
    }

    /// The loaded engine, loading it on a blocking thread the first time.
    pub async fn engine(&self) -> Result<&Engine, ModelError> {
        self.engine
            .get_or_try_init(|| async {
                let source = self.source.clone();
                let options = self.options.clone();
                let model_id = self.model_id.clone();
                tokio::task::spawn_blocking(move || load(&source, options))
                    .await
                    .map_err(|e| ModelError::ModelLoad {
                        provider: PROVIDER.into(),
                        model: model_id,
                        message: format!("the loading task failed: {e}"),
                    })?
                    .map_err(|message| ModelError::ModelLoad {
                        provider: PROVIDER.into(),
                        model: self.model_id.clone(),
                        message,
                    })
            })
            .await
    }
}

/// Resolves the source to a file and loads it. Runs on a blocking thread.
fn load(source: &Source, options: EngineOptions) -> Result<Engine, String> {
    let path = match source {
        Source::Path(path) => path.clone(),
        Source::Named { name, locator } => match locator {
            Some(locator) => locator.locate(name)?,
            None => {
                return Err(format!(
                    "no GGUF file for {name:?}: set {MODEL_PATH_VARIABLE} to a .gguf file, or \
                     use local/<path to a .gguf file>"
                ));
            }
        },
    };
    Engine::load(&path, options).map_err(|e: LoadError| e.to_string())
}

#[async_trait::async_trait]
impl LanguageModel for LocalModel {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        if request.abort.is_aborted() {
            return Err(ModelError::Cancelled);
        }
        let engine = tokio::select! {
            engine = self.engine() => engine?,
            _ = request.abort.aborted() => return Err(ModelError::Cancelled),
        };
        let parameters = engine.info().parameters;
        let small = parameters < SMALL_MODEL_PARAMETERS;
        let policy = self
            .auto_tool_policy
            .unwrap_or(if parameters < CALL_THEN_ANSWER_PARAMETERS {
                AutoToolPolicy::CallThenAnswer
            } else {
                AutoToolPolicy::ModelDecides
            });
        let repeat_penalty = self
            .repeat_penalty
            .unwrap_or(small.then_some(SMALL_MODEL_REPEAT_PENALTY));
        let abort = request.abort.clone();
        let generation = engine
            .generate(engine_request(request, policy, repeat_penalty))
            .map_err(generate_error)?;
        Ok(event_stream(generation, abort))
    }
}

#[cfg(test)]
mod tests {
    use super::request::engine_messages;
    use super::*;
    use crate::message::{Message, Part, Role};
    use kestrel_llama::GenerateError;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn model_ids_resolve_without_loading() {
        let provider = LocalProvider::from_env(|_| None);
        let model = provider.model("./models/x.gguf");
        assert!(matches!(model.source, Source::Path(ref p) if p == Path::new("./models/x.gguf")));
        assert_eq!(model.model_id(), "./models/x.gguf");
        assert!(matches!(
            provider.model("/abs/y.gguf").source,
            Source::Path(_)
        ));
        assert!(matches!(
            provider.model("smollm2").source,
            Source::Named { .. }
        ));
        let provider = LocalProvider::from_env(|k| {
            (k == MODEL_PATH_VARIABLE).then(|| "/m/smol.gguf".to_string())
        });
        assert!(
            matches!(provider.model("smollm2").source, Source::Path(ref p) if p == Path::new("/m/smol.gguf"))
        );
        // Two models of one id share the engine cell.
        let a = provider.model("smollm2");
        let b = provider.model("smollm2");
        assert!(Arc::ptr_eq(&a.engine, &b.engine));
    }

    #[test]
    fn messages_convert_with_calls_and_results() {
        let messages = vec![
            Message::system("sys"),
            Message::user("hi"),
            Message::new(
                Role::Assistant,
                vec![
                    Part::Text { text: "ok".into() },
                    Part::ToolCall {
                        tool_call_id: "c1".into(),
                        tool_name: "add".into(),
                        args: json!({"a": 1}),
                    },
                ],
            ),
            Message::new(
                Role::Tool,
                vec![Part::ToolResult {
                    tool_call_id: "c1".into(),
                    tool_name: "add".into(),
                    result: json!("boom"),
                    is_error: true,
                    denied: false,
                }],
            ),
        ];
        let out = engine_messages(&messages);
        assert_eq!(out.len(), 4);
        assert_eq!(out[2].tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(out[3].content, "Error: boom");
        assert_eq!(out[3].tool_name.as_deref(), Some("add"));
    }

    #[test]
    fn errors_map_to_typed_model_errors() {
        assert_eq!(
            generate_error(GenerateError::ContextOverflow {
                prompt_tokens: 10,
                context: 8
            }),
            ModelError::ContextOverflow {
                provider: "local".into(),
                prompt_tokens: 10,
                context: 8
            }
        );
        assert!(matches!(
            generate_error(GenerateError::UnsupportedSchema {
                feature: "not".into(),
                path: "#".into(),
                reason: String::new()
            }),
            ModelError::InvalidRequest { .. }
        ));
        assert_eq!(
            generate_error(GenerateError::Cancelled),
            ModelError::Cancelled
        );
    }
}
