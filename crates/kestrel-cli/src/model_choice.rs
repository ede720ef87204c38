//! Which model a command uses when the user does not say.
//!
//! [`choose_model`] applies the order `--model`, `KESTREL_MODEL`, then [`default_model`], the one
//! place that decides the fallback (today: the first hosted provider with an API key).

use std::fmt;

/// The model used when only `OPENAI_API_KEY` is set.
pub const OPENAI_DEFAULT: &str = "openai/gpt-5-mini";
/// The model used when only `ANTHROPIC_API_KEY` is set.
pub const ANTHROPIC_DEFAULT: &str = "anthropic/claude-sonnet-4-5";

/// No model was named and none could be chosen from the environment.
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

/// Reads a variable of the process environment; empty or blank values count as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The model to use: `flag` (from `--model`), else `KESTREL_MODEL`, else [`default_model`].
///
/// `env` looks a variable up and returns `None` when it is unset or empty.
pub fn choose_model(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, NoModelConfigured> {
    if let Some(model) = flag.map(str::trim).filter(|m| !m.is_empty()) {
        return Ok(model.to_string());
    }
    if let Some(model) = env("KESTREL_MODEL") {
        let model = model.trim();
        if !model.is_empty() {
            return Ok(model.to_string());
        }
    }
    default_model(env)
        .map(str::to_string)
        .ok_or(NoModelConfigured)
}

/// The model used when none is named, from the credentials in the environment.
pub fn default_model(env: impl Fn(&str) -> Option<String>) -> Option<&'static str> {
    if env("OPENAI_API_KEY").is_some() {
        Some(OPENAI_DEFAULT)
    } else if env("ANTHROPIC_API_KEY").is_some() {
        Some(ANTHROPIC_DEFAULT)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn nothing_configured_is_an_error_naming_the_variables() {
        let e = env(&[("KESTREL_MODEL", ""), ("OPENAI_API_KEY", "")]);
        assert_eq!(choose_model(None, e), Err(NoModelConfigured));
        let message = NoModelConfigured.to_string();
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "KESTREL_MODEL",
            "--model",
        ] {
            assert!(message.contains(name), "{message}");
        }
        assert!(!message.contains('\n'));
    }
}
