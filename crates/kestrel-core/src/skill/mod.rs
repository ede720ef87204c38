//! Skills: instructions an agent loads only when a task needs them, in the
//! [Agent Skills](https://agentskills.io) format.
//!
//! A skill is a folder with a `SKILL.md` (YAML frontmatter with `name` and `description`, then
//! markdown instructions) and optional `references/`, `scripts/` and `assets/`
//! ([`Skill::from_dir`]), or the same built in code ([`create_skill`]). An agent given skills
//! ([`crate::agent::AgentBuilder::skills`]) shows the model a catalog of their names and
//! descriptions in a system message and gets three tools:
//!
//! - `skill` gives a skill's instructions and the lists of its files;
//! - `skill_read` reads one file of a skill (optionally a line range), never outside its
//!   folder;
//! - `skill_search` ranks passages of the skills' text against a query.
//!
//! The instructions reach the model only when it asks for them, so an agent may carry many
//! skills at the cost of one catalog line each.
//!
//! ```
//! use kestrel_core::skill::create_skill;
//!
//! let skill = create_skill(
//!     "release-notes",
//!     "Writes release notes from a list of changes.",
//!     "Group the changes under Added, Changed and Fixed. See references/style.md.",
//! )
//! .reference("style.md", "One line per change, in the past tense.")
//! .build()
//! .unwrap();
//! assert_eq!(skill.name(), "release-notes");
//! assert_eq!(skill.location(), "inline/release-notes/SKILL.md");
//! ```

mod catalog;
mod error;
mod files;
mod format;
mod search;
mod set;
pub(crate) mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub(crate) use catalog::system_messages;
pub use error::SkillError;
pub use files::{LineRange, MAX_READ_BYTES, SkillFileContent, SkillFiles};
pub use format::{
    MAX_COMPATIBILITY_LEN, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, SkillMetadata, WARN_LINES,
    WARN_TOKENS,
};
pub use search::{MAX_QUERY_CHARS, MAX_SEARCH_SKILLS, SkillSearchHit};
pub use set::SkillSet;
pub(crate) use set::{DynSkills, SkillsSource};

/// One skill: its metadata, instructions and files. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Skill {
    inner: Arc<SkillData>,
}

#[derive(Debug)]
struct SkillData {
    metadata: SkillMetadata,
    instructions: String,
    origin: Origin,
    warnings: Vec<String>,
    /// What `skill_search` built from the skill's text, kept for the next search.
    index: search::IndexCache,
}

#[derive(Debug)]
enum Origin {
    /// A folder on disk: `shown` as the user gave it, `root` canonical (for confinement).
    Folder { shown: String, root: PathBuf },
    /// Built in code, with its reference files by relative path.
    Inline { files: BTreeMap<String, String> },
}

/// Where a skill comes from, as the catalog and the HTTP API report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillSource {
    /// A folder of the project, or a skill built in code.
    Local,
}

impl Skill {
    /// Loads the skill in folder `dir`: its `SKILL.md` is read and validated (the name must
    /// equal the folder's name); the other files are read when asked for.
    ///
    /// Warnings (instructions over 500 lines or about 5,000 tokens) are logged and kept in
    /// [`Skill::warnings`].
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Skill, SkillError> {
        let dir = dir.as_ref();
        let shown = dir.display().to_string();
        let io = |source| SkillError::Io {
            path: shown.clone(),
            source,
        };
        let root = dir.canonicalize().map_err(io)?;
        let file = root.join("SKILL.md");
        let file_shown = format!("{}/SKILL.md", shown.trim_end_matches('/'));
        let content = match std::fs::read_to_string(&file) {
            Ok(content) => content,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SkillError::MissingSkillFile { dir: shown });
            }
            Err(source) => {
                return Err(SkillError::Io {
                    path: file_shown,
                    source,
                });
            }
        };
        let directory = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = format::parse_skill_md(&content, &file_shown, Some(&directory))?;
        Ok(Self::new(
            parsed.metadata,
            parsed.instructions,
            Origin::Folder {
                shown: shown.trim_end_matches('/').to_owned(),
                root,
            },
            parsed.warnings,
        ))
    }

    /// Loads every skill folder directly under `dir` (each subfolder with a `SKILL.md`),
    /// sorted by name. Folders without one are skipped; a malformed skill is an error.
    pub fn discover(dir: impl AsRef<Path>) -> Result<Vec<Skill>, SkillError> {
        let dir = dir.as_ref();
        let io = |source| SkillError::Io {
            path: dir.display().to_string(),
            source,
        };
        let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io)?
            .into_iter()
            .map(|entry| entry.path())
            .filter(|path| path.join("SKILL.md").is_file())
            .collect();
        folders.sort();
        let mut skills = folders
            .iter()
            .map(Skill::from_dir)
            .collect::<Result<Vec<_>, _>>()?;
        skills.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(skills)
    }

    /// Parses and validates the content of a `SKILL.md` without a folder: `directory`, when
    /// given, is the name the skill must have. Errors name the file as `file`.
    pub fn parse(
        content: &str,
        file: &str,
        directory: Option<&str>,
    ) -> Result<(SkillMetadata, String), SkillError> {
        let parsed = format::parse_skill_md(content, file, directory)?;
        Ok((parsed.metadata, parsed.instructions))
    }

    fn new(
        metadata: SkillMetadata,
        instructions: String,
        origin: Origin,
        warnings: Vec<String>,
    ) -> Skill {
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Skill {
            inner: Arc::new(SkillData {
                metadata,
                instructions,
                origin,
                warnings,
                index: search::IndexCache::default(),
            }),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.inner.metadata.name
    }

    /// The description the catalog shows.
    pub fn description(&self) -> &str {
        &self.inner.metadata.description
    }

    /// Everything the frontmatter said.
    pub fn metadata(&self) -> &SkillMetadata {
        &self.inner.metadata
    }

    /// The instructions (the markdown body of `SKILL.md`).
    pub fn instructions(&self) -> &str {
        &self.inner.instructions
    }

    /// Where the skill is: its folder as given to [`Skill::from_dir`], or `inline/<name>`.
    pub fn path(&self) -> String {
        match &self.inner.origin {
            Origin::Folder { shown, .. } => shown.clone(),
            Origin::Inline { .. } => format!("inline/{}", self.name()),
        }
    }

    /// Where its `SKILL.md` is, as the catalog shows it.
    pub fn location(&self) -> String {
        format!("{}/SKILL.md", self.path())
    }

    /// Where the skill comes from.
    pub fn source(&self) -> SkillSource {
        SkillSource::Local
    }

    /// Whether the skill was built in code ([`create_skill`]).
    pub fn is_inline(&self) -> bool {
        matches!(self.inner.origin, Origin::Inline { .. })
    }

    /// What loading the skill warned about (long instructions).
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// The files of its `references/`, `scripts/` and `assets/` folders, listed now.
    ///
    /// Symlinked folders are not followed (a symlinked file inside the skill is listed), and a
    /// listing stops at 1,000 files per folder, 8 levels deep and 10,000 entries looked at in
    /// all; a listing cut short is logged.
    pub async fn files(&self) -> Result<SkillFiles, SkillError> {
        match &self.inner.origin {
            Origin::Folder { root, .. } => {
                let root = root.clone();
                blocking(move || files::list_folder(&root)).await
            }
            Origin::Inline { files } => Ok(files::list_inline(files)),
        }
    }

    /// Reads a file of the skill by its path relative to the skill's folder (`SKILL.md`,
    /// `references/x.md`...). Paths that lead outside the folder (`..`, absolute paths,
    /// symlinks out) are refused with [`SkillError::PathOutside`]; a binary file gives only
    /// its size.
    pub async fn read(&self, path: &str, lines: LineRange) -> Result<SkillFileContent, SkillError> {
        match &self.inner.origin {
            Origin::Folder { root, .. } => {
                let (name, root, path) = (self.name().to_owned(), root.clone(), path.to_owned());
                blocking(move || files::read_folder_file(&name, &root, &path, lines)).await
            }
            Origin::Inline { files } => {
                files::read_inline_file(self.name(), self.instructions(), files, path, lines)
            }
        }
    }
}

/// Runs file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SkillError> + Send + 'static,
) -> Result<T, SkillError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) => Err(SkillError::Io {
            path: "(skill files)".to_owned(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// Starts an inline skill (Mastra's `createSkill`): a name, a description and instructions,
/// then optional references and frontmatter fields; [`SkillBuilder::build`] validates it by
/// the same rules as a `SKILL.md`.
pub fn create_skill(
    name: impl Into<String>,
    description: impl Into<String>,
    instructions: impl Into<String>,
) -> SkillBuilder {
    SkillBuilder {
        metadata: SkillMetadata {
            name: name.into(),
            description: description.into(),
            license: None,
            compatibility: None,
            metadata: BTreeMap::new(),
        },
        instructions: instructions.into(),
        files: Vec::new(),
    }
}

/// Builds an inline skill; see [`create_skill`].
#[derive(Debug, Clone)]
pub struct SkillBuilder {
    metadata: SkillMetadata,
    instructions: String,
    files: Vec<(String, String)>,
}

impl SkillBuilder {
    /// Adds a reference file. A bare file name goes under `references/`; a path under
    /// `scripts/` or `assets/` lists the file there.
    pub fn reference(mut self, path: impl Into<String>, content: impl Into<String>) -> Self {
        self.files.push((path.into(), content.into()));
        self
    }

    /// The license.
    pub fn license(mut self, license: impl Into<String>) -> Self {
        self.metadata.license = Some(license.into());
        self
    }

    /// What the skill needs from its environment.
    pub fn compatibility(mut self, compatibility: impl Into<String>) -> Self {
        self.metadata.compatibility = Some(compatibility.into());
        self
    }

    /// A metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.metadata.insert(key.into(), value.into());
        self
    }

    /// Validates the skill: its name, description and the paths of its references.
    pub fn build(self) -> Result<Skill, SkillError> {
        let file = format!("inline/{}/SKILL.md", self.metadata.name);
        format::validate_metadata(&self.metadata, &file, None)?;
        let name = self.metadata.name.clone();
        let mut files = BTreeMap::new();
        for (path, content) in self.files {
            let confined = files::confine(&name, &path)?;
            let mut relative = confined
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>();
            if relative.len() == 1 {
                relative.insert(0, "references".to_owned());
            }
            let relative = relative.join("/");
            if files.insert(relative.clone(), content).is_some() {
                return Err(SkillError::InvalidField {
                    file,
                    field: "references",
                    reason: format!("{relative:?} is given twice"),
                });
            }
        }
        let warnings = format::warnings(&name, &self.instructions);
        let instructions = self.instructions.trim().to_owned();
        Ok(Skill::new(
            self.metadata,
            instructions,
            Origin::Inline { files },
            warnings,
        ))
    }
}
