//! Embedders by `provider/model` string: [`EmbedderRegistry`] and the providers registered in
//! it, and [`EmbedderSpec`], an embedder given as a string or as itself.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{Embedder, SharedEmbedder};

/// Why an embedder string could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownEmbedder {
    /// The string is not of the form `provider/model`.
    #[error(
        "invalid embedder string {spec:?}: expected \"provider/model\", e.g. \
         \"openai/text-embedding-3-small\" or \"local/all-minilm-l6-v2\""
    )]
    InvalidFormat {
        /// The string given.
        spec: String,
    },
    /// No provider of that name is registered.
    #[error("unknown embedding provider {provider:?} in {spec:?}; known providers: {}", known.join(", "))]
    UnknownProvider {
        /// The provider part.
        provider: String,
        /// The whole string.
        spec: String,
        /// The registered provider names.
        known: Vec<String>,
    },
    /// The provider needs a credential that is not set.
    #[error("embedder {spec:?} needs {variable} to be set")]
    MissingCredentials {
        /// The whole string.
        spec: String,
        /// The environment variable to set.
        variable: String,
    },
    /// The provider does not offer that model.
    #[error("embedding provider {provider:?} has no model {model:?}: {reason}")]
    UnsupportedModel {
        /// The provider.
        provider: String,
        /// The model id.
        model: String,
        /// Why.
        reason: String,
    },
}

/// Creates embedders of one provider.
pub trait EmbedderFactory: Send + Sync {
    /// Creates the embedder `model_id` of this provider. `spec` is the whole string, for errors.
    fn create(&self, model_id: &str, spec: &str) -> Result<SharedEmbedder, UnknownEmbedder>;
}

impl<F> EmbedderFactory for F
where
    F: Fn(&str, &str) -> Result<SharedEmbedder, UnknownEmbedder> + Send + Sync,
{
    fn create(&self, model_id: &str, spec: &str) -> Result<SharedEmbedder, UnknownEmbedder> {
        self(model_id, spec)
    }
}

/// Maps provider names to factories and resolves `provider/model` embedder strings.
///
/// [`EmbedderRegistry::from_env`] registers the built-in HTTP providers configured from the
/// environment (see [`crate::providers::openai_embeddings`]); the `kestrel-embed-local` crate
/// adds `local`. [`EmbedderRegistry::register`] adds or replaces a provider. Resolving creates
/// an embedder object and does no I/O.
#[derive(Clone, Default)]
pub struct EmbedderRegistry {
    providers: BTreeMap<String, Arc<dyn EmbedderFactory>>,
}

impl fmt::Debug for EmbedderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbedderRegistry")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl EmbedderRegistry {
    /// A registry with no providers.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in providers, configured from the process environment: none in a build
    /// without the `openai` feature (with it, this is defined beside the providers, in
    /// `providers/openai_embeddings.rs`).
    #[cfg(not(feature = "openai"))]
    pub fn from_env() -> Self {
        Self::empty()
    }

    /// Like [`EmbedderRegistry::from_env`] but reading variables through `env` (for tests).
    #[cfg(not(feature = "openai"))]
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let _ = env;
        Self::empty()
    }

    /// Registers (or replaces) a provider.
    pub fn register(
        &mut self,
        provider: impl Into<String>,
        factory: impl EmbedderFactory + 'static,
    ) -> &mut Self {
        self.providers.insert(provider.into(), Arc::new(factory));
        self
    }

    /// The registered provider names, sorted.
    pub fn providers(&self) -> Vec<String> {
        self.providers.keys().cloned().collect()
    }

    /// Resolves `provider/model`. The model part may itself contain `/`.
    pub fn resolve(&self, spec: &str) -> Result<SharedEmbedder, UnknownEmbedder> {
        let Some((provider, model)) = spec.split_once('/') else {
            return Err(UnknownEmbedder::InvalidFormat { spec: spec.into() });
        };
        if provider.is_empty() || model.is_empty() {
            return Err(UnknownEmbedder::InvalidFormat { spec: spec.into() });
        }
        let Some(factory) = self.providers.get(provider) else {
            return Err(UnknownEmbedder::UnknownProvider {
                provider: provider.into(),
                spec: spec.into(),
                known: self.providers(),
            });
        };
        factory.create(model, spec)
    }
}

/// An embedder given either as a `provider/model` string or as an embedder object.
#[derive(Clone)]
pub enum EmbedderSpec {
    /// A string resolved through an [`EmbedderRegistry`].
    Id(String),
    /// An embedder object used as is.
    Embedder(SharedEmbedder),
}

impl fmt::Debug for EmbedderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedderSpec::Id(id) => write!(f, "{id:?}"),
            EmbedderSpec::Embedder(e) => write!(f, "{}/{}", e.provider(), e.model_id()),
        }
    }
}

impl EmbedderSpec {
    /// Resolves to an embedder through `registry` (a no-op for embedder objects).
    pub fn resolve(&self, registry: &EmbedderRegistry) -> Result<SharedEmbedder, UnknownEmbedder> {
        match self {
            EmbedderSpec::Id(id) => registry.resolve(id),
            EmbedderSpec::Embedder(e) => Ok(e.clone()),
        }
    }
}

impl From<&str> for EmbedderSpec {
    fn from(value: &str) -> Self {
        EmbedderSpec::Id(value.into())
    }
}

impl From<String> for EmbedderSpec {
    fn from(value: String) -> Self {
        EmbedderSpec::Id(value)
    }
}

impl From<SharedEmbedder> for EmbedderSpec {
    fn from(value: SharedEmbedder) -> Self {
        EmbedderSpec::Embedder(value)
    }
}

impl<E: Embedder + 'static> From<Arc<E>> for EmbedderSpec {
    fn from(value: Arc<E>) -> Self {
        EmbedderSpec::Embedder(value)
    }
}
