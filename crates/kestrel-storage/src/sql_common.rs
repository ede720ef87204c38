//! Helpers shared by the SQL backends: error mapping and URL redaction.

use chrono::{DateTime, Utc};
use kestrel_core::message::{Part, Role};

use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{MessageStatus, Metadata, NewMessage, StoredMessage};

/// A message to append, encoded for a SQL row before the write transaction starts.
#[derive(Clone)]
pub(crate) struct EncodedMessage {
    pub id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    pub parts_text: String,
    pub status: MessageStatus,
    pub metadata: Metadata,
    pub metadata_text: String,
    pub search_text: String,
    pub created_at: Option<DateTime<Utc>>,
}

impl EncodedMessage {
    /// Encodes a batch (repeated ids folded, see [`codec::dedupe_batch`]).
    pub fn batch(messages: Vec<NewMessage>) -> Result<Vec<Self>> {
        codec::dedupe_batch(messages)
            .into_iter()
            .map(Self::encode)
            .collect()
    }

    fn encode(message: NewMessage) -> Result<Self> {
        let metadata = codec::normalize_map(message.metadata);
        Ok(Self {
            parts_text: codec::parts_text(&message.message.parts)?,
            search_text: codec::search_text(&message.message.parts),
            metadata_text: codec::canonical_map_text(&metadata),
            id: message.message.id,
            role: message.message.role,
            parts: message.message.parts,
            status: message.status,
            metadata,
            created_at: message.created_at.map(codec::truncate),
        })
    }

    /// The stored form, once its seq and creation time are known.
    pub fn into_stored(
        self,
        thread_id: &str,
        resource_id: &str,
        seq: i64,
        created_at: DateTime<Utc>,
    ) -> StoredMessage {
        StoredMessage {
            id: self.id,
            thread_id: thread_id.to_owned(),
            resource_id: resource_id.to_owned(),
            role: self.role,
            parts: self.parts,
            created_at,
            seq,
            status: self.status,
            metadata: self.metadata,
        }
    }
}

impl EncodedMessage {
    /// [`EncodedMessage::into_stored`] for a message still borrowed.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub fn to_stored(
        &self,
        thread_id: &str,
        resource_id: &str,
        seq: i64,
        created_at: DateTime<Utc>,
    ) -> StoredMessage {
        self.clone()
            .into_stored(thread_id, resource_id, seq, created_at)
    }
}

/// Where a message id of an append batch is already stored.
pub(crate) struct ExistingMessage {
    pub thread_id: String,
    pub seq: i64,
    pub created_at: DateTime<Utc>,
}

/// Refuses a batch holding an id stored in another thread.
pub(crate) fn check_homes(
    thread_id: &str,
    existing: &std::collections::HashMap<String, ExistingMessage>,
) -> Result<()> {
    match existing.iter().find(|(_, e)| e.thread_id != thread_id) {
        Some((id, e)) => Err(StorageError::MessageInOtherThread {
            message_id: id.clone(),
            stored_in: e.thread_id.clone(),
            requested: thread_id.to_owned(),
        }),
        None => Ok(()),
    }
}

/// Maps a driver error of `operation` on `backend` to [`StorageError::Backend`].
pub(crate) fn db_err<E: std::error::Error + Send + Sync + 'static>(
    backend: &'static str,
    operation: &'static str,
) -> impl FnOnce(E) -> StorageError {
    move |e| StorageError::Backend {
        backend,
        operation,
        source: Box::new(e),
    }
}

/// The error for a database that could not be opened or migrated.
pub(crate) fn open_err<E: std::error::Error + Send + Sync + 'static>(
    target: &str,
    reason: &str,
    source: impl Into<Option<E>>,
) -> StorageError {
    let source = source.into();
    let reason = match &source {
        Some(e) => format!("{reason}: {e}"),
        None => reason.to_owned(),
    };
    StorageError::Open {
        target: target.to_owned(),
        reason,
        source: source.map(|e| Box::new(e) as crate::error::BoxError),
    }
}

/// The error for a failed migration on open.
pub(crate) fn migrate_err<E: std::error::Error + Send + Sync + 'static>(
    target: &str,
    error: E,
) -> StorageError {
    StorageError::Open {
        target: target.to_owned(),
        reason: format!("migrating the schema failed: {error}"),
        source: Some(Box::new(error)),
    }
}

/// `url` with its password (in the authority or a `password=` parameter) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let redacted = redact_authority(url);
    redact_password_param(&redacted)
}

fn redact_authority(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else {
        return url.to_owned();
    };
    format!(
        "{}{}:***{}",
        &url[..scheme_end + 3],
        &userinfo[..colon],
        &rest[at..]
    )
}

fn redact_password_param(url: &str) -> String {
    let Some(query_start) = url.find('?') else {
        return url.to_owned();
    };
    let (base, query) = url.split_at(query_start + 1);
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{base}{}", params.join("&"))
}

/// A workflow run's record from its columns (shared by the SQL backends): the status name and
/// the snapshot's JSON text decoded, a bad one reported as corrupt.
#[allow(clippy::too_many_arguments)]
pub(crate) fn workflow_run_record(
    workflow_id: String,
    run_id: String,
    resource_id: Option<String>,
    status: &str,
    snapshot: String,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
) -> crate::error::Result<crate::types::WorkflowRunRecord> {
    use crate::error::StorageError;
    let status = crate::types::WorkflowStatus::parse(status)
        .ok_or_else(|| StorageError::corrupt("workflow run status", status))?;
    Ok(crate::types::WorkflowRunRecord {
        workflow_id,
        run_id,
        resource_id,
        status,
        snapshot: serde_json::value::RawValue::from_string(snapshot)
            .map_err(|e| StorageError::corrupt("workflow run snapshot", e))?,
        created_at,
        updated_at,
        lease_token: None,
    })
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://kestrel:s3cr:et@db.example:5432/app?sslmode=require"),
            "postgres://kestrel:***@db.example:5432/app?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://db/app?user=k&password=hunter2"),
            "postgres://db/app?user=k&password=***"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1/test"),
            "postgres://postgres@127.0.0.1/test"
        );
    }
}
