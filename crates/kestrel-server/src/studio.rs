//! The Studio: a web UI served at `/`, its files embedded in the binary.

use axum::Router;

/// The Studio's routes.
pub(crate) fn routes() -> Router {
    Router::new()
}
