//! Loading errors: missing, non-GGUF, corrupt, unsupported and truncated files (no model
//! needed, but for the truncated copy of the real one).

use std::path::PathBuf;

use kestrel_llama::{Engine, EngineOptions, LoadError};

use super::model_path;

#[test]
fn missing_file_is_a_typed_error_with_the_path() {
    let path = std::env::temp_dir().join("kestrel-llama-no-such-model.gguf");
    match Engine::load(&path, EngineOptions::default()) {
        Err(LoadError::NotFound { path: p }) => assert_eq!(p, path),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("kestrel-llama-test-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn non_gguf_file_is_rejected() {
    let path = temp_file("notes.gguf", b"this is not a model at all");
    match Engine::load(&path, EngineOptions::default()) {
        Err(LoadError::NotGguf { path: p, found }) => {
            assert_eq!(p, path);
            assert_eq!(found, "this");
        }
        other => panic!("expected NotGguf, got {other:?}"),
    }
    let empty = temp_file("empty.gguf", b"");
    assert!(matches!(
        Engine::load(&empty, EngineOptions::default()),
        Err(LoadError::NotGguf { .. })
    ));
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(empty);
}

/// A minimal GGUF v3 file: no tensors, one metadata key.
fn gguf_with_architecture(architecture: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"GGUF");
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes()); // tensors
    bytes.extend_from_slice(&1u64.to_le_bytes()); // metadata entries
    let key = b"general.architecture";
    bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(&8u32.to_le_bytes()); // string
    bytes.extend_from_slice(&(architecture.len() as u64).to_le_bytes());
    bytes.extend_from_slice(architecture.as_bytes());
    bytes
}

#[test]
fn corrupt_and_unsupported_ggufs_are_typed_errors() {
    // A header that claims more than the file holds.
    let mut truncated = gguf_with_architecture("llama");
    truncated[16..24].copy_from_slice(&5u64.to_le_bytes());
    let path = temp_file("truncated.gguf", &truncated);
    match Engine::load(&path, EngineOptions::default()) {
        Err(LoadError::CorruptGguf { path: p, .. }) => assert_eq!(p, path),
        other => panic!("expected CorruptGguf, got {other:?}"),
    }
    let _ = std::fs::remove_file(path);

    let path = temp_file("alien.gguf", &gguf_with_architecture("alien-transformer"));
    match Engine::load(&path, EngineOptions::default()) {
        Err(LoadError::UnsupportedArchitecture { architecture, .. }) => {
            assert_eq!(architecture, "alien-transformer")
        }
        other => panic!("expected UnsupportedArchitecture, got {other:?}"),
    }
    let _ = std::fs::remove_file(path);

    let path = temp_file("bert.gguf", &gguf_with_architecture("bert"));
    assert!(matches!(
        Engine::load(&path, EngineOptions::default()),
        Err(LoadError::UnsupportedArchitecture { .. })
    ));
    let _ = std::fs::remove_file(path);

    // A known architecture without its tensors: llama.cpp refuses it.
    let path = temp_file("empty-llama.gguf", &gguf_with_architecture("llama"));
    match Engine::load(&path, EngineOptions::default()) {
        Err(LoadError::ModelLoad { architecture, .. }) => assert_eq!(architecture, "llama"),
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    let _ = std::fs::remove_file(path);
}

#[test]
fn truncated_real_model_is_rejected() {
    let Some(source) = model_path() else {
        println!("skipping truncated_real_model_is_rejected: set KESTREL_TEST_GGUF");
        return;
    };
    let bytes = std::fs::read(source).unwrap();
    let path = temp_file("half.gguf", &bytes[..bytes.len() / 2]);
    let result = Engine::load(&path, EngineOptions::default());
    assert!(
        matches!(
            result,
            Err(LoadError::CorruptGguf { .. } | LoadError::ModelLoad { .. })
        ),
        "{result:?}"
    );
    let _ = std::fs::remove_file(path);
}
