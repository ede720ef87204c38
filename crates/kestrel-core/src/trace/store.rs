//! Where spans are kept to be read back: the [`SpanStore`] port (save, keep, list traces, read
//! one, delete, prune) and the queries and summaries it answers with. Its in-memory backend is
//! [`InMemorySpanStore`](super::InMemorySpanStore). A tracer hands its spans to one.

use async_trait::async_trait;

use super::recorded::RecordedSpan;
use super::span::{SpanRecord, SpanType};

/// Why a span store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpanStoreError {
    /// The backend failed.
    #[error("the span store failed: {0}")]
    Backend(String),
}

/// A trace's status, from its spans: `error` when one failed, else `success`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceStatus {
    /// No span failed.
    Success,
    /// A span failed.
    Error,
}

/// Which traces [`SpanStore::list_traces`] gives: those whose root span matches every filter
/// set, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceQuery {
    /// Zero-based page.
    pub page: u32,
    /// Traces per page (0: [`DEFAULT_TRACES_PAGE`]; at most [`MAX_TRACES_PAGE`]).
    pub per_page: u32,
    /// The root span's type.
    pub span_type: Option<SpanType>,
    /// `agent`, `workflow`...
    pub entity_type: Option<String>,
    /// The agent's or workflow's id.
    pub entity_id: Option<String>,
    /// The run.
    pub run_id: Option<String>,
    /// The thread.
    pub thread_id: Option<String>,
    /// The resource.
    pub resource_id: Option<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The root span's name.
    pub name: Option<String>,
    /// The agent's or workflow's name.
    pub entity_name: Option<String>,
    /// Started at or after (Unix nanoseconds).
    pub started_after: Option<u64>,
    /// Started before (Unix nanoseconds).
    pub started_before: Option<u64>,
    /// Only traces with this status.
    pub status: Option<TraceStatus>,
}

/// Traces per page by default.
pub const DEFAULT_TRACES_PAGE: u32 = 20;
/// The most traces a page gives.
pub const MAX_TRACES_PAGE: u32 = 100;

impl TraceQuery {
    /// Traces per page, the default and the bound applied.
    pub fn page_size(&self) -> u32 {
        match self.per_page {
            0 => DEFAULT_TRACES_PAGE,
            n => n.min(MAX_TRACES_PAGE),
        }
    }

    /// Whether `root` matches the filters (not the status, which needs the whole trace).
    pub fn matches(&self, root: &SpanRecord) -> bool {
        let same = |want: &Option<String>, have: &Option<String>| {
            want.as_ref().is_none_or(|want| have.as_ref() == Some(want))
        };
        self.span_type.is_none_or(|t| t == root.span_type)
            && same(&self.entity_type, &root.entity_type)
            && same(&self.entity_id, &root.entity_id)
            && same(&self.run_id, &root.run_id)
            && same(&self.thread_id, &root.thread_id)
            && same(&self.resource_id, &root.resource_id)
            && same(&self.user_id, &root.user_id)
            && self.name.as_ref().is_none_or(|name| *name == root.name)
            && same(&self.entity_name, &root.entity_name)
            && self.started_after.is_none_or(|t| root.started_at >= t)
            && self.started_before.is_none_or(|t| root.started_at < t)
    }
}

/// One trace in a list: its root span, and what its other spans say.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TraceSummary {
    /// The root span.
    pub root: SpanRecord,
    /// Whether any span failed.
    pub status: TraceStatus,
    /// Whether a span below the root failed.
    pub has_child_error: bool,
    /// How many spans it has.
    pub span_count: usize,
}

impl TraceSummary {
    /// The summary of a trace whose root is `root`, with `span_count` spans, one below the
    /// root failing when `has_child_error` (for backends that sum traces up themselves; the
    /// status follows from the root's error and `has_child_error`).
    pub fn new(root: SpanRecord, has_child_error: bool, span_count: usize) -> Self {
        let status = if root.is_error() || has_child_error {
            TraceStatus::Error
        } else {
            TraceStatus::Success
        };
        Self {
            root,
            status,
            has_child_error,
            span_count,
        }
    }
}

/// A page of traces.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TracePage {
    /// The traces, newest first.
    pub traces: Vec<TraceSummary>,
    /// How many traces match in all.
    pub total: usize,
}

impl TracePage {
    /// A page of `traces`, `total` matching in all.
    pub fn new(traces: Vec<TraceSummary>, total: usize) -> Self {
        Self { traces, total }
    }
}

/// How long spans are kept.
///
/// A trace's age is its *earliest* span's start (not its root's: a trace joined from a caller
/// may have its root elsewhere), and "the oldest" traces are those whose earliest span started
/// first (ties: the smaller trace id first), on every backend.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Retention {
    /// Traces whose earliest span started more than this many nanoseconds before `now` go.
    pub max_age_ns: Option<u64>,
    /// Past this many traces, the oldest go.
    pub max_traces: Option<usize>,
}

/// Kept spans, read back by trace. Each backend is tested by one conformance suite.
#[async_trait]
pub trait SpanStore: Send + Sync + std::fmt::Debug {
    /// Keeps `spans` (a span saved again replaces the first).
    async fn save(&self, spans: &[SpanRecord]) -> Result<(), SpanStoreError>;

    /// Keeps the spans a tracer recorded, taking them out of `spans` (the tracer reuses the
    /// vector). By default each becomes its [`SpanRecord`] and is [saved](SpanStore::save); a
    /// store that can keep them as they are (the in-memory one) saves the conversion.
    async fn keep(&self, spans: &mut Vec<Box<RecordedSpan>>) -> Result<(), SpanStoreError> {
        let records: Vec<SpanRecord> = spans.drain(..).map(|s| s.to_record()).collect();
        self.save(&records).await
    }

    /// A page of traces, newest first.
    async fn list_traces(&self, query: &TraceQuery) -> Result<TracePage, SpanStoreError>;

    /// Every span of trace `trace_id`, by start time (empty when it is unknown).
    async fn trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>, SpanStoreError>;

    /// Deletes traces `trace_ids`; how many spans went.
    async fn delete_traces(&self, trace_ids: &[String]) -> Result<u64, SpanStoreError>;

    /// Deletes what `retention` no longer keeps, `now` being Unix nanoseconds: first the
    /// traces older than `max_age_ns`, then, past `max_traces`, the oldest (see [`Retention`]);
    /// how many spans went.
    async fn prune(&self, retention: Retention, now: u64) -> Result<u64, SpanStoreError>;
}

/// The trace's root as this store knows it: the earliest span whose parent is not among
/// `spans` (a trace joined from a caller has its root elsewhere).
pub fn local_root(spans: &[SpanRecord]) -> Option<&SpanRecord> {
    spans
        .iter()
        .filter(|s| {
            s.parent_span_id
                .as_ref()
                .is_none_or(|parent| !spans.iter().any(|o| o.span_id == *parent))
        })
        .min_by_key(|s| (s.started_at, s.span_id.as_str()))
}

/// Sums a trace up from its spans (`None` when it has none).
pub fn summarize(spans: &[SpanRecord]) -> Option<TraceSummary> {
    let root = local_root(spans)?;
    let has_child_error = spans
        .iter()
        .any(|s| s.span_id != root.span_id && s.is_error());
    let status = if root.is_error() || has_child_error {
        TraceStatus::Error
    } else {
        TraceStatus::Success
    };
    Some(TraceSummary {
        root: root.clone(),
        status,
        has_child_error,
        span_count: spans.len(),
    })
}

/// A [`SpanStore`] shared.
pub type SharedSpanStore = std::sync::Arc<dyn SpanStore>;
