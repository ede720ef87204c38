//! Errors as clients see them: an HTTP status and `{"error": {"code", "message"}}`.
//!
//! Messages name what was wrong with the request. What went wrong inside (a provider's error
//! text, a database error) is logged, not sent: it may hold keys, prompts or internals.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kestrel_core::agent::{AgentError, RunControlError};
use kestrel_core::version::VersionError;
use kestrel_memory::kestrel_storage::StorageError;
use serde_json::json;

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`not_found`, `invalid_body`, ...).
    pub code: &'static str,
    /// What a person should read.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 422: the body is JSON, but not what the route takes (a missing or mistyped field, a
    /// value out of range). Malformed JSON is a 400.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
    }

    /// 400: a query parameter is wrong.
    pub fn invalid_query(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_query", message)
    }

    /// 404: no such thing.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500, with a generic message (the detail is logged).
    pub fn internal(detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(%detail, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle the request",
        )
    }
}

impl ApiError {
    /// A run's failure as `caller` may read it: a run id taken by another resource's run is
    /// refused without saying that such a run exists.
    pub(crate) fn of_run(error: AgentError, caller: &crate::auth::Caller) -> Self {
        if let AgentError::RunIdTaken { run_id, owner, .. } = &error
            && caller.resource.is_some()
            && owner != &caller.resource
        {
            return ApiError::new(
                StatusCode::CONFLICT,
                "run_id_taken",
                format!("run id {run_id:?} cannot be used: leave runId out for a fresh one"),
            );
        }
        error.into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

/// The storage error behind `error`, if one is in its chain of sources.
fn storage_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a kestrel_memory::kestrel_storage::StorageError> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(storage) = error.downcast_ref() {
            return Some(storage);
        }
        current = error.source();
    }
    None
}

/// A memory failure the caller caused: a thread that does not exist (any more), or one of
/// another resource (not revealed either): 404. Anything else is the server's.
fn memory_error(error: &(dyn std::error::Error + 'static)) -> ApiError {
    use kestrel_memory::kestrel_storage::StorageError;
    let mut current = Some(error);
    while let Some(cause) = current {
        match cause.downcast_ref::<kestrel_memory::Error>() {
            Some(
                kestrel_memory::Error::ForeignThread { thread_id, .. }
                | kestrel_memory::Error::ThreadGone { thread_id },
            ) => return ApiError::not_found(format!("thread {thread_id:?} not found")),
            Some(_) => break,
            None => current = cause.source(),
        }
    }
    match storage_cause(error) {
        Some(
            StorageError::ThreadNotFound { thread_id }
            | StorageError::ThreadOwnedByOtherResource { thread_id, .. },
        ) => ApiError::not_found(format!("thread {thread_id:?} not found")),
        Some(StorageError::InvalidArgument { .. }) => {
            ApiError::invalid(storage_cause(error).map_or_else(String::new, ToString::to_string))
        }
        _ => ApiError::internal(&error),
    }
}

impl From<AgentError> for ApiError {
    fn from(error: AgentError) -> Self {
        match &error {
            AgentError::Memory { source, .. } => memory_error(source),
            AgentError::Model { .. } => {
                tracing::warn!(%error, "a model call failed");
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "model_error",
                    format!("run {}: the model provider failed", error.run_id()),
                )
            }
            AgentError::ModelResolution { .. } | AgentError::Dynamic { .. } => {
                ApiError::internal(&error)
            }
            AgentError::Version { source, .. } => match source {
                kestrel_core::version::VersionError::UnknownVersion { .. } => ApiError::new(
                    StatusCode::NOT_FOUND,
                    "version_not_found",
                    error.to_string(),
                ),
                kestrel_core::version::VersionError::Store(_) => ApiError::internal(&error),
                _ => ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_version",
                    error.to_string(),
                ),
            },
            AgentError::StructuredOutput { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "structured_output",
                error.to_string(),
            ),
            AgentError::Aborted { .. } => {
                ApiError::new(StatusCode::CONFLICT, "aborted", error.to_string())
            }
            AgentError::ThreadBusy { .. } => {
                ApiError::new(StatusCode::CONFLICT, "thread_busy", error.to_string())
            }
            AgentError::InvalidRunState { .. } => {
                ApiError::new(StatusCode::CONFLICT, "invalid_run_state", error.to_string())
            }
            AgentError::RunIdTaken { .. } => {
                ApiError::new(StatusCode::CONFLICT, "run_id_taken", error.to_string())
            }
            AgentError::RunDrivenElsewhere { .. } => ApiError::new(
                StatusCode::CONFLICT,
                "run_driven_elsewhere",
                error.to_string(),
            ),
            AgentError::RunTakenOver { .. } => {
                ApiError::new(StatusCode::CONFLICT, "run_taken_over", error.to_string())
            }
            AgentError::Cluster { .. } => {
                tracing::warn!(%error, "the cluster failed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cluster_unavailable",
                    format!(
                        "run {}: another instance could not be reached",
                        error.run_id()
                    ),
                )
            }
            _ => ApiError::internal(&error),
        }
    }
}

impl From<RunControlError> for ApiError {
    fn from(error: RunControlError) -> Self {
        let error = match error {
            RunControlError::Run(inner) => return inner.into(),
            other => other,
        };
        let code = match &error {
            RunControlError::RunNotFound { .. } => return ApiError::not_found(error.to_string()),
            RunControlError::InvalidResumeData { .. } => {
                return ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_resume_data",
                    error.to_string(),
                );
            }
            RunControlError::NotSuspended { .. } => "not_suspended",
            RunControlError::CallNotWaiting { .. } => "call_not_waiting",
            RunControlError::WrongDecision { .. } => "wrong_decision",
            RunControlError::FingerprintMismatch { .. } => "fingerprint_mismatch",
            RunControlError::Conflict { .. } => "conflict",
            RunControlError::NotResumable { .. } => "not_resumable",
            RunControlError::Delegated { .. } => "delegated_run",
            RunControlError::InvalidState(_) => "invalid_run_state",
            RunControlError::Cluster { .. } => {
                tracing::warn!(%error, "the cluster failed");
                return ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cluster_unavailable",
                    error.to_string(),
                );
            }
            _ => return ApiError::internal(&error),
        };
        ApiError::new(StatusCode::CONFLICT, code, error.to_string())
    }
}

impl From<kestrel_core::agent::ThreadError> for ApiError {
    fn from(error: kestrel_core::agent::ThreadError) -> Self {
        match &error {
            kestrel_core::agent::ThreadError::NoMemory { .. } => {
                ApiError::new(StatusCode::CONFLICT, "no_memory", error.to_string())
            }
            kestrel_core::agent::ThreadError::NoQueue { .. } => {
                ApiError::new(StatusCode::CONFLICT, "no_message_queue", error.to_string())
            }
            kestrel_core::agent::ThreadError::Memory(source) => memory_error(source),
            kestrel_core::agent::ThreadError::Fork(fork) => {
                use kestrel_core::memory::ForkError as F;
                match fork {
                    // Another resource's thread is "not found", as on the memory routes: its
                    // existence is not revealed.
                    F::ThreadNotFound { thread_id }
                    | F::ThreadOfOtherResource { thread_id, .. } => {
                        ApiError::not_found(format!("thread {thread_id:?} not found"))
                    }
                    F::ThreadExists { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "thread_exists", error.to_string())
                    }
                    F::Unsupported { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "fork_unsupported", error.to_string())
                    }
                    F::Memory(source) => memory_error(source),
                    _ => ApiError::internal(&error),
                }
            }
            kestrel_core::agent::ThreadError::Queue(queue) => {
                use kestrel_core::store::QueueError as Q;
                match queue {
                    Q::ThreadOfOtherResource { thread_id, .. } => {
                        ApiError::not_found(format!("thread {thread_id:?} not found"))
                    }
                    Q::Full { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "queue_full", error.to_string())
                    }
                    _ => ApiError::internal(&error),
                }
            }
            kestrel_core::agent::ThreadError::Cluster(_) => {
                tracing::warn!(%error, "the cluster failed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cluster_unavailable",
                    "the instance running the thread could not be reached",
                )
            }
            _ => ApiError::internal(&error),
        }
    }
}

impl From<kestrel_core::workflow::WorkflowRunError> for ApiError {
    fn from(error: kestrel_core::workflow::WorkflowRunError) -> Self {
        use kestrel_core::workflow::WorkflowRunError as E;
        let (status, code) = match &error {
            E::InvalidInput { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"),
            E::InvalidResumeData { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid_resume_data")
            }
            E::UnknownRun { .. } => return ApiError::not_found(error.to_string()),
            E::AlreadyStarted { .. } => (StatusCode::CONFLICT, "already_started"),
            E::NotSuspended { .. } => (StatusCode::CONFLICT, "not_suspended"),
            E::NotSuspendedStep { .. } => (StatusCode::CONFLICT, "not_suspended_step"),
            E::NotSuspendedItem { .. } => (StatusCode::CONFLICT, "not_suspended_item"),
            // Mastra's WORKFLOW_RESUME_ALREADY_CLAIMED: another resumer won the run.
            E::AlreadyClaimed { .. } => (StatusCode::CONFLICT, "already_claimed"),
            E::Ended { .. } => (StatusCode::CONFLICT, "run_ended"),
            E::NotActive { .. } => (StatusCode::CONFLICT, "not_active"),
            E::TravelRefused { .. } => (StatusCode::CONFLICT, "travel_refused"),
            E::UnknownStep { .. } => return ApiError::not_found(error.to_string()),
            E::InProgress { .. } => (StatusCode::CONFLICT, "run_in_progress"),
            E::DrivenElsewhere { .. } => (StatusCode::CONFLICT, "run_driven_elsewhere"),
            E::Cluster { run_id, .. } => {
                tracing::warn!(%error, "the cluster failed");
                return ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cluster_unavailable",
                    format!("run {run_id}: the cluster could not be reached"),
                );
            }
            _ => return ApiError::internal(&error),
        };
        ApiError::new(status, code, error.to_string())
    }
}

/// A storage failure as the client sees it: what it did wrong, or a generic 500.
pub(crate) fn storage_error(error: StorageError) -> ApiError {
    match error {
        // Another resource's thread is not revealed.
        StorageError::ThreadNotFound { thread_id }
        | StorageError::ThreadOwnedByOtherResource { thread_id, .. } => {
            ApiError::not_found(format!("thread {thread_id:?} not found"))
        }
        StorageError::ThreadExists { .. } => {
            ApiError::new(StatusCode::CONFLICT, "thread_exists", error.to_string())
        }
        StorageError::InvalidFilter { .. } | StorageError::InvalidArgument { .. } => {
            ApiError::invalid(error.to_string())
        }
        other => ApiError::internal(&other),
    }
}

/// A version the instance cannot run: 422 naming what is wrong.
pub(crate) fn version_error(error: VersionError) -> ApiError {
    match error {
        e @ VersionError::NotEditable { .. } => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_editable",
            e.to_string(),
        ),
        e @ VersionError::UnknownVersion { .. } => ApiError::not_found(e.to_string()),
        VersionError::Store(e) => ApiError::internal(&e),
        e => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_version",
            e.to_string(),
        ),
    }
}
