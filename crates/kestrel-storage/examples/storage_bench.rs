//! Storage benchmark: the per-turn cost of memory, and history loads and text searches in a big
//! store, on SQLite (and PostgreSQL with `--postgres URL`).
//!
//! ```sh
//! cargo run --release -p kestrel-storage --example storage_bench -- \
//!     [--turns 2000] [--messages 1000000] [--threads 1000] [--samples 2000] [--dir DIR] \
//!     [--postgres postgres://postgres@127.0.0.1:5432/test] [--keep-schema true]
//! ```
//!
//! 1. **append + load last 10** (SQLite): `--turns` times, append a turn (a user and an assistant
//!    message) to one thread, then load its last 10 messages; µs per turn.
//! 2. **big store** (SQLite, then PostgreSQL when `--postgres` is given, in a fresh schema that is
//!    dropped afterwards): seed `--messages` messages over `--threads` threads (100 resources;
//!    through `append_messages`, 1,000 per batch), then, on random threads, `--samples` times:
//!    - load the last 10 messages;
//!    - every 10th sample, text searches (limit 5): a rare term in the thread (`message 7:`, one
//!      match per thread), a term in every message (`kestrel`), a term in no message
//!      (`osprey`), and the rare term over the thread's resource (10 threads).
//!
//!    p50/p95/p99 of each.
//! 3. **semantic search** (with `--dimension N`, default 384, 0 to skip): every seeded message
//!    also gets an `N`-dimensional unit vector (deterministic pseudo-random) in a vector index,
//!    with its thread and resource; every 10th sample then runs a top-5 exact-scan query
//!    filtered to the thread, and one filtered to the thread's resource.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel_core::message::{Message, Part, Role};
use kestrel_storage::prelude::*;
use kestrel_storage::{
    MessageSearch, NewMessage, NewThread, PgOptions, PostgresStorage, Scope, Selection,
    SqliteStorage, Storage, VectorFilter, VectorQuery, VectorRecord,
};
use serde_json::json;

/// The vector index the benchmark seeds.
const INDEX: &str = "bench_messages";

struct Args {
    turns: u32,
    messages: u64,
    threads: u64,
    samples: u32,
    dir: Option<PathBuf>,
    postgres: Option<String>,
    keep_schema: bool,
    dimension: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        turns: 2000,
        messages: 1_000_000,
        threads: 1000,
        samples: 2000,
        dir: None,
        postgres: None,
        keep_schema: false,
        dimension: 384,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--turns" => args.turns = number()? as u32,
            "--messages" => args.messages = number()?,
            "--threads" => args.threads = number()?.max(1),
            "--samples" => args.samples = number()? as u32,
            "--dir" => args.dir = Some(PathBuf::from(&value)),
            "--postgres" => args.postgres = Some(value.clone()),
            "--keep-schema" => args.keep_schema = value == "true",
            "--dimension" => args.dimension = number()? as usize,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

fn message(role: Role, i: u64) -> NewMessage {
    let text = format!(
        "Message {i}: the kestrel hovers over the field, scanning for voles; \
         it is turn {} of a long conversation about birds of prey.",
        i / 2
    );
    NewMessage::from(Message::new(role, vec![Part::Text { text }]))
}

/// A deterministic pseudo-random unit vector for `seed`.
fn unit_vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..dimension)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len().saturating_sub(1)) as f64 * p).round() as usize;
    sorted
        .get(index)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "  {what}, {} samples: p50 {:.1} µs, p95 {:.1} µs, p99 {:.1} µs",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.95),
        percentile(&samples, 0.99)
    );
}

fn file_size(path: &std::path::Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(name).ok()
        })
        .map(|m| m.len())
        .sum()
}

async fn append_and_load(
    dir: &std::path::Path,
    turns: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let path = dir.join("turns.db");
    let store = SqliteStorage::open(&path).await?;
    let thread = store.create_thread(NewThread::new("bench")).await?;
    let start = Instant::now();
    for i in 0..u64::from(turns) {
        let turn = vec![
            message(Role::User, 2 * i),
            message(Role::Assistant, 2 * i + 1),
        ];
        store.append_messages(&thread.id, "bench", turn).await?;
        let history = store
            .list_messages(&thread.id, Some("bench"), Selection::last(10))
            .await?;
        assert!(history.messages.len() >= 2);
    }
    let per_turn = start.elapsed().as_secs_f64() * 1e6 / f64::from(turns);
    println!(
        "sqlite: append turn (2 messages) + load last 10, {turns} turns: {per_turn:.1} µs per turn; file {:.1} MB",
        file_size(&path) as f64 / 1e6
    );
    store.close().await;
    Ok(())
}

fn resource_of(thread: u64) -> String {
    format!("user-{}", thread % 100)
}

async fn seed(store: &dyn Storage, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let per_thread = args.messages / args.threads;
    if args.dimension > 0 {
        store.create_index(INDEX, args.dimension).await?;
    }
    let start = Instant::now();
    for t in 0..args.threads {
        let id = format!("thread-{t:06}");
        let resource = resource_of(t);
        store
            .create_thread(NewThread::new(resource.clone()).id(&id))
            .await?;
        let mut written = 0;
        while written < per_thread {
            let n = (per_thread - written).min(1000);
            let batch = (written..written + n)
                .map(|i| {
                    let role = if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    message(role, i)
                })
                .collect();
            let stored = store.append_messages(&id, &resource, batch).await?;
            if args.dimension > 0 {
                let vectors = stored
                    .iter()
                    .map(|m| VectorRecord {
                        id: m.id.clone(),
                        vector: unit_vector(t * 1_000_000 + m.seq as u64, args.dimension),
                        metadata:
                            json!({"thread_id": id, "resource_id": resource, "message_id": m.id})
                                .as_object()
                                .cloned()
                                .unwrap_or_default(),
                    })
                    .collect();
                store.upsert_vectors(INDEX, vectors).await?;
            }
            written += n;
        }
    }
    let total = per_thread * args.threads;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "  seeded {total} messages in {} threads: {secs:.1} s ({:.1} µs per message)",
        args.threads,
        secs * 1e6 / total as f64
    );
    Ok(())
}

async fn timed<T, F: std::future::Future<Output = T>>(f: F) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

async fn big_store(store: &dyn Storage, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next_thread = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % args.threads
    };
    let per_thread = args.messages / args.threads;
    let mut loads = Vec::with_capacity(args.samples as usize);
    let searches = ["message 7:", "kestrel", "osprey"];
    let mut thread_searches: Vec<Vec<Duration>> = vec![Vec::new(); searches.len()];
    let mut resource_searches = Vec::new();
    let mut vector_thread = Vec::new();
    let mut vector_resource = Vec::new();
    for i in 0..args.samples {
        let t = next_thread();
        let id = format!("thread-{t:06}");
        let resource = resource_of(t);
        let (history, took) =
            timed(store.list_messages(&id, Some(&resource), Selection::last(10))).await;
        loads.push(took);
        assert_eq!(history?.messages.len(), 10.min(per_thread as usize));
        if i % 10 != 0 {
            continue;
        }
        for (query, samples) in searches.iter().zip(&mut thread_searches) {
            let search = MessageSearch {
                scope: Scope::thread(&id, &resource),
                query: (*query).into(),
                limit: 5,
            };
            let (found, took) = timed(store.search_messages(search)).await;
            found?;
            samples.push(took);
        }
        let search = MessageSearch {
            scope: Scope::resource(&resource),
            query: searches[0].into(),
            limit: 5,
        };
        let (found, took) = timed(store.search_messages(search)).await;
        found?;
        resource_searches.push(took);
        if args.dimension == 0 {
            continue;
        }
        let query = unit_vector(u64::from(i) + 7, args.dimension);
        for (filter, samples) in [
            (
                VectorFilter {
                    thread_id: Some(id.clone()),
                    resource_id: None,
                },
                &mut vector_thread,
            ),
            (
                VectorFilter {
                    thread_id: None,
                    resource_id: Some(resource.clone()),
                },
                &mut vector_resource,
            ),
        ] {
            let query = VectorQuery {
                vector: query.clone(),
                top_k: 5,
                filter,
            };
            let (found, took) = timed(store.query_vectors(INDEX, query)).await;
            assert_eq!(found?.len(), 5);
            samples.push(took);
        }
    }
    report("history load (last 10 of a random thread)", loads);
    let labels = [
        "search a rare term (1 match) in a thread",
        "search a term in every message in a thread",
        "search an absent term in a thread",
    ];
    for (label, samples) in labels.iter().zip(thread_searches) {
        report(&format!("{label} of {per_thread}"), samples);
    }
    report(
        &format!(
            "search a rare term over a resource ({} threads)",
            args.threads.div_ceil(100)
        ),
        resource_searches,
    );
    if args.dimension > 0 {
        report(
            &format!(
                "semantic search, top 5 of a thread's {per_thread} vectors ({} dimensions)",
                args.dimension
            ),
            vector_thread,
        );
        report(
            &format!(
                "semantic search, top 5 over a resource ({} threads)",
                args.threads.div_ceil(100)
            ),
            vector_resource,
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    if args.turns > 0 {
        append_and_load(&dir, args.turns).await?;
    }
    if args.messages == 0 {
        return Ok(());
    }

    println!("sqlite, {} messages:", args.messages);
    let path = dir.join("history.db");
    let sqlite = SqliteStorage::open(&path).await?;
    seed(&sqlite, &args).await?;
    sqlite.catch_up_search_index().await?;
    println!("  store file: {:.1} MB", file_size(&path) as f64 / 1e6);
    big_store(&sqlite, &args).await?;
    sqlite.close().await;

    if let Some(url) = &args.postgres {
        let schema = format!("kestrel_bench_{}", std::process::id());
        println!("postgres (schema {schema}), {} messages:", args.messages);
        let pg = PostgresStorage::connect(url, PgOptions::schema(&schema)).await?;
        let shared: Arc<dyn Storage> = Arc::new(pg.clone());
        let outcome = async {
            seed(shared.as_ref(), &args).await?;
            sqlx::query("ANALYZE").execute(pg.pool()).await?;
            big_store(shared.as_ref(), &args).await
        }
        .await;
        if args.keep_schema {
            println!("  kept schema {schema}");
        } else {
            sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
                .execute(pg.pool())
                .await?;
        }
        pg.close().await;
        outcome?;
    }
    Ok(())
}
