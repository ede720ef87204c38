//! Kestrel's traces over OTLP: every span an instance records, sent to Arize Phoenix, Jaeger,
//! Grafana Tempo, an OpenTelemetry Collector or any OTLP/HTTP backend.
//!
//! [`OtlpExporter`] is a [`SpanSink`](kestrel_core::trace::SpanSink): give it to
//! [`KestrelBuilder::span_sink`](kestrel_core::kestrel::KestrelBuilder::span_sink) beside
//! [`KestrelBuilder::tracing`](kestrel_core::kestrel::KestrelBuilder::tracing). It sends the
//! span records the instance also stores, so a trace has the same ids in the backend as in
//! Kestrel's API (`/api/observability/traces/{traceId}`), and follows OpenTelemetry's GenAI
//! conventions ([`convert`]): `invoke_agent Weather Agent`, `chat gpt-4o-mini` (with the
//! token usage), `execute_tool get_weather`, `invoke_workflow ...`.
//!
//! Configured in code ([`OtlpExporter::builder`]) or by the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL` = `http/protobuf` or `http/json`, `..._HEADERS`,
//! `..._TIMEOUT`, `OTEL_SERVICE_NAME`; [`OtlpExporter::from_env`]).

pub mod convert;
mod exporter;

pub use exporter::{
    DEFAULT_MAX_QUEUED_BATCHES, OtlpError, OtlpExporter, OtlpExporterBuilder, OtlpProtocol,
};
