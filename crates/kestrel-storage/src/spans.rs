//! Spans (traces) as every backend keeps them: what a save checks and changes (the same on
//! each, memory included), and, for the SQL backends, a span's columns and the parts of the
//! statements they share.
//!
//! **What is stored.** Each span exactly as saved (read back equal), except that NUL
//! characters are dropped from its plain text fields (ids, name, entity, scope: PostgreSQL
//! text cannot hold them; JSON fields keep them, escaped). A span given twice in one batch is
//! kept once, the last. Times above [`MAX_SPAN_TIME_NS`] are refused (the whole batch, before
//! anything is written).
//!
//! **Roots in SQL.** A trace's root is its earliest span whose parent is not stored
//! ([`local_root`](kestrel_core::trace::local_root)). The SQL backends keep, per span, whether
//! its parent is stored (`top_level`): set when the span is saved, cleared on its children when
//! its parent is saved after them. Spans are only ever deleted by whole traces, so a parent
//! never goes while its children stay. A listing then looks at the top-level spans only (about
//! one per trace), with the filters, counts and paging in SQL.

use std::collections::BTreeMap;

use kestrel_core::trace::{SpanRecord, SpanStoreError};

use crate::error::{Result, StorageError};

/// The latest start or end a stored span may have, in Unix nanoseconds: 2^63 - 1
/// (2262-04-11T23:47:16.854775807Z), the largest signed 64-bit integer, which is what the
/// databases store. A save with a later time is refused, on every backend.
pub const MAX_SPAN_TIME_NS: u64 = i64::MAX as u64;

/// A storage error as the span store's.
pub(crate) fn span_err(error: StorageError) -> SpanStoreError {
    SpanStoreError::Backend(error.to_string())
}

/// A save's batch as every backend stores it: its times checked, NUL dropped from the plain
/// text fields, a span given twice kept once (the last), in (trace id, span id) order.
pub(crate) fn prepare(spans: &[SpanRecord]) -> Result<Vec<SpanRecord>> {
    let mut batch = BTreeMap::new();
    for span in spans {
        for (argument, at) in [("started_at", span.started_at), ("ended_at", span.ended_at)] {
            if at > MAX_SPAN_TIME_NS {
                return Err(StorageError::invalid(
                    argument,
                    format!(
                        "span `{}` of trace `{}`: {at} is above the largest storable time, \
                         {MAX_SPAN_TIME_NS} ns",
                        span.span_id, span.trace_id
                    ),
                ));
            }
        }
        let mut span = span.clone();
        without_nul(&mut span);
        batch.insert((span.trace_id.clone(), span.span_id.clone()), span);
    }
    Ok(batch.into_values().collect())
}

/// Drops NUL characters from the plain text fields of `span`.
fn without_nul(span: &mut SpanRecord) {
    fn clean(text: &mut String) {
        if text.contains('\0') {
            text.retain(|c| c != '\0');
        }
    }
    for text in [&mut span.trace_id, &mut span.span_id, &mut span.name] {
        clean(text);
    }
    for text in [
        &mut span.parent_span_id,
        &mut span.entity_type,
        &mut span.entity_id,
        &mut span.entity_name,
        &mut span.run_id,
        &mut span.thread_id,
        &mut span.resource_id,
        &mut span.user_id,
    ]
    .into_iter()
    .flatten()
    {
        clean(text);
    }
}

/// A time as the databases keep it (checked by [`prepare`] already).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn to_db_time(at: u64) -> i64 {
    i64::try_from(at).unwrap_or(i64::MAX)
}

/// The columns of a span, in the order [`EncodedSpan`] and [`StoredSpan`] have them.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const COLUMNS: [&str; 20] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "span_type",
    "started_at",
    "ended_at",
    "attributes",
    "input",
    "output",
    "error",
    "entity_type",
    "entity_id",
    "entity_name",
    "run_id",
    "thread_id",
    "resource_id",
    "user_id",
    "metadata",
    "tags",
];

/// Whether column `name` holds JSON.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn is_json(name: &str) -> bool {
    matches!(
        name,
        "attributes" | "input" | "output" | "error" | "metadata" | "tags"
    )
}

/// The select list of a span's columns, each `prefix.column`, JSON columns through `json`
/// (`{}` standing for the column; `{}::text` on PostgreSQL).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn select_list(prefix: &str, json: &str) -> String {
    COLUMNS
        .iter()
        .map(|column| {
            let qualified = format!("{prefix}.{column}");
            if is_json(column) {
                format!("{} AS {column}", json.replace("{}", &qualified))
            } else {
                qualified
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A span encoded for its row (JSON fields as JSON text).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct EncodedSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub span_type: &'static str,
    pub started_at: i64,
    pub ended_at: i64,
    pub attributes: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
    pub entity_name: Option<String>,
    pub run_id: Option<String>,
    pub thread_id: Option<String>,
    pub resource_id: Option<String>,
    pub user_id: Option<String>,
    pub metadata: String,
    pub tags: String,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn json_text(what: &'static str, value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| StorageError::invalid("spans", format!("{what} is not JSON: {e}")))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl EncodedSpan {
    /// Encodes a save's batch ([`prepare`]d).
    pub fn batch(spans: &[SpanRecord]) -> Result<Vec<Self>> {
        prepare(spans)?.into_iter().map(Self::encode).collect()
    }

    fn encode(span: SpanRecord) -> Result<Self> {
        Ok(Self {
            span_type: span.span_type.as_str(),
            started_at: to_db_time(span.started_at),
            ended_at: to_db_time(span.ended_at),
            attributes: json_text("attributes", &span.attributes)?,
            input: span
                .input
                .as_ref()
                .map(|v| json_text("input", v))
                .transpose()?,
            output: span
                .output
                .as_ref()
                .map(|v| json_text("output", v))
                .transpose()?,
            error: span
                .error
                .as_ref()
                .map(|v| json_text("error", v))
                .transpose()?,
            metadata: json_text("metadata", &span.metadata)?,
            tags: json_text("tags", &span.tags)?,
            trace_id: span.trace_id,
            span_id: span.span_id,
            parent_span_id: span.parent_span_id,
            name: span.name,
            entity_type: span.entity_type,
            entity_id: span.entity_id,
            entity_name: span.entity_name,
            run_id: span.run_id,
            thread_id: span.thread_id,
            resource_id: span.resource_id,
            user_id: span.user_id,
        })
    }
}

/// A span's row as read, before its JSON is decoded.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(feature = "postgres", derive(sqlx::FromRow))]
pub(crate) struct StoredSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub span_type: String,
    pub started_at: i64,
    pub ended_at: i64,
    pub attributes: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
    pub entity_name: Option<String>,
    pub run_id: Option<String>,
    pub thread_id: Option<String>,
    pub resource_id: Option<String>,
    pub user_id: Option<String>,
    pub metadata: String,
    pub tags: String,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn parse<T: serde::de::DeserializeOwned>(what: &'static str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StorageError::corrupt(what, e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn from_db_time(what: &'static str, at: i64) -> Result<u64> {
    u64::try_from(at).map_err(|e| StorageError::corrupt(what, e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl StoredSpan {
    /// The span it stores.
    pub fn into_record(self) -> Result<SpanRecord> {
        // `SpanRecord` is built by its own decoding (it cannot be named field by field outside
        // its crate), from the fields every span has; the others are set after.
        let base = serde_json::json!({
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "spanType": self.span_type,
            "startedAt": from_db_time("span start", self.started_at)?,
            "endedAt": from_db_time("span end", self.ended_at)?,
        });
        let mut record: SpanRecord =
            serde_json::from_value(base).map_err(|e| StorageError::corrupt("span", e))?;
        record.parent_span_id = self.parent_span_id;
        record.attributes = parse("span attributes", &self.attributes)?;
        record.input = self.input.map(|t| parse("span input", &t)).transpose()?;
        record.output = self.output.map(|t| parse("span output", &t)).transpose()?;
        record.error = self.error.map(|t| parse("span error", &t)).transpose()?;
        record.entity_type = self.entity_type;
        record.entity_id = self.entity_id;
        record.entity_name = self.entity_name;
        record.run_id = self.run_id;
        record.thread_id = self.thread_id;
        record.resource_id = self.resource_id;
        record.user_id = self.user_id;
        record.metadata = parse("span metadata", &self.metadata)?;
        record.tags = parse("span tags", &self.tags)?;
        Ok(record)
    }
}

/// A statement being assembled, in either SQL dialect.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) trait SqlBuilder {
    /// The dialect's `true`, as `top_level` is compared with.
    const TRUE: &'static str;
    /// Appends SQL text.
    fn sql(&mut self, sql: &str);
    /// Appends a placeholder bound to `value`.
    fn text(&mut self, value: String);
    /// Appends a placeholder bound to `value`.
    fn int(&mut self, value: i64);
}

/// Appends the `FROM` and `WHERE` of a trace listing to `q`: the roots (`s`: each trace's
/// earliest top-level span) that match `query`'s filters and status.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn push_roots<B: SqlBuilder>(q: &mut B, query: &kestrel_core::trace::TraceQuery) {
    use kestrel_core::trace::TraceStatus;

    let t = B::TRUE;
    q.sql(&format!(
        " FROM spans s WHERE s.top_level = {t} AND NOT EXISTS (SELECT 1 FROM spans o \
         WHERE o.trace_id = s.trace_id AND o.top_level = {t} \
         AND (o.started_at, o.span_id) < (s.started_at, s.span_id))"
    ));
    if let Some(span_type) = query.span_type {
        q.sql(" AND s.span_type = ");
        q.text(span_type.as_str().to_owned());
    }
    for (column, value) in [
        ("entity_type", &query.entity_type),
        ("entity_id", &query.entity_id),
        ("run_id", &query.run_id),
        ("thread_id", &query.thread_id),
        ("resource_id", &query.resource_id),
        ("user_id", &query.user_id),
        ("name", &query.name),
        ("entity_name", &query.entity_name),
    ] {
        if let Some(value) = value {
            q.sql(&format!(" AND s.{column} = "));
            q.text(value.clone());
        }
    }
    if let Some(after) = query.started_after {
        match i64::try_from(after) {
            Ok(after) => {
                q.sql(" AND s.started_at >= ");
                q.int(after);
            }
            // Later than any stored time.
            Err(_) => q.sql(" AND 1 = 0"),
        }
    }
    // Before a time later than any stored one: no condition.
    if let Some(before) = query.started_before.and_then(|t| i64::try_from(t).ok()) {
        q.sql(" AND s.started_at < ");
        q.int(before);
    }
    let failed = "EXISTS (SELECT 1 FROM spans e WHERE e.trace_id = s.trace_id \
                  AND e.error IS NOT NULL)";
    match query.status {
        Some(TraceStatus::Error) => q.sql(&format!(" AND {failed}")),
        Some(TraceStatus::Success) => q.sql(&format!(" AND NOT {failed}")),
        None => {}
    }
}

/// The select list of a listed root: its columns (as [`select_list`]), then its trace's span
/// count and whether a span below it failed.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn root_select_list(json: &str) -> String {
    format!(
        "{}, (SELECT COUNT(*) FROM spans c WHERE c.trace_id = s.trace_id) AS span_count, \
         EXISTS (SELECT 1 FROM spans e WHERE e.trace_id = s.trace_id AND e.error IS NOT NULL \
         AND e.span_id <> s.span_id) AS child_error",
        select_list("s", json)
    )
}

/// The order of a trace listing: newest root first, then by trace id, descending.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const LISTING_ORDER: &str = " ORDER BY s.started_at DESC, s.trace_id DESC";

/// What [`SpanStore::prune`](kestrel_core::trace::SpanStore::prune) deletes by age.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum AgeCut {
    /// Nothing.
    Nothing,
    /// The traces with a span started before this time.
    Before(i64),
    /// Every trace (the cut is later than any storable time).
    Everything,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl AgeCut {
    /// The cut of `max_age_ns` at `now`: the traces whose earliest span started more than
    /// `max_age_ns` before `now` (a trace has a span started before `now - max_age_ns` exactly
    /// when its earliest did).
    pub fn new(max_age_ns: Option<u64>, now: u64) -> Self {
        match max_age_ns.and_then(|max_age| now.checked_sub(max_age)) {
            None => Self::Nothing,
            Some(cutoff) => i64::try_from(cutoff).map_or(Self::Everything, Self::Before),
        }
    }
}

/// How many traces a prune keeps, as a SQL `OFFSET` (`None`: all of them).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn kept_traces(max_traces: Option<usize>) -> Option<i64> {
    max_traces.and_then(|max| i64::try_from(max).ok())
}

/// The sizes a listing's page asks for, as SQL's `LIMIT` and `OFFSET`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn limit_offset(query: &kestrel_core::trace::TraceQuery) -> (i64, i64) {
    let size = i64::from(query.page_size());
    (size, i64::from(query.page) * size)
}
