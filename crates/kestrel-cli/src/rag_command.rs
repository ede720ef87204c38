//! `kestrel rag ingest` and `kestrel rag query`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use kestrel::embedding::SharedEmbedder;
use kestrel::rag::ingest::{FileOutcome, IngestOptions, IngestProgress, ingest_paths};
use kestrel::rag::vector::SharedVectorStore;
use kestrel::rag::{ChunkOptions, Filter, RagError, VectorQuery, embed};
use kestrel_cli::rag::{is_local_embedder, open_vector_store, resolve_embedder};
use serde_json::json;

use crate::cli::{RagCommand, RagIngestArgs, RagQueryArgs, RagStoreArgs};
use crate::exit::{FAILURE, USAGE, fail};

/// Runs a `kestrel rag` subcommand.
pub async fn run(command: RagCommand) -> ExitCode {
    match command {
        RagCommand::Ingest(args) => ingest(args).await,
        RagCommand::Query(args) => query(args).await,
    }
}

/// The store and the embedder, or the exit code saying why not.
async fn open(args: &RagStoreArgs) -> Result<(SharedVectorStore, SharedEmbedder), ExitCode> {
    if let Err(e) = kestrel::rag::vector::check_index_name(&args.index) {
        return Err(fail(USAGE, e));
    }
    let embedder = resolve_embedder(&args.embedder).map_err(|e| fail(USAGE, e))?;
    if is_local_embedder(&args.embedder) {
        crate::models::ensure_cached(kestrel::embed_local::MODEL_ID)
            .await
            .map_err(|e| fail(FAILURE, e))?;
    }
    let store = open_vector_store(&args.db, &args.schema)
        .await
        .map_err(|e| fail(FAILURE, e))?;
    Ok((store, embedder))
}

/// A mismatched embedder, a missing index or a refused request is the caller's to fix (2);
/// a failing embedder or store, not (1).
fn rag_failure(error: RagError) -> ExitCode {
    let usage = match &error {
        RagError::DimensionMismatch { .. } => true,
        RagError::Vector(e) => e.is_client_error(),
        _ => false,
    };
    fail(if usage { USAGE } else { FAILURE }, error)
}

/// The progress of an ingest on stderr: one line redrawn in place on a terminal, a line per
/// file that changed otherwise.
struct Progress {
    tty: bool,
}

impl Progress {
    fn show(&mut self, p: &IngestProgress<'_>) {
        let mut err = std::io::stderr().lock();
        let what = match p.outcome {
            FileOutcome::Ingested(n) => format!("{n} chunks"),
            FileOutcome::Unchanged => "unchanged".to_owned(),
            FileOutcome::Failed(why) => format!("failed: {why}"),
        };
        // Progress is best effort: a closed stderr must not stop the ingest.
        if self.tty {
            let _ = write!(
                err,
                "\r\x1b[2K[{}/{}] {} ({what})",
                p.done, p.total, p.source
            );
            if p.done == p.total {
                let _ = writeln!(err);
            }
        } else if !matches!(p.outcome, FileOutcome::Unchanged) {
            let _ = writeln!(err, "[{}/{}] {} ({what})", p.done, p.total, p.source);
        }
        let _ = err.flush();
    }
}

async fn ingest(args: RagIngestArgs) -> ExitCode {
    let mut options = IngestOptions::default();
    if args.max_size.is_some() || args.overlap.is_some() {
        let max_size = args.max_size.unwrap_or(1000);
        let overlap = args.overlap.unwrap_or(max_size.min(1000) / 10);
        if max_size == 0 || overlap >= max_size {
            return fail(
                USAGE,
                format!("--overlap ({overlap}) must be smaller than --max-size ({max_size})"),
            );
        }
        // Recursive cutting everywhere when the size is given (Markdown's separators first for
        // Markdown files are the default's refinement).
        options.chunking = Some(
            ChunkOptions::recursive()
                .max_size(max_size)
                .overlap(overlap),
        );
    }
    let (store, embedder) = match open(&args.store).await {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
    };
    let report = match ingest_paths(
        store.as_ref(),
        &args.store.index,
        embedder.as_ref(),
        &args.paths,
        &options,
        |p| progress.show(&p),
    )
    .await
    {
        Ok(report) => report,
        Err(error) => return rag_failure(error),
    };
    if args.json {
        let files: Vec<_> = report
            .files
            .iter()
            .map(|(source, outcome)| match outcome {
                FileOutcome::Ingested(n) => {
                    json!({"source": source, "status": "ingested", "chunks": n})
                }
                FileOutcome::Unchanged => json!({"source": source, "status": "unchanged"}),
                FileOutcome::Failed(why) => {
                    json!({"source": source, "status": "failed", "error": why})
                }
            })
            .collect();
        println!(
            "{}",
            json!({"index": args.store.index, "files": files, "chunks": report.chunks()})
        );
    }
    eprintln!(
        "{}: {} files ingested ({} chunks), {} unchanged, {} failed",
        args.store.index,
        report.ingested(),
        report.chunks(),
        report.unchanged(),
        report.failed()
    );
    for (source, outcome) in &report.files {
        if let FileOutcome::Failed(why) = outcome {
            eprintln!("  {source}: {why}");
        }
    }
    if report.failed() > 0 {
        ExitCode::from(FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

async fn query(args: RagQueryArgs) -> ExitCode {
    let filter = match args
        .filter
        .as_deref()
        .map(Filter::from_json_str)
        .transpose()
    {
        Ok(filter) => filter,
        Err(e) => return fail(USAGE, format!("--filter: {e}")),
    };
    let (store, embedder) = match open(&args.store).await {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    if let Err(error) =
        kestrel::rag::ingest::check_index(store.as_ref(), &args.store.index, embedder.as_ref())
            .await
    {
        return rag_failure(error);
    }
    let vector = match embed(embedder.as_ref(), &args.text).await {
        Ok(vector) => vector,
        Err(e) => return fail(FAILURE, e),
    };
    let mut query = VectorQuery::new(&args.store.index, vector).top_k(args.top_k as usize);
    query.filter = filter;
    let results = match store.query(query).await {
        Ok(results) => results,
        Err(e) if e.is_client_error() => return fail(USAGE, e),
        Err(e) => return fail(FAILURE, e),
    };
    if args.json {
        match serde_json::to_string(&results) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(FAILURE, e),
        }
        return ExitCode::SUCCESS;
    }
    let mut out = std::io::stdout().lock();
    for (i, result) in results.iter().enumerate() {
        let source = result
            .metadata
            .get("source")
            .and_then(|v| v.as_str())
            .unwrap_or(&result.id);
        let text = result
            .metadata
            .get("text")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let snippet: String = text.chars().take(240).collect();
        let ellipsis = if text.chars().count() > 240 {
            "…"
        } else {
            ""
        };
        if writeln!(
            out,
            "{}. {source} (score {:.3})\n   {snippet}{ellipsis}",
            i + 1,
            result.score
        )
        .is_err()
        {
            return ExitCode::from(FAILURE);
        }
    }
    if results.is_empty() {
        eprintln!("no results in {}", args.store.index);
    }
    ExitCode::SUCCESS
}
