//! Temporary files and directories inside the cache directory, deleted unless kept.
//!
//! They are named `.<model file>.<pid>-<n>.part` (files) and `.<model file>.<pid>-<n>.pip`
//! (pip's working directories), so they are hidden, on the same file system as the final path
//! (the rename is atomic), and attributable. A process killed mid-download leaves them behind;
//! [`sweep_stale`] removes those that have not been touched for an hour.
//!
//! A direct download goes to `.<model file>.download` instead, one name per model file, kept
//! when the transfer breaks off so that the next pull resumes it. A process holds an exclusive
//! lock on it while writing (another pull of the same file at the same time downloads to a
//! `.part` of its own); [`sweep_stale`] removes one untouched for a week.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Leftovers untouched for this long belong to a dead process.
const STALE_AFTER: Duration = Duration::from_secs(60 * 60);
/// A broken-off download untouched for this long will not be resumed.
const STALE_DOWNLOAD_AFTER: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The suffix of a resumable download.
const DOWNLOAD_SUFFIX: &str = "download";

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_name(file_name: &str, suffix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".{file_name}.{}-{n}.{suffix}", std::process::id())
}

/// A file being written; deleted on drop unless [`TempFile::persist`]ed, or, for a
/// resumable download, unless its bytes were found wrong ([`TempFile::discard`]).
#[derive(Debug)]
pub(crate) struct TempFile {
    path: PathBuf,
    kept: bool,
    /// Whether drop leaves the file for a later pull to resume.
    resumable: bool,
}

impl TempFile {
    /// Creates a new empty temporary file for `file_name` in `dir`.
    pub(crate) fn create(dir: &Path, file_name: &str) -> io::Result<(Self, File)> {
        loop {
            let path = dir.join(temp_name(file_name, "part"));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    let temp = Self {
                        path,
                        kept: false,
                        resumable: false,
                    };
                    return Ok((temp, file));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens (or creates) the resumable download of `file_name` in `dir`, locked for this
    /// process, positioned at its end; `None` when another process holds it. What it already
    /// holds is an earlier download's first bytes, unverified.
    pub(crate) fn resumable(dir: &Path, file_name: &str) -> io::Result<Option<(Self, File)>> {
        let path = dir.join(format!(".{file_name}.{DOWNLOAD_SUFFIX}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Ok(None),
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
        let temp = Self {
            path,
            kept: false,
            resumable: true,
        };
        Ok(Some((temp, file)))
    }

    /// Makes drop delete the file even if it is a resumable download (its bytes are wrong).
    pub(crate) fn discard(&mut self) {
        self.resumable = false;
    }

    /// Where the file is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file to `target` (atomically replacing it).
    pub(crate) fn persist(mut self, target: &Path) -> io::Result<()> {
        fs::rename(&self.path, target)?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // A resumable download is kept if it holds anything.
        let resume = self.resumable && fs::metadata(&self.path).is_ok_and(|m| m.len() > 0);
        if !self.kept && !resume {
            // Best effort; a leftover is swept later.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A scratch directory; deleted with its contents on drop.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a new empty scratch directory for `file_name` in `dir`.
    pub(crate) fn create(dir: &Path, file_name: &str) -> io::Result<Self> {
        loop {
            let path = dir.join(temp_name(file_name, "pip"));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Where the directory is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort; a leftover is swept later.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Removes temporary files and directories of `file_name` in `dir` that have not been modified
/// for an hour (left by a process that was killed), and a broken-off download untouched for a
/// week. (A download being written is touched as it grows.)
pub(crate) fn sweep_stale(dir: &Path, file_name: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{file_name}.");
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let after = if name.ends_with(".part") || name.ends_with(".pip") {
            STALE_AFTER
        } else if name.ends_with(&format!(".{DOWNLOAD_SUFFIX}")) {
            STALE_DOWNLOAD_AFTER
        } else {
            continue;
        };
        if !name.starts_with(&prefix) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let stale = meta
            .modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > after);
        if stale {
            let path = entry.path();
            let _ = if meta.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
        }
    }
}
