//! Ids and bounds: what a caller may name, and how long it may be.

use axum::http::StatusCode;
use serde::Deserialize;

use crate::ApiError;

/// The longest id (thread, resource, run, tool call, chat) a request may name, in characters.
/// Ids end up as map keys, topics and database keys: an unbounded one is a way to make the
/// server hold (or store) whatever a caller sends.
pub(crate) const MAX_ID_LEN: usize = 256;

/// The longest name a body may give (an agent's display name, a thread's title, a model), in
/// characters.
pub(crate) const MAX_NAME_LEN: usize = 256;

/// The longest reason a decision may give (a declined call's, which the model reads).
pub(crate) const MAX_REASON_LEN: usize = 4_096;

/// The longest description (an agent's, a tool's) or change message a body may give.
pub(crate) const MAX_TEXT_LEN: usize = 10_000;

/// The longest system prompt, or working memory, a body may set.
pub(crate) const MAX_PROMPT_LEN: usize = 100_000;

/// The ids' pattern in the OpenAPI document: not only whitespace, no control characters.
pub(crate) const ID_PATTERN: &str = r"^(?!\s*$)[^\u0000-\u001F\u007F-\u009F]*$";

/// Why `id` cannot be an id: empty or only whitespace, longer than [`MAX_ID_LEN`], or holding a
/// control character
/// (NUL among them, which PostgreSQL cannot store).
pub(crate) fn id_problem(id: &str) -> Option<String> {
    if id.trim().is_empty() {
        return Some("an id must not be empty (nor only whitespace)".to_owned());
    }
    let length = id.chars().count();
    if length > MAX_ID_LEN {
        return Some(format!(
            "an id may be at most {MAX_ID_LEN} characters long (this one has {length})"
        ));
    }
    if id.chars().any(char::is_control) {
        return Some("an id must not contain control characters".to_owned());
    }
    None
}

/// Deserializes an id string, refusing one [`id_problem`] names (a 422 that says why).
pub(crate) fn id<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let id = String::deserialize(deserializer)?;
    match id_problem(&id) {
        Some(problem) => Err(serde::de::Error::custom(problem)),
        None => Ok(id),
    }
}

/// [`id`], for an optional field.
pub(crate) fn opt_id<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let id = Option::<String>::deserialize(deserializer)?;
    match id.as_deref().and_then(id_problem) {
        Some(problem) => Err(serde::de::Error::custom(problem)),
        None => Ok(id),
    }
}

/// Refuses a request whose path has a segment longer than [`MAX_ID_LEN`] (once decoded, a
/// path segment is an id) with 400 `invalid_path`, before any route reads it.
pub(crate) async fn bounded_path(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    // A character is at most 4 bytes, each percent-encoded in 3: this bounds the encoded
    // form of an id of MAX_ID_LEN characters.
    let path = request.uri().path();
    let too_long = path
        .split('/')
        .any(|segment| segment.len() > 12 * MAX_ID_LEN);
    // A control character can only come percent-encoded (%00-%1F, %7F); no id holds one.
    let control = path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && ((matches!(w[1], b'0' | b'1') && w[2].is_ascii_hexdigit())
                || (w[1] == b'7' && matches!(w[2], b'f' | b'F')))
    });
    if control {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            "a path segment (an id) must not contain control characters",
        )
        .into_response();
    }
    if too_long {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("a path segment (an id) may be at most {MAX_ID_LEN} characters long"),
        )
        .into_response();
    }
    next.run(request).await
}
