//! Chunking matches `@mastra/rag`: every case of the fixtures (generated from `@mastra/rag`
//! 2.6.4 by `compat-tests/rag-fixtures/generate.mjs`) gives the same chunks, metadata and
//! errors here.

use std::path::{Path, PathBuf};

use kestrel_rag::{ChunkOptions, Document};
use serde_json::{Map, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The document of a case, as the generator built it.
fn document(case: &Value) -> Document {
    let text = match case["inputFile"].as_str() {
        Some(file) => std::fs::read_to_string(fixtures().join("documents").join(file)).unwrap(),
        None => case["input"].as_str().unwrap().to_owned(),
    };
    let document = match case["docType"].as_str().unwrap() {
        "text" => Document::from_text(text),
        "markdown" => Document::from_markdown(text),
        "html" => Document::from_html(text),
        "json" => Document::from_json(text),
        other => panic!("unknown docType {other}"),
    };
    let metadata: Map<String, Value> = case["metadata"].as_object().cloned().unwrap_or_default();
    document.metadata(metadata)
}

/// Cases where Mastra joins pieces cut at a regular expression with the pattern's own text
/// (`\s+`, `\n#{1,6} ` in the chunks): Kestrel joins them with the text they were cut at.
const KNOWN_MASTRA_BUGS: &[&str] = &[
    "recursive/separators-regex",
    "recursive/language-markdown",
    "markdown/defaults",
    "markdown/max300-overlap0",
    "markdown/max300-overlap50",
    "latex/defaults",
    "latex/max300-overlap0",
    "latex/max120-overlap100-large",
];

/// What holds of Kestrel's chunks where Mastra's are wrong: each is the document's own text
/// (no pattern put in), none is longer than `maxSize`, and about as many as Mastra's.
fn better_than_mastra(
    name: &str,
    document: &Document,
    chunks: &[kestrel_rag::Chunk],
    case: &Value,
) {
    let max_size = case["options"]["maxSize"].as_u64().unwrap_or(4000) as usize;
    for chunk in chunks {
        assert!(
            document.text().contains(&chunk.text),
            "{name}: a chunk that is not the document's text: {:?}",
            chunk.text
        );
        assert!(
            kestrel_rag::chunk::split::size(&chunk.text) <= max_size,
            "{name}: {:?}",
            chunk.text
        );
    }
    let theirs = case["chunks"].as_array().unwrap();
    assert!(
        theirs
            .iter()
            .any(|c| !document.text().contains(c["text"].as_str().unwrap())),
        "{name}: Mastra's chunks are right here: the case is no longer a known bug"
    );
    let (ours, theirs) = (chunks.len() as f64, theirs.len() as f64);
    assert!(
        (ours - theirs).abs() <= theirs * 0.3 + 1.0,
        "{name}: {ours} chunks, Mastra {theirs}"
    );
}

/// Runs every case of `strategy`'s fixture file; how many ran.
fn run(strategy: &str) -> usize {
    let path = fixtures().join("chunking").join(format!("{strategy}.json"));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = file["cases"].as_array().unwrap();
    for case in cases {
        let name = format!("{strategy}/{}", case["name"].as_str().unwrap());
        let document = document(case);
        let outcome =
            ChunkOptions::from_json(&case["options"]).and_then(|options| document.chunk(&options));
        if let Some(error) = case.get("error").and_then(Value::as_str) {
            let ours = outcome.expect_err(&format!("{name}: Mastra refused it: {error}"));
            if error.starts_with("Chunk overlap") {
                assert_eq!(ours.to_string(), error, "{name}");
            }
            continue;
        }
        let chunks = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = case["chunks"].as_array().unwrap();
        if KNOWN_MASTRA_BUGS.contains(&name.as_str()) {
            better_than_mastra(&name, &document, &chunks, case);
            continue;
        }
        for (i, (ours, theirs)) in chunks.iter().zip(expected).enumerate() {
            assert_eq!(
                ours.text,
                theirs["text"].as_str().unwrap(),
                "{name}: chunk {i} of {}",
                expected.len()
            );
            assert_eq!(
                Value::Object(ours.metadata.clone()),
                theirs["metadata"],
                "{name}: chunk {i}'s metadata"
            );
        }
        assert_eq!(chunks.len(), expected.len(), "{name}: how many chunks");
    }
    cases.len()
}

#[test]
fn recursive_cuts_where_mastra_cuts() {
    assert!(run("recursive") >= 10);
}

#[test]
fn character_cuts_where_mastra_cuts() {
    assert!(run("character") >= 10);
}

#[test]
fn markdown_cuts_where_mastra_cuts() {
    assert!(run("markdown") >= 8);
}

#[test]
fn latex_cuts_where_mastra_cuts() {
    assert!(run("latex") >= 5);
}

#[test]
fn options_a_strategy_does_not_take_are_refused_by_name() {
    let document = Document::from_text("one two three");
    let error = document
        .chunk(
            &ChunkOptions::character()
                .separators([" "])
                .max_size(10)
                .overlap(0),
        )
        .unwrap_err();
    assert!(error.to_string().contains("'separators'"), "{error}");
    let error = document
        .chunk(&ChunkOptions::recursive().separators(Vec::<String>::new()))
        .unwrap_err();
    assert!(error.to_string().contains("empty"), "{error}");
    let error = document
        .chunk(
            &ChunkOptions::character()
                .separator("(")
                .regex_separators()
                .max_size(10)
                .overlap(0),
        )
        .unwrap_err();
    assert!(error.to_string().contains("regular expression"), "{error}");
}
