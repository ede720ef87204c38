//! Extractors that do what many handlers would otherwise repeat, answering with the same
//! errors the handlers gave: a query string read into its type ([`Query`]), a head extractor
//! taken after the body ([`BodyFirst`]), for the routes whose body was always checked first,
//! and the agent a route's path names ([`AgentAccess`], and [`AgentBody`] with the body).

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use kestrel_core::agent::Agent;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::wire::Body;
use crate::{ApiError, AppState};

/// The query string as a `T`. Checks that the query string deserializes into `T` (no
/// parameter of the wrong type or given twice, none that `T` requires missing); answers 400
/// `invalid_query` with axum's description of the problem when it does not.
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

/// The `{agent_id}` of a route's path, read by name: the route may have more parameters.
#[derive(Deserialize)]
struct AgentPath {
    agent_id: String,
}

/// The route's `{agent_id}`. A path axum cannot read (a parameter that is not UTF-8) is
/// answered as axum's `Path` answers it, as the handlers' own `Path` did.
async fn agent_id(parts: &mut Parts, state: &Arc<AppState>) -> Result<String, Response> {
    Path::<AgentPath>::from_request_parts(parts, state)
        .await
        .map(|Path(path)| path.agent_id)
        .map_err(IntoResponse::into_response)
}

/// The agent a route's `{agent_id}` names, and that id. Checks that the agent exists (in code
/// or stored: [`crate::lookup::agent`]); answers 404 `not_found` naming the known agents when
/// it does not, and a path axum cannot read (a parameter that is not UTF-8) with axum's own
/// 400. The route's other parameters stay for `Path` to read.
pub(crate) struct AgentAccess {
    pub agent: Agent,
    pub id: String,
}

impl FromRequestParts<Arc<AppState>> for AgentAccess {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let id = agent_id(parts, state).await?;
        let agent = crate::lookup::agent(state, &id)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self { agent, id })
    }
}

/// [`AgentAccess`] with a [`Body`]: the path read, then the body, then the agent looked up,
/// the order the handlers had, so that a request for an unknown agent with a bad body gets
/// the body's error. Checks and answers what [`AgentAccess`] and [`Body`] do.
pub(crate) struct AgentBody<T> {
    pub agent: Agent,
    pub id: String,
    pub body: T,
}

impl<T> FromRequest<Arc<AppState>> for AgentBody<T>
where
    T: DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(
        request: Request,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let id = agent_id(&mut parts, state).await?;
        let Body(body) = Body::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        let agent = crate::lookup::agent(state, &id)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self { agent, id, body })
    }
}
