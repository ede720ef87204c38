//! [`OtlpExporter`]: a span sink that sends Kestrel's finished spans to an OTLP/HTTP endpoint,
//! from a task of its own, through a bounded queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kestrel_core::trace::{SpanRecord, SpanSink};
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use tokio::sync::{mpsc, oneshot};

use crate::convert::span_data;

/// How spans travel to the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`, the default).
    HttpProtobuf,
    /// OTLP/HTTP with JSON bodies (`http/json`).
    HttpJson,
}

/// Why an exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The configuration (in code or in `OTEL_EXPORTER_OTLP_*`) is not usable.
    #[error("the OTLP exporter cannot be built: {0}")]
    Config(String),
    /// It was built outside a Tokio runtime, which its sending task needs.
    #[error("the OTLP exporter must be built inside a Tokio runtime")]
    NoRuntime,
}

/// Batches waiting to be sent, by default; past it new batches are dropped (and counted).
pub const DEFAULT_MAX_QUEUED_BATCHES: usize = 64;

/// Builds an [`OtlpExporter`]. What is not set here comes from the standard variables
/// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `..._PROTOCOL`,
/// `..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`), then from OpenTelemetry's defaults
/// (`http://localhost:4318/v1/traces`, protobuf, 10 s).
#[derive(Debug, Clone, Default)]
pub struct OtlpExporterBuilder {
    endpoint: Option<String>,
    protocol: Option<OtlpProtocol>,
    headers: HashMap<String, String>,
    timeout: Option<Duration>,
    service_name: Option<String>,
    max_queued_batches: Option<usize>,
}

impl OtlpExporterBuilder {
    /// The full URL spans are posted to (`http://127.0.0.1:4318/v1/traces`).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// Protobuf or JSON bodies.
    pub fn protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// A header sent with every request (an API key, say).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// How long one request may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The `service.name` of the resource (default: `OTEL_SERVICE_NAME`, else `kestrel`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// How many batches may wait while the endpoint is slow (at least 1).
    pub fn max_queued_batches(mut self, batches: usize) -> Self {
        self.max_queued_batches = Some(batches.max(1));
        self
    }

    /// The exporter, its sending task started on the current Tokio runtime.
    pub fn build(self) -> Result<OtlpExporter, OtlpError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        if let Some(protocol) = self.protocol {
            builder = builder.with_protocol(match protocol {
                OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
                OtlpProtocol::HttpJson => Protocol::HttpJson,
            });
        }
        if !self.headers.is_empty() {
            builder = builder.with_headers(self.headers.clone());
        }
        if let Some(timeout) = self.timeout {
            builder = builder.with_timeout(timeout);
        }
        let mut exporter = builder
            .build()
            .map_err(|e| OtlpError::Config(e.to_string()))?;
        let service = self
            .service_name
            .or_else(|| std::env::var("OTEL_SERVICE_NAME").ok())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "kestrel".to_owned());
        exporter.set_resource(&Resource::builder().with_service_name(service).build());
        let scope = InstrumentationScope::builder("kestrel")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let (tx, rx) = mpsc::channel(
            self.max_queued_batches
                .unwrap_or(DEFAULT_MAX_QUEUED_BATCHES),
        );
        let stats = Arc::new(Stats::default());
        handle.spawn(send(exporter, rx, Arc::clone(&stats)));
        Ok(OtlpExporter { tx, stats, scope })
    }
}

enum Message {
    /// Converted by the tracer's worker, as they are handed over: the records are not copied.
    Spans(Vec<SpanData>),
    Flush(oneshot::Sender<()>),
}

#[derive(Debug, Default)]
struct Stats {
    exported: AtomicU64,
    dropped: AtomicU64,
    /// Whether the first drop was logged (later ones are counted quietly).
    warned: AtomicBool,
}

impl Stats {
    fn drop_spans(&self, count: usize, why: &str) {
        self.dropped.fetch_add(count as u64, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                spans = count,
                "OTLP export: {why}; spans are dropped (counted in OtlpExporter::dropped, logged once)"
            );
        } else {
            tracing::debug!(spans = count, "OTLP export: {why}");
        }
    }
}

/// The sending task: one batch at a time, in order.
async fn send(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<Message>,
    stats: Arc<Stats>,
) {
    while let Some(message) = rx.recv().await {
        let batch = match message {
            Message::Spans(batch) => batch,
            Message::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        let count = batch.len();
        match exporter.export(batch).await {
            Ok(()) => {
                stats.exported.fetch_add(count as u64, Ordering::Relaxed);
            }
            Err(error) => stats.drop_spans(count, &format!("the endpoint failed: {error}")),
        }
    }
}

/// Sends the spans of a [`Tracer`](kestrel_core::trace::Tracer) to an OTLP/HTTP endpoint, as
/// OpenTelemetry spans with Kestrel's own ids, `"{operation} {identifier}"` names and the
/// GenAI conventions' `gen_ai.*` attributes (see [`crate::convert`]).
///
/// Never in a run's way: the tracer hands it batches off the runs, it queues them (bounded,
/// [`OtlpExporterBuilder::max_queued_batches`]) for a task of its own, and a batch the queue
/// has no room for, or the endpoint refuses, is dropped, counted ([`OtlpExporter::dropped`])
/// and logged once.
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use kestrel_core::kestrel::Kestrel;
/// use kestrel_core::trace::TracingConfig;
/// use kestrel_otlp::OtlpExporter;
///
/// let exporter = OtlpExporter::builder()
///     .endpoint("http://127.0.0.1:6006/v1/traces")
///     .build()?;
/// let kestrel = Kestrel::builder()
///     .tracing(TracingConfig::new())
///     .span_sink(Arc::new(exporter))
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OtlpExporter {
    tx: mpsc::Sender<Message>,
    stats: Arc<Stats>,
    /// What the spans are recorded by (Kestrel and its version).
    scope: InstrumentationScope,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spans(spans) => write!(f, "Spans({})", spans.len()),
            Self::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl OtlpExporter {
    /// A builder, every setting defaulting to the `OTEL_EXPORTER_OTLP_*` variables.
    pub fn builder() -> OtlpExporterBuilder {
        OtlpExporterBuilder::default()
    }

    /// An exporter configured by the environment alone, when it names an endpoint
    /// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`); `None` when it
    /// names none, so nothing is sent anywhere unless asked.
    pub fn from_env() -> Result<Option<Self>, OtlpError> {
        let named = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .iter()
        .any(|var| std::env::var(var).is_ok_and(|v| !v.trim().is_empty()));
        if !named {
            return Ok(None);
        }
        Self::builder().build().map(Some)
    }

    /// How many spans the endpoint accepted.
    pub fn exported(&self) -> u64 {
        self.stats.exported.load(Ordering::Relaxed)
    }

    /// How many spans were dropped: the queue was full, the endpoint failed, or a record was
    /// not exportable.
    pub fn dropped(&self) -> u64 {
        self.stats.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every batch handed over so far was sent (or dropped). Flush the tracer
    /// first ([`Tracer::flush`](kestrel_core::trace::Tracer::flush)), so it has handed them
    /// over.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

impl SpanSink for OtlpExporter {
    fn export<'a>(&'a self, spans: &'a [SpanRecord]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if spans.is_empty() {
                return;
            }
            // A full queue drops the batch before any work is spent on it.
            let Ok(permit) = self.tx.try_reserve() else {
                self.stats.drop_spans(spans.len(), "the queue is full");
                return;
            };
            let mut batch = Vec::with_capacity(spans.len());
            for span in spans {
                match span_data(span, &self.scope) {
                    Ok(data) => batch.push(data),
                    Err(error) => self.stats.drop_spans(1, &error.to_string()),
                }
            }
            if batch.is_empty() {
                return;
            }
            permit.send(Message::Spans(batch));
        })
    }
}
