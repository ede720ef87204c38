//! SQLite storage benchmark: the per-turn cost of memory, and history loads in a big store.
//!
//! ```sh
//! cargo run --release -p kestrel-storage --example storage_bench -- \
//!     [--turns 2000] [--messages 1000000] [--threads 1000] [--samples 2000] [--dir DIR]
//! ```
//!
//! 1. **append + load last 10**: `--turns` times, append a turn (a user and an assistant
//!    message) to one thread, then load its last 10 messages; µs per turn.
//! 2. **history load**: seed `--messages` messages over `--threads` threads (through
//!    `append_messages`, 1,000 per batch), then load the last 10 messages of random threads
//!    `--samples` times; p50/p95/p99. Also a thread-scoped text search for a rare term.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kestrel_core::message::{Message, Part, Role};
use kestrel_storage::{
    MessageSearch, NewMessage, NewThread, Scope, Selection, SqliteStorage, Storage,
};

struct Args {
    turns: u32,
    messages: u64,
    threads: u64,
    samples: u32,
    dir: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        turns: 2000,
        messages: 1_000_000,
        threads: 1000,
        samples: 2000,
        dir: None,
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

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1e6
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
        "append turn (2 messages) + load last 10, {turns} turns: {per_turn:.1} µs per turn; file {:.1} MB",
        file_size(&path) as f64 / 1e6
    );
    store.close().await;
    Ok(())
}

async fn seed(store: &SqliteStorage, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let per_thread = args.messages / args.threads;
    let start = Instant::now();
    for t in 0..args.threads {
        let id = format!("thread-{t:06}");
        store
            .create_thread(NewThread::new(format!("user-{}", t % 100)).id(&id))
            .await?;
        let mut written = 0;
        while written < per_thread {
            let n = (per_thread - written).min(1000);
            let batch = (written..written + n)
                .map(|i| {
                    message(
                        if i % 2 == 0 {
                            Role::User
                        } else {
                            Role::Assistant
                        },
                        i,
                    )
                })
                .collect();
            store
                .append_messages(&id, &format!("user-{}", t % 100), batch)
                .await?;
            written += n;
        }
    }
    let total = per_thread * args.threads;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "seeded {total} messages in {} threads: {secs:.1} s ({:.1} µs per message)",
        args.threads,
        secs * 1e6 / total as f64
    );
    Ok(())
}

async fn history_load(
    dir: &std::path::Path,
    args: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let path = dir.join("history.db");
    let store = SqliteStorage::open(&path).await?;
    seed(&store, args).await?;
    println!("store file: {:.1} MB", file_size(&path) as f64 / 1e6);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next_thread = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % args.threads
    };
    let mut loads = Vec::with_capacity(args.samples as usize);
    let mut searches = Vec::with_capacity(200);
    for i in 0..args.samples {
        let t = next_thread();
        let id = format!("thread-{t:06}");
        let resource = format!("user-{}", t % 100);
        let start = Instant::now();
        let history = store
            .list_messages(&id, Some(&resource), Selection::last(10))
            .await?;
        loads.push(start.elapsed());
        assert_eq!(history.messages.len(), 10);
        if i % 10 == 0 {
            let search = MessageSearch {
                scope: Scope::thread(&id, &resource),
                query: "Message 7:".into(),
                limit: 5,
            };
            let start = Instant::now();
            store.search_messages(search).await?;
            searches.push(start.elapsed());
        }
    }
    loads.sort();
    searches.sort();
    println!(
        "history load (last 10 of a random thread), {} samples: p50 {:.1} µs, p95 {:.1} µs, p99 {:.1} µs",
        loads.len(),
        percentile(&loads, 0.50),
        percentile(&loads, 0.95),
        percentile(&loads, 0.99)
    );
    println!(
        "text search (rare term, one thread of {}), {} samples: p50 {:.1} µs, p95 {:.1} µs",
        args.messages / args.threads,
        searches.len(),
        percentile(&searches, 0.50),
        percentile(&searches, 0.95)
    );
    store.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    append_and_load(&dir, args.turns).await?;
    if args.messages > 0 {
        history_load(&dir, &args).await?;
    }
    Ok(())
}
