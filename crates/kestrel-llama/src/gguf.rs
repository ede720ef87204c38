//! Checks run on a GGUF file before llama.cpp loads it, so that the common failures get a
//! precise error with the path instead of llama.cpp's bare "failed to load".

use std::io::Read;
use std::path::{Path, PathBuf};

use llama_cpp_2::gguf::GgufContext;

use crate::error::LoadError;

/// Architectures (`general.architecture`) known to the llama.cpp vendored by
/// `llama-cpp-sys-2` 0.1.161 (`LLM_ARCH_NAMES` in `src/llama-arch.cpp`).
const KNOWN_ARCHITECTURES: &[&str] = &[
    "clip",
    "llama",
    "llama4",
    "deci",
    "falcon",
    "grok",
    "gpt2",
    "gptj",
    "gptneox",
    "mpt",
    "baichuan",
    "starcoder",
    "refact",
    "bert",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "eurobert",
    "bloom",
    "stablelm",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "qwen3next",
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "clef",
    "qwen4exp",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "codeshell",
    "orion",
    "internlm2",
    "minicpm",
    "minicpm3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "gemma4-assistant",
    "gemma-embedding",
    "starcoder2",
    "mamba",
    "mamba2",
    "maple",
    "jamba",
    "falcon-h1",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "dbrx",
    "olmo",
    "olmo2",
    "olmoe",
    "muse-glimmer",
    "openelm",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "chatglm",
    "glm4",
    "glm4moe",
    "glm-dsa",
    "bitnet",
    "t5",
    "t5encoder",
    "jais",
    "jais2",
    "nemotron",
    "nemotron_h",
    "nemotron_h_moe",
    "exaone",
    "exaone4",
    "exaone-moe",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "wavtokenizer-dec",
    "plm",
    "bailingmoe",
    "bailingmoe2",
    "bailingmoe3",
    "dots1",
    "dots3note",
    "arcee",
    "afmoe",
    "laguna",
    "ernie4_5",
    "ernie4_5-moe",
    "hunyuan-moe",
    "hunyuan-dense",
    "hunyuan_vl",
    "hy_v3",
    "hy_v4",
    "smollm3",
    "gpt-oss",
    "lfm2",
    "lfm2moe",
    "dream",
    "smallthinker",
    "llada",
    "llada-moe",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "hrm_text",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "rnd1",
    "pangu-embedded",
    "mistral3",
    "eagle3",
    "dflash",
    "mistral4",
    "paddleocr",
    "mimo2",
    "step35",
    "spark2_5",
    "llama-embed",
    "maincoder",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "talkie",
    "mellum",
    "nanbeige",
    "qwen3tts",
    "pockettts",
];

/// Known architectures that cannot do causal text generation with this engine: encoders and
/// embedding models, encoder-decoder models (the engine has no encode step), diffusion LMs,
/// speculative-decoding drafters, and audio models.
const NON_GENERATIVE: &[&str] = &[
    "clip",
    "bert",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "eurobert",
    "gemma-embedding",
    "llama-embed",
    "t5",
    "t5encoder",
    "wavtokenizer-dec",
    "dream",
    "llada",
    "llada-moe",
    "eagle3",
    "dflash",
    "gemma4-assistant",
    "qwen3tts",
    "pockettts",
];

/// What the pre-flight check learnt about the file.
#[derive(Debug, Clone)]
pub(crate) struct Preflight {
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// The path as UTF-8, for llama.cpp.
    pub path_str: String,
}

/// Checks that `path` is a readable GGUF file of a supported architecture.
pub(crate) fn preflight(path: &Path) -> Result<Preflight, LoadError> {
    let owned = || path.to_path_buf();
    let metadata = std::fs::metadata(path).map_err(|source| io_error(path, source))?;
    if metadata.is_dir() {
        return Err(LoadError::Io {
            path: owned(),
            source: std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
        });
    }
    let mut magic = [0_u8; 4];
    let mut file = std::fs::File::open(path).map_err(|source| io_error(path, source))?;
    let mut read = 0;
    while read < magic.len() {
        match file.read(&mut magic[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(io_error(path, source)),
        }
    }
    if read < magic.len() || &magic != b"GGUF" {
        return Err(LoadError::NotGguf {
            path: owned(),
            found: String::from_utf8_lossy(&magic[..read]).into_owned(),
        });
    }
    let Some(path_str) = path.to_str() else {
        return Err(LoadError::NonUtf8Path { path: owned() });
    };
    let Some(gguf) = GgufContext::from_file(path) else {
        return Err(LoadError::CorruptGguf {
            path: owned(),
            reason: "the GGUF header, metadata or tensor table cannot be parsed".into(),
        });
    };
    let Some(architecture) = string_value(&gguf, "general.architecture") else {
        return Err(LoadError::CorruptGguf {
            path: owned(),
            reason: "no general.architecture string in the metadata".into(),
        });
    };
    let name = string_value(&gguf, "general.name");
    check_architecture(path, &architecture)?;
    Ok(Preflight {
        architecture,
        name,
        path_str: path_str.to_string(),
    })
}

fn check_architecture(path: &Path, architecture: &str) -> Result<(), LoadError> {
    let unsupported = |reason| LoadError::UnsupportedArchitecture {
        path: path.to_path_buf(),
        architecture: architecture.to_string(),
        reason,
    };
    if !KNOWN_ARCHITECTURES.contains(&architecture) {
        return Err(unsupported(
            "unknown to the llama.cpp version built into kestrel-llama",
        ));
    }
    if NON_GENERATIVE.contains(&architecture) {
        return Err(unsupported(
            "not a causal text-generation model (encoder, embedding, diffusion, drafter or audio model)",
        ));
    }
    Ok(())
}

/// A string metadata value; `None` if absent or of another type (reading a non-string value
/// as a string aborts inside ggml, so the type is checked first).
fn string_value(gguf: &GgufContext, key: &str) -> Option<String> {
    let index = gguf.find_key(key);
    if index < 0 || gguf.kv_type(index) != llama_cpp_sys_2::GGUF_TYPE_STRING {
        return None;
    }
    gguf.val_str(index).map(str::to_string)
}

fn io_error(path: &Path, source: std::io::Error) -> LoadError {
    if source.kind() == std::io::ErrorKind::NotFound {
        LoadError::NotFound {
            path: PathBuf::from(path),
        }
    } else {
        LoadError::Io {
            path: PathBuf::from(path),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_lists_are_consistent() {
        for arch in NON_GENERATIVE {
            assert!(KNOWN_ARCHITECTURES.contains(arch), "{arch}");
        }
        assert!(check_architecture(Path::new("m.gguf"), "llama").is_ok());
        assert!(matches!(
            check_architecture(Path::new("m.gguf"), "bert"),
            Err(LoadError::UnsupportedArchitecture { .. })
        ));
        assert!(matches!(
            check_architecture(Path::new("m.gguf"), "no-such-arch"),
            Err(LoadError::UnsupportedArchitecture { .. })
        ));
    }
}
