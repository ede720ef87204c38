//! Workflows. W9: the five-step workflow of Mastra's fixture (s1 → parallel(a, b) →
//! branch(hi | lo) → s3, numeric steps), run after run, with `start` (the result) and `stream`
//! (every event read), its runs kept in memory. W10: the same with a last step that suspends,
//! on SQLite: one start, suspension and resume per run. W11: many W9 runs at once whose steps
//! each wait 10 ms: the wall time and the peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::workflow::{Workflow, WorkflowStatus, create_step, when};
use serde_json::{Value, json};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct V {
    v: i64,
}

fn w9() -> Result<Workflow, Box<dyn std::error::Error>> {
    five_steps(None)
}

/// The five steps; with `wait`, each step waits that long first (W11).
fn five_steps(wait: Option<Duration>) -> Result<Workflow, Box<dyn std::error::Error>> {
    let pause = move || async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    };
    let s1 = create_step("s1").execute(move |n: V, _ctx| async move {
        pause().await;
        Ok(V { v: n.v * 2 })
    });
    let a = create_step("a").execute(move |n: V, _ctx| async move {
        pause().await;
        Ok(json!({"x": n.v * 2}))
    });
    let b = create_step("b").execute(move |n: V, _ctx| async move {
        pause().await;
        Ok(json!({"y": n.v * 3}))
    });
    let sum = |input: &Value| {
        input["a"]["x"].as_i64().unwrap_or(0) + input["b"]["y"].as_i64().unwrap_or(0)
    };
    let hi = create_step("hi").execute(move |ab: Value, _ctx| async move {
        pause().await;
        Ok(V { v: sum(&ab) })
    });
    let lo = create_step("lo").execute(move |ab: Value, _ctx| async move {
        pause().await;
        Ok(V { v: -sum(&ab) })
    });
    let s3 = create_step("s3").execute(move |h: Value, _ctx| async move {
        pause().await;
        Ok(V {
            v: h["hi"]["v"].as_i64().unwrap_or(0) * 10,
        })
    });
    Ok(Workflow::builder("w9")
        .then(s1)
        .parallel([a, b])
        .branch([
            (when(move |c| async move { Ok(sum(&c.input) > 5) }), hi),
            (when(move |c| async move { Ok(sum(&c.input) <= 5) }), lo),
        ])
        .then(s3)
        .commit()?)
}

/// `start` and `stream` (or only the one named by `only`), `runs` runs per batch.
pub async fn w9_bench(runs: usize, only: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let workflow = w9()?;
    let (start, stream) = match only {
        None => (true, true),
        Some("start") => (true, false),
        Some("stream") => (false, true),
        Some(other) => return Err(format!("w9 runs start or stream, not {other:?}").into()),
    };
    if start {
        w9_start(&workflow, runs).await?;
    }
    if stream {
        w9_stream(&workflow, runs).await?;
    }
    Ok(())
}

async fn w9_start(workflow: &Workflow, runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    super::per_run_batches("w9 start (5 steps, no storage)", runs, 11, || {
        let workflow = workflow.clone();
        async move {
            let result = workflow.create_run().start(json!({"v": 1})).await?;
            debug_assert_eq!(result.result, Some(json!({"v": 100})));
            Ok(())
        }
    })
    .await
}

async fn w9_stream(workflow: &Workflow, runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    super::per_run_batches("w9 stream (5 steps, every event read)", runs, 11, || {
        let workflow = workflow.clone();
        async move {
            let mut stream = workflow.create_run().stream(json!({"v": 1})).await?;
            let mut events = 0;
            while stream.next().await.is_some() {
                events += 1;
            }
            debug_assert_eq!(events, 12);
            stream.result().await?;
            Ok(())
        }
    })
    .await
}

/// W10's workflow: W9's first four entries, then `ask`, which suspends until resumed with
/// `{ok}`; its runs on SQLite (`store`).
fn w10(
    store: kestrel::workflow::SharedWorkflowStore,
) -> Result<Workflow, Box<dyn std::error::Error>> {
    let s1 = create_step("s1").execute(|n: V, _ctx| async move { Ok(V { v: n.v * 2 }) });
    let a = create_step("a").execute(|n: V, _ctx| async move { Ok(json!({"x": n.v * 2})) });
    let b = create_step("b").execute(|n: V, _ctx| async move { Ok(json!({"y": n.v * 3})) });
    let sum = |input: &Value| {
        input["a"]["x"].as_i64().unwrap_or(0) + input["b"]["y"].as_i64().unwrap_or(0)
    };
    let hi = create_step("hi").execute(move |ab: Value, _ctx| async move { Ok(V { v: sum(&ab) }) });
    let lo =
        create_step("lo").execute(move |ab: Value, _ctx| async move { Ok(V { v: -sum(&ab) }) });
    let ask = create_step("ask").execute(|h: Value, ctx| async move {
        match ctx.resume_data() {
            None => Err(ctx.suspend(json!({"q": "approve?"}))),
            Some(_) => Ok(V {
                v: h["hi"]["v"].as_i64().unwrap_or(0) * 10,
            }),
        }
    });
    Ok(Workflow::builder("w10")
        .store(store)
        .then(s1)
        .parallel([a, b])
        .branch([
            (when(move |c| async move { Ok(sum(&c.input) > 5) }), hi),
            (when(move |c| async move { Ok(sum(&c.input) <= 5) }), lo),
        ])
        .then(ask)
        .commit()?)
}

/// W10: `runs` start-suspend-resume cycles per batch on SQLite (a file in a temporary
/// directory, the store's default durability: WAL, `Synchronous::Runs`, under which workflow
/// snapshots are not synced; `KESTREL_BENCH_SQLITE_SYNC=full` syncs every commit).
pub async fn w10_bench(runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let storage = kestrel_storage::SqliteStorage::open_with(
        dir.path().join("w10.db"),
        crate::sqlite_options(),
    )
    .await?;
    let store = Arc::new(kestrel_storage::StorageWorkflowStore::new(Arc::new(
        storage,
    )));
    let workflow = w10(store)?;
    super::per_run_batches(
        "w10 start + suspend + resume (5 steps, SQLite)",
        runs,
        11,
        || {
            let workflow = workflow.clone();
            async move {
                let run = workflow.create_run();
                let stopped = run.start(json!({"v": 1})).await?;
                debug_assert_eq!(stopped.status, WorkflowStatus::Suspended);
                let done = run.resume(None, json!({"ok": true})).await?;
                debug_assert_eq!(done.status, WorkflowStatus::Success);
                Ok(())
            }
        },
    )
    .await
}

/// W11: `runs` W9 runs at once, each step waiting 10 ms: the wall time and the process's peak
/// RSS (run each size in its own process).
pub async fn w11_bench(runs: usize) -> Result<(), Box<dyn std::error::Error>> {
    let workflow = five_steps(Some(Duration::from_millis(10)))?;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(runs);
    for _ in 0..runs {
        let workflow = workflow.clone();
        tasks.push(tokio::spawn(async move {
            workflow.create_run().start(json!({"v": 1})).await
        }));
    }
    let mut succeeded = 0;
    for task in tasks {
        if task.await??.status == WorkflowStatus::Success {
            succeeded += 1;
        }
    }
    let wall = start.elapsed();
    println!(
        "w11: {runs} concurrent runs of 5 steps waiting 10 ms each ({succeeded} succeeded), \
         wall {:.0} ms, peak RSS {:.1} MB",
        wall.as_secs_f64() * 1e3,
        super::peak_rss_mb().unwrap_or(f64::NAN)
    );
    Ok(())
}
