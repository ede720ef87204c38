//! The model used when none is named.
//!
//! [`default_model`] is the one place that decides it, for agents built without a model and for
//! the `kestrel` CLI. In order:
//!
//! 1. `KESTREL_MODEL` (`provider/model`), if set;
//! 2. [`OPENAI_DEFAULT`] if `OPENAI_API_KEY` is set (feature `openai`);
//! 3. [`ANTHROPIC_DEFAULT`] if `ANTHROPIC_API_KEY` is set (feature `anthropic`);
//! 4. [`LOCAL_DEFAULT`], the embedded model, when the `local` feature is on. It is downloaded
//!    into the model cache the first time it is used (see `providers::local`, with the `local` feature).
//!
//! Without the `local` feature and with nothing configured there is no default.

/// The variable naming the model to use, as `provider/model`.
pub const MODEL_VARIABLE: &str = "KESTREL_MODEL";
/// The model used when only `OPENAI_API_KEY` is set.
pub const OPENAI_DEFAULT: &str = "openai/gpt-5-mini";
/// The model used when only `ANTHROPIC_API_KEY` is set.
pub const ANTHROPIC_DEFAULT: &str = "anthropic/claude-sonnet-4-5";
/// The embedded local model: SmolLM2-135M-Instruct, run in-process (feature `local`).
pub const LOCAL_DEFAULT: &str = "local/smollm2";

/// The model string to use when none is named, from the variables `env` returns (blank values
/// count as unset); `None` when nothing is configured and the `local` feature is off.
pub fn default_model(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let var = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    if let Some(model) = var(MODEL_VARIABLE) {
        return Some(model.trim().to_string());
    }
    if cfg!(feature = "openai") && var("OPENAI_API_KEY").is_some() {
        return Some(OPENAI_DEFAULT.to_string());
    }
    if cfg!(feature = "anthropic") && var("ANTHROPIC_API_KEY").is_some() {
        return Some(ANTHROPIC_DEFAULT.to_string());
    }
    cfg!(feature = "local").then(|| LOCAL_DEFAULT.to_string())
}

/// Reads a variable of the process environment; blank values count as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn kestrel_model_wins_over_keys() {
        let e = env(&[("KESTREL_MODEL", " a/b "), ("OPENAI_API_KEY", "k")]);
        assert_eq!(default_model(e).as_deref(), Some("a/b"));
    }

    #[cfg(all(feature = "openai", feature = "anthropic"))]
    #[test]
    fn keys_choose_a_hosted_model_openai_first() {
        let e = env(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")]);
        assert_eq!(default_model(e).as_deref(), Some(OPENAI_DEFAULT));
        let e = env(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", " ")]);
        assert_eq!(default_model(e).as_deref(), Some(ANTHROPIC_DEFAULT));
    }

    #[test]
    fn nothing_configured_is_the_local_model_when_compiled_in() {
        let e = env(&[("KESTREL_MODEL", "")]);
        let expected = cfg!(feature = "local").then_some(LOCAL_DEFAULT);
        assert_eq!(default_model(e).as_deref(), expected);
    }
}
