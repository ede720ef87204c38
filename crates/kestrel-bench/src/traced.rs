//! W1, W2, W3 and W5 with tracing, to measure what it costs (issue 40).
//!
//! `KESTREL_BENCH_TRACING` chooses: unset, the agent runs on its own (the figures of the
//! tables before tracing); `off`, in a `Kestrel` instance that does not trace; `memory`, in
//! one that traces into its in-memory span store; `otlp`, the same with an OTLP exporter
//! configured by `OTEL_EXPORTER_OTLP_*` (a receiver such as `python -m oteltap` listening).
//! After the runs it prints the spans per run and the bytes per span (as JSON).

use std::sync::Arc;

use kestrel::agent::Agent;
use kestrel::kestrel::Kestrel;
use kestrel::trace::{TraceQuery, TracingConfig};

/// What `KESTREL_BENCH_TRACING` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The agent alone.
    Alone,
    /// In an instance that does not trace.
    Off,
    /// Traced into memory.
    Memory,
    /// Traced into memory and exported over OTLP.
    Otlp,
}

impl Mode {
    /// The mode of this process.
    pub fn from_env() -> Result<Self, Box<dyn std::error::Error>> {
        Ok(match std::env::var("KESTREL_BENCH_TRACING").as_deref() {
            Err(_) => Self::Alone,
            Ok("off") => Self::Off,
            Ok("memory") => Self::Memory,
            Ok("otlp") => Self::Otlp,
            Ok(other) => {
                return Err(format!(
                    "KESTREL_BENCH_TRACING={other:?}: expected off, memory or otlp"
                )
                .into());
            }
        })
    }
}

/// `agent` as the benchmark runs it in `mode`, and its instance (kept alive beside it).
pub fn place(
    agent: Agent,
    mode: Mode,
) -> Result<(Agent, Option<Kestrel>), Box<dyn std::error::Error>> {
    if mode == Mode::Alone {
        return Ok((agent, None));
    }
    let id = agent.id().to_owned();
    let mut builder = Kestrel::builder().agent(agent);
    if mode != Mode::Off {
        builder = builder.tracing(TracingConfig::new());
    }
    if mode == Mode::Otlp {
        let exporter = kestrel::otlp::OtlpExporter::from_env()?
            .ok_or("KESTREL_BENCH_TRACING=otlp needs OTEL_EXPORTER_OTLP_ENDPOINT")?;
        builder = builder.span_sink(Arc::new(exporter));
    }
    let kestrel = builder.build()?;
    let agent = kestrel.agent(&id)?.clone();
    Ok((agent, Some(kestrel)))
}

/// Prints the spans per run and bytes per span the instance recorded over `runs` runs.
pub async fn report(
    kestrel: Option<&Kestrel>,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let Some(tracer) = kestrel.and_then(Kestrel::tracer) else {
        return Ok(());
    };
    tracer.flush().await;
    let Some(store) = tracer.store() else {
        return Ok(());
    };
    let page = store.list_traces(&TraceQuery::default()).await?;
    let Some(newest) = page.traces.first() else {
        return Ok(());
    };
    let spans = store.trace(&newest.root.trace_id).await?;
    let bytes: usize = spans
        .iter()
        .map(|s| serde_json::to_vec(s).map_or(0, |v| v.len()))
        .sum();
    println!(
        "tracing: {} spans per run, {:.0} bytes per span (JSON), {} traces kept of {runs} runs, {} spans dropped",
        spans.len(),
        bytes as f64 / spans.len().max(1) as f64,
        page.total,
        tracer.dropped()
    );
    Ok(())
}
