//! [`LocalProvider`]: `local/<id>` model strings resolved to GGUF files.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kestrel_llama::{Engine, EngineOptions};
use tokio::sync::OnceCell;

use super::{LocalModel, MODEL_PATH_VARIABLE, ModelLocator, Source};
use crate::model::{SharedModel, UnknownModel};

/// The `local` provider's factory: resolves `local/<id>` (see the module docs) without
/// loading anything, and shares one engine per id among the models it creates.
#[derive(Clone, Default)]
pub struct LocalProvider {
    model_path: Option<PathBuf>,
    locator: Option<Arc<dyn ModelLocator>>,
    options: EngineOptions,
    engines: Arc<Mutex<HashMap<String, Arc<OnceCell<Engine>>>>>,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("model_path", &self.model_path)
            .field("locator", &self.locator.is_some())
            .field("options", &self.options)
            .finish()
    }
}

impl LocalProvider {
    /// A provider configured from `env`: reads [`MODEL_PATH_VARIABLE`].
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            model_path: env(MODEL_PATH_VARIABLE)
                .filter(|v| !v.trim().is_empty())
                .map(PathBuf::from),
            ..Self::default()
        }
    }

    /// Resolves names through `locator` (after [`MODEL_PATH_VARIABLE`]).
    pub fn with_locator(mut self, locator: Arc<dyn ModelLocator>) -> Self {
        self.locator = Some(locator);
        self
    }

    /// Engine options for the models it loads.
    pub fn with_engine_options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// The model `local/<model_id>`. Loads nothing.
    pub fn model(&self, model_id: &str) -> LocalModel {
        let source = if looks_like_path(model_id) {
            Source::Path(PathBuf::from(model_id))
        } else if let Some(path) = &self.model_path {
            Source::Path(path.clone())
        } else {
            Source::Named {
                name: model_id.to_string(),
                locator: self.locator.clone(),
            }
        };
        let cell = match self.engines.lock() {
            Ok(mut engines) => engines.entry(model_id.to_string()).or_default().clone(),
            // A poisoned map only loses sharing.
            Err(_) => Arc::new(OnceCell::new()),
        };
        LocalModel::with_source(model_id.to_string(), source)
            .with_engine_options(self.options.clone())
            .with_engine_cell(cell)
    }
}

impl crate::model::ProviderFactory for LocalProvider {
    fn create(&self, model_id: &str, _spec: &str) -> Result<SharedModel, UnknownModel> {
        Ok(Arc::new(self.model(model_id)))
    }
}

/// Whether a `local/<id>` id names a file rather than a model.
pub(super) fn looks_like_path(id: &str) -> bool {
    id.ends_with(".gguf") || id.contains('/') || id.contains(std::path::MAIN_SEPARATOR)
}
