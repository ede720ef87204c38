//! Recording spans off the run: [`Tracer::start`] gives an [`ActiveSpan`]; ending it appends
//! its record to a bounded buffer (a lock and a push). A worker task takes the buffer in
//! batches, applies the [`TracingConfig`] (redaction, size caps), and hands each batch to the
//! sinks (the span store, exporters). A full buffer drops new spans, counted and logged once:
//! tracing never slows or stops a run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::policy::TracingConfig;
use super::span::{SpanError, SpanRecord, SpanType, TraceContext, new_span_id};

/// The most finished spans waiting for the worker; past it new ones are dropped.
pub const MAX_BUFFERED_SPANS: usize = 10_000;

/// How often the worker takes the buffer when nothing wakes it sooner.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Spans in one batch that wake the worker at once.
const WAKE_AT: usize = 512;

/// How often the worker prunes the span store to the configured retention.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// Where finished spans go: a span store, an exporter. Called by the recorder's worker, one
/// batch at a time, with the spans already redacted and cut.
pub trait SpanSink: Send + Sync + std::fmt::Debug {
    /// Takes a batch. A sink that fails logs it and drops the batch: tracing never fails a
    /// run.
    fn export<'a>(&'a self, spans: &'a [SpanRecord]) -> BoxFuture<'a, ()>;
}

/// Where new spans go: the tracer recording them and the span they hang under.
#[derive(Clone, Debug)]
pub struct SpanParent {
    /// The tracer.
    pub tracer: Tracer,
    /// The span new spans hang under.
    pub context: TraceContext,
}

impl SpanParent {
    /// Starts a span under this parent (`None` when its trace is not sampled).
    pub fn start(&self, span_type: SpanType, name: impl Into<String>) -> Option<ActiveSpan> {
        self.tracer.start(Some(&self.context), span_type, name)
    }

    /// The span work in this task hangs under, when the framework set one with
    /// [`SpanParent::scope`]: a memory's work after a run ([`AgentMemory::run_finished`])
    /// hangs under the run's `memory: 'after run'` span.
    ///
    /// [`AgentMemory::run_finished`]: crate::memory::AgentMemory::run_finished
    pub fn current() -> Option<SpanParent> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Runs `future` with this parent as [`SpanParent::current`].
    pub async fn scope<F: std::future::Future>(self, future: F) -> F::Output {
        CURRENT.scope(self, future).await
    }
}

tokio::task_local! {
    /// What [`SpanParent::current`] gives.
    static CURRENT: SpanParent;
}

/// Records an instance's spans. Cheap to clone; clones share the buffer and the sinks.
#[derive(Clone, Debug)]
pub struct Tracer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: TracingConfig,
    /// The store the traces are read back from, when the tracer keeps one.
    store: Option<super::store::SharedSpanStore>,
    sinks: Vec<Arc<dyn SpanSink>>,
    buffer: Mutex<Vec<SpanRecord>>,
    /// The last batch's vector, emptied, given back to the buffer at the next drain: the
    /// buffer never grows again from nothing (a batch is hundreds of kilobytes).
    spare: Mutex<Vec<SpanRecord>>,
    wake: Arc<tokio::sync::Notify>,
    worker: AtomicBool,
    dropped: AtomicU64,
    /// One drain at a time, so batches reach the sinks in order.
    draining: tokio::sync::Mutex<()>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Tracer {
    /// A tracer applying `config`, handing spans to `sinks`.
    pub fn new(config: TracingConfig, sinks: Vec<Arc<dyn SpanSink>>) -> Self {
        Self::build(config, None, sinks)
    }

    /// A tracer applying `config` that saves its spans into `store` (where they are read back
    /// from, [`Tracer::store`]) and hands them to `sinks` as well (an OTLP exporter...).
    pub fn storing(
        config: TracingConfig,
        store: super::store::SharedSpanStore,
        sinks: Vec<Arc<dyn SpanSink>>,
    ) -> Self {
        let mut all: Vec<Arc<dyn SpanSink>> = vec![Arc::new(StoreSink::new(Arc::clone(&store)))];
        all.extend(sinks);
        Self::build(config, Some(store), all)
    }

    fn build(
        config: TracingConfig,
        store: Option<super::store::SharedSpanStore>,
        sinks: Vec<Arc<dyn SpanSink>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                store,
                sinks,
                buffer: Mutex::new(Vec::with_capacity(WAKE_AT * 2)),
                spare: Mutex::new(Vec::with_capacity(WAKE_AT * 2)),
                wake: Arc::new(tokio::sync::Notify::new()),
                worker: AtomicBool::new(false),
                dropped: AtomicU64::new(0),
                draining: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &TracingConfig {
        &self.inner.config
    }

    /// The store its traces are read back from, if named.
    pub fn store(&self) -> Option<&super::store::SharedSpanStore> {
        self.inner.store.as_ref()
    }

    /// How many spans were dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Starts a span under `parent` (a new trace without one), or `None` when the trace is
    /// not sampled.
    pub fn start(
        &self,
        parent: Option<&TraceContext>,
        span_type: SpanType,
        name: impl Into<String>,
    ) -> Option<ActiveSpan> {
        match parent {
            Some(parent) => self.start_in(
                &parent.trace_id,
                parent.parent_span_id.as_deref(),
                span_type,
                name,
            ),
            None => self.start_in(&super::span::new_trace_id(), None, span_type, name),
        }
    }

    /// Starts a span in trace `trace_id` under span `parent_span_id`.
    fn start_in(
        &self,
        trace_id: &str,
        parent_span_id: Option<&str>,
        span_type: SpanType,
        name: impl Into<String>,
    ) -> Option<ActiveSpan> {
        if !self.inner.config.sampling.keeps(trace_id) {
            return None;
        }
        let record = SpanRecord {
            trace_id: trace_id.to_owned(),
            span_id: new_span_id(),
            parent_span_id: parent_span_id.map(str::to_owned),
            name: name.into(),
            span_type,
            started_at: now_ns(),
            ended_at: 0,
            attributes: Map::new(),
            input: None,
            output: None,
            error: None,
            entity_type: None,
            entity_id: None,
            entity_name: None,
            run_id: None,
            thread_id: None,
            resource_id: None,
            user_id: None,
            metadata: Map::new(),
            tags: Vec::new(),
        };
        Some(ActiveSpan {
            record: Some(Box::new(record)),
            tracer: self.clone(),
        })
    }

    /// Appends a finished span to the buffer (dropped and counted when it is full).
    fn record(&self, span: SpanRecord) {
        let waiting = {
            let mut buffer = self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner());
            if buffer.len() >= MAX_BUFFERED_SPANS {
                drop(buffer);
                if self.inner.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        max = MAX_BUFFERED_SPANS,
                        "the span buffer is full: new spans are dropped until the sinks catch up"
                    );
                }
                return;
            }
            buffer.push(span);
            buffer.len()
        };
        self.ensure_worker();
        if waiting >= WAKE_AT {
            self.inner.wake.notify_one();
        }
    }

    /// Starts the worker on the current Tokio runtime, once.
    fn ensure_worker(&self) {
        if self.inner.worker.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime here: the spans wait for `flush` or a worker started later.
            return;
        };
        if self.inner.worker.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let wake = Arc::clone(&self.inner.wake);
        runtime.spawn(work(weak, wake));
    }

    /// Prunes the span store to the configured retention now (the worker does it every
    /// [`PRUNE_INTERVAL`]); how many spans went.
    pub async fn prune(&self) -> Result<u64, super::store::SpanStoreError> {
        self.inner.prune().await
    }

    /// Hands every buffered span to the sinks now, and waits until they took them.
    pub async fn flush(&self) {
        self.inner.drain().await;
    }
}

/// The worker: drains the buffer every [`FLUSH_INTERVAL`], or sooner when woken, until the
/// tracer is gone.
async fn work(inner: Weak<Inner>, wake: Arc<tokio::sync::Notify>) {
    let mut pruned = tokio::time::Instant::now();
    loop {
        let _ = tokio::time::timeout(FLUSH_INTERVAL, wake.notified()).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.drain().await;
        if pruned.elapsed() >= PRUNE_INTERVAL {
            pruned = tokio::time::Instant::now();
            if let Err(error) = inner.prune().await {
                tracing::warn!(%error, "the span store could not be pruned");
            }
        }
    }
}

impl Inner {
    /// Deletes what the retention no longer keeps from the store; how many spans went.
    async fn prune(&self) -> Result<u64, super::store::SpanStoreError> {
        let retention = self.config.retention;
        match &self.store {
            Some(store) if retention != super::store::Retention::default() => {
                store.prune(retention, now_ns()).await
            }
            _ => Ok(0),
        }
    }

    async fn drain(&self) {
        let _turn = self.draining.lock().await;
        loop {
            let spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(|e| e.into_inner()));
            let mut batch = {
                let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
                std::mem::replace(&mut *buffer, spare)
            };
            if batch.is_empty() {
                *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = batch;
                return;
            }
            for span in &mut batch {
                self.sanitize(span);
            }
            for sink in &self.sinks {
                sink.export(&batch).await;
            }
            batch.clear();
            if batch.capacity() <= MAX_BUFFERED_SPANS / 4 {
                *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = batch;
            }
        }
    }

    /// What a span may keep: the configuration's redaction and caps.
    fn sanitize(&self, span: &mut SpanRecord) {
        let config = &self.config;
        for value in [&mut span.input, &mut span.output].into_iter().flatten() {
            config.sanitize(value);
        }
        for map in [&mut span.attributes, &mut span.metadata] {
            let mut whole = Value::Object(std::mem::take(map));
            config.sanitize(&mut whole);
            match whole {
                Value::Object(fields) => *map = fields,
                // Cut whole: kept under one key.
                cut => {
                    map.insert("truncated".to_owned(), cut);
                }
            }
        }
    }
}

/// A span store as a tracer's sink: each batch saved (a failure logged, the batch dropped).
#[derive(Debug)]
pub struct StoreSink(super::store::SharedSpanStore);

impl StoreSink {
    /// The sink saving into `store`.
    pub fn new(store: super::store::SharedSpanStore) -> Self {
        Self(store)
    }
}

impl SpanSink for StoreSink {
    fn export<'a>(&'a self, spans: &'a [SpanRecord]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.0.save(spans).await {
                tracing::warn!(%error, spans = spans.len(), "storing spans failed; the batch is dropped");
            }
        })
    }
}

/// A span in progress. End it with [`ActiveSpan::end`] or [`ActiveSpan::fail`]; one dropped
/// before (a cancelled call) is recorded as cancelled.
#[derive(Debug)]
pub struct ActiveSpan {
    /// Boxed: a span lives in the futures of the calls it times.
    record: Option<Box<SpanRecord>>,
    tracer: Tracer,
}

impl ActiveSpan {
    fn record_mut(&mut self) -> Option<&mut SpanRecord> {
        self.record.as_deref_mut()
    }

    /// The context of spans started under this one.
    pub fn context(&self) -> TraceContext {
        match &self.record {
            Some(record) => TraceContext {
                trace_id: record.trace_id.clone(),
                parent_span_id: Some(record.span_id.clone()),
            },
            None => TraceContext::new_trace(),
        }
    }

    /// Where spans started under this one go (`None` when this one has ended).
    pub fn as_parent(&self) -> Option<SpanParent> {
        let record = self.record.as_deref()?;
        Some(SpanParent {
            tracer: self.tracer.clone(),
            context: TraceContext {
                trace_id: record.trace_id.clone(),
                parent_span_id: Some(record.span_id.clone()),
            },
        })
    }

    /// Starts a span under this one (`None` when this one has ended).
    pub fn child(&self, span_type: SpanType, name: impl Into<String>) -> Option<ActiveSpan> {
        let record = self.record.as_deref()?;
        self.tracer
            .start_in(&record.trace_id, Some(&record.span_id), span_type, name)
    }

    /// The trace's id.
    pub fn trace_id(&self) -> &str {
        self.record.as_deref().map_or("", |r| r.trace_id.as_str())
    }

    /// This span's id.
    pub fn span_id(&self) -> &str {
        self.record.as_deref().map_or("", |r| r.span_id.as_str())
    }

    /// Sets an attribute.
    pub fn attribute(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        if let Some(record) = self.record_mut() {
            record.attributes.insert(key.into(), value.into());
        }
    }

    /// Sets what went in.
    pub fn input(&mut self, input: impl Into<Value>) {
        if let Some(record) = self.record_mut() {
            record.input = Some(input.into());
        }
    }

    /// Sets what came out.
    pub fn output(&mut self, output: impl Into<Value>) {
        if let Some(record) = self.record_mut() {
            record.output = Some(output.into());
        }
    }

    /// Names what the span is about (`agent`, `weather`, `Weather agent`).
    pub fn entity(&mut self, kind: &str, id: &str, name: Option<&str>) {
        if let Some(record) = self.record_mut() {
            record.entity_type = Some(kind.to_owned());
            record.entity_id = Some(id.to_owned());
            record.entity_name = name.map(str::to_owned);
        }
    }

    /// Names the run, thread and resource it belongs to.
    pub fn scope(&mut self, run_id: &str, thread_id: Option<&str>, resource_id: Option<&str>) {
        if let Some(record) = self.record_mut() {
            record.run_id = Some(run_id.to_owned());
            record.thread_id = thread_id.map(str::to_owned);
            record.resource_id = resource_id.map(str::to_owned);
        }
    }

    /// Sets the caller's user id, metadata and tags.
    pub fn caller(
        &mut self,
        user_id: Option<&str>,
        metadata: &Map<String, Value>,
        tags: &[String],
    ) {
        if let Some(record) = self.record_mut() {
            record.user_id = user_id.map(str::to_owned);
            record.metadata.clone_from(metadata);
            record.tags = tags.to_vec();
        }
    }

    /// Ends the span.
    pub fn end(mut self) {
        self.finish(None);
    }

    /// Ends the span as failed.
    pub fn fail(mut self, message: impl Into<String>, kind: Option<&str>) {
        self.finish(Some(SpanError {
            message: message.into(),
            kind: kind.map(str::to_owned),
        }));
    }

    fn finish(&mut self, error: Option<SpanError>) {
        if let Some(mut record) = self.record.take() {
            record.ended_at = now_ns().max(record.started_at);
            if error.is_some() {
                record.error = error;
            }
            self.tracer.record(*record);
        }
    }
}

impl Drop for ActiveSpan {
    fn drop(&mut self) {
        if self.record.is_some() {
            self.finish(Some(SpanError {
                message: "the span ended unfinished: its work was cancelled".to_owned(),
                kind: Some("cancelled".to_owned()),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::super::policy::Sampling;
    use super::*;
    use serde_json::json;

    /// A sink keeping what it gets.
    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<SpanRecord>>);

    impl SpanSink for Kept {
        fn export<'a>(&'a self, spans: &'a [SpanRecord]) -> BoxFuture<'a, ()> {
            self.0.lock().unwrap().extend_from_slice(spans);
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn spans_reach_the_sinks_redacted_with_their_parents() {
        let kept = Arc::new(Kept::default());
        let tracer = Tracer::new(TracingConfig::new(), vec![kept.clone()]);
        let mut run = tracer
            .start(None, SpanType::AgentRun, "agent run: 'weather'")
            .unwrap();
        run.input(json!({"prompt": "hi", "apiKey": "sk-1"}));
        let mut tool = tracer
            .start(
                Some(&run.context()),
                SpanType::ToolCall,
                "tool: 'get_weather'",
            )
            .unwrap();
        tool.attribute("toolCallId", "c1");
        tool.fail("it broke", Some("tool"));
        let cancelled = tracer.start(Some(&run.context()), SpanType::ModelGeneration, "llm: 'm'");
        drop(cancelled);
        run.end();
        tracer.flush().await;
        let spans = kept.0.lock().unwrap().clone();
        assert_eq!(spans.len(), 3);
        let root = spans.iter().find(|s| s.is_root()).unwrap();
        assert_eq!(
            root.input,
            Some(json!({"prompt": "hi", "apiKey": "[REDACTED]"}))
        );
        assert!(root.ended_at >= root.started_at);
        for child in spans.iter().filter(|s| !s.is_root()) {
            assert_eq!(child.trace_id, root.trace_id);
            assert_eq!(child.parent_span_id.as_deref(), Some(root.span_id.as_str()));
            assert!(child.is_error());
        }
        let cancelled = spans
            .iter()
            .find(|s| s.span_type == SpanType::ModelGeneration)
            .unwrap();
        assert_eq!(
            cancelled.error.as_ref().unwrap().kind.as_deref(),
            Some("cancelled")
        );
    }

    #[tokio::test]
    async fn the_worker_drains_without_a_flush_and_unsampled_traces_record_nothing() {
        let kept = Arc::new(Kept::default());
        let tracer = Tracer::new(TracingConfig::new(), vec![kept.clone()]);
        tracer.start(None, SpanType::Generic, "one").unwrap().end();
        tokio::time::sleep(FLUSH_INTERVAL * 3).await;
        assert_eq!(kept.0.lock().unwrap().len(), 1);
        let off = Tracer::new(
            TracingConfig::new().sampling(Sampling::Never),
            vec![kept.clone()],
        );
        assert!(off.start(None, SpanType::Generic, "none").is_none());
    }

    #[tokio::test]
    async fn a_full_buffer_drops_and_counts() {
        // No sink drains it while the test fills it: no runtime worker gets to run between
        // the pushes.
        let tracer = Tracer::new(TracingConfig::new(), Vec::new());
        for _ in 0..MAX_BUFFERED_SPANS + 5 {
            tracer.start(None, SpanType::Generic, "s").unwrap().end();
        }
        assert_eq!(tracer.dropped(), 5);
        tracer.flush().await;
        tracer.start(None, SpanType::Generic, "s").unwrap().end();
        assert_eq!(tracer.dropped(), 5);
    }
}
