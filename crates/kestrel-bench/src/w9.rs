//! Workflows. W9: the five-step workflow of Mastra's fixture (s1 → parallel(a, b) →
//! branch(hi | lo) → s3, numeric steps typed as Kestrel's steps are), run after run, with
//! `start` (the result) and `stream` (every event read): with no storage (the workflow keeps
//! no snapshot), and with its runs kept in the default in-memory store. W10: the same with a
//! last step that suspends, on SQLite: one start, suspension and resume per run. W11: many W9
//! runs at once whose steps each wait 10 ms: the wall time and the peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::workflow::{Workflow, WorkflowStatus, create_step, when};
use serde_json::{Value, json};

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct V {
    v: i64,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct X {
    x: i64,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Y {
    y: i64,
}

/// What the parallel entry gives: each arm's output under its step id.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Ab {
    a: X,
    b: Y,
}

/// What the branch gives when `hi` ran.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Hi {
    hi: V,
}

/// W9 as the issue states it, with no storage: the workflow keeps no snapshot of its runs.
fn w9() -> Result<Workflow, Box<dyn std::error::Error>> {
    five_steps(None, false)
}

/// The five steps; with `wait`, each step waits that long first (W11); with `keep`, every
/// run's snapshot is kept (in the default in-memory store), else none.
fn five_steps(wait: Option<Duration>, keep: bool) -> Result<Workflow, Box<dyn std::error::Error>> {
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
        Ok(X { x: n.v * 2 })
    });
    let b = create_step("b").execute(move |n: V, _ctx| async move {
        pause().await;
        Ok(Y { y: n.v * 3 })
    });
    let hi = create_step("hi").execute(move |ab: Ab, _ctx| async move {
        pause().await;
        Ok(V { v: ab.a.x + ab.b.y })
    });
    let lo = create_step("lo").execute(move |ab: Ab, _ctx| async move {
        pause().await;
        Ok(V {
            v: -(ab.a.x + ab.b.y),
        })
    });
    let s3 = create_step("s3").execute(move |h: Hi, _ctx| async move {
        pause().await;
        Ok(V { v: h.hi.v * 10 })
    });
    // A branch condition reads the JSON that reaches it.
    let sum = |input: &Value| {
        input["a"]["x"].as_i64().unwrap_or(0) + input["b"]["y"].as_i64().unwrap_or(0)
    };
    let builder = Workflow::builder(if keep { "w9-kept" } else { "w9" });
    let builder = if keep {
        builder
    } else {
        builder.should_persist_snapshot(|_| false)
    };
    Ok(builder
        .then(s1)
        .parallel([a, b])
        .branch([
            (when(move |c| async move { Ok(sum(&c.input) > 5) }), hi),
            (when(move |c| async move { Ok(sum(&c.input) <= 5) }), lo),
        ])
        .then(s3)
        .commit()?)
}

/// `start` and `stream` (or only the one named by `only`), `runs` runs per batch: with no
/// storage (the target), then with every run kept in the default in-memory store (or only
/// the one `storage` names: `none` or `memory`).
pub async fn w9_bench(
    runs: usize,
    only: Option<&str>,
    storage: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (start, stream) = match only {
        None | Some("both") => (true, true),
        Some("start") => (true, false),
        Some("stream") => (false, true),
        Some(other) => return Err(format!("w9 runs start or stream, not {other:?}").into()),
    };
    let mut workflows = Vec::new();
    if matches!(storage, None | Some("none")) {
        workflows.push((w9()?, "no storage"));
    }
    if matches!(storage, None | Some("memory")) {
        workflows.push((five_steps(None, true)?, "runs kept in memory"));
    }
    if workflows.is_empty() {
        return Err(format!("w9 runs with storage none or memory, not {storage:?}").into());
    }
    for (workflow, storage) in workflows {
        if start {
            w9_start(&workflow, storage, runs).await?;
        }
        if stream {
            w9_stream(&workflow, storage, runs).await?;
        }
    }
    Ok(())
}

async fn w9_start(
    workflow: &Workflow,
    storage: &str,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let name = format!("w9 start (5 steps, {storage})");
    super::per_run_batches(&name, runs, 11, || {
        let workflow = workflow.clone();
        async move {
            let result = workflow.create_run().start(json!({"v": 1})).await?;
            debug_assert_eq!(result.result, Some(json!({"v": 100})));
            Ok(())
        }
    })
    .await
}

async fn w9_stream(
    workflow: &Workflow,
    storage: &str,
    runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let name = format!("w9 stream (5 steps, every event read, {storage})");
    super::per_run_batches(&name, runs, 11, || {
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
    let a = create_step("a").execute(|n: V, _ctx| async move { Ok(X { x: n.v * 2 }) });
    let b = create_step("b").execute(|n: V, _ctx| async move { Ok(Y { y: n.v * 3 }) });
    let sum = |input: &Value| {
        input["a"]["x"].as_i64().unwrap_or(0) + input["b"]["y"].as_i64().unwrap_or(0)
    };
    let hi = create_step("hi").execute(|ab: Ab, _ctx| async move { Ok(V { v: ab.a.x + ab.b.y }) });
    let lo = create_step("lo").execute(|ab: Ab, _ctx| async move {
        Ok(V {
            v: -(ab.a.x + ab.b.y),
        })
    });
    let ask = create_step("ask").execute(|h: Hi, ctx| async move {
        match ctx.resume_data() {
            None => Err(ctx.suspend(json!({"q": "approve?"}))),
            Some(_) => Ok(V { v: h.hi.v * 10 }),
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
    let store = Arc::new(storage);
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
    let workflow = five_steps(Some(Duration::from_millis(10)), false)?;
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
