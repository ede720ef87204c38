//! Connection settings shared by the HTTP providers.

use std::fmt;
use std::time::Duration;

/// Where and how an HTTP provider connects: base URL, credentials, timeouts, retries, headers.
///
/// Start from [`HttpConfig::new`] (every other field at its default) and adjust with the
/// `with_*` methods:
///
/// ```
/// use std::time::Duration;
/// use kestrel_core::providers::HttpConfig;
///
/// let config = HttpConfig::new("http://127.0.0.1:8000/v1")
///     .with_api_key("sk-local")
///     .with_idle_timeout(Duration::from_secs(120))
///     .with_max_retries(5)
///     .with_header("x-team", "search");
/// assert_eq!(config.max_retries, 5);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The API root, e.g. `https://api.openai.com/v1` (a trailing `/` is ignored).
    pub base_url: String,
    /// The API key, sent the way the provider expects (bearer token, `x-api-key`...).
    pub api_key: Option<String>,
    /// Maximum time to establish a connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Maximum wait for the response headers and, once streaming, between two chunks of the
    /// body. Default 60 s.
    pub idle_timeout: Duration,
    /// How many times a failed request is retried before the stream starts (so at most
    /// `max_retries + 1` attempts). Default 3.
    pub max_retries: u32,
    /// Backoff before the first retry; it doubles on every further retry. Default 500 ms.
    pub initial_backoff: Duration,
    /// Upper bound of one backoff. A `Retry-After` longer than this is not waited for: the
    /// error is returned instead. Default 30 s.
    pub max_backoff: Duration,
    /// Extra headers sent with every request, e.g. OpenRouter's `HTTP-Referer`.
    pub headers: Vec<(String, String)>,
}

impl HttpConfig {
    /// Default connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default idle timeout.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default number of retries.
    pub const DEFAULT_MAX_RETRIES: u32 = 3;
    /// Default first backoff.
    pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
    /// Default backoff cap.
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);

    /// Settings for `base_url` with no API key and every other field at its default.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            initial_backoff: Self::DEFAULT_INITIAL_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            headers: Vec::new(),
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets the API key, or clears it with `None`.
    pub fn with_optional_api_key(mut self, api_key: Option<String>) -> Self {
        self.api_key = api_key;
        self
    }

    /// Sets the connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the idle timeout (wait for headers, and between two body chunks).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets how many times a request is retried before the stream starts; `0` disables retries.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the first backoff and the backoff cap.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// Adds a header sent with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `base_url` without its trailing `/`, followed by `path` (which starts with `/`).
    pub(crate) fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base_url.trim_end_matches('/'))
    }
}

impl fmt::Debug for HttpConfig {
    // Hand-written so that the API key never ends up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("headers", &header_names)
            .finish()
    }
}
