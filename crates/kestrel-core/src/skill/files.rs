//! A skill's files: what `references/`, `scripts/` and `assets/` hold, and reading one file
//! without ever leaving the skill's folder.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SkillError;

/// Files larger than this are not read (their size is still reported for binary files).
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
/// At most this many files are listed per folder of a skill.
const MAX_LISTED: usize = 1_000;
/// Folders are listed this deep at most.
const MAX_DEPTH: usize = 8;

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

/// Lists the files of a skill folder (`root` is canonical). Entries that resolve outside the
/// folder (symlinks out) are left out: they could not be read.
pub(crate) fn list_folder(root: &Path) -> Result<SkillFiles, SkillError> {
    let mut lists: [Vec<String>; 3] = Default::default();
    for (folder, list) in FOLDERS.iter().zip(lists.iter_mut()) {
        let dir = root.join(folder);
        if dir.is_dir() {
            walk(root, &dir, 0, list)?;
            list.sort();
        }
    }
    let [references, scripts, assets] = lists;
    Ok(SkillFiles {
        references,
        scripts,
        assets,
    })
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) -> Result<(), SkillError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let io = |source| SkillError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= MAX_LISTED {
            return Ok(());
        }
        let Ok(real) = entry.path().canonicalize() else {
            continue; // a dangling symlink
        };
        if !real.starts_with(root) {
            continue;
        }
        if real.is_dir() {
            // A symlink to a folder inside the skill is followed once, by depth.
            walk(root, &entry.path(), depth + 1, out)?;
        } else if let Ok(relative) = entry.path().strip_prefix(root) {
            out.push(slashed(relative));
        }
    }
    Ok(())
}

/// A relative path with `/` separators, as the model sees paths.
fn slashed(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads `path` of a skill folder (`root` canonical), refusing anything that resolves outside
/// it (a symlink out, too).
pub(crate) fn read_folder_file(
    skill: &str,
    root: &Path,
    path: &str,
    lines: LineRange,
) -> Result<SkillFileContent, SkillError> {
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
    let io = |source| SkillError::Io {
        path: real.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(&real).map_err(io)?;
    if !meta.is_file() {
        return Err(SkillError::FileNotFound {
            skill: skill.to_owned(),
            path: path.to_owned(),
        });
    }
    let size = meta.len();
    if size > MAX_READ_BYTES {
        return Err(SkillError::FileTooLarge {
            skill: skill.to_owned(),
            path: path.to_owned(),
            size,
            limit: MAX_READ_BYTES,
        });
    }
    let bytes = std::fs::read(&real).map_err(io)?;
    content_of(skill, path, bytes, lines)
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
}
