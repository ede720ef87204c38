//! How much one server takes on at once: runs in progress, open streams per token, and how
//! long a non-streaming request may take.
//!
//! Past a limit the server answers 429 with `Retry-After` instead of queueing without end:
//! a flood of requests costs the flooder, not the memory of the server. The limits are
//! [`crate::Server::max_runs`], [`crate::Server::max_streams_per_token`] and
//! [`crate::Server::request_timeout`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::Caller;
use crate::{ApiError, AppState};

/// The default of [`crate::Server::max_runs`].
pub const DEFAULT_MAX_RUNS: usize = 1_024;

/// The default of [`crate::Server::max_streams_per_token`].
pub const DEFAULT_MAX_STREAMS_PER_TOKEN: usize = 64;

/// The default of [`crate::Server::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The limits and what counts against them.
#[derive(Debug)]
pub(crate) struct Limits {
    pub max_runs: usize,
    pub max_streams_per_token: usize,
    pub request_timeout: Duration,
    /// Open streams by token.
    open: Mutex<HashMap<Arc<str>, usize>>,
}

impl Limits {
    pub(crate) fn new(max_runs: usize, max_streams_per_token: usize, timeout: Duration) -> Self {
        Self {
            max_runs,
            max_streams_per_token,
            request_timeout: timeout,
            open: Mutex::default(),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, usize>> {
        // Plain counters: a panic elsewhere leaves them consistent.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// 429 with `Retry-After`.
fn too_many(code: &'static str, message: String) -> Response {
    let mut response = ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A place among the open streams of the caller's token, held for as long as the stream holds
/// anything of the server's: a streamed run's until the run ended and its client took what was
/// buffered for it (see [`crate::relay`]), a subscription's until its response ends. Taking it
/// refuses the request with 429 when the token has all its streams open. Every streaming
/// handler takes one, before it starts anything.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    limits: Arc<Limits>,
    token: Arc<str>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.limits.open();
        if let Some(count) = open.get_mut(&self.token) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.token);
            }
        }
    }
}

impl FromRequestParts<Arc<AppState>> for StreamSlot {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .extensions
            .get::<Caller>()
            .map(|caller| Arc::clone(&caller.token))
            .unwrap_or_default();
        StreamSlot::take(Arc::clone(&state.limits), token).ok_or_else(|| {
            let max = state.limits.max_streams_per_token;
            too_many(
                "too_many_streams",
                format!("this caller has {max} streams open, the most it may: close one"),
            )
        })
    }
}

impl StreamSlot {
    /// A place among `token`'s open streams, unless it has all its streams open.
    pub(crate) fn take(limits: Arc<Limits>, token: Arc<str>) -> Option<Self> {
        {
            let mut open = limits.open();
            let count = open.entry(Arc::clone(&token)).or_default();
            if *count >= limits.max_streams_per_token {
                return None;
            }
            *count += 1;
        }
        Some(Self { limits, token })
    }
}

/// Refuses a request that would start (or continue) a run while the server has as many in
/// progress as it takes. Every handler that drives a run takes one, before it starts it.
#[derive(Debug)]
pub(crate) struct RunSlot;

impl FromRequestParts<Arc<AppState>> for RunSlot {
    type Rejection = Response;

    async fn from_request_parts(
        _parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let max = state.limits.max_runs;
        if state.kestrel.runs_in_progress() >= max {
            return Err(too_many(
                "too_many_runs",
                format!("the server has {max} runs in progress, the most it takes: retry later"),
            ));
        }
        Ok(Self)
    }
}

/// Ends a request whose response has not started within the request timeout with 503. A
/// stream's response starts at once, so this bounds only the non-streaming routes; a run a
/// timed-out request started goes on in the background (the handlers run it in a task).
pub(crate) async fn timeout(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    let limit = limits.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                format!(
                    "the request took longer than {} s; a run it started goes on in the \
                     background",
                    limit.as_secs()
                ),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
    }
}
