//! Extractors that do what many handlers would otherwise repeat, answering with the same
//! errors the handlers gave: a query string read into its type ([`Query`]), and a head
//! extractor taken after the body ([`BodyFirst`]), for the routes whose body was always
//! checked first.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// The query string as a `T`. Checks that the query deserializes into `T` (a known parameter
/// of the wrong type, one given twice, a required one missing); answers 400 `invalid_query`
/// with axum's description of what was wrong otherwise.
pub(crate) struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(query)| Query(query))
            .map_err(|e| ApiError::invalid_query(e.body_text()))
    }
}

/// `B`, an extractor of the body ([`crate::wire::Body`], [`crate::wire::MaybeBody`]), then
/// `P`, an extractor of the head (a [`Query`]): for a route that checks its body before its
/// head, so that a request wrong in both gets the body's error. Checks what `B` and then `P`
/// check; answers the first one's rejection.
pub(crate) struct BodyFirst<B, P>(pub B, pub P);

impl<S, B, P> FromRequest<S> for BodyFirst<B, P>
where
    S: Send + Sync,
    B: FromRequest<S, Rejection = ApiError> + Send,
    P: FromRequestParts<S, Rejection = ApiError>,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let body = B::from_request(Request::from_parts(parts.clone(), body), state).await?;
        let head = P::from_request_parts(&mut parts, state).await?;
        Ok(Self(body, head))
    }
}
