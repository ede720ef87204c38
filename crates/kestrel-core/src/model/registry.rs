//! Resolving `provider/model` strings to models.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::SharedModel;

/// Why a model string could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownModel {
    /// The string is not of the form `provider/model`.
    #[error(
        "invalid model string {spec:?}: expected \"provider/model\", e.g. \"openai/gpt-5-mini\""
    )]
    InvalidFormat {
        /// The string given.
        spec: String,
    },
    /// No provider of that name is registered.
    #[error("unknown model provider {provider:?} in {spec:?}; known providers: {}", known.join(", "))]
    UnknownProvider {
        /// The provider part.
        provider: String,
        /// The whole string.
        spec: String,
        /// The registered provider names.
        known: Vec<String>,
    },
    /// The provider needs a credential that is not set.
    #[error("model {spec:?} needs {variable} to be set")]
    MissingCredentials {
        /// The whole string.
        spec: String,
        /// The environment variable to set.
        variable: String,
    },
    /// The provider does not offer that model.
    #[error("provider {provider:?} has no model {model:?}: {reason}")]
    UnsupportedModel {
        /// The provider.
        provider: String,
        /// The model id.
        model: String,
        /// Why.
        reason: String,
    },
}

/// Creates models of one provider.
pub trait ProviderFactory: Send + Sync {
    /// Creates the model `model_id` of this provider. `spec` is the whole string, for errors.
    fn create(&self, model_id: &str, spec: &str) -> Result<SharedModel, UnknownModel>;
}

impl<F> ProviderFactory for F
where
    F: Fn(&str, &str) -> Result<SharedModel, UnknownModel> + Send + Sync,
{
    fn create(&self, model_id: &str, spec: &str) -> Result<SharedModel, UnknownModel> {
        self(model_id, spec)
    }
}

/// Maps provider names to factories and resolves `provider/model` strings.
///
/// [`ModelRegistry::from_env`] registers the built-in providers configured from the environment;
/// [`ModelRegistry::register`] adds or replaces one.
#[derive(Clone, Default)]
pub struct ModelRegistry {
    providers: BTreeMap<String, Arc<dyn ProviderFactory>>,
}

impl fmt::Debug for ModelRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelRegistry")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ModelRegistry {
    /// A registry with no providers.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in providers, configured from the process environment: none in a build
    /// without the `http` feature (with it, this is defined beside the providers, in
    /// `providers/builtin.rs`).
    #[cfg(not(feature = "http"))]
    pub fn from_env() -> Self {
        Self::empty()
    }

    /// Like [`ModelRegistry::from_env`] but reading variables through `env` (for tests).
    #[cfg(not(feature = "http"))]
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let _ = env;
        Self::empty()
    }

    /// Registers (or replaces) a provider.
    pub fn register(
        &mut self,
        provider: impl Into<String>,
        factory: impl ProviderFactory + 'static,
    ) -> &mut Self {
        self.providers.insert(provider.into(), Arc::new(factory));
        self
    }

    /// The registered provider names, sorted.
    pub fn providers(&self) -> Vec<String> {
        self.providers.keys().cloned().collect()
    }

    /// Resolves `provider/model`. The model part may itself contain `/`
    /// (`openrouter/meta-llama/llama-3`).
    pub fn resolve(&self, spec: &str) -> Result<SharedModel, UnknownModel> {
        let Some((provider, model)) = spec.split_once('/') else {
            return Err(UnknownModel::InvalidFormat { spec: spec.into() });
        };
        if provider.is_empty() || model.is_empty() {
            return Err(UnknownModel::InvalidFormat { spec: spec.into() });
        }
        let Some(factory) = self.providers.get(provider) else {
            return Err(UnknownModel::UnknownProvider {
                provider: provider.into(),
                spec: spec.into(),
                known: self.providers(),
            });
        };
        factory.create(model, spec)
    }
}

/// A model given either as a `provider/model` string or as a model object.
#[derive(Clone)]
pub enum ModelSpec {
    /// A string resolved through a [`ModelRegistry`].
    Id(String),
    /// A model object used as is.
    Model(SharedModel),
}

impl fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Id(id) => write!(f, "{id:?}"),
            ModelSpec::Model(m) => write!(f, "{}/{}", m.provider(), m.model_id()),
        }
    }
}

impl ModelSpec {
    /// Resolves to a model through `registry` (a no-op for model objects).
    pub fn resolve(&self, registry: &ModelRegistry) -> Result<SharedModel, UnknownModel> {
        match self {
            ModelSpec::Id(id) => registry.resolve(id),
            ModelSpec::Model(m) => Ok(m.clone()),
        }
    }
}

impl From<&str> for ModelSpec {
    fn from(value: &str) -> Self {
        ModelSpec::Id(value.into())
    }
}

impl From<String> for ModelSpec {
    fn from(value: String) -> Self {
        ModelSpec::Id(value)
    }
}

impl From<SharedModel> for ModelSpec {
    fn from(value: SharedModel) -> Self {
        ModelSpec::Model(value)
    }
}

impl<M: super::LanguageModel + 'static> From<Arc<M>> for ModelSpec {
    fn from(value: Arc<M>) -> Self {
        ModelSpec::Model(value)
    }
}
