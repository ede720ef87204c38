//! Helpers of the checks: fixed times, metadata literals, messages, pseudo-random vectors.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use kestrel_core::message::{Message, Part, Role};
use serde_json::Value;

use crate::error::StorageError;
use crate::storage::Storage;
use crate::types::{Metadata, NewMessage, NewThread, Selection, StoredMessage};

/// A JSON object literal as [`Metadata`].
pub fn meta(value: Value) -> Metadata {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A fixed time, `seconds` after 2025-01-01T00:00:00Z.
pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_735_689_600 + seconds, 0).unwrap()
}

pub(super) async fn thread(store: &Arc<dyn Storage>, id: &str, resource: &str) {
    store
        .create_thread(NewThread::new(resource).id(id))
        .await
        .unwrap();
}

pub(super) fn text(role: Role, id: &str, body: &str) -> NewMessage {
    NewMessage::from(Message {
        id: id.to_owned(),
        role,
        parts: vec![Part::Text { text: body.into() }],
    })
}

pub(super) fn seqs(messages: &[StoredMessage]) -> Vec<i64> {
    messages.iter().map(|m| m.seq).collect()
}

pub(super) fn ids(messages: &[StoredMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

pub(super) async fn all(store: &Arc<dyn Storage>, thread_id: &str) -> Vec<StoredMessage> {
    store
        .list_messages(thread_id, None, Selection::all())
        .await
        .unwrap()
        .messages
}

pub(super) fn is_foreign(result: Result<impl std::fmt::Debug, StorageError>, thread: &str) -> bool {
    matches!(
        result,
        Err(StorageError::ThreadOwnedByOtherResource { ref thread_id, ref owner, ref requested })
            if thread_id == thread && owner == "alice" && requested == "mallory"
    )
}

/// A deterministic pseudo-random vector (a linear congruential generator seeded by `seed`).
pub fn pseudo_vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..dimension)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
