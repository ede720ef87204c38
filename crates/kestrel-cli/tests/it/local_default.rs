//! The default with nothing configured, on the real model: `kestrel chat` pulls `local/smollm2`
//! on first use (from a fake hub on 127.0.0.1 serving the real GGUF) and answers from it, then
//! uses the cached file.
//!
//! Needs `KESTREL_TEST_GGUF` (SmolLM2-135M-Instruct Q4_1, as `kestrel models pull` fetches it);
//! without it the test prints a message and passes.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use sha2::{Digest, Sha256};

const HUB_PATH: &str = "/kestrel/smol/resolve/main/smol.gguf";

/// Serves `body` at [`HUB_PATH`], one request per connection; counts the requests.
fn fake_hub(body: Arc<Vec<u8>>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let path = String::from_utf8_lossy(&head)
                .split_whitespace()
                .nth(1)
                .map(str::to_owned);
            let (status, body): (u16, &[u8]) = match path.as_deref() {
                Some(HUB_PATH) => (200, &body),
                _ => (404, b"Entry not found"),
            };
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body);
        }
    });
    (base_url, hits)
}

fn run(home: &Path, vars: &[(&str, String)], prompt: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kestrel"))
        .args(["chat", prompt])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KESTREL_HOME", home.join("kestrel"))
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn chat_with_nothing_configured_pulls_the_local_model_once_and_answers() {
    let Some(gguf) = std::env::var("KESTREL_TEST_GGUF")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        println!(
            "skipping: set KESTREL_TEST_GGUF to the SmolLM2-135M-Instruct Q4_1 GGUF to run it"
        );
        return;
    };
    let model = Arc::new(fs::read(&gguf).unwrap());
    let sha: String = Sha256::digest(model.as_slice())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let home = tempfile::tempdir().unwrap();
    // The catalog's `smollm2`, served by the fake hub instead of huggingface.co.
    let catalog = json!({"models": [{
        "name": "smollm2",
        "description": "SmolLM2-135M-Instruct Q4_1",
        "file_name": "smol.gguf",
        "size": model.len(),
        "sha256": sha,
        "license": "Apache-2.0",
        "sources": [
            {"kind": "hugging-face", "repo": "kestrel/smol", "revision": "main", "file": "smol.gguf"}
        ]
    }]});
    let catalog_path = home.path().join("catalog.json");
    fs::write(&catalog_path, catalog.to_string()).unwrap();
    let (hub, hits) = fake_hub(model.clone());
    let vars = [
        ("KESTREL_MODEL_CATALOG", catalog_path.display().to_string()),
        ("KESTREL_HF_ENDPOINT", hub),
    ];

    let first = run(home.path(), &vars, "What is the capital of France?");
    let err = String::from_utf8_lossy(&first.stderr);
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("smollm2: first use of the local model, downloading it into"),
        "{err}"
    );
    assert!(!out.trim().is_empty(), "no answer; stderr: {err}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        fs::read(home.path().join("kestrel/models/smol.gguf"))
            .unwrap()
            .len(),
        model.len()
    );

    let second = run(home.path(), &vars, "Name a colour.");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "stderr: {err}");
    assert!(!err.contains("downloading"), "cached: {err}");
    assert!(!String::from_utf8_lossy(&second.stdout).trim().is_empty());
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the cached file is reused");
}
