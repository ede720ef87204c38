//! The AI SDK chat route: `POST /chat/{agentId}` speaking the UI message stream protocol.

use std::sync::Arc;

use axum::Router;

use crate::AppState;

/// The chat routes (outside `/api`, as Mastra's `chatRoute`).
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
