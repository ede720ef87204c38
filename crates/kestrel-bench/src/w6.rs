//! W6: runs that stop for approval and are approved, on SQLite.
//!
//! ```text
//! cargo run --release -p kestrel-bench -- w6 [RUNS] [ROUNDS]   # default 1000 runs, 5 rounds
//! ```
//!
//! Each round opens a fresh SQLite file holding both the agent's `Memory` (last 10 messages,
//! one thread) and its run store, and makes `RUNS` sequential cycles. A cycle is `generate`,
//! which stops on an approval-gated `add` call (the input and the step's assistant message
//! stored, the run's snapshot saved), then `approve` (the snapshot loaded,
//! the decision saved with a compare-and-set, the tool run, the tool result and the final
//! 10-delta answer stored, the snapshot marked finished). Printed: µs per cycle (the median
//! round, with the per-cycle p50/p95 of that round) and the size of a suspended run's snapshot
//! as stored (its JSON), first and last cycle (it grows with the history the run carries).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel::agent::Agent;
use kestrel::kestrel::Kestrel;
use kestrel::prelude::*;
use kestrel_memory::Memory;
use kestrel_storage::{SqliteStorage, Storage};
use serde_json::json;

use crate::{AddInput, DELTAS, percentile};

const THREAD: &str = "w6-thread";
const RESOURCE: &str = "w6-user";

fn instance(store: Arc<dyn Storage>) -> Result<Kestrel, Box<dyn Error>> {
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
        .require_approval(true)
        .execute(|i: AddInput, _ctx| async move { Ok(i.a + i.b) });
    let memory = Memory::builder()
        .storage(Arc::clone(&store))
        .last_messages(10)
        .build()?;
    let agent = Agent::builder("w6")
        .instructions("You add numbers.")
        .model(Arc::new(model))
        .tool(add)
        .memory(memory)
        .build()?;
    Ok(Kestrel::builder().storage(store).agent(agent).build()?)
}

struct Round {
    per_cycle_us: f64,
    p50_us: f64,
    p95_us: f64,
    first_snapshot: usize,
    last_snapshot: usize,
}

/// The stored JSON size of the run's snapshot.
async fn snapshot_size(store: &Arc<dyn Storage>, run_id: &str) -> Result<usize, Box<dyn Error>> {
    let record = store
        .get_run(run_id)
        .await?
        .ok_or("the run has no snapshot")?;
    Ok(record.snapshot.get().len())
}

async fn round(runs: usize) -> Result<Round, Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let sqlite =
        SqliteStorage::open_with(dir.path().join("w6.db"), crate::sqlite_options()).await?;
    let store: Arc<dyn Storage> = Arc::new(sqlite.clone());
    let kestrel = instance(Arc::clone(&store))?;
    let agent = kestrel.agent("w6")?;
    let options = || RunOptions::new().memory(THREAD, RESOURCE);
    let mut each = Vec::with_capacity(runs);
    let mut sizes = Vec::new();
    for cycle in 0..runs {
        let cycle_start = Instant::now();
        let stopped = agent.generate("What is 2 + 3?").options(options()).await?;
        if stopped.finish_reason != FinishReason::Suspended {
            return Err(format!("cycle {cycle}: the run did not stop for approval").into());
        }
        let measure = cycle == 0 || cycle + 1 == runs;
        if measure {
            // Outside the timed part: read the snapshot back.
            let paused = cycle_start.elapsed();
            sizes.push(snapshot_size(&store, &stopped.run_id).await?);
            let resumed = Instant::now();
            let done = agent.run(&stopped.run_id).approve("call-1").await?;
            each.push(paused + resumed.elapsed());
            if done.finish_reason != FinishReason::Stop {
                return Err(format!("cycle {cycle}: the approved run did not finish").into());
            }
            continue;
        }
        let done = agent.run(&stopped.run_id).approve("call-1").await?;
        each.push(cycle_start.elapsed());
        if done.finish_reason != FinishReason::Stop {
            return Err(format!("cycle {cycle}: the approved run did not finish").into());
        }
    }
    let total: Duration = each.iter().sum();
    let per_cycle_us = total.as_secs_f64() * 1e6 / runs as f64;
    drop(kestrel);
    sqlite.close().await;
    each.sort();
    Ok(Round {
        per_cycle_us,
        p50_us: percentile(&each, 0.5),
        p95_us: percentile(&each, 0.95),
        first_snapshot: sizes.first().copied().unwrap_or(0),
        last_snapshot: sizes.last().copied().unwrap_or(0),
    })
}

/// Runs W6 and prints its figures.
pub(crate) async fn w6(runs: usize, rounds: usize) -> Result<(), Box<dyn Error>> {
    let runs = runs.max(1);
    // A warm-up round (not counted).
    round(runs.min(100)).await?;
    let mut results = Vec::with_capacity(rounds.max(1));
    for _ in 0..rounds.max(1) {
        results.push(round(runs).await?);
    }
    results.sort_by(|a, b| a.per_cycle_us.total_cmp(&b.per_cycle_us));
    let Some(median) = results.get(results.len() / 2) else {
        return Err("no rounds".into());
    };
    let all: Vec<String> = results
        .iter()
        .map(|r| format!("{:.1}", r.per_cycle_us))
        .collect();
    println!(
        "w6 stop for approval + approve on SQLite (Memory and run store in one file, one thread): \
         median {:.1} µs/cycle over {} rounds of {runs} sequential cycles (rounds: {}); median \
         round: cycle p50 {:.1} µs, p95 {:.1} µs; suspended snapshot {} bytes at the first \
         cycle, {} bytes at the last",
        median.per_cycle_us,
        results.len(),
        all.join(", "),
        median.p50_us,
        median.p95_us,
        median.first_snapshot,
        median.last_snapshot,
    );
    Ok(())
}
