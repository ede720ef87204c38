//! AI tracing: every run a trace of spans, with Mastra's span types and attributes.
//!
//! - [`span`]: what a span is ([`SpanType`], [`TraceContext`], the finished [`SpanRecord`]).
//! - [`policy`]: which traces are kept ([`Sampling`]) and what a span may carry (sensitive
//!   keys redacted, large values cut: [`TracingConfig`]).
//! - [`recorded`]: a span as a tracer records it ([`RecordedSpan`]), compact until read.
//! - [`recorder`]: [`Tracer`] starts spans; an ended span is appended to a bounded buffer,
//!   and a worker hands batches to the [`SpanSink`]s, off the runs.
//! - [`memory`]: [`InMemorySpanStore`], the span store used when no other is given.
//! - [`store`]: the [`SpanStore`] port the traces are read back from.

pub mod memory;
pub mod policy;
pub mod recorded;
pub mod recorder;
pub mod span;
pub mod store;

pub use memory::InMemorySpanStore;
pub use policy::{DEFAULT_RETENTION, REDACTED, SENSITIVE_KEYS, Sampling, TracingConfig};
pub use recorded::RecordedSpan;
pub use recorder::{
    ActiveSpan, MAX_BUFFERED_SPANS, PRUNE_INTERVAL, SpanParent, SpanSink, StoreSink, Tracer,
};
pub use span::{
    SpanError, SpanRecord, SpanType, TraceContext, TracingOptions, new_span_id, new_trace_id,
};
pub use store::{
    Retention, SharedSpanStore, SpanStore, SpanStoreError, TracePage, TraceQuery, TraceStatus,
    TraceSummary, local_root, summarize,
};
