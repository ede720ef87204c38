//! Recording spans off the run: [`Tracer::start`] gives an [`ActiveSpan`]; ending it appends
//! its record to a bounded buffer (a lock and a push). A worker task takes the buffer in
//! batches, applies the [`TracingConfig`] (redaction, size caps), and hands each batch to the
//! sinks (the span store, exporters). A full buffer drops new spans, counted and logged once:
//! tracing never slows or stops a run.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::policy::TracingConfig;
use super::recorded::{
    RecordedSpan, SpanCaller, SpanEntity, SpanScope, SpanValue, hex_span_id, hex_trace_id,
    parse_span_id, parse_trace_id,
};
use super::span::{SpanError, SpanRecord, SpanType, TraceContext};

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
    /// The other sinks (exporters), given each batch as [`SpanRecord`]s.
    sinks: Vec<Arc<dyn SpanSink>>,
    /// Boxed as they were started (a span lives in the futures of the calls it times), and
    /// kept boxed by the in-memory store: the box moves, the record does not.
    #[allow(clippy::vec_box)]
    buffer: Mutex<Vec<Box<RecordedSpan>>>,
    /// The last batch's vector, emptied, given back to the buffer at the next drain: the
    /// buffer never grows again from nothing (a batch is hundreds of kilobytes).
    #[allow(clippy::vec_box)]
    spare: Mutex<Vec<Box<RecordedSpan>>>,
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

    /// A tracer applying `config` that keeps its spans in `store` (where they are read back
    /// from, [`Tracer::store`]: handed over as recorded, [`SpanStore::keep`]) and hands them to
    /// `sinks` as well (an OTLP exporter...).
    ///
    /// [`SpanStore::keep`]: super::SpanStore::keep
    pub fn storing(
        config: TracingConfig,
        store: super::store::SharedSpanStore,
        sinks: Vec<Arc<dyn SpanSink>>,
    ) -> Self {
        Self::build(config, Some(store), sinks)
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
    /// not sampled. A parent whose trace id is not 32 lowercase hex digits (the W3C form every
    /// backend needs) starts a new trace; a parent span id not of 16 is left out.
    pub fn start(
        &self,
        parent: Option<&TraceContext>,
        span_type: SpanType,
        name: impl Into<String>,
    ) -> Option<ActiveSpan> {
        let (trace_id, parent_span_id) = match parent
            .and_then(|p| parse_trace_id(&p.trace_id).map(|t| (t, p.parent_span_id.as_deref())))
        {
            Some((trace_id, parent_span_id)) => (trace_id, parent_span_id.and_then(parse_span_id)),
            None => (random_trace_id(), None),
        };
        self.start_in(trace_id, parent_span_id, span_type, name.into())
    }

    /// Starts a span in trace `trace_id` under span `parent_span_id`.
    fn start_in(
        &self,
        trace_id: u128,
        parent_span_id: Option<NonZeroU64>,
        span_type: SpanType,
        name: String,
    ) -> Option<ActiveSpan> {
        if !self.inner.config.sampling.keeps_id(trace_id) {
            return None;
        }
        let record = RecordedSpan {
            trace_id,
            span_id: random_span_id(),
            parent_span_id,
            span_type,
            started_at: now_ns(),
            ended_at: 0,
            name,
            // Room for the attributes the framework sets on spans of this type.
            attributes: Vec::with_capacity(match span_type {
                SpanType::ModelGeneration => 6,
                SpanType::AgentRun => 4,
                _ => 2,
            }),
            input: None,
            output: None,
            error: None,
            entity: None,
            scope: None,
            caller: None,
        };
        Some(ActiveSpan {
            record: Some(Box::new(record)),
            tracer: self.clone(),
        })
    }

    /// Appends a finished span to the buffer (dropped and counted when it is full).
    fn record(&self, span: Box<RecordedSpan>) {
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
                self.config.sanitize_span(span);
            }
            if !self.sinks.is_empty() {
                let records: Vec<SpanRecord> = batch.iter().map(|span| span.to_record()).collect();
                for sink in &self.sinks {
                    sink.export(&records).await;
                }
            }
            if let Some(store) = &self.store {
                let spans = batch.len();
                if let Err(error) = store.keep(&mut batch).await {
                    tracing::warn!(%error, spans, "storing spans failed; the batch is dropped");
                }
            }
            batch.clear();
            if batch.capacity() <= MAX_BUFFERED_SPANS / 4 {
                *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = batch;
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
    record: Option<Box<RecordedSpan>>,
    tracer: Tracer,
}

impl ActiveSpan {
    fn record_mut(&mut self) -> Option<&mut RecordedSpan> {
        self.record.as_deref_mut()
    }

    /// The context of spans started under this one.
    pub fn context(&self) -> TraceContext {
        match &self.record {
            Some(record) => TraceContext {
                trace_id: hex_trace_id(record.trace_id),
                parent_span_id: Some(hex_span_id(record.span_id.get())),
            },
            None => TraceContext::new_trace(),
        }
    }

    /// Where spans started under this one go (`None` when this one has ended).
    pub fn as_parent(&self) -> Option<SpanParent> {
        self.record.as_ref()?;
        Some(SpanParent {
            tracer: self.tracer.clone(),
            context: self.context(),
        })
    }

    /// Starts a span under this one (`None` when this one has ended).
    pub fn child(&self, span_type: SpanType, name: impl Into<String>) -> Option<ActiveSpan> {
        let record = self.record.as_deref()?;
        self.tracer.start_in(
            record.trace_id,
            Some(record.span_id),
            span_type,
            name.into(),
        )
    }

    /// The trace's id (32 hex digits; empty once the span has ended).
    pub fn trace_id(&self) -> String {
        self.record
            .as_deref()
            .map_or_else(String::new, |r| hex_trace_id(r.trace_id))
    }

    /// This span's id (16 hex digits; empty once the span has ended).
    pub fn span_id(&self) -> String {
        self.record
            .as_deref()
            .map_or_else(String::new, |r| hex_span_id(r.span_id.get()))
    }

    /// Sets an attribute (replacing one of the same key).
    pub fn attribute(&mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Value>) {
        self.set_attribute(key.into(), SpanValue::Value(value.into()));
    }

    /// Sets an attribute to `value` as JSON, written straight from its type (no JSON tree is
    /// built: cheaper to record and to keep). Only for values of a known shape: sensitive
    /// keys are not looked for inside (the size cap still applies). Not set when `value`
    /// does not serialize.
    pub fn attribute_json(
        &mut self,
        key: impl Into<Cow<'static, str>>,
        value: &impl serde::Serialize,
    ) {
        if self.record.is_none() {
            return;
        }
        if let Some(json) = json_text(value) {
            self.set_attribute(key.into(), json);
        }
    }

    fn set_attribute(&mut self, key: Cow<'static, str>, value: SpanValue) {
        if let Some(record) = self.record_mut() {
            match record.attributes.iter_mut().find(|(k, _)| *k == key) {
                Some((_, kept)) => *kept = value,
                None => record.attributes.push((key, value)),
            }
        }
    }

    /// Sets what went in.
    pub fn input(&mut self, input: impl Into<Value>) {
        if let Some(record) = self.record_mut() {
            record.input = Some(SpanValue::Value(input.into()));
        }
    }

    /// Sets what came out.
    pub fn output(&mut self, output: impl Into<Value>) {
        if let Some(record) = self.record_mut() {
            record.output = Some(SpanValue::Value(output.into()));
        }
    }

    /// Sets what went in from a borrowed value: written now as JSON text, sensitive keys
    /// redacted (no copy of its tree is made or kept).
    pub fn input_of(&mut self, value: &Value) {
        if let Some(json) = self.redacted(value)
            && let Some(record) = self.record_mut()
        {
            record.input = Some(json);
        }
    }

    /// Sets what came out from a borrowed value, as [`ActiveSpan::input_of`] does.
    pub fn output_of(&mut self, value: &Value) {
        if let Some(json) = self.redacted(value)
            && let Some(record) = self.record_mut()
        {
            record.output = Some(json);
        }
    }

    fn redacted(&self, value: &Value) -> Option<SpanValue> {
        self.record.as_ref()?;
        json_text(&super::policy::Redacted {
            value,
            config: self.tracer.config(),
        })
    }

    /// Sets what came out to `value` as JSON, as [`ActiveSpan::attribute_json`] does.
    pub fn output_json(&mut self, value: &impl serde::Serialize) {
        if self.record.is_none() {
            return;
        }
        if let Some(json) = json_text(value)
            && let Some(record) = self.record_mut()
        {
            record.output = Some(json);
        }
    }

    /// Names what the span is about (`agent`, `weather`, `Weather agent`).
    pub fn entity(&mut self, kind: &str, id: &str, name: Option<&str>) {
        if let Some(record) = self.record_mut() {
            record.entity = Some(Arc::new(SpanEntity {
                kind: kind.into(),
                id: id.into(),
                name: name.map(Into::into),
            }));
        }
    }

    /// Names the run, thread and resource it belongs to.
    pub fn scope(&mut self, run_id: &str, thread_id: Option<&str>, resource_id: Option<&str>) {
        if let Some(record) = self.record_mut() {
            record.scope = Some(Arc::new(SpanScope {
                run_id: run_id.into(),
                thread_id: thread_id.map(Into::into),
                resource_id: resource_id.map(Into::into),
            }));
        }
    }

    /// Sets the caller's user id, metadata (sanitized as inputs are) and tags.
    pub fn caller(
        &mut self,
        user_id: Option<&str>,
        metadata: &Map<String, Value>,
        tags: &[String],
    ) {
        let config = self.tracer.config().clone();
        if let Some(record) = self.record_mut() {
            if user_id.is_none() && metadata.is_empty() && tags.is_empty() {
                record.caller = None;
                return;
            }
            record.caller = Some(Arc::new(SpanCaller {
                user_id: user_id.map(Into::into),
                metadata: config.sanitize_map(metadata.clone()),
                tags: tags.to_vec(),
            }));
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
            if let Some(error) = error {
                record.error = Some(Box::new(error));
            }
            // Kept for long: no room for attributes that will not come.
            if record.attributes.capacity() > record.attributes.len() + 1 {
                record.attributes.shrink_to_fit();
            }
            self.tracer.record(record);
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

/// `value`'s JSON text, kept to its length (`None` when it does not serialize).
fn json_text(value: &impl serde::Serialize) -> Option<SpanValue> {
    let json = serde_json::to_string(value).ok()?;
    Some(SpanValue::Json(json.into_boxed_str()))
}

/// A fresh trace id (a random UUID's 128 bits: never zero).
fn random_trace_id() -> u128 {
    uuid::Uuid::new_v4().as_u128()
}

/// A fresh span id: 64 random bits, never zero.
fn random_span_id() -> NonZeroU64 {
    loop {
        // The low half of a random UUID is random but for its variant bits.
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        if let Some(id) = NonZeroU64::new(high ^ low) {
            return id;
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
