//! The traces of [`InMemoryStorage`]: an [`InMemorySpanStore`](kestrel_core::trace::InMemorySpanStore)
//! (bounded: past [`DEFAULT_IN_MEMORY_TRACES`](kestrel_core::trace::memory::DEFAULT_IN_MEMORY_TRACES)
//! traces, the oldest go), given the batches as the database backends store them (times
//! checked, NUL dropped from the plain text fields: see `crate::spans`).

use async_trait::async_trait;
use kestrel_core::trace::{
    Retention, SpanRecord, SpanStore, SpanStoreError, TracePage, TraceQuery,
};

use super::InMemoryStorage;
use crate::spans::{prepare, span_err};

#[async_trait]
impl SpanStore for InMemoryStorage {
    async fn save(&self, spans: &[SpanRecord]) -> Result<(), SpanStoreError> {
        let batch = prepare(spans).map_err(span_err)?;
        self.spans.save(&batch).await
    }

    async fn list_traces(&self, query: &TraceQuery) -> Result<TracePage, SpanStoreError> {
        self.spans.list_traces(query).await
    }

    async fn trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>, SpanStoreError> {
        self.spans.trace(trace_id).await
    }

    async fn delete_traces(&self, trace_ids: &[String]) -> Result<u64, SpanStoreError> {
        self.spans.delete_traces(trace_ids).await
    }

    async fn prune(&self, retention: Retention, now: u64) -> Result<u64, SpanStoreError> {
        self.spans.prune(retention, now).await
    }
}
