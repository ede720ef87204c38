//! The bearer token check in front of every route, and who the caller is.
//!
//! A server has no tokens (loopback only: every caller may do anything), or a list of them.
//! A token is either unpinned (the caller may act for any resource) or pinned to one resource
//! id: that caller's runs are that resource's, and nothing of another resource can be read,
//! decided, resumed or aborted with it.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// One accepted token, and the resource it is pinned to, if any.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub token: Arc<str>,
    pub resource: Option<String>,
    /// Whether a pinned caller may choose stored versions (drafts included) in a run body;
    /// unpinned callers always may.
    pub versions: bool,
}

/// The tokens requests must carry (none: no check).
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens(pub Arc<Vec<Grant>>);

/// Who is calling: the resource the caller is pinned to, if any. Every handler sees one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    pub resource: Option<String>,
    /// Whether the caller may run stored versions other than the published ones (a run
    /// body's `versions`): unpinned callers may, pinned ones when the operator allowed it.
    pub versions: bool,
    /// The token the caller presented (empty on a server without tokens): what per-token
    /// limits count against.
    pub token: Arc<str>,
    /// The trace the caller's request belongs to (its W3C `traceparent` header): the runs it
    /// starts join it.
    pub trace: Option<kestrel_core::trace::TraceContext>,
}

/// The trace context of a request's `traceparent` header (a malformed one is ignored, as the
/// W3C recommendation says).
fn trace_of(request: &Request) -> Option<kestrel_core::trace::TraceContext> {
    let header = request.headers().get("traceparent")?.to_str().ok()?;
    kestrel_core::trace::TraceContext::from_traceparent(header)
}

impl Caller {
    /// The caller of a server without tokens: anyone on loopback, who may do anything.
    pub(crate) fn anyone() -> Self {
        Self {
            resource: None,
            versions: true,
            token: Arc::from(""),
            trace: None,
        }
    }

    /// Refuses a run body's `versions` that chooses anything but published versions, from a
    /// caller not allowed to: an unpublished draft is the operator's to try, not a pinned
    /// client's.
    pub(crate) fn check_versions(
        &self,
        versions: &kestrel_core::version::Versions,
    ) -> Result<(), ApiError> {
        use kestrel_core::version::{VersionChoice, VersionStatus};
        if self.versions {
            return Ok(());
        }
        let beyond = versions.agents.iter().find(|(_, choice)| {
            !matches!(
                choice,
                VersionChoice::Status {
                    status: VersionStatus::Published
                }
            )
        });
        match beyond {
            Some((agent, _)) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "this token runs published versions only (versions.agents.{agent} chooses \
                     another); the operator allows more with Server::resource_token_with_versions"
                ),
            )),
            None => Ok(()),
        }
    }

    /// Refuses a request about another resource than the caller's.
    pub(crate) fn check_resource(&self, resource_id: &str) -> Result<(), ApiError> {
        match &self.resource {
            Some(own) if own != resource_id => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("this token acts for resource {own:?} only, not {resource_id:?}"),
            )),
            _ => Ok(()),
        }
    }
}

/// The caller [`require_token`] recorded for the request. Checks that there is one; answers
/// 500 `internal` when there is none: every route is behind the token check, so a request
/// without a caller is the server's bug, and it fails closed.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal(&"no caller: the token check did not run"))
    }
}

/// Compares in time independent of where the inputs differ, so a token cannot be guessed
/// byte by byte from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lets the request through when no token is configured or it carries a valid one, and
/// records the caller for the handlers.
pub(crate) async fn require_token(
    State(tokens): State<Tokens>,
    mut request: Request,
    next: Next,
) -> Response {
    if tokens.0.is_empty() {
        let caller = Caller {
            trace: trace_of(&request),
            ..Caller::anyone()
        };
        request.extensions_mut().insert(caller);
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        // `Bearer` and spaces carry no token (and no configured token is empty).
        .filter(|token| !token.is_empty());
    let Some(given) = given else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs an `Authorization: Bearer <token>` header",
        )
        .into_response();
    };
    // Every grant is compared, so the time does not tell which one matched.
    let mut found = None;
    for grant in tokens.0.iter() {
        if same(given.as_bytes(), grant.token.as_bytes()) {
            found = Some((
                grant.resource.clone(),
                grant.resource.is_none() || grant.versions,
                Arc::clone(&grant.token),
            ));
        }
    }
    match found {
        Some((resource, versions, token)) => {
            let trace = trace_of(&request);
            request.extensions_mut().insert(Caller {
                resource,
                versions,
                token,
                trace,
            });
            next.run(request).await
        }
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is not valid",
        )
        .into_response(),
    }
}
