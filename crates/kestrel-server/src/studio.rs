//! The Studio: a web UI served at `/`, its files embedded in the binary.
//!
//! The Studio is plain HTML, CSS and JavaScript modules (no build step, nothing to install):
//! `GET /` answers `index.html` and `GET /studio/<file>` the other files. It talks to the
//! same server's `/api` routes from the browser, so it holds no data itself and needs no token
//! to be loaded; when the API answers 401 it asks the person for the token and keeps it in the
//! browser's `localStorage`.
//!
//! Every answer carries an `ETag` (a hash of the file, fixed at compile time) with
//! `Cache-Control: no-cache`: browsers keep the files and revalidate them, and a matching
//! `If-None-Match` gets `304 Not Modified`, so a new binary's files are never served stale.
//! A strict Content-Security-Policy allows scripts, styles and requests to this origin only.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
struct Asset {
    /// Its path under `/studio/`.
    name: &'static str,
    /// Its `Content-Type`.
    content_type: &'static str,
    /// Its bytes.
    body: &'static [u8],
}

/// Embeds a file of `studio/` under its name.
macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../studio/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// The page itself, served at `/`.
const INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");

/// The files the page loads, under `/studio/`.
const ASSETS: &[Asset] = &[
    asset!("studio.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("runs.js", JS),
    asset!("render.js", JS),
    asset!("forms.js", JS),
    asset!("workflows.js", JS),
    asset!("workflow-runs.js", JS),
    asset!("networks.js", JS),
    asset!("network-runs.js", JS),
    asset!("skills.js", JS),
    asset!("queue.js", JS),
    asset!("versions.js", JS),
    asset!("mcp.js", JS),
    asset!("traces.js", JS),
    asset!("experiments.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
];

/// Scripts, styles, images and requests from this origin only; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The Studio's routes.
pub(crate) fn routes() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/studio/{*file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(asset) => serve(asset, &headers),
        None => {
            crate::ApiError::not_found(format!("the Studio has no file {file:?}")).into_response()
        }
    }
}

/// The file, or 304 when the browser's copy is current.
fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = etag(asset.body);
    let current = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if current {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.name == INDEX.name {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    response
}

/// A strong entity tag: the FNV-1a hash of the file.
fn etag(body: &[u8]) -> String {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_page_reference_is_served() {
        let page = std::str::from_utf8(INDEX.body).unwrap();
        for reference in page.split("/studio/").skip(1) {
            let name: String = reference
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .collect();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "index.html loads /studio/{name}, which is not embedded"
            );
        }
    }

    #[test]
    fn every_module_import_is_served() {
        for asset in ASSETS.iter().filter(|a| a.content_type == JS) {
            let source = std::str::from_utf8(asset.body).unwrap();
            for line in source.lines().filter(|l| l.starts_with("import ")) {
                let name = line
                    .rsplit("\"./")
                    .next()
                    .and_then(|rest| rest.split('"').next())
                    .unwrap();
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} imports {name}, which is not embedded",
                    asset.name
                );
            }
        }
    }

    #[tokio::test]
    async fn files_are_served_with_their_type_and_tag() {
        let page = index(HeaderMap::new()).await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(page.headers()[header::CACHE_CONTROL], "no-cache");
        assert!(page.headers().contains_key(header::CONTENT_SECURITY_POLICY));

        let script = asset(Path("app.js".to_owned()), HeaderMap::new()).await;
        assert_eq!(script.status(), StatusCode::OK);
        assert_eq!(script.headers()[header::CONTENT_TYPE], JS);
        let tag = script.headers()[header::ETAG].clone();

        let mut revalidate = HeaderMap::new();
        revalidate.insert(header::IF_NONE_MATCH, tag.clone());
        let again = asset(Path("app.js".to_owned()), revalidate).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()[header::ETAG], tag);

        let missing = asset(Path("../Cargo.toml".to_owned()), HeaderMap::new()).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn tags_differ_by_content() {
        assert_ne!(etag(b"a"), etag(b"b"));
        assert_eq!(etag(b"a"), etag(b"a"));
    }
}
