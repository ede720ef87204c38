//! Built-in HTTP model providers and the environment variables that configure them.
//!
//! Two wire protocols are implemented:
//!
//! - [`openai::OpenAiCompatible`]: OpenAI Chat Completions streaming. One implementation serves
//!   OpenAI and every server that copies its API (DeepSeek, OpenRouter, Groq, Ollama, vLLM,
//!   llama.cpp server, LM Studio...).
//! - [`anthropic::Anthropic`]: the Anthropic Messages API.
//!
//! Both share [`HttpConfig`]: base URL, API key, timeouts, retries and extra headers. Requests
//! that fail *before* the stream starts are retried on HTTP 429, 5xx and connection errors, with
//! exponential backoff and jitter, honouring `Retry-After`. Once events have started flowing
//! nothing is retried: a cut connection is reported as [`ModelError::Connection`].
//!
//! # Environment
//!
//! [`ModelRegistry::from_env`](crate::model::ModelRegistry::from_env) registers these
//! providers. Each reads its variables once, when the registry is built; creating a model does no
//! network I/O. Empty values count as unset.
//!
//! | provider | variables | default base URL |
//! | --- | --- | --- |
//! | `openai` | `OPENAI_API_KEY`, `OPENAI_BASE_URL` | `https://api.openai.com/v1` |
//! | `anthropic` | `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` | `https://api.anthropic.com` |
//! | `deepseek` | `DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL` | `https://api.deepseek.com/v1` |
//! | `openrouter` | `OPENROUTER_API_KEY`, `OPENROUTER_BASE_URL` | `https://openrouter.ai/api/v1` |
//! | `groq` | `GROQ_API_KEY`, `GROQ_BASE_URL` | `https://api.groq.com/openai/v1` |
//! | `ollama` | `OLLAMA_BASE_URL` (no key) | `http://127.0.0.1:11434/v1` |
//!
//! A hosted provider's API key is required while its base URL is the default one: resolving a
//! model without it fails with
//! [`UnknownModel::MissingCredentials`](crate::model::UnknownModel::MissingCredentials) naming
//! the variable. When the base URL points elsewhere (a proxy, a local server) the key is
//! optional and sent only if set.
//!
//! ## Custom OpenAI-compatible endpoints
//!
//! Any number of further OpenAI-compatible servers can be named:
//!
//! - `KESTREL_OPENAI_COMPATIBLE_<NAME>_BASE_URL` (required) and
//!   `KESTREL_OPENAI_COMPATIBLE_<NAME>_API_KEY` (optional) register the provider `<name>`:
//!   `<NAME>` lowercased with `_` turned into `-`. `KESTREL_OPENAI_COMPATIBLE_MY_VLLM_BASE_URL`
//!   gives `my-vllm/<model>`.
//! - `KESTREL_OPENAI_COMPATIBLE` may list names, comma-separated (`my-vllm,lmstudio`); each
//!   reads the two variables above (with `-` written as `_` and upper-cased in the variable
//!   name). Use the list when the environment is given as a lookup function (as with
//!   [`ModelRegistry::from_env_with`](crate::model::ModelRegistry::from_env_with)), since names
//!   cannot be discovered through a lookup.
//!
//! A custom endpoint named like a built-in provider replaces it.

mod builtin;
mod config;
mod http;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "local")]
pub mod local;
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(feature = "openai")]
pub mod openai_embeddings;

pub use config::HttpConfig;

#[cfg(doc)]
use crate::model::ModelError;
