//! Errors a model call can fail with.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider rejected the credentials (HTTP 401/403).
    #[error("{provider}: authentication failed (HTTP {status}): {message}")]
    Auth {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider rate-limited the call and retries ran out (HTTP 429).
    #[error("{provider}: rate limited (HTTP 429) after {attempts} attempt(s): {message}")]
    RateLimited {
        /// Provider name.
        provider: String,
        /// How many attempts were made.
        attempts: u32,
        /// The `Retry-After` the provider last asked for.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// The provider rejected the request (HTTP 400, 404, 422...).
    #[error("{provider}: bad request (HTTP {status}): {message}")]
    BadRequest {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider failed (HTTP 5xx) and retries ran out.
    #[error("{provider}: server error (HTTP {status}) after {attempts} attempt(s): {message}")]
    Server {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// The provider sent something that does not follow its protocol.
    #[error("{provider}: protocol error: {message}{}", line.as_ref().map(|l| format!(" (line: {l:?})")).unwrap_or_default())]
    Protocol {
        /// Provider name.
        provider: String,
        /// What was wrong.
        message: String,
        /// The offending line, quoted.
        line: Option<String>,
    },
    /// The connection failed or was cut.
    #[error("{provider}: connection error: {message}")]
    Connection {
        /// Provider name.
        provider: String,
        /// What happened.
        message: String,
    },
    /// Connecting, or waiting for the next piece of the stream, took too long.
    #[error("{provider}: timed out after {after:?} ({phase})")]
    Timeout {
        /// Provider name.
        provider: String,
        /// `connect` or `idle`.
        phase: &'static str,
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The call was cancelled through its abort signal.
    #[error("model call cancelled")]
    Cancelled,
    /// A scripted model ran out of responses, or a test injected this error.
    #[error("{0}")]
    Scripted(String),
    /// The prompt does not fit the model's context window.
    #[error(
        "{provider}: the prompt ({prompt_tokens} tokens) does not fit the context window ({context} tokens)"
    )]
    ContextOverflow {
        /// Provider name.
        provider: String,
        /// Tokens in the prompt.
        prompt_tokens: u64,
        /// The context window in tokens.
        context: u64,
    },
    /// The provider cannot run this request as asked (a JSON schema feature it cannot
    /// enforce, an invalid setting...). Unlike [`ModelError::BadRequest`] there is no HTTP
    /// exchange: an in-process provider rejected it.
    #[error("{provider}: invalid request: {message}")]
    InvalidRequest {
        /// Provider name.
        provider: String,
        /// What is wrong.
        message: String,
    },
    /// The model could not be loaded (an in-process model: missing or corrupt file,
    /// unsupported architecture...).
    #[error("{provider}: cannot load model {model:?}: {message}")]
    ModelLoad {
        /// Provider name.
        provider: String,
        /// The model id.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// Any other failure.
    #[error("{provider}: {message}")]
    Other {
        /// Provider name.
        provider: String,
        /// What happened.
        message: String,
    },
}

impl ModelError {
    /// Whether retrying the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Connection { .. }
                | ModelError::Timeout { .. }
        )
    }
}
