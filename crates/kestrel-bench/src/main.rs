//! Benchmarks of the agent loop on the scripted model.
//!
//! ```text
//! cargo run --release -p kestrel-bench -- w1          # generate, one text step of 10 deltas
//! cargo run --release -p kestrel-bench -- w2          # stream, one tool round trip + 10 deltas
//! cargo run --release -p kestrel-bench -- w3          # generate, a supervisor delegating twice
//! cargo run --release -p kestrel-bench -- w5a 10000   # N concurrent W2 runs, 50 ms model latency
//! cargo run --release -p kestrel-bench -- w5 10000    # N concurrent W3 runs, 50 ms model latency
//! cargo run --release -p kestrel-bench -- w4          # W2 with Memory on SQLite, 500 runs (see w4.rs)
//! cargo run --release -p kestrel-bench -- w6          # stop for approval + approve on SQLite (see w6.rs)
//! cargo run --release -p kestrel-bench -- w7 1000     # N concurrent SSE streams of W2 (see w7.rs)
//! cargo run --release -p kestrel-bench -- w8 events|abort|takeover|commands|scale [N] [sqlite]
//!                                                     # two instances over Redis (see w8.rs)
//! cargo run --release -p kestrel-bench -- w9 10000    # the five-step workflow, start and stream
//!                                                     # (`w9 10000 start` or `stream`: one of them;
//!                                                     # `w9 10000 both memory`: runs kept in memory)
//! cargo run --release -p kestrel-bench -- w10 1000    # ... suspended and resumed, on SQLite
//! cargo run --release -p kestrel-bench -- w11 10000   # 10,000 runs at once, steps waiting 10 ms
//! cargo run --release -p kestrel-bench -- w12 1000    # a network: agent, workflow, tool, then none
//! cargo run --release -p kestrel-bench -- rag-quality <dir>  # recall@5/MRR per backend (rag.rs)
//! cargo run --release -p kestrel-bench -- rag-latency 10000  # query p50/p99 per backend (rag.rs)
//! cargo run --release -p kestrel-bench -- rag-hnsw corpus.json # HNSW recall per ef_search (rag.rs)
//! cargo run --release -p kestrel-bench -- evals-scorers 10000  # code scorers' throughput (evals.rs)
//! cargo run --release -p kestrel-bench -- evals-experiment 100 # a 100-item experiment (evals.rs)
//! ```
//!
//! W4 and W6 open SQLite with the defaults (run saves synced); `KESTREL_BENCH_SQLITE_SYNC=full`
//! or `normal` measures them with every commit synced, or none.
//!
//! Built with `--features mimalloc`, the benchmarks run with mimalloc as the global allocator
//! instead of the system's (glibc's malloc, by default).
//!
//! `KESTREL_BENCH_TRACING=off|memory|otlp` runs W1, W2, W3 and W5 in a `Kestrel` instance
//! without tracing, tracing into memory, or also exporting over OTLP (see traced.rs).
//!
//! `KESTREL_BENCH_GUARDRAILS=on` gives the agents of W2, W3 and W5 (sub-agents too) the
//! deterministic guardrails (issue 42): on the input the unicode normalizer and the regex filter
//! (secrets and PII presets, redacting); on the output the regex filter (secrets, blocking:
//! each step held back until checked) and the PII detector's local pass, also over tool results.
//!
//! W1 and W2 run sequential batches and print the median time per run over the batches.
//! W5a prints wall time and the process's peak RSS (VmHWM), so run each size in its own process.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod evals;
mod rag;
mod traced;
mod w12;
mod w13;
mod w4;
mod w6;
mod w7;
mod w8;
mod w9;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::agent::Agent;
use kestrel::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The SQLite options of W4 and W6: the defaults (the commits that save runs synced), or
/// `KESTREL_BENCH_SQLITE_SYNC=full` (every commit) / `normal` (none), to measure what each
/// durability costs.
fn sqlite_options() -> kestrel_storage::SqliteOptions {
    use kestrel_storage::Synchronous;
    let mut options = kestrel_storage::SqliteOptions::default();
    match std::env::var("KESTREL_BENCH_SQLITE_SYNC").as_deref() {
        Ok("full") => options.synchronous = Synchronous::Full,
        Ok("normal") => options.synchronous = Synchronous::Normal,
        _ => {}
    }
    options
}

/// The `p` quantile (0 to 1) of `sorted` durations, in µs.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len().saturating_sub(1)) as f64 * p).round() as usize;
    sorted
        .get(index)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

const DELTAS: [&str; 10] = [
    "The ", "answer ", "is ", "five", ", ", "as ", "the ", "tool ", "said", ".",
];

#[derive(Deserialize, JsonSchema)]
struct AddInput {
    a: i64,
    b: i64,
}

/// The agent `builder` with the deterministic guardrails, when `KESTREL_BENCH_GUARDRAILS=on`.
fn guarded(builder: kestrel::agent::AgentBuilder) -> kestrel::agent::AgentBuilder {
    use kestrel::processors::{
        FilterStrategy, PiiDetector, Preset, RegexFilter, UnicodeNormalizer,
    };
    if std::env::var("KESTREL_BENCH_GUARDRAILS").as_deref() != Ok("on") {
        return builder;
    }
    builder
        .input_processor(UnicodeNormalizer::new())
        .input_processor(
            RegexFilter::new()
                .preset(Preset::Secrets)
                .preset(Preset::Pii),
        )
        .output_processor(
            RegexFilter::new()
                .preset(Preset::Secrets)
                .strategy(FilterStrategy::Block),
        )
        .output_processor(PiiDetector::new())
}

fn w1_agent() -> Result<Agent, Box<dyn std::error::Error>> {
    let model =
        ScriptedModel::from_fn(|_| ScriptedResponse::text_deltas(DELTAS)).without_recording();
    Ok(Agent::builder("w1")
        .instructions("You are a benchmark.")
        .model(Arc::new(model))
        .build()?)
}

/// W3: a supervisor that delegates once to each of two sub-agents (each answers with 10
/// deltas), then answers.
fn w3_agent(delay: Option<Duration>) -> Result<Agent, Box<dyn std::error::Error>> {
    let delayed = move |response: ScriptedResponse| match delay {
        Some(d) => response.with_delay(d),
        None => response,
    };
    let sub = |id: &str, description: &str| -> Result<Agent, Box<dyn std::error::Error>> {
        let model = ScriptedModel::from_fn(move |_| delayed(ScriptedResponse::text_deltas(DELTAS)))
            .without_recording();
        Ok(guarded(
            Agent::builder(id)
                .description(description)
                .instructions("You are a benchmark sub-agent.")
                .model(Arc::new(model)),
        )
        .build()?)
    };
    let model = ScriptedModel::from_fn(move |req| {
        let results = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        delayed(match results {
            0 => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "facts"})),
            1 => ScriptedResponse::tool_call("d2", "agent-writing", json!({"prompt": "prose"})),
            _ => ScriptedResponse::text_deltas(DELTAS),
        })
    })
    .without_recording();
    Ok(guarded(
        Agent::builder("supervisor")
            .instructions("You delegate.")
            .model(Arc::new(model))
            .agents([
                sub("research", "Finds facts")?,
                sub("writing", "Writes prose")?,
            ]),
    )
    .build()?)
}

fn w2_agent(delay: Option<Duration>) -> Result<Agent, Box<dyn std::error::Error>> {
    let model = ScriptedModel::from_fn(move |req| {
        let answered = req.messages.last().is_some_and(|m| m.role == Role::Tool);
        let response = if answered {
            ScriptedResponse::text_deltas(DELTAS)
        } else {
            ScriptedResponse::tool_call("call-1", "add", json!({"a": 2, "b": 3}))
        };
        match delay {
            Some(d) => response.with_delay(d),
            None => response,
        }
    })
    .without_recording();
    let add = create_tool("add")
        .description("Adds two integers")
        .execute(|i: AddInput, _ctx| async move { Ok(i.a + i.b) });
    Ok(guarded(
        Agent::builder("w2")
            .instructions("You add numbers.")
            .model(Arc::new(model))
            .tool(add),
    )
    .build()?)
}

async fn w2_run(agent: &Agent) -> Result<usize, AgentError> {
    let mut stream = agent.stream("What is 2 + 3?").into_stream();
    let mut events = 0;
    while let Some(_event) = stream.next().await {
        events += 1;
    }
    stream.result().await?;
    Ok(events)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

async fn per_run_batches<F, Fut>(
    name: &str,
    runs: usize,
    batches: usize,
    mut f: F,
) -> Result<(), Box<dyn std::error::Error>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Box<dyn std::error::Error>>>,
{
    // Warm-up batch, not counted.
    for _ in 0..runs / 10 {
        f().await?;
    }
    let mut per_run = Vec::with_capacity(batches);
    for _ in 0..batches {
        let start = Instant::now();
        for _ in 0..runs {
            f().await?;
        }
        per_run.push(start.elapsed().as_secs_f64() * 1e6 / runs as f64);
    }
    let min = per_run.iter().copied().fold(f64::INFINITY, f64::min);
    let max = per_run.iter().copied().fold(0.0, f64::max);
    println!(
        "{name}: median {:.2} µs/run over {batches} batches of {runs} runs (min {min:.2}, max {max:.2})",
        median(per_run)
    );
    Ok(())
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

async fn w5a(runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let agent = w2_agent(Some(Duration::from_millis(50)))?;
    let start = Instant::now();
    let handles: Vec<_> = (0..runs)
        .map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move { w2_run(&agent).await })
        })
        .collect();
    let mut events = 0;
    for h in handles {
        events += h.await??;
    }
    let wall = start.elapsed();
    println!(
        "w5a: {runs} concurrent runs, {events} events, wall {:.0} ms, peak RSS {:.1} MB",
        wall.as_secs_f64() * 1e3,
        peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}

/// W5: `runs` concurrent W3 runs, every model call taking 50 ms.
async fn w5(runs: usize, mode: traced::Mode) -> Result<(), Box<dyn std::error::Error>> {
    let (agent, kestrel) = traced::place(w3_agent(Some(Duration::from_millis(50)))?, mode)?;
    let start = Instant::now();
    let handles: Vec<_> = (0..runs)
        .map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let r = agent.generate("Write about kestrels").await?;
                Ok::<_, AgentError>(r.steps.len())
            })
        })
        .collect();
    let mut steps = 0;
    for h in handles {
        steps += h.await??;
    }
    let wall = start.elapsed();
    println!(
        "w5: {runs} concurrent W3 runs (5 model calls of 50 ms each), {steps} supervisor steps, \
         wall {:.0} ms, peak RSS {:.1} MB",
        wall.as_secs_f64() * 1e3,
        peak_rss_mb().unwrap_or(f64::NAN)
    );
    traced::report(kestrel.as_ref(), runs).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = traced::Mode::from_env()?;
    match args.first().map(String::as_str) {
        Some("w1") => {
            let (agent, kestrel) = traced::place(w1_agent()?, mode)?;
            per_run_batches("w1 generate (1 step, 10 deltas)", 20_000, 11, || async {
                let r = agent.generate("What is 2 + 3?").await?;
                debug_assert_eq!(r.steps.len(), 1);
                Ok(())
            })
            .await?;
            traced::report(kestrel.as_ref(), 20_000).await
        }
        Some("w2") => {
            let (agent, kestrel) = traced::place(w2_agent(None)?, mode)?;
            per_run_batches(
                "w2 stream (tool round trip + 10 deltas)",
                10_000,
                11,
                || async {
                    let n = w2_run(&agent).await?;
                    debug_assert!(n >= 23);
                    Ok(())
                },
            )
            .await?;
            traced::report(kestrel.as_ref(), 10_000).await
        }
        Some("w3") => {
            let (agent, kestrel) = traced::place(w3_agent(None)?, mode)?;
            per_run_batches(
                "w3 generate (supervisor, two delegations, answer)",
                10_000,
                11,
                || async {
                    let r = agent.generate("Write about kestrels").await?;
                    debug_assert_eq!(r.steps.len(), 3);
                    Ok(())
                },
            )
            .await?;
            traced::report(kestrel.as_ref(), 10_000).await
        }
        Some("w4") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(500);
            let rounds = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(5);
            w4::w4(runs, rounds).await
        }
        Some("w6") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            let rounds = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(5);
            w6::w6(runs, rounds).await
        }
        Some("w5") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            w5(runs, mode).await
        }
        Some("w7") => {
            let streams = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            w7::w7(streams).await
        }
        Some("w7-client") => {
            let addr = args.get(1).ok_or("w7-client needs the server's address")?;
            let streams = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            w7::w7_client(addr, streams).await
        }
        Some("w8") => {
            let n = args.get(2).map(|s| s.parse()).transpose()?;
            let outcome = match args.get(1).map(String::as_str) {
                Some("events") => {
                    let on_sqlite = args.get(3).is_some_and(|s| s == "sqlite");
                    w8::events(n.unwrap_or(1000), on_sqlite).await
                }
                Some("abort") => w8::abort(n.unwrap_or(300)).await,
                Some("takeover") => w8::takeover(n.unwrap_or(3)).await,
                Some("commands") => w8::commands(n.unwrap_or(1000)).await,
                Some("scale") => w8::scale(n.unwrap_or(1000)).await,
                _ => Err("w8 needs events, abort, takeover, commands or scale".into()),
            };
            outcome.map_err(|e| -> Box<dyn std::error::Error> { e.to_string().into() })
        }
        Some("w9") => {
            let runs = args
                .get(1)
                .map(|s| s.parse())
                .transpose()?
                .unwrap_or(10_000);
            w9::w9_bench(
                runs,
                args.get(2).map(String::as_str),
                args.get(3).map(String::as_str),
            )
            .await
        }
        Some("w10") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            w9::w10_bench(runs).await
        }
        Some("w12") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            let batches = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(11);
            w12::w12(runs, batches).await
        }
        Some("w11") => {
            let runs = args
                .get(1)
                .map(|s| s.parse())
                .transpose()?
                .unwrap_or(10_000);
            w9::w11_bench(runs).await
        }
        Some("rag-quality") => {
            let dir = args
                .get(1)
                .ok_or("usage: rag-quality <dir of Markdown pages>")?;
            rag::quality(std::path::Path::new(dir)).await
        }
        Some("evals-scorers") => {
            let n = args
                .get(1)
                .map(|s| s.parse())
                .transpose()?
                .unwrap_or(10_000);
            evals::scorers(n).await
        }
        Some("evals-experiment") => {
            let items = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(100);
            evals::experiment(items).await
        }
        Some("rag-hnsw") => {
            let corpus = args
                .get(1)
                .ok_or("usage: rag-hnsw <corpus.json exported by rag-quality>")?;
            rag::hnsw(std::path::Path::new(corpus)).await
        }
        Some("rag-latency") => {
            let n = args
                .get(1)
                .map(|s| s.parse())
                .transpose()?
                .unwrap_or(10_000);
            rag::latency(n).await
        }
        Some("w13") => {
            let calls = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(2000);
            let concurrent = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(50);
            w13::w13(calls, concurrent).await
        }
        Some("w13-serve") => w13::serve_stdio().await,
        Some("w13-serve-http") => {
            let port = args.get(1).ok_or("w13-serve-http needs a port")?.parse()?;
            w13::serve_http(port).await
        }
        Some("w5a") => {
            let runs = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
            w5a(runs).await
        }
        _ => {
            eprintln!(
                "usage: kestrel-bench w1 | w2 | w3 | w4 [RUNS] [ROUNDS] | w5 [RUNS] | w5a [RUNS] | w6 [RUNS] [ROUNDS] | w7 [STREAMS] | w8 events|abort|takeover|commands|scale [N] [sqlite] | w9 [RUNS] [start|stream|both] [none|memory] | w10 [RUNS] | w11 [RUNS] | w12 [RUNS] [BATCHES] | w13 [CALLS] [CONCURRENT]"
            );
            std::process::exit(2);
        }
    }
}
