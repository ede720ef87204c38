//! W4: the W2 workload with `Memory` on SQLite.
//!
//! ```text
//! cargo run --release -p kestrel-bench -- w4 [RUNS] [ROUNDS]   # default 500 runs, 5 rounds
//! ```
//!
//! Each round opens a fresh SQLite file, builds the W2 agent (an `add` tool round trip then 10
//! text deltas, every event of `stream` consumed) with a `Memory` keeping the last 10 messages,
//! and makes `RUNS` sequential runs on one thread. A run therefore loads the thread's last
//! messages, stores the user message, the tool step (assistant call and tool result) and the
//! final answer: three appends and one history read. Printed: µs per run (the median round, with
//! the per-run p50/p95 of that round) and the file size at the end, with its WAL before the store
//! is closed and after (closing checkpoints the WAL into the file).

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kestrel::agent::Agent;
use kestrel::prelude::*;
use kestrel_memory::Memory;
use kestrel_storage::{Selection, SqliteStorage, Storage};
use serde_json::json;

use crate::{AddInput, DELTAS, percentile};

const THREAD: &str = "w4-thread";
const RESOURCE: &str = "w4-user";

fn agent(memory: Memory) -> Result<Agent, Box<dyn Error>> {
    let model = ScriptedModel::from_fn(|req| {
        let answered = req.messages.last().is_some_and(|m| m.role == Role::Tool);
        if answered {
            ScriptedResponse::text_deltas(DELTAS)
        } else {
            ScriptedResponse::tool_call("call-1", "add", json!({"a": 2, "b": 3}))
        }
    })
    .without_recording();
    let add = create_tool("add")
        .description("Adds two integers")
        .execute(|i: AddInput, _ctx| async move { Ok(i.a + i.b) });
    Ok(Agent::builder("w4")
        .instructions("You add numbers.")
        .model(Arc::new(model))
        .tool(add)
        .memory(memory)
        .build()?)
}

async fn run_once(agent: &Agent) -> Result<usize, AgentError> {
    let options = RunOptions::new().memory(THREAD, RESOURCE);
    let mut stream = agent
        .stream("What is 2 + 3?")
        .options(options)
        .into_stream();
    let mut events = 0;
    while let Some(_event) = stream.next().await {
        events += 1;
    }
    stream.result().await?;
    Ok(events)
}

/// The bytes of `path` plus its `-wal` file, if any.
fn size_with_wal(path: &Path) -> u64 {
    let wal = {
        let mut name = path.as_os_str().to_owned();
        name.push("-wal");
        name
    };
    [path.as_os_str().to_owned(), wal]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

struct Round {
    per_run_us: f64,
    p50_us: f64,
    p95_us: f64,
    bytes_open: u64,
    bytes_closed: u64,
}

async fn round(runs: usize) -> Result<Round, Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("w4.db");
    let store = SqliteStorage::open_with(&path, crate::sqlite_options()).await?;
    let shared: Arc<dyn Storage> = Arc::new(store.clone());
    let memory = Memory::builder()
        .storage(shared.clone())
        .last_messages(10)
        .build()?;
    let agent = agent(memory)?;
    let mut each = Vec::with_capacity(runs);
    let start = Instant::now();
    for _ in 0..runs {
        let run_start = Instant::now();
        let events = run_once(&agent).await?;
        each.push(run_start.elapsed());
        debug_assert_eq!(events, 23);
    }
    let per_run_us = start.elapsed().as_secs_f64() * 1e6 / runs as f64;
    let stored = shared
        .list_messages(THREAD, Some(RESOURCE), Selection::page(0, 1))
        .await?;
    if stored.total != Some(runs as u64 * 4) {
        return Err(format!(
            "expected {} stored messages, found {:?}",
            runs * 4,
            stored.total
        )
        .into());
    }
    let bytes_open = size_with_wal(&path);
    store.close().await;
    let bytes_closed = size_with_wal(&path);
    each.sort();
    Ok(Round {
        per_run_us,
        p50_us: percentile(&each, 0.5),
        p95_us: percentile(&each, 0.95),
        bytes_open,
        bytes_closed,
    })
}

/// Runs W4 and prints its figures.
pub(crate) async fn w4(runs: usize, rounds: usize) -> Result<(), Box<dyn Error>> {
    let runs = runs.max(1);
    // A warm-up round (not counted): page cache, allocator, lazily opened connections.
    round(runs.min(100)).await?;
    let mut results = Vec::with_capacity(rounds.max(1));
    for _ in 0..rounds.max(1) {
        results.push(round(runs).await?);
    }
    results.sort_by(|a, b| a.per_run_us.total_cmp(&b.per_run_us));
    let Some(median) = results.get(results.len() / 2) else {
        return Err("no rounds".into());
    };
    let all: Vec<String> = results
        .iter()
        .map(|r| format!("{:.1}", r.per_run_us))
        .collect();
    println!(
        "w4 stream + Memory on SQLite (tool round trip + 10 deltas, last_messages 10, one thread): \
         median {:.1} µs/run over {} rounds of {runs} sequential runs (rounds: {}); median round: \
         run p50 {:.1} µs, p95 {:.1} µs; file {:.2} MB with WAL before close, {:.2} MB after close",
        median.per_run_us,
        results.len(),
        all.join(", "),
        median.p50_us,
        median.p95_us,
        median.bytes_open as f64 / 1e6,
        median.bytes_closed as f64 / 1e6,
    );
    Ok(())
}
