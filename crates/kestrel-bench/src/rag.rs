//! RAG benchmarks (issue 41).
//!
//! ```text
//! kestrel-bench rag-quality <dir>      # recall@5 and MRR, ingest throughput, per backend
//! kestrel-bench rag-latency <N>        # query latency p50/p99 over N random 384-d vectors
//! kestrel-bench rag-hnsw <corpus.json> # HNSW's own recall on real embeddings, per ef_search
//! ```
//!
//! **Quality.** Every Markdown page of `<dir>` (e.g. the 450 reference pages that ship in
//! `@mastra/core`'s `dist/docs/references/`) is ingested with the default chunking
//! (Markdown's separators, 1000 characters, 100 overlap) and the local all-MiniLM-L6-v2;
//! each page's title (its first `# ` heading) is a query whose answer is that page. A query
//! takes the 20 nearest chunks and ranks the pages they come from in order: recall@5 is the
//! share of queries whose page is among the first five, MRR the mean of 1/rank (0 past 20
//! chunks). The embeddings are computed once (timed: chunks/s with the embedder) and the same
//! vectors go into each backend: memory, SQLite, and with `KESTREL_BENCH_PGVECTOR_URL` pgvector
//! exact (flat) and HNSW.
//!
//! **Latency.** N random unit vectors (384-d, seeded), 200 queries with top-k 10, per backend;
//! also the upsert throughput and, for HNSW, its recall@10 against exact search.
//!
//! **HNSW on real embeddings.** The vectors and title queries `rag-quality` exported
//! (`KESTREL_BENCH_EXPORT`) go into a pgvector HNSW index (m 16, ef_construction 64) whose
//! connections have sequential and bitmap scans off, so that PostgreSQL walks the graph even
//! where, at this size, it would rather scan the table (or the namespace's index, and sort); each query's top k is compared with the exact
//! top k, for several `ef_search` (Mastra's rule, m · k, among them).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel::embed_local::LocalEmbedder;
use kestrel::embedding::Embedder;
use kestrel::rag::VectorStore;
use kestrel::rag::ingest::{SOURCE_KEY, TEXT_KEY};
use kestrel::rag::vector::pgvector::{PgVectorOptions, PgVectorStore};
use kestrel::rag::vector::sqlite::SqliteVectorStore;
use kestrel::rag::vector::{IndexConfig, Metadata, SharedVectorStore};
use kestrel::rag::{
    ChunkOptions, CreateIndex, Document, EmbedOptions, InMemoryVectorStore, Upsert, VectorQuery,
    embed_many,
};
use serde_json::Value;

type BoxError = Box<dyn std::error::Error>;

/// A page of the corpus.
struct Page {
    source: String,
    title: String,
    text: String,
}

fn read_pages(dir: &Path) -> Result<Vec<Page>, BoxError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    let mut pages = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let Some(title) = text
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .map(|t| t.trim().to_owned())
        else {
            continue;
        };
        let source = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        pages.push(Page {
            source,
            title,
            text,
        });
    }
    Ok(pages)
}

fn peak_rss_mb() -> f64 {
    super::peak_rss_mb().unwrap_or(f64::NAN)
}

/// The backends to compare, each with a fresh index of `dimension` named `name`.
async fn backends(
    name: &str,
    dimension: usize,
    dir: &Path,
) -> Result<Vec<(String, SharedVectorStore)>, BoxError> {
    let mut out: Vec<(String, SharedVectorStore)> = Vec::new();
    let memory: SharedVectorStore = Arc::new(InMemoryVectorStore::new());
    memory
        .create_index(CreateIndex::new(name, dimension))
        .await?;
    out.push(("memory (exact)".into(), memory));
    let sqlite: SharedVectorStore =
        Arc::new(SqliteVectorStore::open(dir.join(format!("{name}.db"))).await?);
    sqlite
        .create_index(CreateIndex::new(name, dimension))
        .await?;
    out.push(("sqlite (exact)".into(), sqlite));
    if let Ok(url) = std::env::var("KESTREL_BENCH_PGVECTOR_URL") {
        let schema = format!("kestrel_bench_{}", std::process::id());
        let pg = PgVectorStore::connect(&url, PgVectorOptions::default().schema(schema)).await?;
        for (label, config) in [
            ("pgvector flat (exact)", IndexConfig::flat()),
            ("pgvector hnsw m=16 efc=64", IndexConfig::hnsw(16, 64)),
        ] {
            let index = format!(
                "{name}_{}",
                if label.contains("flat") {
                    "flat"
                } else {
                    "hnsw"
                }
            );
            let _ = pg.delete_index(&index).await;
            pg.create_index(CreateIndex::new(&index, dimension).index_config(config))
                .await?;
            out.push((format!("{label}|{index}"), Arc::new(pg.clone())));
        }
    }
    Ok(out)
}

/// `label|index` or just `label` (the index is `default`).
fn split_label<'a>(label: &'a str, default: &'a str) -> (&'a str, &'a str) {
    label.split_once('|').unwrap_or((label, default))
}

async fn upsert_all(
    store: &SharedVectorStore,
    index: &str,
    ids: &[String],
    vectors: &[Vec<f32>],
    metadata: &[Metadata],
) -> Result<Duration, BoxError> {
    let started = Instant::now();
    for start in (0..ids.len()).step_by(1000) {
        let end = (start + 1000).min(ids.len());
        store
            .upsert(Upsert {
                index_name: index.to_owned(),
                vectors: vectors[start..end].to_vec(),
                metadata: metadata[start..end].to_vec(),
                ids: ids[start..end].to_vec(),
                delete_filter: None,
            })
            .await?;
    }
    Ok(started.elapsed())
}

/// recall@5 and MRR (over pages) of the title queries.
pub async fn quality(dir: &Path) -> Result<(), BoxError> {
    let mut pages = read_pages(dir)?;
    // `KESTREL_BENCH_PAGES`: only the first N pages (a quicker run).
    if let Some(n) = std::env::var("KESTREL_BENCH_PAGES")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        pages.truncate(n);
    }
    let embedder = LocalEmbedder::from_env();
    let chunking = ChunkOptions::markdown().max_size(1000).overlap(100);
    let mut ids = Vec::new();
    let mut texts = Vec::new();
    let mut metadata = Vec::new();
    let chunking_started = Instant::now();
    for page in &pages {
        let chunks = Document::from_markdown(page.text.clone())
            .with(SOURCE_KEY, page.source.as_str())
            .chunk(&chunking)?;
        for (i, chunk) in chunks
            .into_iter()
            .filter(|c| !c.text.trim().is_empty())
            .enumerate()
        {
            ids.push(format!("{}#{i}", page.source));
            texts.push(chunk.text.clone());
            let mut m = chunk.metadata;
            m.insert(TEXT_KEY.into(), Value::String(chunk.text));
            metadata.push(m);
        }
    }
    let chunking_time = chunking_started.elapsed();
    println!(
        "rag-quality: {} pages, {} chunks (markdown, 1000/100) in {:.0} ms, embedder {}/{}",
        pages.len(),
        texts.len(),
        chunking_time.as_secs_f64() * 1000.0,
        embedder.provider(),
        embedder.model_id()
    );
    // `KESTREL_BENCH_EMBED_CONCURRENCY`: batches in flight (default 2, the library's; the
    // local embedder is compute-bound, 1 measured within 15% of 2).
    let concurrency = std::env::var("KESTREL_BENCH_EMBED_CONCURRENCY")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let embed_options = EmbedOptions::default().max_concurrency(concurrency);
    let started = Instant::now();
    let vectors = embed_many(&embedder, &texts, &embed_options).await?;
    let embed_time = started.elapsed();
    println!(
        "  embedding: {:.1} s, {:.1} chunks/s (batches of 64, {concurrency} at a time)",
        embed_time.as_secs_f64(),
        texts.len() as f64 / embed_time.as_secs_f64()
    );
    let titles: Vec<String> = pages.iter().map(|p| p.title.clone()).collect();
    let query_vectors = embed_many(&embedder, &titles, &EmbedOptions::default()).await?;
    // For the comparison with Mastra's LibSQLVector (compat-tests/rag-fixtures/bench.mjs): the
    // same chunks' vectors and the same queries.
    if let Ok(path) = std::env::var("KESTREL_BENCH_EXPORT") {
        let sources: Vec<&Value> = metadata.iter().map(|m| &m[SOURCE_KEY]).collect();
        let pages_json: Vec<Value> = pages
            .iter()
            .map(|p| serde_json::json!({"source": p.source, "title": p.title}))
            .collect();
        let export = serde_json::json!({
            "ids": ids, "sources": sources, "vectors": vectors,
            "pages": pages_json, "queries": query_vectors,
        });
        std::fs::write(&path, serde_json::to_vec(&export)?)?;
        println!("  exported the vectors and queries to {path}");
    }
    let tmp = tempfile::tempdir()?;
    for (label, store) in backends("corpus", 384, tmp.path()).await? {
        let (label, index) = split_label(&label, "corpus");
        let upsert = upsert_all(&store, index, &ids, &vectors, &metadata).await?;
        let mut hits = 0usize;
        let mut reciprocal = 0f64;
        let mut latencies = Vec::new();
        for (page, vector) in pages.iter().zip(&query_vectors) {
            let started = Instant::now();
            let results = store
                .query(VectorQuery::new(index, vector.clone()).top_k(20))
                .await?;
            latencies.push(started.elapsed());
            let mut ranked: Vec<&str> = Vec::new();
            for r in &results {
                let source = r
                    .metadata
                    .get(SOURCE_KEY)
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !ranked.contains(&source) {
                    ranked.push(source);
                }
            }
            if let Some(rank) = ranked.iter().position(|s| *s == page.source) {
                reciprocal += 1.0 / (rank + 1) as f64;
                if rank < 5 {
                    hits += 1;
                }
            }
        }
        latencies.sort();
        println!(
            "  {label}: recall@5 {:.3}, MRR {:.3}, upsert {:.0} vectors/s, query p50 {:.2} ms p99 {:.2} ms",
            hits as f64 / pages.len() as f64,
            reciprocal / pages.len() as f64,
            ids.len() as f64 / upsert.as_secs_f64(),
            super::percentile(&latencies, 0.5) / 1000.0,
            super::percentile(&latencies, 0.99) / 1000.0,
        );
    }
    println!("  peak RSS {:.0} MB", peak_rss_mb());
    Ok(())
}

/// A seeded random unit vector.
fn unit_vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..dimension)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect();
    let norm = kestrel::rag::vector::norm(&v);
    for x in &mut v {
        *x /= norm;
    }
    v
}

/// Query latency over `n` random vectors.
pub async fn latency(n: usize) -> Result<(), BoxError> {
    const DIMENSION: usize = 384;
    const QUERIES: usize = 200;
    let ids: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let vectors: Vec<Vec<f32>> = (0..n)
        .map(|i| unit_vector(i as u64 + 1, DIMENSION))
        .collect();
    let metadata: Vec<Metadata> = (0..n)
        .map(|i| {
            let mut m = Metadata::new();
            m.insert("bucket".into(), Value::from(i % 10));
            m
        })
        .collect();
    let queries: Vec<Vec<f32>> = (0..QUERIES)
        .map(|i| unit_vector(1_000_000 + i as u64, DIMENSION))
        .collect();
    println!("rag-latency: {n} random unit vectors, {DIMENSION}-d, {QUERIES} queries, top-k 10");
    let tmp = tempfile::tempdir()?;
    let mut exact: Vec<Vec<String>> = Vec::new();
    for (label, store) in backends("latency", DIMENSION, tmp.path()).await? {
        let (label, index) = split_label(&label, "latency");
        let upsert = upsert_all(&store, index, &ids, &vectors, &metadata).await?;
        let mut latencies = Vec::new();
        let mut found = Vec::new();
        for query in &queries {
            let started = Instant::now();
            let results = store
                .query(VectorQuery::new(index, query.clone()).top_k(10))
                .await?;
            latencies.push(started.elapsed());
            found.push(results.into_iter().map(|r| r.id).collect::<Vec<_>>());
        }
        latencies.sort();
        let recall = if exact.is_empty() {
            exact = found.clone();
            1.0
        } else {
            let hits: usize = found
                .iter()
                .zip(&exact)
                .map(|(f, e)| f.iter().filter(|id| e.contains(id)).count())
                .sum();
            hits as f64 / (10 * QUERIES) as f64
        };
        println!(
            "  {label}: query p50 {:.2} ms, p99 {:.2} ms, recall@10 vs exact {recall:.3}, upsert {:.0} vectors/s",
            super::percentile(&latencies, 0.5) / 1000.0,
            super::percentile(&latencies, 0.99) / 1000.0,
            n as f64 / upsert.as_secs_f64(),
        );
    }
    println!("  peak RSS {:.0} MB", peak_rss_mb());
    Ok(())
}

/// HNSW's recall against exact search on the real embeddings `rag-quality` exported, per
/// `ef_search`, with the index forced.
pub async fn hnsw(corpus: &Path) -> Result<(), BoxError> {
    let export: Value = serde_json::from_slice(&std::fs::read(corpus)?)?;
    let floats = |v: &Value| -> Vec<f32> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_f64)
                    .map(|x| x as f32)
                    .collect()
            })
            .unwrap_or_default()
    };
    let vectors: Vec<Vec<f32>> = export["vectors"]
        .as_array()
        .ok_or("the export has no `vectors`")?
        .iter()
        .map(floats)
        .collect();
    let queries: Vec<Vec<f32>> = export["queries"]
        .as_array()
        .ok_or("the export has no `queries`")?
        .iter()
        .map(floats)
        .collect();
    let dimension = vectors.first().map_or(0, Vec::len);
    let ids: Vec<String> = (0..vectors.len()).map(|i| format!("c{i}")).collect();
    let metadata = vec![Metadata::new(); vectors.len()];
    let url = std::env::var("KESTREL_BENCH_PGVECTOR_URL")
        .map_err(|_| "rag-hnsw needs KESTREL_BENCH_PGVECTOR_URL")?;
    println!(
        "rag-hnsw: {} real vectors ({dimension}-d), {} queries, HNSW m=16 efc=64, index forced",
        vectors.len(),
        queries.len()
    );
    let exact = InMemoryVectorStore::new();
    exact
        .create_index(CreateIndex::new("corpus", dimension))
        .await?;
    upsert_all(
        &(Arc::new(exact.clone()) as SharedVectorStore),
        "corpus",
        &ids,
        &vectors,
        &metadata,
    )
    .await?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::Executor::execute(
                    conn,
                    "SET enable_seqscan = off; SET enable_bitmapscan = off",
                )
                .await?;
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    let schema = format!("kestrel_bench_hnsw_{}", std::process::id());
    let pg =
        PgVectorStore::from_pool(pool, PgVectorOptions::default().schema(schema.clone())).await?;
    let _ = pg.delete_index("corpus").await;
    pg.create_index(CreateIndex::new("corpus", dimension).index_config(IndexConfig::hnsw(16, 64)))
        .await?;
    let built = upsert_all(
        &(Arc::new(pg.clone()) as SharedVectorStore),
        "corpus",
        &ids,
        &vectors,
        &metadata,
    )
    .await?;
    println!(
        "  built in {:.1} s ({:.0} vectors/s)",
        built.as_secs_f64(),
        vectors.len() as f64 / built.as_secs_f64()
    );
    // Fresh statistics: right after the load PostgreSQL still guesses a few dozen rows.
    sqlx::query(&format!("ANALYZE \"{schema}\".\"corpus\""))
        .execute(pg.pool())
        .await?;
    let plan = pg
        .explain(&VectorQuery::new("corpus", queries[0].clone()).top_k(10))
        .await?;
    // The HNSW index by name: with sequential scans off, PostgreSQL could also pick another
    // index (the namespace's) and sort, which is exact.
    let hnsw_used = plan
        .lines()
        .any(|l| l.contains("Index Scan using corpus_vector_idx"))
        && plan.contains("Order By: (embedding");
    println!(
        "  plan: {}",
        if hnsw_used {
            "the HNSW index"
        } else {
            "NOT the HNSW index"
        }
    );
    if !hnsw_used {
        println!("{plan}");
    }
    for k in [5usize, 10, 20] {
        let mut truth: Vec<Vec<String>> = Vec::new();
        for q in &queries {
            let results = exact
                .query(VectorQuery::new("corpus", q.clone()).top_k(k))
                .await?;
            truth.push(results.into_iter().map(|r| r.id).collect());
        }
        let rule = (16 * k).min(1000) as u32;
        for ef in [k as u32, 40, 64, rule] {
            let mut latencies = Vec::new();
            let mut hits = 0usize;
            for (q, want) in queries.iter().zip(&truth) {
                let started = Instant::now();
                let results = pg
                    .query(VectorQuery::new("corpus", q.clone()).top_k(k).ef(ef))
                    .await?;
                latencies.push(started.elapsed());
                hits += results.iter().filter(|r| want.contains(&r.id)).count();
            }
            latencies.sort();
            println!(
                "  top {k:>2}, ef_search {ef:>3}{}: recall@{k} vs exact {:.3}, p50 {:.2} ms, p99 {:.2} ms",
                if ef == rule { " (Mastra's rule)" } else { "" },
                hits as f64 / (k * queries.len()) as f64,
                super::percentile(&latencies, 0.5) / 1000.0,
                super::percentile(&latencies, 0.99) / 1000.0,
            );
        }
    }
    pg.delete_index("corpus").await?;
    Ok(())
}
