//! W8: two instances of a cluster on one Redis (`KESTREL_BENCH_REDIS_URL`, default
//! `redis://127.0.0.1:6379`), in one process, each with its own Redis connections.
//!
//! - `events`: the first event of a W2 run on A as a subscriber on B sees it, against the
//!   moment A's own stream yields it (p50/p99 over the runs);
//! - `abort`: `agent.run(id).abort()` on B of a run waiting in a tool on A, until A's stream ends;
//! - `takeover`: A runs on a tokio runtime of its own; its run waits in a tool; the runtime is
//!   dropped at once (its tasks die with it, as in `kill -9`); the time until B's sweep has
//!   finished the run from its SQLite snapshot, with the default lease;
//! - `commands`: Redis commands (`INFO stats`) per W2 run on a thread, and its events;
//! - `scale`: N concurrent W2 streams (50 ms model latency) on one instance, then split over two.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel::agent::Agent;
use kestrel::cluster::Cluster;
use kestrel::kestrel::Kestrel;
use kestrel::prelude::*;
use kestrel::redis::{RedisCluster, RedisPubSubOptions};
use kestrel::store::{InMemoryRunStore, RunPhase, SharedRunStore};
use serde_json::{Value, json};

use super::{percentile, w2_agent};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn redis_url() -> String {
    std::env::var("KESTREL_BENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("kestrel-bench:{nanos}:")
}

async fn member(
    prefix: &str,
    id: &str,
    ttl: Option<Duration>,
) -> Result<(RedisCluster, Cluster), BoxError> {
    let redis = RedisCluster::connect_with(
        &redis_url(),
        RedisPubSubOptions::default().key_prefix(prefix),
    )
    .await?;
    let mut cluster = redis.cluster().instance_id(id);
    if let Some(ttl) = ttl {
        cluster = cluster.lease_ttl(ttl);
    }
    Ok((redis, cluster))
}

async fn instance(
    prefix: &str,
    id: &str,
    agent: Agent,
    store: &SharedRunStore,
) -> Result<Kestrel, BoxError> {
    let (redis, cluster) = member(prefix, id, None).await?;
    Ok(Kestrel::builder()
        .agent(agent)
        .run_store(Arc::clone(store))
        .pubsub(redis.pubsub())
        .cluster(cluster)
        .build()?)
}

/// An instance of W2's agent (no model latency).
async fn w2_instance(prefix: &str, id: &str, store: &SharedRunStore) -> Result<Kestrel, BoxError> {
    instance(
        prefix,
        id,
        w2_agent(None).map_err(|e| e.to_string())?,
        store,
    )
    .await
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} runs",
        percentile(&samples, 0.5) / 1e3,
        percentile(&samples, 0.99) / 1e3,
        percentile(&samples, 1.0) / 1e3,
        samples.len()
    );
}

/// The first event of a run on A, seen on B; with `on_sqlite`, the runs are saved in SQLite
/// (a durable store: each run's start also looks for runs a dead instance left on its thread).
pub async fn events(runs: usize, on_sqlite: bool) -> Result<(), BoxError> {
    let prefix = prefix();
    let dir = tempfile::tempdir()?;
    let store: SharedRunStore = if on_sqlite {
        let sqlite = kestrel_storage::SqliteStorage::open(&dir.path().join("w8.db")).await?;
        Arc::new(sqlite)
    } else {
        Arc::new(InMemoryRunStore::new())
    };
    let a = w2_instance(&prefix, "a", &store).await?;
    let b = w2_instance(&prefix, "b", &store).await?;
    let (on_a, on_b) = (a.agent("w2")?, b.agent("w2")?);
    let (mut on_a_samples, mut on_b_samples) = (Vec::new(), Vec::new());
    for n in 0..runs {
        let thread = format!("t{n}");
        let mut watch = on_b.thread("bench", &thread).subscribe().await?;
        let start = Instant::now();
        // B reads on its own task while A's stream is read here.
        let watching = tokio::spawn(async move {
            let seen = watch.next().await;
            (seen.map(|e| e.run_id), Instant::now())
        });
        let mut stream = on_a
            .stream("What is 2 + 3?")
            .memory(&thread, "bench")
            .into_stream();
        let first = stream.next().await.ok_or("no first event")?;
        on_a_samples.push(start.elapsed());
        let (seen, at_b) = watching.await?;
        on_b_samples.push(at_b - start);
        assert_eq!(seen.as_deref(), Some(&*first.run_id));
        while stream.next().await.is_some() {}
    }
    report(
        "w8 first event of a run on A, read from A's own stream (since the run started)",
        on_a_samples,
    );
    report(
        "w8 first event of a run on A, seen by a subscriber on B (since the run started)",
        on_b_samples,
    );
    Ok(())
}

/// A run on A waits in a tool until aborted; B aborts it.
pub async fn abort(runs: usize) -> Result<(), BoxError> {
    let prefix = prefix();
    let store: SharedRunStore = Arc::new(InMemoryRunStore::new());
    let waiting = || -> Result<Agent, BoxError> {
        let model = ScriptedModel::from_fn(|_| ScriptedResponse::tool_call("c", "wait", json!({})))
            .without_recording();
        let wait = create_tool("wait")
            .description("Waits until the run is aborted")
            .input_schema(json!({"type": "object"}))
            .execute(|_input: Value, ctx| async move {
                ctx.abort_signal().aborted().await;
                Ok("aborted".to_owned())
            });
        Ok(Agent::builder("waiter")
            .model(Arc::new(model))
            .tool(wait)
            .build()?)
    };
    let a = instance(&prefix, "a", waiting()?, &store).await?;
    let b = instance(&prefix, "b", waiting()?, &store).await?;
    let (on_a, on_b) = (a.agent("waiter")?, b.agent("waiter")?);
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut stream = on_a.stream("wait").into_stream();
        let run_id = stream.run_id().to_owned();
        // Until the tool runs.
        while let Some(event) = stream.next().await {
            if matches!(event.kind, EventKind::ToolCall(_)) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let start = Instant::now();
        on_b.run(&run_id).abort().await?;
        while stream.next().await.is_some() {}
        samples.push(start.elapsed());
    }
    report("w8 abort from B until the run on A stopped", samples);
    Ok(())
}

/// Takeover after A's runtime (all its tasks) is dropped mid-tool.
pub async fn takeover(rounds: usize) -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("w8.db");
    let sqlite = kestrel_storage::SqliteStorage::open(&path).await?;
    let store: SharedRunStore = Arc::new(sqlite);
    let agent = |blocking: bool| -> Result<Agent, BoxError> {
        let model = ScriptedModel::from_fn(|req| {
            if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
                ScriptedResponse::text("done")
            } else {
                ScriptedResponse::tool_call("c", "work", json!({}))
            }
        })
        .without_recording();
        let work = create_tool("work")
            .description("Works (forever, on the instance that dies)")
            .input_schema(json!({"type": "object"}))
            .execute(move |_input: Value, _ctx| async move {
                if blocking {
                    std::future::pending::<()>().await;
                }
                Ok("worked".to_owned())
            });
        Ok(Agent::builder("worker")
            .model(Arc::new(model))
            .tool(work)
            .build()?)
    };
    let prefix = prefix();
    let b = instance(&prefix, "b", agent(false)?, &store).await?;
    let mut samples = Vec::new();
    for round in 0..rounds {
        let (started_tx, started_rx) = std::sync::mpsc::channel::<String>();
        let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
        let (store_a, prefix_a, agent_a) = (Arc::clone(&store), prefix.clone(), agent(true)?);
        let dying = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let a = runtime.block_on(async {
                let a = instance(&prefix_a, &format!("a{round}"), agent_a, &store_a)
                    .await
                    .map_err(|e| e.to_string())?;
                let stream = a
                    .agent("worker")
                    .map_err(|e| e.to_string())?
                    .stream("work")
                    .into_stream();
                let run_id = stream.run_id().to_owned();
                tokio::spawn(stream.collect());
                // Long enough for the tool to be running (and the start snapshot saved).
                tokio::time::sleep(Duration::from_millis(200)).await;
                started_tx.send(run_id).map_err(|e| e.to_string())?;
                Ok::<_, String>(a)
            })?;
            let _ = kill_rx.recv();
            // Every task of A ends here, at once: no release, no last write.
            runtime.shutdown_background();
            drop(a);
            Ok(())
        });
        let run_id = started_rx.recv()?;
        kill_tx.send(())?;
        let killed = Instant::now();
        dying.join().map_err(|_| "the dying instance panicked")??;
        loop {
            let stored = store.load(&run_id).await?.ok_or("the run is not stored")?;
            if stored.phase == RunPhase::Completed {
                break;
            }
            if killed.elapsed() > Duration::from_secs(120) {
                return Err("no takeover within 2 minutes".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        samples.push(killed.elapsed());
        println!(
            "  round {round}: taken over after {:.2} s",
            killed.elapsed().as_secs_f64()
        );
    }
    drop(b);
    report(
        &format!(
            "w8 takeover after the owner died (lease {} s, sweep every {} s)",
            kestrel::cluster::DEFAULT_LEASE_TTL.as_secs(),
            kestrel::cluster::DEFAULT_SWEEP_INTERVAL.as_secs()
        ),
        samples,
    );
    Ok(())
}

/// `total_commands_processed` of the Redis at `url`.
async fn commands_processed(client: &redis_client::Client) -> Result<u64, BoxError> {
    let mut connection = client.get_multiplexed_async_connection().await?;
    let info: String = redis_client::cmd("INFO")
        .arg("stats")
        .query_async(&mut connection)
        .await?;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "INFO stats has no total_commands_processed".into())
}

/// Redis commands per W2 run on a thread.
pub async fn commands(runs: usize) -> Result<(), BoxError> {
    let prefix = prefix();
    let store: SharedRunStore = Arc::new(InMemoryRunStore::new());
    let a = w2_instance(&prefix, "a", &store).await?;
    let on_a = a.agent("w2")?;
    let client = redis_client::Client::open(redis_url())?;
    let mut events = 0;
    let before = commands_processed(&client).await?;
    let start = Instant::now();
    for n in 0..runs {
        let mut stream = on_a
            .stream("What is 2 + 3?")
            .memory(format!("t{n}"), "bench")
            .into_stream();
        while stream.next().await.is_some() {
            events += 1;
        }
    }
    let elapsed = start.elapsed();
    let after = commands_processed(&client).await?;
    // The two INFO calls, and the instance's blocking inbox reads (one per 5 s block).
    let total = after - before - 2;
    let per_run = total as f64 / runs as f64;
    let events_per_run = events as f64 / runs as f64;
    println!(
        "w8 Redis commands per W2 run on a thread: {per_run:.1} ({events_per_run:.0} events, so \
         {:.1} beyond one per event) over {runs} runs in {:.1} s",
        per_run - events_per_run,
        elapsed.as_secs_f64()
    );
    Ok(())
}

/// N concurrent W2 streams with 50 ms model latency: on one instance, then half on each of two.
pub async fn scale(streams: usize) -> Result<(), BoxError> {
    let delay = Some(Duration::from_millis(50));
    for instances in [1usize, 2] {
        let prefix = prefix();
        let store: SharedRunStore = Arc::new(InMemoryRunStore::new());
        let mut agents = Vec::new();
        let mut kept = Vec::new();
        for i in 0..instances {
            let k = instance(
                &prefix,
                &format!("i{i}"),
                w2_agent(delay).map_err(|e| e.to_string())?,
                &store,
            )
            .await?;
            agents.push(k.agent("w2")?.clone());
            kept.push(k);
        }
        let done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let tasks: Vec<_> = (0..streams)
            .map(|n| {
                let agent = agents[n % instances].clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let began = Instant::now();
                    let mut stream = agent
                        .stream("What is 2 + 3?")
                        .memory(format!("t{n}"), "bench")
                        .into_stream();
                    while stream.next().await.is_some() {}
                    done.fetch_add(1, Ordering::Relaxed);
                    began.elapsed()
                })
            })
            .collect();
        let mut latencies = Vec::with_capacity(streams);
        for task in tasks {
            latencies.push(task.await?);
        }
        let wall = start.elapsed();
        latencies.sort();
        println!(
            "w8 {streams} concurrent W2 streams on {instances} instance(s): wall {:.2} s, per-stream p50 {:.0} ms, p99 {:.0} ms",
            wall.as_secs_f64(),
            percentile(&latencies, 0.5) / 1e3,
            percentile(&latencies, 0.99) / 1e3
        );
        drop(kept);
    }
    Ok(())
}
