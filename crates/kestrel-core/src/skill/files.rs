//! A skill's files: what `references/`, `scripts/` and `assets/` hold, and reading one file
//! without ever leaving the skill's folder.
//!
//! Listing is bounded whatever the folder holds: symlinked folders are never followed (links
//! can loop, and each link followed multiplies the walk), folders are entered at most
//! [`MAX_DEPTH`] deep, each of the three lists stops at [`MAX_LISTED`] files, and a listing
//! looks at no more than [`MAX_VISITED`] entries in all. A listing cut short by a bound is
//! logged and gives what it found. Reading checks a file's size before reading it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::SkillError;

/// Files larger than this are not read (their size is still reported for binary files).
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
/// At most this many files are listed per folder of a skill.
const MAX_LISTED: usize = 1_000;
/// Folders are listed this deep at most.
const MAX_DEPTH: usize = 8;
/// At most this many folder entries (files, folders, links) are looked at per listing of a
/// skill, whatever they turn out to be: a folder of countless empty folders costs no more.
const MAX_VISITED: usize = 10_000;

/// The files a skill ships besides its `SKILL.md`, as paths relative to the skill's folder
/// (`references/checklist.md`), sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFiles {
    /// Documents the model may read when the instructions point to them.
    pub references: Vec<String>,
    /// Code the skill's instructions may tell someone to run.
    pub scripts: Vec<String>,
    /// Templates, images and other material.
    pub assets: Vec<String>,
}

/// What reading a skill's file gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillFileContent {
    /// A UTF-8 text file: the lines asked for.
    Text {
        /// The lines, joined by `\n`.
        text: String,
        /// The first line given (1-based).
        start_line: u64,
        /// The last line given.
        end_line: u64,
        /// How many lines the file has.
        total_lines: u64,
    },
    /// Any other file: only its size.
    Binary {
        /// Its size in bytes.
        size: u64,
    },
}

/// The folders whose files a skill lists.
const FOLDERS: [&str; 3] = ["references", "scripts", "assets"];

/// Checks that `path` is relative and stays inside the skill (no `..`, no root), and gives it
/// back normalised (`./a/b` → `a/b`).
pub(crate) fn confine(skill: &str, path: &str) -> Result<PathBuf, SkillError> {
    let outside = |reason| SkillError::PathOutside {
        skill: skill.to_owned(),
        path: path.to_owned(),
        reason,
    };
    if path.trim().is_empty() {
        return Err(SkillError::FileNotFound {
            skill: skill.to_owned(),
            path: path.to_owned(),
        });
    }
    // Both separators count: a Windows-style path must not slip through on Unix either.
    let unified = path.replace('\\', "/");
    if unified.starts_with('/') || Path::new(&unified).has_root() {
        return Err(outside("absolute paths are refused"));
    }
    let mut normal = PathBuf::new();
    for component in Path::new(&unified).components() {
        match component {
            Component::Normal(part) => {
                if part.to_string_lossy().contains(':') {
                    return Err(outside("drive and stream prefixes are refused"));
                }
                normal.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err(outside("`..` is refused")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(outside("absolute paths are refused"));
            }
        }
    }
    if normal.as_os_str().is_empty() {
        return Err(SkillError::FileNotFound {
            skill: skill.to_owned(),
            path: path.to_owned(),
        });
    }
    Ok(normal)
}

/// How far one listing may go.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Files per list.
    listed: usize,
    /// Folder levels below `references/`, `scripts/` or `assets/`.
    depth: usize,
    /// Entries looked at, in all.
    visited: usize,
}

const BOUNDS: Bounds = Bounds {
    listed: MAX_LISTED,
    depth: MAX_DEPTH,
    visited: MAX_VISITED,
};

/// Lists the files of a skill folder (`root` is canonical). Symlinked folders are not
/// followed; a symlinked file is listed when it resolves inside the folder (one that leads out
/// could not be read). A listing cut short by a bound is logged and gives what it found.
pub(crate) fn list_folder(root: &Path) -> Result<SkillFiles, SkillError> {
    list_folder_within(root, BOUNDS)
}

fn list_folder_within(root: &Path, bounds: Bounds) -> Result<SkillFiles, SkillError> {
    let mut walk = Walk {
        root,
        bounds,
        visited: 0,
        truncated: false,
    };
    let mut lists: [Vec<String>; 3] = Default::default();
    for (folder, list) in FOLDERS.iter().zip(lists.iter_mut()) {
        let dir = root.join(folder);
        // `symlink_metadata`: a symlinked `references/` is not followed either.
        if std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
            walk.folder(&dir, 0, list)?;
            list.sort();
        }
    }
    if walk.truncated {
        tracing::warn!(
            "skill folder {}: the listing stopped at a bound ({} files per folder, {} levels, \
             {} entries in all); files past it are not listed",
            root.display(),
            bounds.listed,
            bounds.depth,
            bounds.visited,
        );
    }
    let [references, scripts, assets] = lists;
    Ok(SkillFiles {
        references,
        scripts,
        assets,
    })
}

/// One listing of a skill folder, and what it has used of its bounds.
struct Walk<'a> {
    root: &'a Path,
    bounds: Bounds,
    visited: usize,
    truncated: bool,
}

impl Walk<'_> {
    fn folder(
        &mut self,
        dir: &Path,
        depth: usize,
        out: &mut Vec<String>,
    ) -> Result<(), SkillError> {
        if depth > self.bounds.depth {
            self.truncated = true;
            return Ok(());
        }
        let io = |source| SkillError::Io {
            path: dir.display().to_string(),
            source,
        };
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            if self.visited >= self.bounds.visited {
                self.truncated = true;
                break;
            }
            self.visited += 1;
            entries.push(entry.map_err(io)?);
        }
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if out.len() >= self.bounds.listed {
                self.truncated = true;
                return Ok(());
            }
            // The entry itself, not what a link points to.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                self.folder(&path, depth + 1, out)?;
                continue;
            }
            if kind.is_symlink() {
                // A link is listed when it resolves to a file inside the skill; a link to a
                // folder is never followed.
                let inside = path
                    .canonicalize()
                    .is_ok_and(|real| real.starts_with(self.root) && real.is_file());
                if !inside {
                    continue;
                }
            }
            if let Ok(relative) = path.strip_prefix(self.root) {
                out.push(slashed(relative));
            }
        }
        Ok(())
    }
}

/// The files of an inline skill, by the folder their path starts with (a bare name was put
/// under `references/` by the builder).
pub(crate) fn list_inline(files: &BTreeMap<String, String>) -> SkillFiles {
    let mut listed = SkillFiles::default();
    for path in files.keys() {
        let list = match path.split('/').next() {
            Some("scripts") => &mut listed.scripts,
            Some("assets") => &mut listed.assets,
            _ => &mut listed.references,
        };
        list.push(path.clone());
    }
    listed
}

/// A relative path with `/` separators, as the model sees paths.
fn slashed(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads `path` of a skill folder (`root` canonical), refusing anything that resolves outside
/// it (a symlink out, too), and files over [`MAX_READ_BYTES`].
pub(crate) fn read_folder_file(
    skill: &str,
    root: &Path,
    path: &str,
    lines: LineRange,
) -> Result<SkillFileContent, SkillError> {
    read_folder_file_within(skill, root, path, lines, MAX_READ_BYTES)
}

/// [`read_folder_file`] with a bound of its own: a file over `limit` bytes is refused by its
/// size before any of it is read, and one that grows past it while read is refused too.
pub(crate) fn read_folder_file_within(
    skill: &str,
    root: &Path,
    path: &str,
    lines: LineRange,
    limit: u64,
) -> Result<SkillFileContent, SkillError> {
    let (real, meta) = resolve(skill, root, path)?;
    let too_large = |size| SkillError::FileTooLarge {
        skill: skill.to_owned(),
        path: path.to_owned(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let io = |source| SkillError::Io {
        path: real.display().to_string(),
        source,
    };
    let file = std::fs::File::open(&real).map_err(io)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    #[cfg(test)]
    reads::record(&real);
    let size = bytes.len() as u64;
    if size > limit {
        return Err(too_large(size));
    }
    content_of(skill, path, bytes, lines)
}

/// What an index of a file depends on: its path in the skill, its size and when it last
/// changed. A file rewritten within the file system's time resolution and at the same size
/// keeps its stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    /// The path, relative to the skill's folder.
    pub(crate) path: String,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// Its modification time, where the file system keeps one.
    pub(crate) modified: Option<SystemTime>,
}

/// The stamp of `path` in a skill folder (`root` canonical), from its metadata alone.
pub(crate) fn stamp_folder_file(
    skill: &str,
    root: &Path,
    path: &str,
) -> Result<FileStamp, SkillError> {
    let (_, meta) = resolve(skill, root, path)?;
    Ok(FileStamp {
        path: path.to_owned(),
        size: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// The real path of `path` in a skill folder (`root` canonical) and its metadata, when it is a
/// file inside the folder.
fn resolve(
    skill: &str,
    root: &Path,
    path: &str,
) -> Result<(PathBuf, std::fs::Metadata), SkillError> {
    let relative = confine(skill, path)?;
    let joined = root.join(&relative);
    let real = match joined.canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SkillError::FileNotFound {
                skill: skill.to_owned(),
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(SkillError::Io {
                path: joined.display().to_string(),
                source,
            });
        }
    };
    if !real.starts_with(root) {
        return Err(SkillError::PathOutside {
            skill: skill.to_owned(),
            path: path.to_owned(),
            reason: "it resolves (through a symlink) to a file outside the skill's folder",
        });
    }
    let meta = std::fs::metadata(&real).map_err(|source| SkillError::Io {
        path: real.display().to_string(),
        source,
    })?;
    if !meta.is_file() {
        return Err(SkillError::FileNotFound {
            skill: skill.to_owned(),
            path: path.to_owned(),
        });
    }
    Ok((real, meta))
}

/// Which files were read, by real path: how tests see that a file was not read, or read once.
#[cfg(test)]
pub(crate) mod reads {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    static READ: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    pub(crate) fn record(real: &Path) {
        READ.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(real.to_owned());
    }

    /// How many times the file at `path` was read (`path` is canonicalised).
    pub(crate) fn count(path: &Path) -> usize {
        let Ok(real) = path.canonicalize() else {
            return 0;
        };
        READ.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|read| **read == real)
            .count()
    }
}

/// Reads `path` of an inline skill: `SKILL.md` gives the instructions, any other path a
/// reference given to the builder.
pub(crate) fn read_inline_file(
    skill: &str,
    instructions: &str,
    files: &BTreeMap<String, String>,
    path: &str,
    lines: LineRange,
) -> Result<SkillFileContent, SkillError> {
    let relative = slashed(&confine(skill, path)?);
    let text = if relative == "SKILL.md" {
        instructions
    } else {
        files
            .get(&relative)
            .ok_or_else(|| SkillError::FileNotFound {
                skill: skill.to_owned(),
                path: path.to_owned(),
            })?
    };
    content_of(skill, path, text.as_bytes().to_vec(), lines)
}

/// The lines of a file to give: all of them unless a range is set (1-based, inclusive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineRange {
    /// The first line (1-based); from the start when unset.
    pub start: Option<u64>,
    /// The last line (inclusive); to the end when unset.
    pub end: Option<u64>,
}

fn content_of(
    skill: &str,
    path: &str,
    bytes: Vec<u8>,
    range: LineRange,
) -> Result<SkillFileContent, SkillError> {
    let size = bytes.len() as u64;
    let probe = &bytes[..bytes.len().min(8 * 1024)];
    if probe.contains(&0) {
        return Ok(SkillFileContent::Binary { size });
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(SkillFileContent::Binary { size });
    };
    let all: Vec<&str> = text.lines().collect();
    let total = all.len() as u64;
    let start = range.start.unwrap_or(1);
    let end = range.end.unwrap_or(total).min(total.max(1));
    let invalid = |reason: String| SkillError::InvalidLineRange {
        skill: skill.to_owned(),
        path: path.to_owned(),
        start,
        end: range.end.unwrap_or(total),
        reason,
    };
    if start == 0 || range.end == Some(0) {
        return Err(invalid("lines are numbered from 1".to_owned()));
    }
    if range.end.is_some_and(|e| e < start) {
        return Err(invalid("the last line comes before the first".to_owned()));
    }
    if total == 0 {
        return Ok(SkillFileContent::Text {
            text: String::new(),
            start_line: 1,
            end_line: 0,
            total_lines: 0,
        });
    }
    if start > total {
        return Err(invalid(format!("the file has {total} lines")));
    }
    let text = all[(start - 1) as usize..end as usize].join("\n");
    Ok(SkillFileContent::Text {
        text,
        start_line: start,
        end_line: end,
        total_lines: total,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn confine_refuses_what_leads_out() {
        for path in [
            "../secret",
            "references/../../x",
            "/etc/passwd",
            "\\windows\\x",
            "C:/x",
            "a/..",
        ] {
            let err = confine("s", path).unwrap_err();
            assert!(
                matches!(err, SkillError::PathOutside { .. }),
                "{path}: {err:?}"
            );
        }
        assert_eq!(
            confine("s", "./references/a.md").unwrap(),
            PathBuf::from("references/a.md")
        );
        assert!(matches!(
            confine("s", ".").unwrap_err(),
            SkillError::FileNotFound { .. }
        ));
    }

    #[test]
    fn line_ranges_slice_text() {
        let text = b"one\ntwo\nthree\n".to_vec();
        let got = content_of(
            "s",
            "f",
            text.clone(),
            LineRange {
                start: Some(2),
                end: None,
            },
        )
        .unwrap();
        assert_eq!(
            got,
            SkillFileContent::Text {
                text: "two\nthree".into(),
                start_line: 2,
                end_line: 3,
                total_lines: 3
            }
        );
        let got = content_of(
            "s",
            "f",
            text.clone(),
            LineRange {
                start: None,
                end: Some(9),
            },
        )
        .unwrap();
        assert!(matches!(got, SkillFileContent::Text { end_line: 3, .. }));
        for (start, end) in [(Some(0), None), (Some(3), Some(2)), (Some(4), None)] {
            let err = content_of("s", "f", text.clone(), LineRange { start, end }).unwrap_err();
            assert!(
                matches!(err, SkillError::InvalidLineRange { .. }),
                "{err:?}"
            );
        }
    }

    #[test]
    fn binary_files_give_only_their_size() {
        let got = content_of("s", "f", vec![0x89, b'P', 0, 1, 2], LineRange::default()).unwrap();
        assert_eq!(got, SkillFileContent::Binary { size: 5 });
        let got = content_of("s", "f", vec![0xff, 0xfe, b'a'], LineRange::default()).unwrap();
        assert_eq!(got, SkillFileContent::Binary { size: 3 });
    }

    /// A skill folder at `dir/s` with `SKILL.md` and the files given (relative paths).
    fn skill_folder(dir: &Path, files: &[&str]) -> PathBuf {
        let root = dir.join("s");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("SKILL.md"), "x").unwrap();
        for file in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        root.canonicalize().unwrap()
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_folders_are_not_followed() {
        use std::os::unix::fs::symlink;

        let dir = tempfile::tempdir().unwrap();
        let root = skill_folder(
            dir.path(),
            &["references/a.md", "references/l1/l2/l3/l4/l5/b.md"],
        );
        let references = root.join("references");
        // Loops at every level: each one followed would multiply the walk.
        let mut level = references.clone();
        for name in ["l1", "l2", "l3", "l4", "l5"] {
            level = level.join(name);
            symlink(&references, level.join("top")).unwrap();
            symlink(".", level.join("here")).unwrap();
        }
        symlink(".", references.join("self")).unwrap();
        // A link to a file inside is listed; links out and dangling links are not.
        symlink("a.md", references.join("alias.md")).unwrap();
        std::fs::write(dir.path().join("secret.md"), "x").unwrap();
        symlink(dir.path().join("secret.md"), references.join("out.md")).unwrap();
        symlink(dir.path(), references.join("outside")).unwrap();
        symlink("gone.md", references.join("dangling.md")).unwrap();
        // A symlinked top folder is not followed either.
        symlink(&references, root.join("scripts")).unwrap();

        let listed = list_folder(&root).unwrap();
        assert_eq!(
            listed.references,
            [
                "references/a.md",
                "references/alias.md",
                "references/l1/l2/l3/l4/l5/b.md",
            ]
        );
        assert!(listed.scripts.is_empty(), "{:?}", listed.scripts);
        assert!(listed.assets.is_empty());
    }

    #[test]
    fn listings_stop_at_their_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let root = skill_folder(
            dir.path(),
            &[
                "references/a.md",
                "references/b.md",
                "references/c.md",
                "references/deep/d.md",
                "references/deep/deeper/e.md",
                "scripts/s.sh",
            ],
        );
        let bounds = |listed, depth, visited| Bounds {
            listed,
            depth,
            visited,
        };
        let all = list_folder_within(&root, bounds(10, 10, 100)).unwrap();
        assert_eq!(all.references.len(), 5);
        assert_eq!(all.scripts, ["scripts/s.sh"]);
        let listed = list_folder_within(&root, bounds(2, 10, 100)).unwrap();
        assert_eq!(listed.references, ["references/a.md", "references/b.md"]);
        assert_eq!(listed.scripts, ["scripts/s.sh"]);
        let shallow = list_folder_within(&root, bounds(10, 1, 100)).unwrap();
        assert_eq!(shallow.references.len(), 4, "{:?}", shallow.references);
        // Entries are counted across the folders, folders included: a.md, b.md, c.md and
        // deep/, then d.md and deeper/, and nothing is left for scripts/.
        let visited = list_folder_within(&root, bounds(10, 10, 6)).unwrap();
        assert_eq!(
            visited.references,
            [
                "references/a.md",
                "references/b.md",
                "references/c.md",
                "references/deep/d.md"
            ]
        );
        assert!(visited.scripts.is_empty());
    }

    #[test]
    fn a_file_over_the_limit_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let root = skill_folder(dir.path(), &[]);
        std::fs::create_dir_all(root.join("references")).unwrap();
        std::fs::write(root.join("references/big.md"), "0123456789").unwrap();
        let err = read_folder_file_within("s", &root, "references/big.md", LineRange::default(), 9)
            .unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::FileTooLarge {
                    size: 10,
                    limit: 9,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(reads::count(&root.join("references/big.md")), 0);
        let read =
            read_folder_file_within("s", &root, "references/big.md", LineRange::default(), 10)
                .unwrap();
        assert!(matches!(read, SkillFileContent::Text { .. }));
        assert_eq!(reads::count(&root.join("references/big.md")), 1);
    }
}
