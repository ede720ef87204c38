//! The `/api/memory` routes: threads, their messages, working memory and observations.

use std::sync::Arc;

use axum::Router;

use crate::AppState;

/// The memory routes, under `/api`.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
