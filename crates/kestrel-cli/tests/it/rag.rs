//! `kestrel rag ingest` and `kestrel rag query`, as a user runs them.
//!
//! The usage errors need no model. The end-to-end test embeds with the real local
//! all-MiniLM-L6-v2 and needs `KESTREL_TEST_MINILM_DIR` (the model cache directory `kestrel
//! models pull all-minilm-l6-v2` fills); without it, it says so and passes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn kestrel(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KESTREL_HOME", home)
        // No download may start: the hub is a closed port.
        .env("KESTREL_HF_ENDPOINT", "http://127.0.0.1:9")
        .env("KESTREL_OFFLINE_HUB", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_arguments_are_usage_errors_that_say_what_is_wrong() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("dev.db");
    let db = db.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["rag", "query", "hi", "--index", "bad-name", "--db", db],
            "not a valid index name",
        ),
        (
            vec![
                "rag",
                "query",
                "hi",
                "--index",
                "docs",
                "--filter",
                "{\"$gt\": 1}",
                "--db",
                db,
            ],
            "--filter",
        ),
        (
            vec![
                "rag",
                "query",
                "hi",
                "--index",
                "docs",
                "--embedder",
                "nope/x",
                "--db",
                db,
            ],
            "nope",
        ),
        (
            vec![
                "rag",
                "ingest",
                ".",
                "--index",
                "docs",
                "--max-size",
                "50",
                "--overlap",
                "50",
                "--db",
                db,
            ],
            "--overlap",
        ),
    ] {
        let output = kestrel(home.path(), &args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(expected),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn ingest_then_query_with_the_local_embedder() {
    let Some(models) = std::env::var("KESTREL_TEST_MINILM_DIR")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        println!(
            "skipping ingest_then_query_with_the_local_embedder: set KESTREL_TEST_MINILM_DIR to \
             the model cache holding all-MiniLM-L6-v2 (kestrel models pull all-minilm-l6-v2)"
        );
        return;
    };
    // The cache is $KESTREL_HOME/models.
    let home = Path::new(&models).parent().unwrap().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("nesting.md"), "# Nesting\n\nKestrels lay their eggs in cavities in trees, on cliff ledges and in nest boxes.").unwrap();
    std::fs::write(
        notes.join("hunting.md"),
        "# Hunting\n\nKestrels hover in the wind over fields and drop onto voles.",
    )
    .unwrap();
    std::fs::write(
        notes.join("migration.txt"),
        "Northern kestrels migrate south for the winter.",
    )
    .unwrap();
    let db = dir.path().join("dev.db");
    let db = db.to_str().unwrap();
    let notes = notes.to_str().unwrap();

    let output = kestrel(
        &home,
        &[
            "rag", "ingest", notes, "--index", "notes", "--db", db, "--json",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["files"].as_array().unwrap().len(), 3, "{report}");
    assert!(
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["status"] == "ingested")
    );
    assert!(
        stderr(&output).contains("3 files ingested"),
        "{}",
        stderr(&output)
    );

    // Again: nothing changed, nothing embedded.
    let output = kestrel(
        &home,
        &["rag", "ingest", notes, "--index", "notes", "--db", db],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("0 files ingested (0 chunks), 3 unchanged"),
        "{}",
        stderr(&output)
    );

    let output = kestrel(
        &home,
        &[
            "rag",
            "query",
            "Where do kestrels lay eggs?",
            "--index",
            "notes",
            "--db",
            db,
            "--json",
            "-k",
            "2",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let results: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results.as_array().unwrap().len(), 2);
    assert_eq!(
        results[0]["metadata"]["source"], "notes/nesting.md",
        "{results}"
    );

    let output = kestrel(
        &home,
        &[
            "rag",
            "query",
            "Where do kestrels lay eggs?",
            "--index",
            "notes",
            "--db",
            db,
            "--filter",
            "{\"source\": \"notes/hunting.md\"}",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("1. notes/hunting.md (score "), "{text}");
    assert!(!text.contains("nesting"), "{text}");

    // A missing index is the caller's mistake.
    let output = kestrel(
        &home,
        &["rag", "query", "eggs", "--index", "missing", "--db", db],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("does not exist"),
        "{}",
        stderr(&output)
    );
}
