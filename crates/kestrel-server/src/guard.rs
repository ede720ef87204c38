//! Who may talk to the server from a browser: the `Host` check against DNS rebinding, and the
//! `Origin` check on requests that change state.
//!
//! A web page on `evil.test` can make its own name resolve to 127.0.0.1 (DNS rebinding); the
//! browser then treats the server as same-origin with the page and lets it read every answer.
//! Such requests still say `Host: evil.test`, so the server answers only requests whose host
//! is a loopback name, an IP address (a literal address involves no DNS, so nothing can rebind
//! it), or one the server was configured with ([`crate::Server::allowed_hosts`]).
//!
//! A page of another origin may also *send* requests (a form post, `fetch` with
//! `mode: "no-cors"`) without reading the answer. The server refuses every request that is not
//! `GET`, `HEAD` or `OPTIONS` when its `Origin` is neither the server's own (the Studio) nor
//! one the CORS settings allow ([`crate::Server::cors_origins`]).

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// What the guard accepts besides loopback and IP literals.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guard {
    /// Host names (lowercase, without port); `*.example.com` matches its subdomains.
    pub allowed_hosts: Arc<Vec<String>>,
    /// The CORS origins (`*` for any).
    pub cors_origins: Arc<Vec<String>>,
}

impl Guard {
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host == "localhost" || host.ends_with(".localhost") {
            return true;
        }
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        if literal.unwrap_or(&host).parse::<IpAddr>().is_ok() {
            return true;
        }
        self.allowed_hosts
            .iter()
            .any(|allowed| match allowed.strip_prefix("*.") {
                Some(domain) => host
                    .strip_suffix(domain)
                    .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
                None => *allowed == host,
            })
    }

    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        if self.cors_origins.iter().any(|o| o == "*" || o == origin) {
            return true;
        }
        // Same origin: the page was served by this server under the name it now asks for.
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h))
    }
}

/// The host a request names (`Host`, or the URI's authority over HTTP/2), port included.
fn authority(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()))
}

/// The host name of `host[:port]` (an IPv6 literal keeps its brackets).
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(name, _port)| name)
}

/// Refuses requests for a host the server does not answer to (421), and cross-origin
/// requests that change state from an origin the CORS settings do not allow (403).
pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let authority = authority(&request);
    if let Some(authority) = &authority
        && !guard.host_allowed(host_name(authority))
    {
        tracing::warn!(host = %authority, "refusing a request for a host this server does not answer to");
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            format!(
                "this server does not answer to the host {:?}: add it with --allowed-host \
                 (Server::allowed_hosts)",
                host_name(authority)
            ),
        )
        .into_response();
    }
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !safe
        && let Some(origin) = request
            .headers()
            .get(header::ORIGIN)
            .map(|v| v.to_str().unwrap_or("null").to_owned())
        && !guard.origin_allowed(&origin, authority.as_deref())
    {
        tracing::warn!(%origin, "refusing a cross-origin request that changes state");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!("requests from the origin {origin:?} are not allowed to change state here"),
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
        Guard {
            allowed_hosts: Arc::new(hosts.iter().map(|h| h.to_string()).collect()),
            cors_origins: Arc::new(origins.iter().map(|o| o.to_string()).collect()),
        }
    }

    #[test]
    fn hosts() {
        let g = guard(&["kestrel.example.com", "*.internal.test"], &[]);
        for ok in [
            "localhost",
            "LOCALHOST",
            "studio.localhost",
            "127.0.0.1",
            "10.1.2.3",
            "[::1]",
            "kestrel.example.com",
            "a.internal.test",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for refused in [
            "evil.test",
            "localhost.evil.test",
            "internal.test",
            "xinternal.test",
            "127.0.0.1.nip.io",
            "example.com",
        ] {
            assert!(!g.host_allowed(refused), "{refused}");
        }
        assert_eq!(host_name("evil.test:4199"), "evil.test");
        assert_eq!(host_name("[::1]:4111"), "[::1]");
        assert_eq!(host_name("localhost"), "localhost");
    }

    #[test]
    fn origins() {
        let g = guard(&[], &["https://app.example.com"]);
        assert!(g.origin_allowed("http://127.0.0.1:4111", Some("127.0.0.1:4111")));
        assert!(g.origin_allowed("https://app.example.com", Some("127.0.0.1:4111")));
        assert!(!g.origin_allowed("http://evil.test", Some("127.0.0.1:4111")));
        assert!(!g.origin_allowed("null", Some("127.0.0.1:4111")));
        assert!(!g.origin_allowed("http://127.0.0.1:9999", Some("127.0.0.1:4111")));
        assert!(guard(&[], &["*"]).origin_allowed("null", None));
    }
}
