//! Encoding and rules shared by every backend, so they store and answer alike: timestamps,
//! canonical JSON, search text, vectors and their scoring, argument checks.

use std::cmp::Ordering;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kestrel_core::message::Part;
use serde_json::{Map, Number, Value};

use crate::error::{Result, StorageError};
use crate::types::{Metadata, NewThread, PageRequest, VectorMatch};

pub use crate::types::{now, truncate};

/// Microseconds since the Unix epoch.
pub fn to_micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// The time `micros` microseconds after the Unix epoch.
pub fn from_micros(micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StorageError::corrupt("timestamp", format!("{micros} µs is out of range")))
}

/// A fresh random id.
pub fn new_id() -> String {
    kestrel_core::id::new_id()
}

// ---------------------------------------------------------------------------------------------
// Canonical JSON

/// `value` with every integral float (within i64 range) written as an integer, so `1.0` and `1`
/// store and compare alike on every backend.
pub fn normalize(value: Value) -> Value {
    match value {
        Value::Number(n) => Value::Number(normalize_number(n)),
        Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
        Value::Object(map) => Value::Object(normalize_map(map)),
        other => other,
    }
}

/// [`normalize`] for every value of an object.
pub fn normalize_map(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter().map(|(k, v)| (k, normalize(v))).collect()
}

// The range check makes the float-to-int cast exact.
#[allow(clippy::cast_possible_truncation)]
fn normalize_number(n: Number) -> Number {
    match n.as_f64() {
        Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
            Number::from(f as i64)
        }
        _ => n,
    }
}

/// Compact JSON text with object keys sorted: equal values have equal text. Stored metadata and
/// filters are written this way, which lets SQLite compare nested values as text.
pub fn canonical_text(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// [`canonical_text`] of an object.
pub fn canonical_map_text(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_object(map, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_object(map, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_object(map: &Map<String, Value>, out: &mut String) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push('{');
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_canonical(&Value::String(key.clone()), out);
        out.push(':');
        if let Some(value) = map.get(key) {
            write_canonical(value, out);
        }
    }
    out.push('}');
}

/// Parses stored JSON object text.
pub fn parse_map(what: &'static str, text: &str) -> Result<Metadata> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(StorageError::corrupt(what, "not a JSON object")),
        Err(e) => Err(StorageError::corrupt(what, e)),
    }
}

/// A stored JSON value that must be an object.
pub fn value_to_map(what: &'static str, value: Value) -> Result<Metadata> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(StorageError::corrupt(what, "not a JSON object")),
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata filters

/// Checks a metadata filter: it must be a JSON object. Returns it normalized.
pub fn parse_filter(filter: Option<&Value>) -> Result<Option<Metadata>> {
    match filter {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(normalize_map(map.clone()))),
        Some(other) => Err(StorageError::InvalidFilter {
            reason: format!("expected a JSON object, got {}", json_kind(other)),
        }),
    }
}

/// Whether `metadata` has every key of `filter` with an equal value.
pub fn matches_filter(metadata: &Metadata, filter: &Metadata) -> bool {
    filter
        .iter()
        .all(|(key, want)| metadata.get(key) == Some(want))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

/// The searchable text of a message: its text parts, joined by newlines, lowercased.
pub fn search_text(parts: &[Part]) -> String {
    let mut out = String::new();
    for part in parts {
        if let Part::Text { text } = part {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    // PostgreSQL text cannot hold NUL; dropping it keeps every backend alike.
    out.replace('\0', "").to_lowercase()
}

/// The search needle: the query, lowercased.
pub fn search_needle(query: &str) -> String {
    query.to_lowercase()
}

/// Serialises message parts.
pub fn parts_text(parts: &[Part]) -> Result<String> {
    serde_json::to_string(parts).map_err(|e| StorageError::corrupt("message parts", e))
}

/// Parses stored message parts.
pub fn parse_parts(text: &str) -> Result<Vec<Part>> {
    serde_json::from_str(text).map_err(|e| StorageError::corrupt("message parts", e))
}

/// Serialises a queued message.
pub fn message_text(message: &kestrel_core::message::Message) -> Result<String> {
    serde_json::to_string(message).map_err(|e| StorageError::corrupt("queued message", e))
}

/// Parses a stored queued message.
pub fn parse_message(text: &str) -> Result<kestrel_core::message::Message> {
    serde_json::from_str(text).map_err(|e| StorageError::corrupt("queued message", e))
}

/// Checks a message to queue: ids present and the message not empty.
pub fn check_queued(message: &crate::types::NewQueuedMessage) -> Result<()> {
    check_id("id", &message.id)?;
    check_id("run_id", &message.run_id)?;
    check_id("agent_id", &message.agent_id)?;
    check_id("thread_id", &message.thread_id)
}

/// A queued id that is taken.
pub fn queued_exists(id: &str) -> StorageError {
    StorageError::invalid("id", format!("a queued message `{id}` exists already"))
}

/// Parses a stored role.
pub fn parse_role(text: &str) -> Result<kestrel_core::message::Role> {
    use kestrel_core::message::Role;
    match text {
        "system" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        _ => Err(StorageError::corrupt("message role", text)),
    }
}

/// The stored name of a role.
pub fn role_str(role: kestrel_core::message::Role) -> &'static str {
    use kestrel_core::message::Role;
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

// ---------------------------------------------------------------------------------------------
// Argument checks

/// Refuses a page of size 0, and a page whose offset does not fit the databases' signed
/// 64-bit `OFFSET` (checked here, before any cast).
pub fn check_page(page: PageRequest) -> Result<()> {
    if page.per_page == 0 {
        return Err(StorageError::invalid("per_page", "must be at least 1"));
    }
    if i64::try_from(page.offset()).is_err() {
        return Err(StorageError::invalid(
            "page",
            "is too far: page × per_page must fit a signed 64-bit offset",
        ));
    }
    Ok(())
}

/// The error of a run's compare-and-set that found version `actual` (`None`: no such run)
/// where `expected` was asked for.
pub fn run_conflict(run_id: String, expected: Option<i64>, actual: Option<i64>) -> StorageError {
    match (expected, actual) {
        (Some(_), None) => StorageError::RunNotFound { run_id },
        (expected, actual) => StorageError::Conflict {
            run_id,
            expected,
            actual,
        },
    }
}

/// A lease token as the stores keep it (a signed 64-bit column).
pub fn fence_token(token: u64) -> Result<i64> {
    i64::try_from(token).map_err(|_| {
        StorageError::invalid(
            "lease_token",
            format!("{token} is above the largest storable, {}", i64::MAX),
        )
    })
}

/// Refuses an empty id.
pub fn check_id(argument: &'static str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(StorageError::invalid(argument, "must not be empty"));
    }
    Ok(())
}

/// Checks a new thread and fills in its id and creation time.
pub fn prepare_thread(thread: NewThread) -> Result<(String, NewThread, DateTime<Utc>)> {
    check_id("resource_id", &thread.resource_id)?;
    let id = thread.id.clone().unwrap_or_else(new_id);
    check_id("thread_id", &id)?;
    let created = thread.created_at.map_or_else(now, truncate);
    let thread = NewThread {
        metadata: normalize_map(thread.metadata),
        ..thread
    };
    Ok((id, thread, created))
}

/// The refusal for a thread owned by another resource.
pub fn foreign_thread(thread_id: &str, owner: &str, requested: &str) -> StorageError {
    StorageError::ThreadOwnedByOtherResource {
        thread_id: thread_id.to_owned(),
        owner: owner.to_owned(),
        requested: requested.to_owned(),
    }
}

/// Checks that `owner` is the resource the caller named (if any).
pub fn check_owner(thread_id: &str, owner: &str, requested: Option<&str>) -> Result<()> {
    match requested {
        Some(requested) if requested != owner => Err(foreign_thread(thread_id, owner, requested)),
        _ => Ok(()),
    }
}

/// The metadata of a clone: the source's plus `clone: {sourceThreadId, clonedAt}`.
pub fn clone_metadata(source: &Metadata, source_id: &str, at: DateTime<Utc>) -> Metadata {
    let mut metadata = source.clone();
    let mut clone = Map::new();
    clone.insert("sourceThreadId".into(), Value::String(source_id.to_owned()));
    clone.insert(
        "clonedAt".into(),
        Value::String(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
    );
    metadata.insert("clone".into(), Value::Object(clone));
    metadata
}

/// Messages of a batch with repeated ids folded: each id keeps its first position and its last
/// content.
pub fn dedupe_batch(messages: Vec<crate::types::NewMessage>) -> Vec<crate::types::NewMessage> {
    let mut out: Vec<crate::types::NewMessage> = Vec::with_capacity(messages.len());
    let mut positions = std::collections::HashMap::new();
    for message in messages {
        match positions.get(&message.message.id) {
            Some(&i) => out[i] = message,
            None => {
                positions.insert(message.message.id.clone(), out.len());
                out.push(message);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Vectors

/// The little-endian bytes of a vector (how every backend stores it).
pub fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from its little-endian bytes.
pub fn decode_vector(bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StorageError::corrupt(
            "vector",
            "length is not a multiple of 4",
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Checks a vector's length against an index's dimension, and that it is finite.
pub fn check_vector(index: &str, dimension: usize, vector: &[f32]) -> Result<()> {
    if vector.len() != dimension {
        return Err(StorageError::DimensionMismatch {
            index: index.to_owned(),
            expected: dimension,
            got: vector.len(),
        });
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return Err(StorageError::invalid(
            "vector",
            "holds a NaN or infinite value",
        ));
    }
    Ok(())
}

/// Refuses a dimension of 0.
pub fn check_dimension(dimension: usize) -> Result<()> {
    if dimension == 0 {
        return Err(StorageError::invalid("dimension", "must be at least 1"));
    }
    Ok(())
}

/// The string value of a metadata key.
pub fn meta_str(metadata: &Metadata, key: &str) -> Option<String> {
    metadata.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Cosine similarity, accumulated in f64; 0 when either vector is zero.
#[allow(clippy::cast_possible_truncation)]
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}

/// Keeps the best `k` matches seen: highest score first, ties by id ascending.
#[derive(Debug)]
pub struct TopK {
    k: usize,
    items: Vec<VectorMatch>,
}

impl TopK {
    /// An empty selection of at most `k`.
    pub fn new(k: u32) -> Self {
        Self {
            k: k as usize,
            items: Vec::new(),
        }
    }

    /// Whether a match with this score and id would be kept (checked before decoding metadata).
    pub fn admits(&self, score: f32, id: &str) -> bool {
        if self.k == 0 {
            return false;
        }
        self.items.len() < self.k
            || self
                .items
                .last()
                .is_some_and(|worst| rank(score, id, worst.score, &worst.id) == Ordering::Less)
    }

    /// Offers a match.
    pub fn push(&mut self, candidate: VectorMatch) {
        if !self.admits(candidate.score, &candidate.id) {
            return;
        }
        let at = self
            .items
            .partition_point(|m| rank(m.score, &m.id, candidate.score, &candidate.id).is_lt());
        self.items.insert(at, candidate);
        self.items.truncate(self.k);
    }

    /// The kept matches, best first.
    pub fn into_vec(self) -> Vec<VectorMatch> {
        self.items
    }
}

fn rank(score_a: f32, id_a: &str, score_b: f32, id_b: &str) -> Ordering {
    score_b.total_cmp(&score_a).then_with(|| id_a.cmp(id_b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roles_read_back_as_stored_and_unknown_ones_are_corrupt() {
        use kestrel_core::message::Role;
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            assert!(matches!(parse_role(role_str(role)), Ok(read) if read == role));
            // The stored name is the role's serde name.
            assert_eq!(json!(role), json!(role_str(role)));
        }
        assert!(matches!(
            parse_role("robot"),
            Err(StorageError::Corrupt { .. })
        ));
    }

    #[test]
    fn canonical_text_sorts_keys_and_normalizes_numbers() {
        let value = normalize(json!({"b": [1.0, {"z": 2, "a": 1.5}], "a": "x\"y"}));
        assert_eq!(
            canonical_text(&value),
            r#"{"a":"x\"y","b":[1,{"a":1.5,"z":2}]}"#
        );
    }

    #[test]
    fn vectors_round_trip_and_score() {
        let v = vec![1.0f32, -2.5, 0.0];
        assert_eq!(decode_vector(&encode_vector(&v)).ok(), Some(v.clone()));
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&v, &[0.0, 0.0, 0.0]), 0.0);
    }

    #[test]
    fn top_k_orders_by_score_then_id() {
        let mut top = TopK::new(2);
        for (id, score) in [("c", 0.5), ("b", 0.9), ("a", 0.5), ("d", 0.9)] {
            top.push(VectorMatch {
                id: id.into(),
                score,
                metadata: Metadata::new(),
            });
        }
        let ids: Vec<_> = top.into_vec().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["b", "d"]);
    }
}
