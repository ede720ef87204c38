//! Which model a command uses when the user does not say.
//!
//! [`choose_model`] applies the order `--model`, then [`kestrel::model::default_model`]
//! (`KESTREL_MODEL`, a hosted model when an API key is set, else the embedded `local/smollm2`).

use std::fmt;
use std::process::ExitCode;

use crate::exit::{FAILURE, USAGE, fail};

pub use kestrel::model::process_env;

/// No model was named and none could be chosen from the environment (only possible in a build
/// without the local model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoModelConfigured;

impl fmt::Display for NoModelConfigured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no model configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, \
             or name a model with --model PROVIDER/MODEL or KESTREL_MODEL"
        )
    }
}

impl std::error::Error for NoModelConfigured {}

/// The model to use: `flag` (from `--model`), else [`kestrel::model::default_model`].
///
/// `env` looks a variable up and returns `None` when it is unset or empty.
pub fn choose_model(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, NoModelConfigured> {
    if let Some(model) = flag.map(str::trim).filter(|m| !m.is_empty()) {
        return Ok(model.to_string());
    }
    kestrel::model::default_model(env).ok_or(NoModelConfigured)
}

/// The model a command runs: [`choose_model`] on the process environment, with a local
/// catalog model pulled into the cache first (progress on stderr). A failure is reported on
/// stderr and returned as the exit code.
pub async fn model_for_command(flag: Option<&str>) -> Result<String, ExitCode> {
    let spec = choose_model(flag, process_env).map_err(|error| fail(USAGE, error))?;
    if let Some(name) = local_catalog_name(&spec, process_env) {
        crate::models::ensure_cached(name)
            .await
            .map_err(|message| fail(FAILURE, message))?;
    }
    Ok(spec)
}

/// [`model_for_command`], resolved once: the model string, and the model every demo agent
/// shares (one local model in memory).
pub async fn resolved_model_for_command(
    flag: Option<&str>,
) -> Result<(String, kestrel::model::SharedModel), ExitCode> {
    let spec = model_for_command(flag).await?;
    let model = kestrel::model::ModelRegistry::from_env()
        .resolve(&spec)
        .map_err(|error| fail(USAGE, error))?;
    Ok((spec, model))
}

/// The catalog name in a `local/<name>` model string, if it names a catalog model rather than a
/// file (and `KESTREL_LOCAL_MODEL_PATH` does not override it): the model the CLI pulls, with
/// visible progress, before the first answer.
pub fn local_catalog_name(spec: &str, env: impl Fn(&str) -> Option<String>) -> Option<&str> {
    let name = spec.strip_prefix("local/")?;
    let is_path = name.ends_with(".gguf") || name.contains(['/', std::path::MAIN_SEPARATOR]);
    (!is_path && env("KESTREL_LOCAL_MODEL_PATH").is_none()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel::model::{ANTHROPIC_DEFAULT, LOCAL_DEFAULT, OPENAI_DEFAULT};

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            vars.iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_flag_wins() {
        let e = env(&[("KESTREL_MODEL", "a/b"), ("OPENAI_API_KEY", "k")]);
        assert_eq!(choose_model(Some("x/y"), e), Ok("x/y".to_string()));
    }

    #[test]
    fn kestrel_model_comes_next() {
        let e = env(&[("KESTREL_MODEL", " a/b "), ("OPENAI_API_KEY", "k")]);
        assert_eq!(choose_model(None, e), Ok("a/b".to_string()));
    }

    #[test]
    fn openai_is_preferred_to_anthropic() {
        let e = env(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")]);
        assert_eq!(choose_model(None, e), Ok(OPENAI_DEFAULT.to_string()));
        let e = env(&[("ANTHROPIC_API_KEY", "k")]);
        assert_eq!(choose_model(None, e), Ok(ANTHROPIC_DEFAULT.to_string()));
    }

    #[test]
    fn nothing_configured_is_the_embedded_model() {
        let e = env(&[("KESTREL_MODEL", ""), ("OPENAI_API_KEY", "")]);
        assert_eq!(choose_model(None, e), Ok(LOCAL_DEFAULT.to_string()));
    }

    #[test]
    fn the_no_model_message_names_the_variables() {
        let message = NoModelConfigured.to_string();
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "KESTREL_MODEL",
            "--model",
        ] {
            assert!(message.contains(name), "{message}");
        }
    }

    #[test]
    fn local_catalog_names_are_recognised() {
        let none = env(&[]);
        assert_eq!(local_catalog_name("local/smollm2", &none), Some("smollm2"));
        assert_eq!(local_catalog_name("local/./m.gguf", &none), None);
        assert_eq!(local_catalog_name("local/x.gguf", &none), None);
        assert_eq!(local_catalog_name("openai/gpt-5-mini", &none), None);
        let path = env(&[("KESTREL_LOCAL_MODEL_PATH", "/m.gguf")]);
        assert_eq!(local_catalog_name("local/smollm2", &path), None);
    }
}
