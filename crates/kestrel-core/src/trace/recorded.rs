//! A span as a tracer records it ([`RecordedSpan`]): the [`SpanRecord`] of the wire in a form
//! that is cheap to build on a run and cheap to keep. Its ids are integers (formatted as hex
//! only when a [`SpanRecord`] is made), its attribute keys are mostly static, and what several
//! spans of a run have in common (the entity, the run's scope, the caller's data) is shared.
//!
//! Tracers hand these to their span store ([`SpanStore::keep`](super::SpanStore::keep)); the
//! in-memory store keeps them as they are and makes [`SpanRecord`]s only when they are read.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::span::{SpanError, SpanRecord, SpanType};

/// What a span is about: `agent`, `weather`, `Weather Agent`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanEntity {
    pub(crate) kind: Box<str>,
    pub(crate) id: Box<str>,
    pub(crate) name: Option<Box<str>>,
}

/// The run, thread and resource a span belongs to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanScope {
    pub(crate) run_id: Box<str>,
    pub(crate) thread_id: Option<Box<str>>,
    pub(crate) resource_id: Option<Box<str>>,
}

/// What the caller said: the user, metadata (already sanitized) and tags.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanCaller {
    pub(crate) user_id: Option<Box<str>>,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) tags: Vec<String>,
}

/// A recorded value: a JSON value, or the JSON text of a value whose shape the framework knows
/// (a model's usage, its output), written straight from its type: a small object as a tree of
/// nodes takes over 600 bytes, its text a tenth of that, and no tree is built.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SpanValue {
    /// A value.
    Value(Value),
    /// JSON text (read back as its value).
    Json(Box<str>),
}

impl SpanValue {
    /// The value (JSON text that does not parse, which serde never writes, as a string).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Self::Value(value) => value.clone(),
            Self::Json(json) => {
                serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_string()))
            }
        }
    }

    fn size(&self) -> usize {
        match self {
            Self::Value(value) => value_size(value),
            Self::Json(json) => json.len(),
        }
    }
}

/// A finished span as its tracer recorded it. [`RecordedSpan::to_record`] gives the
/// [`SpanRecord`] it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedSpan {
    pub(crate) trace_id: u128,
    pub(crate) span_id: NonZeroU64,
    pub(crate) parent_span_id: Option<NonZeroU64>,
    pub(crate) span_type: SpanType,
    pub(crate) started_at: u64,
    pub(crate) ended_at: u64,
    pub(crate) name: String,
    /// In the order set, each key once.
    pub(crate) attributes: Vec<(Cow<'static, str>, SpanValue)>,
    pub(crate) input: Option<SpanValue>,
    pub(crate) output: Option<SpanValue>,
    pub(crate) error: Option<Box<SpanError>>,
    pub(crate) entity: Option<Arc<SpanEntity>>,
    pub(crate) scope: Option<Arc<SpanScope>>,
    pub(crate) caller: Option<Arc<SpanCaller>>,
}

impl RecordedSpan {
    /// The trace's id, as a number (its 32 hex digits are [`hex_trace_id`]'s).
    pub fn trace_id(&self) -> u128 {
        self.trace_id
    }

    /// The span's id, as a number (its 16 hex digits are [`hex_span_id`]'s).
    pub fn span_id(&self) -> u64 {
        self.span_id.get()
    }

    /// The parent span's id, when the span has one.
    pub fn parent_span_id(&self) -> Option<u64> {
        self.parent_span_id.map(NonZeroU64::get)
    }

    /// When it started (Unix nanoseconds).
    pub fn started_at(&self) -> u64 {
        self.started_at
    }

    /// Whether it failed.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// Its input, when it has one.
    pub fn input(&self) -> Option<Value> {
        self.input.as_ref().map(SpanValue::to_value)
    }

    /// Its output, when it has one.
    pub fn output(&self) -> Option<Value> {
        self.output.as_ref().map(SpanValue::to_value)
    }

    /// The record of the wire and the stores.
    pub fn to_record(&self) -> SpanRecord {
        let entity = self.entity.as_deref();
        let scope = self.scope.as_deref();
        let caller = self.caller.as_deref();
        let text = |s: Option<&Box<str>>| s.map(|s| String::from(&**s));
        SpanRecord {
            trace_id: hex_trace_id(self.trace_id),
            span_id: hex_span_id(self.span_id.get()),
            parent_span_id: self.parent_span_id.map(|p| hex_span_id(p.get())),
            name: self.name.clone(),
            span_type: self.span_type,
            started_at: self.started_at,
            ended_at: self.ended_at,
            attributes: self
                .attributes
                .iter()
                .map(|(k, v)| (k.clone().into_owned(), v.to_value()))
                .collect(),
            input: self.input(),
            output: self.output(),
            error: self.error.as_deref().cloned(),
            entity_type: entity.map(|e| e.kind.to_string()),
            entity_id: entity.map(|e| e.id.to_string()),
            entity_name: text(entity.and_then(|e| e.name.as_ref())),
            run_id: scope.map(|s| s.run_id.to_string()),
            thread_id: text(scope.and_then(|s| s.thread_id.as_ref())),
            resource_id: text(scope.and_then(|s| s.resource_id.as_ref())),
            user_id: text(caller.and_then(|c| c.user_id.as_ref())),
            metadata: caller.map(|c| c.metadata.clone()).unwrap_or_default(),
            tags: caller.map(|c| c.tags.clone()).unwrap_or_default(),
        }
    }

    /// What it takes in memory, about: the record, its texts and its values.
    pub fn approx_size(&self) -> usize {
        let mut size = std::mem::size_of::<Self>() + self.name.len();
        for (key, value) in &self.attributes {
            size += std::mem::size_of::<(Cow<'static, str>, SpanValue)>() + owned_len(key);
            size += value.size();
        }
        for value in [&self.input, &self.output].into_iter().flatten() {
            size += value.size();
        }
        if let Some(error) = &self.error {
            size += std::mem::size_of::<SpanError>()
                + error.message.len()
                + error.kind.as_ref().map_or(0, String::len);
        }
        // Shared parts count whole in each span: an upper bound, and the entity is small.
        if let Some(entity) = &self.entity {
            size +=
                entity.kind.len() + entity.id.len() + entity.name.as_ref().map_or(0, |n| n.len());
        }
        size
    }

    /// The span's `key` attribute, when it is set.
    pub fn attribute(&self, key: &str) -> Option<Value> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.to_value())
    }
}

#[allow(clippy::ptr_arg)] // Whether the key is owned is the question.
fn owned_len(key: &Cow<'static, str>) -> usize {
    match key {
        Cow::Borrowed(_) => 0,
        Cow::Owned(key) => key.len(),
    }
}

/// What a JSON value takes on the heap, about (its texts and nodes).
fn value_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(text) => text.len(),
        Value::Array(items) => items
            .iter()
            .map(|item| std::mem::size_of::<Value>() + value_size(item))
            .sum(),
        Value::Object(fields) => fields
            .iter()
            .map(|(key, field)| {
                // A B-tree's entry: the key's String and the value, and some node room.
                key.len() + std::mem::size_of::<(String, Value)>() + 8 + value_size(field)
            })
            .sum(),
    }
}

/// A trace id's 32 lowercase hex digits.
pub fn hex_trace_id(id: u128) -> String {
    format!("{id:032x}")
}

/// A span id's 16 lowercase hex digits.
pub fn hex_span_id(id: u64) -> String {
    format!("{id:016x}")
}

/// A trace id of 32 lowercase hex digits (not all zero) as a number.
pub fn parse_trace_id(id: &str) -> Option<u128> {
    if !super::TraceContext::is_trace_id(id) {
        return None;
    }
    u128::from_str_radix(id, 16).ok()
}

/// A span id of 16 lowercase hex digits (not all zero) as a number.
pub fn parse_span_id(id: &str) -> Option<NonZeroU64> {
    if !super::TraceContext::is_span_id(id) {
        return None;
    }
    u64::from_str_radix(id, 16).ok().and_then(NonZeroU64::new)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn ids_go_to_hex_and_back() {
        let trace = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128;
        assert_eq!(hex_trace_id(trace), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parse_trace_id(&hex_trace_id(trace)), Some(trace));
        assert_eq!(hex_trace_id(1), "00000000000000000000000000000001");
        assert_eq!(hex_span_id(0x00f0_67aa_0ba9_02b7), "00f067aa0ba902b7");
        assert_eq!(
            parse_span_id("00f067aa0ba902b7").map(NonZeroU64::get),
            Some(0x00f0_67aa_0ba9_02b7)
        );
        for bad in [
            "",
            "0000000000000000",
            "00F067AA0BA902B7",
            "xyz",
            "00f067aa0ba902b",
        ] {
            assert_eq!(parse_span_id(bad), None, "{bad}");
        }
        assert_eq!(parse_trace_id("00000000000000000000000000000000"), None);
    }
}
