//! HTTP plumbing shared by the providers.
//!
//! [`HttpClient::post_events`] sends a JSON request, retrying before the stream starts, and
//! returns the response body as server-sent events guarded by the idle timeout and the abort
//! signal. [`decode_events`] turns those events into a [`ModelStream`] through a
//! provider-specific [`SseDecoder`].

use std::collections::VecDeque;
use std::error::Error as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStream, EventStreamError};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde_json::Value;

use super::HttpConfig;
use crate::abort::AbortSignal;
use crate::model::{ModelError, ModelEvent, ModelStream};

/// Server-sent events of one response, already guarded by idle timeout and cancellation.
pub(crate) type SseEvents = BoxStream<'static, Result<Event, ModelError>>;

/// A lazily built [`reqwest::Client`] that several models with the same settings can share, so
/// that they share its connection pool. Built on first use: creating a model does no I/O and
/// cannot fail.
pub(crate) type SharedClient = Arc<OnceLock<Result<reqwest::Client, String>>>;

/// Longest provider error text kept when the body is not JSON.
const MAX_ERROR_TEXT: usize = 1000;

/// A provider's HTTP client: its settings, its authentication headers and a lazily built
/// [`reqwest::Client`].
pub(crate) struct HttpClient {
    provider: String,
    config: HttpConfig,
    auth_headers: Vec<(&'static str, String)>,
    client: SharedClient,
}

/// The outcome of one attempt.
enum Attempt {
    Success(Response),
    /// Worth retrying; `retry_after` is what the server asked for.
    Retryable {
        error: ModelError,
        retry_after: Option<Duration>,
    },
    Fatal(ModelError),
}

impl HttpClient {
    /// A client for `provider`. `auth_headers` are sent with every request and marked sensitive.
    pub(crate) fn new(
        provider: impl Into<String>,
        config: HttpConfig,
        auth_headers: Vec<(&'static str, String)>,
    ) -> Self {
        Self {
            provider: provider.into(),
            config,
            auth_headers,
            client: SharedClient::default(),
        }
    }

    /// Uses `client`, shared with other models built from the same settings and headers.
    pub(crate) fn share(mut self, client: SharedClient) -> Self {
        self.client = client;
        self
    }

    /// The provider name used in errors.
    pub(crate) fn provider(&self) -> &str {
        &self.provider
    }

    /// The connection settings.
    pub(crate) fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// POSTs `body` to `path` (relative to the base URL) and returns the streamed answer as
    /// server-sent events. Retries on 429, 5xx and connection failures before the stream starts.
    pub(crate) async fn post_events(
        &self,
        path: &str,
        body: &Value,
        abort: &AbortSignal,
    ) -> Result<SseEvents, ModelError> {
        if abort.is_aborted() {
            return Err(ModelError::Cancelled);
        }
        let body = Bytes::from(serde_json::to_vec(body).map_err(|e| ModelError::Other {
            provider: self.provider.clone(),
            message: format!("could not serialize the request: {e}"),
        })?);
        let url = self.config.endpoint(path);
        let response = self
            .send_with_retry(&url, body, "text/event-stream", abort)
            .await?;
        if is_json(&response) {
            return Err(self.unexpected_json(response, abort).await);
        }
        Ok(sse_events(
            self.provider.clone(),
            response,
            self.config.idle_timeout,
            abort.clone(),
        ))
    }

    /// POSTs `body` to `path` (relative to the base URL) and returns the JSON answer (used by
    /// non-streaming endpoints such as embeddings). Retries like [`HttpClient::post_events`];
    /// the whole answer must arrive within the idle timeout.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &Value,
        abort: &AbortSignal,
    ) -> Result<Value, ModelError> {
        if abort.is_aborted() {
            return Err(ModelError::Cancelled);
        }
        let body = Bytes::from(serde_json::to_vec(body).map_err(|e| ModelError::Other {
            provider: self.provider.clone(),
            message: format!("could not serialize the request: {e}"),
        })?);
        let url = self.config.endpoint(path);
        let response = self
            .send_with_retry(&url, body, "application/json", abort)
            .await?;
        let read = tokio::select! {
            biased;
            () = abort.aborted() => return Err(ModelError::Cancelled),
            read = tokio::time::timeout(self.config.idle_timeout, response.bytes()) => read,
        };
        let bytes = match read {
            Err(_elapsed) => {
                return Err(ModelError::Timeout {
                    provider: self.provider.clone(),
                    phase: "idle",
                    after: self.config.idle_timeout,
                });
            }
            Ok(Err(e)) => {
                return Err(ModelError::Connection {
                    provider: self.provider.clone(),
                    message: format!(
                        "connection lost while reading the answer: {}",
                        error_chain(&e)
                    ),
                });
            }
            Ok(Ok(bytes)) => bytes,
        };
        serde_json::from_slice(&bytes).map_err(|e| ModelError::Protocol {
            provider: self.provider.clone(),
            message: format!("the answer is not valid JSON: {e}"),
            line: Some(truncate(
                String::from_utf8_lossy(&bytes).trim(),
                MAX_ERROR_TEXT,
            )),
        })
    }

    fn client(&self) -> Result<&reqwest::Client, ModelError> {
        self.client
            .get_or_init(|| self.build_client())
            .as_ref()
            .map_err(|message| ModelError::Other {
                provider: self.provider.clone(),
                message: message.clone(),
            })
    }

    fn build_client(&self) -> Result<reqwest::Client, String> {
        let mut headers = HeaderMap::new();
        let extra = self
            .config
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v, false));
        let auth = self.auth_headers.iter().map(|(n, v)| (*n, v, true));
        for (name, value, sensitive) in extra.chain(auth) {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("invalid HTTP header name {name:?}"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("invalid value for HTTP header {name:?}"))?;
            value.set_sensitive(sensitive);
            headers.insert(name, value);
        }
        reqwest::Client::builder()
            .connect_timeout(self.config.connect_timeout)
            .default_headers(headers)
            .build()
            .map_err(|e| format!("could not build the HTTP client: {}", error_chain(&e)))
    }

    async fn send_with_retry(
        &self,
        url: &str,
        body: Bytes,
        accept: &'static str,
        abort: &AbortSignal,
    ) -> Result<Response, ModelError> {
        let client = self.client()?;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (error, retry_after) = match self
                .attempt(client, url, body.clone(), accept, attempt, abort)
                .await
            {
                Attempt::Success(response) => return Ok(response),
                Attempt::Fatal(error) => return Err(error),
                Attempt::Retryable { error, retry_after } => (error, retry_after),
            };
            if attempt > self.config.max_retries {
                return Err(error);
            }
            let delay = match retry_after {
                // Waiting longer than our own cap would stall the caller; report instead.
                Some(wait) if wait > self.config.max_backoff => return Err(error),
                Some(wait) => wait,
                None => backoff_delay(&self.config, attempt),
            };
            tracing::warn!(
                provider = %self.provider, attempt, ?delay, %error,
                "retrying model request"
            );
            tokio::select! {
                biased;
                () = abort.aborted() => return Err(ModelError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn attempt(
        &self,
        client: &reqwest::Client,
        url: &str,
        body: Bytes,
        accept: &'static str,
        attempt: u32,
        abort: &AbortSignal,
    ) -> Attempt {
        let request = client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body);
        // `connect_timeout` bounds the connection; the idle timeout bounds the wait for headers.
        let limit = self.config.connect_timeout + self.config.idle_timeout;
        let sent = tokio::select! {
            biased;
            () = abort.aborted() => return Attempt::Fatal(ModelError::Cancelled),
            sent = tokio::time::timeout(limit, request.send()) => sent,
        };
        let response = match sent {
            Err(_elapsed) => {
                return Attempt::Retryable {
                    error: ModelError::Timeout {
                        provider: self.provider.clone(),
                        phase: "idle",
                        after: self.config.idle_timeout,
                    },
                    retry_after: None,
                };
            }
            Ok(Err(e)) if e.is_builder() => {
                return Attempt::Fatal(ModelError::Other {
                    provider: self.provider.clone(),
                    message: format!("invalid request to {url}: {}", error_chain(&e)),
                });
            }
            Ok(Err(e)) => {
                return Attempt::Retryable {
                    error: self.transport_error(&e, url, attempt),
                    retry_after: None,
                };
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Attempt::Success(response);
        }
        let retry_after = retry_after(response.headers());
        let Some(body) = self.read_text(response, abort).await else {
            return Attempt::Fatal(ModelError::Cancelled);
        };
        let message = error_message(&body, status);
        let error = status_error(
            &self.provider,
            status.as_u16(),
            message,
            attempt,
            retry_after,
        );
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Attempt::Retryable { error, retry_after }
        } else {
            Attempt::Fatal(error)
        }
    }

    fn transport_error(&self, error: &reqwest::Error, url: &str, attempts: u32) -> ModelError {
        if error.is_connect() && error.is_timeout() {
            return ModelError::Timeout {
                provider: self.provider.clone(),
                phase: "connect",
                after: self.config.connect_timeout,
            };
        }
        let what = if error.is_connect() {
            "could not connect to"
        } else {
            "request failed for"
        };
        ModelError::Connection {
            provider: self.provider.clone(),
            message: format!(
                "{what} {url} after {attempts} attempt(s): {}",
                error_chain(error)
            ),
        }
    }

    /// Reads a (short) body; `None` when aborted. A body that cannot be read counts as empty.
    async fn read_text(&self, response: Response, abort: &AbortSignal) -> Option<String> {
        tokio::select! {
            biased;
            () = abort.aborted() => None,
            text = tokio::time::timeout(self.config.idle_timeout, response.text()) => {
                Some(text.ok().and_then(Result::ok).unwrap_or_default())
            }
        }
    }

    /// Some servers ignore `stream: true`, or report errors as a 200 JSON body.
    async fn unexpected_json(&self, response: Response, abort: &AbortSignal) -> ModelError {
        let status = response.status();
        let Some(body) = self.read_text(response, abort).await else {
            return ModelError::Cancelled;
        };
        let parsed: Option<Value> = serde_json::from_str(&body).ok();
        if let Some(message) = parsed.as_ref().and_then(json_error_message) {
            return ModelError::Other {
                provider: self.provider.clone(),
                message: format!("HTTP {status} with an error body: {message}"),
            };
        }
        ModelError::Protocol {
            provider: self.provider.clone(),
            message: "expected a server-sent event stream but got a JSON body".into(),
            line: Some(truncate(body.trim(), MAX_ERROR_TEXT)),
        }
    }
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Maps an HTTP error status to a typed error.
pub(crate) fn status_error(
    provider: &str,
    status: u16,
    message: String,
    attempts: u32,
    retry_after: Option<Duration>,
) -> ModelError {
    let provider = provider.to_string();
    match status {
        401 | 403 => ModelError::Auth {
            provider,
            status,
            message,
        },
        429 => ModelError::RateLimited {
            provider,
            attempts,
            retry_after,
            message,
        },
        400..=499 => ModelError::BadRequest {
            provider,
            status,
            message,
        },
        500..=599 => ModelError::Server {
            provider,
            status,
            attempts,
            message,
        },
        _ => ModelError::Other {
            provider,
            message: format!("unexpected HTTP status {status}: {message}"),
        },
    }
}

/// The provider's message from an error body: JSON `error.message` (OpenAI, Anthropic and most
/// compatible servers), a few other common shapes, or the raw text.
pub(crate) fn error_message(body: &str, status: StatusCode) -> String {
    let body = body.trim();
    if body.is_empty() {
        return status
            .canonical_reason()
            .unwrap_or("no error message")
            .to_string();
    }
    serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(json_error_message)
        .unwrap_or_else(|| truncate(body, MAX_ERROR_TEXT))
}

/// Finds an error message in a JSON error body.
pub(crate) fn json_error_message(value: &Value) -> Option<String> {
    let text = |v: &Value| v.as_str().map(str::to_string);
    match value {
        Value::Array(items) => items.first().and_then(json_error_message),
        Value::Object(map) => map
            .get("error")
            .and_then(|e| e.get("message").and_then(text).or_else(|| text(e)))
            .or_else(|| map.get("message").and_then(text))
            .or_else(|| map.get("detail").and_then(text)),
        _ => None,
    }
}

/// `Retry-After` as a delay: `retry-after-ms` (OpenAI) or `Retry-After` in seconds. HTTP dates
/// are not supported and fall back to our own backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    number(RETRY_AFTER.as_str()).map(Duration::from_secs_f64)
}

/// Exponential backoff before retry number `retry` (1-based), capped at `max_backoff`, with
/// "equal jitter": a random delay between half and all of the exponential value.
fn backoff_delay(config: &HttpConfig, retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1));
    let capped = config
        .initial_backoff
        .saturating_mul(factor)
        .min(config.max_backoff);
    let half = capped / 2;
    half + half.mul_f64(random_fraction())
}

/// A random number in `[0, 1)`, from the UUID generator already in our dependencies.
fn random_fraction() -> f64 {
    let (bits, _) = uuid::Uuid::new_v4().as_u64_pair();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// An error with its sources, which is where reqwest keeps the useful part.
fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The body of `response` as server-sent events, each body chunk awaited under the idle timeout
/// and the abort signal.
fn sse_events(
    provider: String,
    response: Response,
    idle_timeout: Duration,
    abort: AbortSignal,
) -> SseEvents {
    let chunks = guarded_chunks(provider.clone(), response, idle_timeout, abort);
    EventStream::new(chunks)
        .map(move |item| item.map_err(|e| sse_error(&provider, e)))
        .boxed()
}

fn sse_error(provider: &str, error: EventStreamError<ModelError>) -> ModelError {
    match error {
        EventStreamError::Transport(error) => error,
        EventStreamError::Utf8(e) => ModelError::Protocol {
            provider: provider.to_string(),
            message: format!("the event stream is not valid UTF-8: {e}"),
            line: None,
        },
        EventStreamError::Parser(e) => ModelError::Protocol {
            provider: provider.to_string(),
            message: format!("malformed server-sent event: {e}"),
            line: None,
        },
    }
}

/// The body's chunks; ends after the first error.
fn guarded_chunks(
    provider: String,
    response: Response,
    idle_timeout: Duration,
    abort: AbortSignal,
) -> impl Stream<Item = Result<Bytes, ModelError>> + Send + 'static {
    let body = response.bytes_stream().boxed();
    // The state is `None` once an error has been yielded.
    futures::stream::unfold(Some((body, provider, abort)), move |state| async move {
        let (mut body, provider, abort) = state?;
        let next = tokio::select! {
            biased;
            () = abort.aborted() => Err(ModelError::Cancelled),
            next = tokio::time::timeout(idle_timeout, body.next()) => match next {
                Err(_elapsed) => Err(ModelError::Timeout {
                    provider: provider.clone(),
                    phase: "idle",
                    after: idle_timeout,
                }),
                Ok(None) => return None,
                Ok(Some(Ok(chunk))) => Ok(chunk),
                Ok(Some(Err(e))) => Err(ModelError::Connection {
                    provider: provider.clone(),
                    message: format!("connection lost while streaming: {}", error_chain(&e)),
                }),
            },
        };
        match next {
            Ok(chunk) => Some((Ok(chunk), Some((body, provider, abort)))),
            Err(error) => Some((Err(error), None)),
        }
    })
}

/// Whether a decoder wants more events.
pub(crate) enum Progress {
    /// Keep reading.
    Continue,
    /// The answer is complete (and `Finish` was emitted); stop reading.
    Done,
}

/// Turns one provider's server-sent events into model events.
pub(crate) trait SseDecoder: Send + 'static {
    /// Handles one event, pushing the model events it yields to `out`.
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ModelError>;

    /// Handles the end of the body before [`Progress::Done`]: completes the answer or fails.
    fn on_eof(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError>;
}

/// Drives `decoder` over `events`. Events it produced before an error are still delivered; the
/// stream ends after the first error, and stops with [`ModelError::Cancelled`] once `abort` fires.
pub(crate) fn decode_events<D: SseDecoder>(
    events: SseEvents,
    decoder: D,
    abort: AbortSignal,
) -> ModelStream {
    let state = DecodeState {
        events,
        decoder,
        abort,
        queue: VecDeque::new(),
        ended: false,
    };
    Box::pin(futures::stream::unfold(state, DecodeState::next))
}

struct DecodeState<D> {
    events: SseEvents,
    decoder: D,
    abort: AbortSignal,
    queue: VecDeque<Result<ModelEvent, ModelError>>,
    ended: bool,
}

impl<D: SseDecoder> DecodeState<D> {
    async fn next(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            if !self.ended && self.abort.is_aborted() {
                self.ended = true;
                self.queue.clear();
                return Some((Err(ModelError::Cancelled), self));
            }
            if let Some(item) = self.queue.pop_front() {
                return Some((item, self));
            }
            if self.ended {
                return None;
            }
            let mut out = Vec::new();
            let result = match self.events.next().await {
                None => {
                    self.ended = true;
                    self.decoder.on_eof(&mut out)
                }
                Some(Err(error)) => {
                    self.ended = true;
                    Err(error)
                }
                Some(Ok(event)) => match self.decoder.on_event(&event, &mut out) {
                    Ok(Progress::Continue) => Ok(()),
                    Ok(Progress::Done) => {
                        self.ended = true;
                        Ok(())
                    }
                    Err(error) => {
                        self.ended = true;
                        Err(error)
                    }
                },
            };
            self.queue.extend(out.into_iter().map(Ok));
            if let Err(error) = result {
                self.queue.push_back(Err(error));
            }
        }
    }
}

/// A protocol error for an event whose data is not the JSON expected, quoting the data.
pub(crate) fn invalid_json(provider: &str, data: &str, error: &serde_json::Error) -> ModelError {
    ModelError::Protocol {
        provider: provider.to_string(),
        message: format!("invalid JSON in stream event: {error}"),
        line: Some(truncate(data, MAX_ERROR_TEXT)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn backoff_grows_exponentially_within_jitter_and_cap() {
        let config = HttpConfig::new("http://x")
            .with_backoff(Duration::from_millis(100), Duration::from_millis(1000));
        for _ in 0..50 {
            let first = backoff_delay(&config, 1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = backoff_delay(&config, 3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let capped = backoff_delay(&config, 30);
            assert!(capped >= Duration::from_millis(500) && capped <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn parses_retry_after_headers() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            map
        };
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            None
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")])), None);
    }

    #[test]
    fn extracts_error_messages_from_common_body_shapes() {
        let status = StatusCode::BAD_REQUEST;
        assert_eq!(error_message(r#"{"error":{"message":"m1"}}"#, status), "m1");
        assert_eq!(error_message(r#"{"error":"m2"}"#, status), "m2");
        assert_eq!(error_message(r#"{"detail":"m3"}"#, status), "m3");
        assert_eq!(
            error_message(r#"[{"error":{"message":"m4"}}]"#, status),
            "m4"
        );
        assert_eq!(error_message(r#"{"other":1}"#, status), r#"{"other":1}"#);
        assert_eq!(error_message("  ", status), "Bad Request");
        assert_eq!(error_message("plain text", status), "plain text");
    }

    #[test]
    fn truncates_at_a_character_boundary() {
        assert_eq!(truncate("héllo", 2), "h…");
        assert_eq!(truncate("short", 10), "short");
    }
}
