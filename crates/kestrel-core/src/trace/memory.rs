//! [`InMemorySpanStore`]: the span store a tracing instance uses when it is given no other,
//! bounded by traces and bytes. A tracer's spans are kept as recorded; records saved by hand, as
//! their JSON.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use super::recorded::RecordedSpan;
use super::span::SpanRecord;
use super::store::{Retention, SpanStore, SpanStoreError, TracePage, TraceQuery, TraceSummary};

/// A trace id's 32 lowercase hex digits, written into `buffer`.
fn hex_trace_id_in(id: u128, buffer: &mut [u8; 32]) -> &str {
    use std::io::Write;
    // 32 digits fill the buffer exactly, and are ASCII.
    let _ = write!(&mut buffer[..], "{id:032x}");
    std::str::from_utf8(buffer).unwrap_or_default()
}

/// The most traces [`InMemorySpanStore`] keeps by default; past it the oldest go.
pub const DEFAULT_IN_MEMORY_TRACES: usize = 10_000;

/// The most bytes of spans [`InMemorySpanStore`] keeps by default (their JSON and what the
/// store keeps beside it); past it the oldest traces go. Real traces are much larger than
/// scripted ones (a model call's input and output may each take 16 KiB).
pub const DEFAULT_IN_MEMORY_BYTES: usize = 256 * 1024 * 1024;

/// Spans in memory, bounded by a number of traces and a number of bytes: past either bound, the
/// oldest traces go (those whose earliest span started first, as [`Retention`] orders them).
///
/// A tracer's spans are kept as recorded ([`SpanStore::keep`]: moved in, nothing encoded);
/// a [`SpanRecord`] saved by hand as its JSON. Records are made when spans are read back: a
/// tracing instance keeps many more spans than it reads.
#[derive(Debug)]
pub struct InMemorySpanStore {
    max_traces: usize,
    max_bytes: usize,
    state: Mutex<Traces>,
}

#[derive(Debug, Default)]
struct Traces {
    /// Spans by trace.
    traces: HashMap<String, StoredTrace>,
    /// Every trace as (its earliest span's start, its id): the oldest first.
    by_age: BTreeSet<(u64, String)>,
    /// What the spans take ([`StoredSpan::size`]), all traces together.
    bytes: usize,
}

#[derive(Debug)]
struct StoredTrace {
    /// When its earliest span started.
    first: u64,
    spans: Vec<StoredSpan>,
    /// What its spans take ([`StoredSpan::size`]).
    bytes: usize,
}

/// A span as kept: what finding the trace's root and status needs, and the span itself.
#[derive(Debug)]
struct StoredSpan {
    span_id: SpanKey,
    parent_span_id: Option<SpanKey>,
    started_at: u64,
    failed: bool,
    /// What it takes in memory, about.
    size: usize,
    body: Body,
}

/// The span itself: as its tracer recorded it, or (a record saved by hand, whose ids may be any
/// text) as its JSON.
#[derive(Debug)]
enum Body {
    Recorded(Box<RecordedSpan>),
    Json {
        json: Box<str>,
        /// An input or output of JSON `null` (which the JSON would read back as none).
        null_input: bool,
        null_output: bool,
    },
}

/// A span id as the store compares it: its 64 bits (an id is 16 hex digits), or a hash of one
/// that is not (a record saved by hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SpanKey(u64);

impl SpanKey {
    fn of(id: &str) -> Self {
        if id.len() == 16
            && let Ok(bits) = u64::from_str_radix(id, 16)
        {
            return Self(bits);
        }
        // A fixed hash: equal ids give equal keys in every run of the process.
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(id, &mut hasher);
        Self(std::hash::Hasher::finish(&hasher))
    }
}

impl StoredSpan {
    fn new(span: &SpanRecord) -> Result<Self, SpanStoreError> {
        let json = serde_json::to_string(span)
            .map_err(|e| SpanStoreError::Backend(format!("span `{}`: {e}", span.span_id)))?;
        Ok(Self {
            span_id: SpanKey::of(&span.span_id),
            parent_span_id: span.parent_span_id.as_deref().map(SpanKey::of),
            started_at: span.started_at,
            failed: span.is_error(),
            size: std::mem::size_of::<Self>() + json.len(),
            body: Body::Json {
                null_input: span.input == Some(serde_json::Value::Null),
                null_output: span.output == Some(serde_json::Value::Null),
                json: json.into_boxed_str(),
            },
        })
    }

    fn recorded(span: Box<RecordedSpan>) -> Self {
        Self {
            // The key of a hex id is its number (`SpanKey::of`).
            span_id: SpanKey(span.span_id()),
            parent_span_id: span.parent_span_id().map(SpanKey),
            started_at: span.started_at,
            failed: span.is_error(),
            size: std::mem::size_of::<Self>() + span.approx_size(),
            body: Body::Recorded(span),
        }
    }

    /// What it takes in memory, about.
    fn size(&self) -> usize {
        self.size
    }

    fn record(&self) -> Result<SpanRecord, SpanStoreError> {
        match &self.body {
            Body::Recorded(span) => Ok(span.to_record()),
            Body::Json {
                json,
                null_input,
                null_output,
            } => {
                let mut record: SpanRecord = serde_json::from_str(json).map_err(|e| {
                    SpanStoreError::Backend(format!("a kept span is unreadable: {e}"))
                })?;
                if *null_input {
                    record.input = Some(serde_json::Value::Null);
                }
                if *null_output {
                    record.output = Some(serde_json::Value::Null);
                }
                Ok(record)
            }
        }
    }
}

impl StoredTrace {
    /// Its summary: the root read back, the rest from the kept fields.
    fn summary(&self) -> Result<Option<TraceSummary>, SpanStoreError> {
        let spans = &self.spans;
        let root = spans
            .iter()
            .filter(|s| {
                s.parent_span_id
                    .as_ref()
                    .is_none_or(|parent| !spans.iter().any(|o| o.span_id == *parent))
            })
            // Ties by id, as `local_root` breaks them (for hex ids, the same order).
            .min_by_key(|s| (s.started_at, s.span_id));
        let Some(root) = root else {
            return Ok(None);
        };
        let has_child_error = spans.iter().any(|s| s.span_id != root.span_id && s.failed);
        Ok(Some(TraceSummary::new(
            root.record()?,
            has_child_error,
            spans.len(),
        )))
    }
}

impl Default for InMemorySpanStore {
    fn default() -> Self {
        Self::new(DEFAULT_IN_MEMORY_TRACES)
    }
}

impl InMemorySpanStore {
    /// A store keeping at most `max_traces` traces (at least 1) and
    /// [`DEFAULT_IN_MEMORY_BYTES`].
    pub fn new(max_traces: usize) -> Self {
        Self {
            max_traces: max_traces.max(1),
            max_bytes: DEFAULT_IN_MEMORY_BYTES,
            state: Mutex::new(Traces::default()),
        }
    }

    /// Keeps at most `bytes` of spans (their JSON and what is kept beside it); the newest trace
    /// is kept whatever its size.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Traces> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Traces {
    fn remove(&mut self, trace_id: &str) -> u64 {
        let Some(trace) = self.traces.remove(trace_id) else {
            return 0;
        };
        self.by_age.remove(&(trace.first, trace_id.to_owned()));
        self.bytes = self.bytes.saturating_sub(trace.bytes);
        trace.spans.len() as u64
    }

    /// Removes the oldest traces until at most `max` are left and they take at most
    /// `max_bytes` (the newest is kept whatever its size); how many spans went.
    fn keep_newest(&mut self, max: usize, max_bytes: usize) -> u64 {
        let mut removed = 0;
        while self.by_age.len() > max || (self.bytes > max_bytes && self.by_age.len() > 1) {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            if let Some(trace) = self.traces.remove(&oldest) {
                self.bytes = self.bytes.saturating_sub(trace.bytes);
                removed += trace.spans.len() as u64;
            }
        }
        removed
    }

    /// Keeps `span` of trace `trace_id` (replacing one with its id).
    fn insert(&mut self, trace_id: &str, span: StoredSpan) {
        let started_at = span.started_at;
        let size = span.size();
        self.bytes += size;
        let Some(trace) = self.traces.get_mut(trace_id) else {
            self.traces.insert(
                trace_id.to_owned(),
                StoredTrace {
                    first: started_at,
                    spans: vec![span],
                    bytes: size,
                },
            );
            self.by_age.insert((started_at, trace_id.to_owned()));
            return;
        };
        // The trace's age follows its earliest span (one saved again may have moved).
        let first = match trace.spans.iter_mut().find(|s| s.span_id == span.span_id) {
            Some(kept) => {
                trace.bytes = trace.bytes + size - kept.size();
                self.bytes -= kept.size();
                *kept = span;
                trace
                    .spans
                    .iter()
                    .map(|s| s.started_at)
                    .min()
                    .unwrap_or(started_at)
            }
            None => {
                trace.bytes += size;
                trace.spans.push(span);
                trace.first.min(started_at)
            }
        };
        if first != trace.first {
            self.by_age.remove(&(trace.first, trace_id.to_owned()));
            self.by_age.insert((first, trace_id.to_owned()));
            trace.first = first;
        }
    }
}

#[async_trait]
impl SpanStore for InMemorySpanStore {
    async fn save(&self, spans: &[SpanRecord]) -> Result<(), SpanStoreError> {
        // Encoded before the lock is taken: readers wait only for the inserts.
        let stored = spans
            .iter()
            .map(StoredSpan::new)
            .collect::<Result<Vec<_>, _>>()?;
        let mut state = self.lock();
        for (span, kept) in spans.iter().zip(stored) {
            state.insert(&span.trace_id, kept);
        }
        state.keep_newest(self.max_traces, self.max_bytes);
        Ok(())
    }

    async fn keep(&self, spans: &mut Vec<Box<RecordedSpan>>) -> Result<(), SpanStoreError> {
        // Moved in as they are: nothing is encoded, copied or freed on the way.
        let mut state = self.lock();
        let mut hex = [0u8; 32];
        for span in spans.drain(..) {
            let trace_id = hex_trace_id_in(span.trace_id(), &mut hex);
            state.insert(trace_id, StoredSpan::recorded(span));
        }
        state.keep_newest(self.max_traces, self.max_bytes);
        Ok(())
    }

    async fn list_traces(&self, query: &TraceQuery) -> Result<TracePage, SpanStoreError> {
        let state = self.lock();
        let mut matching = Vec::new();
        for trace in state.traces.values() {
            let Some(summary) = trace.summary()? else {
                continue;
            };
            if query.matches(&summary.root) && query.status.is_none_or(|s| s == summary.status) {
                matching.push(summary);
            }
        }
        drop(state);
        matching.sort_by(|a, b| {
            b.root
                .started_at
                .cmp(&a.root.started_at)
                .then_with(|| b.root.trace_id.cmp(&a.root.trace_id))
        });
        let total = matching.len();
        let size = query.page_size() as usize;
        let traces = matching
            .into_iter()
            .skip(query.page as usize * size)
            .take(size)
            .collect();
        Ok(TracePage { traces, total })
    }

    async fn trace(&self, trace_id: &str) -> Result<Vec<SpanRecord>, SpanStoreError> {
        let mut spans = {
            let state = self.lock();
            match state.traces.get(trace_id) {
                Some(trace) => trace
                    .spans
                    .iter()
                    .map(StoredSpan::record)
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            }
        };
        spans.sort_by(|a, b| {
            (a.started_at, a.span_id.as_str()).cmp(&(b.started_at, b.span_id.as_str()))
        });
        Ok(spans)
    }

    async fn delete_traces(&self, trace_ids: &[String]) -> Result<u64, SpanStoreError> {
        let mut state = self.lock();
        Ok(trace_ids.iter().map(|id| state.remove(id)).sum())
    }

    async fn prune(&self, retention: Retention, now: u64) -> Result<u64, SpanStoreError> {
        let mut state = self.lock();
        let mut removed = 0;
        // Older than `max_age`: started before `now - max_age` (nothing when that is before 0).
        if let Some(cutoff) = retention
            .max_age_ns
            .and_then(|max_age| now.checked_sub(max_age))
        {
            while let Some((first, oldest)) = state.by_age.first().cloned() {
                if first >= cutoff {
                    break;
                }
                removed += state.remove(&oldest);
            }
        }
        if let Some(max) = retention.max_traces {
            removed += state.keep_newest(max, usize::MAX);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::super::{SpanType, StoreSink, TraceContext, TraceStatus, Tracer, TracingConfig};
    use super::*;
    use std::sync::Arc;

    /// A sink keeping the records it is given.
    #[derive(Debug, Default)]
    struct Kept(std::sync::Mutex<Vec<SpanRecord>>);

    impl super::super::SpanSink for Kept {
        fn export<'a>(&'a self, spans: &'a [SpanRecord]) -> futures::future::BoxFuture<'a, ()> {
            self.0.lock().unwrap().extend_from_slice(spans);
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn recorded_spans_are_kept_as_they_are_and_read_back_as_the_sinks_saw_them() {
        let store = Arc::new(InMemorySpanStore::new(100));
        let kept = Arc::new(Kept::default());
        let tracer = Tracer::storing(TracingConfig::new(), store.clone(), vec![kept.clone()]);
        let mut run = tracer
            .start(None, SpanType::AgentRun, "agent run: 'weather'")
            .unwrap();
        run.entity("agent", "weather", Some("Weather Agent"));
        run.scope("run-1", Some("t1"), None);
        let mut metadata = serde_json::Map::new();
        metadata.insert("team".into(), "blue".into());
        metadata.insert("apiKey".into(), "sk-1".into());
        run.caller(Some("ada"), &metadata, &["beta".to_owned()]);
        run.input("hi");
        run.attribute("maxSteps", 5);
        run.attribute("maxSteps", 6);
        run.attribute("password", "hunter2");
        run.attribute(
            "usage",
            serde_json::json!({"inputTokens": 3, "outputTokens": 1}),
        );
        run.attribute("availableTools", serde_json::json!(["a", "b"]));
        let mut tool = run.child(SpanType::ToolCall, "tool: 'x'").unwrap();
        // Borrowed values, written as redacted JSON text at once.
        tool.input_of(&serde_json::json!({"city": "Oslo", "nested": [{"token": "t"}]}));
        tool.output_of(&serde_json::Value::Null);
        tool.fail("no", Some("tool"));
        run.end();
        tracer.flush().await;

        let mut seen = kept.0.lock().unwrap().clone();
        seen.sort_by_key(|s| s.started_at);
        let read = store.trace(&seen[0].trace_id).await.unwrap();
        assert_eq!(read, seen);
        let root = &read[0];
        assert!(TraceContext::is_trace_id(&root.trace_id) && root.parent_span_id.is_none());
        assert_eq!(
            read[1].parent_span_id.as_deref(),
            Some(root.span_id.as_str())
        );
        assert_eq!(root.attributes["maxSteps"], 6);
        assert_eq!(root.attributes["usage"]["inputTokens"], 3);
        assert_eq!(
            root.attributes["availableTools"],
            serde_json::json!(["a", "b"])
        );
        assert_eq!(root.attributes["password"], super::super::REDACTED);
        assert_eq!(root.metadata["apiKey"], super::super::REDACTED);
        assert_eq!(root.metadata["team"], "blue");
        assert_eq!(root.user_id.as_deref(), Some("ada"));
        assert_eq!(root.tags, ["beta"]);
        assert_eq!(root.entity_name.as_deref(), Some("Weather Agent"));
        assert_eq!(root.thread_id.as_deref(), Some("t1"));
        let input = read[1].input.as_ref().unwrap();
        assert_eq!(input["nested"][0]["token"], super::super::REDACTED);
        assert_eq!(input["city"], "Oslo");
        assert_eq!(read[1].output, Some(serde_json::Value::Null));
        let listed = store.list_traces(&TraceQuery::default()).await.unwrap();
        assert_eq!(listed.total, 1);
        assert_eq!(listed.traces[0].root, *root);
        assert_eq!(listed.traces[0].status, TraceStatus::Error);
        assert_eq!(listed.traces[0].span_count, 2);
    }

    #[tokio::test]
    async fn recorded_spans_count_toward_the_byte_bound() {
        // Room for about one trace of two spans: the older traces go.
        let store = Arc::new(InMemorySpanStore::new(100).max_bytes(1_500));
        let tracer = Tracer::storing(TracingConfig::new(), store.clone(), Vec::new());
        for _ in 0..5 {
            let mut run = tracer.start(None, SpanType::AgentRun, "run").unwrap();
            run.input("x".repeat(300));
            run.child(SpanType::ToolCall, "tool").unwrap().end();
            run.end();
            tracer.flush().await;
        }
        let listed = store.list_traces(&TraceQuery::default()).await.unwrap();
        assert!(
            (1..5).contains(&listed.total),
            "kept {} traces",
            listed.total
        );
    }

    #[tokio::test]
    async fn traces_are_listed_newest_first_filtered_and_read_back() {
        let store = Arc::new(InMemorySpanStore::new(100));
        let sink = Arc::new(StoreSink::new(store.clone()));
        let tracer = Tracer::new(TracingConfig::new(), vec![sink]);
        for (agent, fails) in [("weather", false), ("mail", true), ("weather", false)] {
            let mut run = tracer
                .start(None, SpanType::AgentRun, format!("agent run: '{agent}'"))
                .unwrap();
            run.entity("agent", agent, None);
            run.scope("run-1", Some("t1"), Some("r1"));
            let tool = tracer
                .start(Some(&run.context()), SpanType::ToolCall, "tool: 'x'")
                .unwrap();
            if fails {
                tool.fail("no", None);
            } else {
                tool.end();
            }
            run.end();
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        tracer.flush().await;
        let all = store.list_traces(&TraceQuery::default()).await.unwrap();
        assert_eq!(all.total, 3);
        assert!(all.traces[0].root.started_at >= all.traces[1].root.started_at);
        let weather = TraceQuery {
            entity_id: Some("weather".into()),
            ..TraceQuery::default()
        };
        assert_eq!(store.list_traces(&weather).await.unwrap().total, 2);
        let errors = TraceQuery {
            status: Some(TraceStatus::Error),
            ..TraceQuery::default()
        };
        let failed = store.list_traces(&errors).await.unwrap();
        assert_eq!(failed.total, 1);
        assert!(failed.traces[0].has_child_error);
        let spans = store.trace(&failed.traces[0].root.trace_id).await.unwrap();
        assert_eq!(spans.len(), 2);
        let page = TraceQuery {
            per_page: 2,
            page: 1,
            ..TraceQuery::default()
        };
        assert_eq!(store.list_traces(&page).await.unwrap().traces.len(), 1);
        let gone = store
            .delete_traces(&[failed.traces[0].root.trace_id.clone()])
            .await
            .unwrap();
        assert_eq!(gone, 2);
        let kept = Retention {
            max_traces: Some(1),
            ..Retention::default()
        };
        assert_eq!(store.prune(kept, 0).await.unwrap(), 2);
        assert_eq!(
            store
                .list_traces(&TraceQuery::default())
                .await
                .unwrap()
                .total,
            1
        );
        let aged = Retention {
            max_age_ns: Some(1),
            ..Retention::default()
        };
        assert_eq!(store.prune(aged, u64::MAX).await.unwrap(), 2);
    }

    fn span(trace: &str, id: &str, started_at: u64) -> SpanRecord {
        serde_json::from_value(serde_json::json!({
            "traceId": trace, "spanId": id, "name": id, "spanType": "generic",
            "startedAt": started_at, "endedAt": started_at + 1,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn past_its_bytes_the_oldest_traces_go_and_a_span_saved_again_counts_once() {
        let one = StoredSpan::new(&span("t0", "a", 100)).unwrap().size();
        let store = InMemorySpanStore::new(100).max_bytes(one * 3);
        for (trace, at) in [("t1", 100), ("t2", 200), ("t3", 300)] {
            store.save(&[span(trace, "a", at)]).await.unwrap();
        }
        // The same span again replaces the first: still three spans' worth.
        store.save(&[span("t3", "a", 300)]).await.unwrap();
        assert_eq!(store.trace("t1").await.unwrap().len(), 1);
        store.save(&[span("t4", "a", 400)]).await.unwrap();
        assert!(store.trace("t1").await.unwrap().is_empty());
        assert_eq!(store.trace("t2").await.unwrap().len(), 1);
        // A trace larger than the bound alone is kept (the newest).
        let tiny = InMemorySpanStore::new(100).max_bytes(1);
        tiny.save(&[span("big", "a", 1), span("big", "b", 2)])
            .await
            .unwrap();
        assert_eq!(tiny.trace("big").await.unwrap().len(), 2);
        tiny.save(&[span("next", "a", 3)]).await.unwrap();
        assert!(tiny.trace("big").await.unwrap().is_empty());
        assert_eq!(tiny.trace("next").await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_oldest_traces_are_those_that_started_first_not_those_seen_first() {
        let store = InMemorySpanStore::new(2);
        // Seen first, started last.
        store.save(&[span("late", "a", 300)]).await.unwrap();
        store.save(&[span("early", "b", 100)]).await.unwrap();
        store.save(&[span("middle", "c", 200)]).await.unwrap();
        // Past the bound, the trace that started first went, not the first seen.
        assert!(store.trace("early").await.unwrap().is_empty());
        // A span starting earlier makes its trace older.
        store.save(&[span("late", "d", 50)]).await.unwrap();
        let keep_one = Retention {
            max_traces: Some(1),
            ..Retention::default()
        };
        assert_eq!(store.prune(keep_one, 0).await.unwrap(), 2);
        assert_eq!(store.trace("middle").await.unwrap().len(), 1);
        // By age: started before `now - max_age`.
        let aged = Retention {
            max_age_ns: Some(100),
            ..Retention::default()
        };
        assert_eq!(store.prune(aged, 300).await.unwrap(), 0);
        assert_eq!(store.prune(aged, 50).await.unwrap(), 0);
        assert_eq!(store.prune(aged, 301).await.unwrap(), 1);
    }
}
