//! The JSON body extractors of every route: [`Body`] and [`MaybeBody`], whose rejections are
//! [`ApiError`]s naming what was wrong, checked against the bounds the route's documented
//! schema states.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ApiError;
use crate::openapi::Bounds;

/// A JSON body whose rejections are [`ApiError`]s: 400 for malformed JSON, 422 for JSON of
/// the wrong shape or with a value past a bound its route's documented schema states (the
/// message names the field: [`crate::openapi::Bounds`]), 413 for too large, 415 without a
/// JSON content type.
pub(crate) struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, bytes) = read(req, state).await?;
        parse(parts, bytes, state).await.map(Body)
    }
}

/// [`Body`], or `T::default()` for a request with no body at all (Mastra's clients leave it
/// out on some routes).
pub(crate) struct MaybeBody<T>(pub T);

impl<S, T> FromRequest<S> for MaybeBody<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, bytes) = read(req, state).await?;
        if bytes.is_empty() {
            return Ok(MaybeBody(T::default()));
        }
        parse(parts, bytes, state).await.map(MaybeBody)
    }
}

/// The request's body, whole (413 past the body limit), with its head.
async fn read<S: Send + Sync>(
    req: Request,
    state: &S,
) -> Result<(axum::http::request::Parts, axum::body::Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    match axum::body::Bytes::from_request(Request::from_parts(parts.clone(), body), state).await {
        Ok(bytes) => Ok((parts, bytes)),
        Err(rejection) => {
            let status = rejection.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "body_too_large"
            } else {
                "invalid_body"
            };
            Err(ApiError::new(status, code, rejection.body_text()))
        }
    }
}

/// `bytes`, sent with `parts`, as a `T` (see [`Body`] for the rejections).
async fn parse<S: Send + Sync, T: DeserializeOwned>(
    parts: axum::http::request::Parts,
    bytes: axum::body::Bytes,
    state: &S,
) -> Result<T, ApiError> {
    if holds_nul(&bytes) {
        return Err(ApiError::invalid(
            "a string in the body holds a NUL character (U+0000), which is not stored",
        ));
    }
    // Every body is a JSON object: serde would read an array into a struct by position.
    let object = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    // What the route's documented schema bounds (`openapi::Routes` puts it there).
    let bounds = parts.extensions.get::<Bounds>().cloned();
    let checked = bytes.clone();
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    let parsed = axum::Json::<T>::from_request(req, state).await;
    // Past the content type and the syntax, a value past a bound is named before any other
    // problem of the body's shape: it is the clearer answer.
    if let Some(bounds) = bounds
        && !matches!(&parsed, Err(rejection) if rejection.status() != StatusCode::UNPROCESSABLE_ENTITY)
    {
        check_bounds(&bounds, &checked)?;
    }
    let not_an_object = || ApiError::invalid("the body must be a JSON object");
    match parsed {
        Ok(_) if !object => Err(not_an_object()),
        Ok(axum::Json(value)) => Ok(value),
        // Valid JSON that serde read by position, then stumbled on: still the wrong shape,
        // not malformed JSON.
        Err(_) if !object && serde_json::from_slice::<serde::de::IgnoredAny>(&checked).is_ok() => {
            Err(not_an_object())
        }
        Err(rejection) => Err(rejected(rejection)),
    }
}

/// Refuses (422, naming the field) a body with a string, array or map longer than the route's
/// documented schema allows.
fn check_bounds(bounds: &Bounds, body: &[u8]) -> Result<(), ApiError> {
    if !bounds.may_break(body.len()) {
        return Ok(());
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    bounds
        .check(&value)
        .map_err(|violation| ApiError::invalid(violation.to_string()))
}

/// Whether a JSON body has a string holding U+0000 (PostgreSQL stores no such text, SQLite
/// would: both refuse it alike). JSON writes it only as the escape `\u0000`; the rare body
/// with that sequence is parsed to tell an escaped NUL from an escaped backslash before `u0000`.
fn holds_nul(body: &[u8]) -> bool {
    const ESCAPE: &[u8] = b"\\u0000";
    if !body.windows(ESCAPE.len()).any(|w| w == ESCAPE) {
        return false;
    }
    fn walk(value: &Value) -> bool {
        match value {
            Value::String(text) => text.contains('\0'),
            Value::Array(items) => items.iter().any(walk),
            Value::Object(object) => object
                .iter()
                .any(|(key, value)| key.contains('\0') || walk(value)),
            _ => false,
        }
    }
    serde_json::from_slice::<Value>(body).is_ok_and(|value| walk(&value))
}

fn rejected(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::BAD_REQUEST => "invalid_json",
        _ => "invalid_body",
    };
    let status = if status.is_client_error() {
        status
    } else {
        StatusCode::BAD_REQUEST
    };
    ApiError::new(status, code, rejection.body_text())
}
