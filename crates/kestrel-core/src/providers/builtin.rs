//! Registering the built-in providers from environment variables (see [`super`] for the list).

use std::sync::Arc;

use super::HttpConfig;
use super::http::SharedClient;
use crate::model::{ModelRegistry, SharedModel, UnknownModel};

/// Prefix of the variables that name custom OpenAI-compatible endpoints.
#[cfg(feature = "openai")]
const CUSTOM_PREFIX: &str = "KESTREL_OPENAI_COMPATIBLE";

/// The well-known OpenAI-compatible providers: name, variable prefix, default base URL and
/// whether an API key is needed at that URL.
#[cfg(feature = "openai")]
const OPENAI_COMPATIBLE: &[(&str, &str, &str, bool)] = &[
    ("openai", "OPENAI", super::openai::DEFAULT_BASE_URL, true),
    ("deepseek", "DEEPSEEK", "https://api.deepseek.com/v1", true),
    (
        "openrouter",
        "OPENROUTER",
        "https://openrouter.ai/api/v1",
        true,
    ),
    ("groq", "GROQ", "https://api.groq.com/openai/v1", true),
    ("ollama", "OLLAMA", "http://127.0.0.1:11434/v1", false),
];

// The registry's constructors that know the built-in providers live here, beside them, so
// that the model module never names the providers module (which builds on it).
impl ModelRegistry {
    /// The built-in providers, configured from the process environment.
    ///
    /// See [`crate::providers`] for the variables each provider reads.
    pub fn from_env() -> Self {
        Self::from_env_with(|key| std::env::var(key).ok().filter(|v| !v.is_empty()))
    }

    /// Like [`ModelRegistry::from_env`] but reading variables through `env` (for tests).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let mut registry = Self::empty();
        register_builtin(&mut registry, &env);
        registry
    }
}

/// Registers the built-in providers configured from `env`.
///
/// Variables are read here, once; the factories only build model objects (no I/O).
fn register_builtin(registry: &mut ModelRegistry, env: &impl Fn(&str) -> Option<String>) {
    let var = |name: &str| env(name).filter(|value| !value.trim().is_empty());

    #[cfg(feature = "openai")]
    for &(name, prefix, default_url, needs_key) in OPENAI_COMPATIBLE {
        let endpoint = Endpoint::from_env(&var, prefix, default_url, needs_key);
        register_openai_compatible(registry, name, endpoint);
    }

    #[cfg(feature = "anthropic")]
    {
        let endpoint =
            Endpoint::from_env(&var, "ANTHROPIC", super::anthropic::DEFAULT_BASE_URL, true);
        let client = SharedClient::default();
        registry.register(
            "anthropic",
            move |model_id: &str, spec: &str| -> Result<SharedModel, UnknownModel> {
                let config = endpoint.config(spec)?;
                let model = super::anthropic::Anthropic::new(model_id, config);
                Ok(Arc::new(model.with_shared_client(client.clone())))
            },
        );
    }

    #[cfg(feature = "openai")]
    register_custom_endpoints(registry, &var);

    #[cfg(feature = "local")]
    registry.register(
        "local",
        super::local::LocalProvider::from_env(var)
            .with_locator(Arc::new(super::local::ModelStoreLocator::from_env(var))),
    );
}

/// Registers the custom OpenAI-compatible endpoints (see [`super`]).
#[cfg(feature = "openai")]
fn register_custom_endpoints(registry: &mut ModelRegistry, var: &impl Fn(&str) -> Option<String>) {
    // `vars_os`: `vars` panics on a variable that is not valid Unicode.
    let process_vars = std::env::vars_os().filter_map(|(key, _)| key.into_string().ok());
    for name in custom_endpoint_names(var, process_vars) {
        let variable = custom_variable_stem(&name);
        let Some(base_url) = var(&format!("{variable}_BASE_URL")) else {
            tracing::warn!(
                provider = %name,
                "{CUSTOM_PREFIX} lists {name:?} but {variable}_BASE_URL is not set; skipped"
            );
            continue;
        };
        let endpoint = Endpoint {
            base_url,
            api_key: var(&format!("{variable}_API_KEY")),
            missing_key: None,
        };
        register_openai_compatible(registry, &provider_name(&name), endpoint);
    }
}

/// A provider's base URL and key as read from the environment.
#[derive(Clone)]
struct Endpoint {
    base_url: String,
    api_key: Option<String>,
    /// The key variable to report when resolving a model, if the key is needed but unset.
    missing_key: Option<String>,
}

impl Endpoint {
    /// Reads `<PREFIX>_BASE_URL` and `<PREFIX>_API_KEY`. The key is needed only at the default
    /// URL: a custom URL may be a proxy or a local server that takes none.
    fn from_env(
        var: &impl Fn(&str) -> Option<String>,
        prefix: &str,
        default_url: &str,
        needs_key: bool,
    ) -> Self {
        let key_variable = format!("{prefix}_API_KEY");
        let api_key = var(&key_variable);
        let custom_url = var(&format!("{prefix}_BASE_URL"))
            .filter(|url| url.trim_end_matches('/') != default_url.trim_end_matches('/'));
        let missing_key =
            (needs_key && api_key.is_none() && custom_url.is_none()).then_some(key_variable);
        Self {
            base_url: custom_url.unwrap_or_else(|| default_url.to_string()),
            api_key,
            missing_key,
        }
    }

    fn config(&self, spec: &str) -> Result<HttpConfig, UnknownModel> {
        if let Some(variable) = &self.missing_key {
            return Err(UnknownModel::MissingCredentials {
                spec: spec.to_string(),
                variable: variable.clone(),
            });
        }
        Ok(HttpConfig::new(self.base_url.clone()).with_optional_api_key(self.api_key.clone()))
    }
}

#[cfg(feature = "openai")]
fn register_openai_compatible(registry: &mut ModelRegistry, name: &str, endpoint: Endpoint) {
    let provider = name.to_string();
    // Every model of this provider has the same settings, so they can share one client.
    let client = SharedClient::default();
    registry.register(
        name,
        move |model_id: &str, spec: &str| -> Result<SharedModel, UnknownModel> {
            let config = endpoint.config(spec)?;
            let model = super::openai::OpenAiCompatible::new(provider.clone(), model_id, config);
            Ok(Arc::new(model.with_shared_client(client.clone())))
        },
    );
}

#[cfg(feature = "openai")]
/// Custom endpoint names, as written in variable names (`MY_VLLM`) or in the list (`my-vllm`):
/// those listed in `KESTREL_OPENAI_COMPATIBLE`, plus those found among `process_vars` as
/// `KESTREL_OPENAI_COMPATIBLE_<NAME>_BASE_URL`. Values are always read through `var`, so a
/// test's lookup function stays the only source of configuration.
fn custom_endpoint_names(
    var: &impl Fn(&str) -> Option<String>,
    process_vars: impl Iterator<Item = String>,
) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
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

#[cfg(feature = "openai")]
/// `KESTREL_OPENAI_COMPATIBLE_<NAME>` for a name in variable form.
fn custom_variable_stem(name: &str) -> String {
    format!("{CUSTOM_PREFIX}_{name}")
}

#[cfg(feature = "openai")]
/// The provider name for a name in variable form: lowercase, `_` as `-`.
fn provider_name(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}
