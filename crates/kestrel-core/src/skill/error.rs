//! Why a skill could not be loaded, found or read.

use crate::error::BoxError;

/// A skill could not be loaded, validated, found or read.
///
/// Errors about a `SKILL.md` name its file (`inline/<name>/SKILL.md` for inline skills) and,
/// where there is one, the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A skill folder has no `SKILL.md`.
    #[error("{dir}: a skill folder needs a SKILL.md file")]
    MissingSkillFile {
        /// The folder.
        dir: String,
    },
    /// The frontmatter of a `SKILL.md` is missing or malformed.
    #[error("{file}:{line}: {message}")]
    Frontmatter {
        /// The `SKILL.md`.
        file: String,
        /// The line (1-based, in the whole file).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A skill's name breaks the naming rules.
    #[error("{file}: skill name {name:?} is invalid: {reason}")]
    InvalidName {
        /// The `SKILL.md`.
        file: String,
        /// The name given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A folder skill's name differs from its folder's name.
    #[error("{file}: skill name {name:?} must equal its folder's name {directory:?}")]
    NameMismatch {
        /// The `SKILL.md`.
        file: String,
        /// The name in the frontmatter.
        name: String,
        /// The folder's name.
        directory: String,
    },
    /// A frontmatter field has a value out of bounds (an empty or too long description...).
    #[error("{file}: {field} {reason}")]
    InvalidField {
        /// The `SKILL.md`.
        file: String,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Two skills of one agent share a name.
    #[error("two skills are named {name:?}: {first} and {second}")]
    DuplicateName {
        /// The name.
        name: String,
        /// Where the first is.
        first: String,
        /// Where the second is.
        second: String,
    },
    /// No skill has this name.
    #[error("no skill is named {name:?}; the skills are: {}", list(.available))]
    UnknownSkill {
        /// The name asked for.
        name: String,
        /// The names there are.
        available: Vec<String>,
    },
    /// A path leads outside its skill's folder (`..`, an absolute path, a symlink out).
    #[error("path {path:?} is outside skill {skill:?}: {reason}")]
    PathOutside {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// How it leads out.
        reason: &'static str,
    },
    /// A skill has no file at this path.
    #[error("skill {skill:?} has no file {path:?}")]
    FileNotFound {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// A file is too large to be read whole.
    #[error("{path:?} of skill {skill:?} is {size} bytes; files over {limit} bytes are not read")]
    FileTooLarge {
        /// The skill.
        skill: String,
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// A line range that does not fit the file.
    #[error("lines {start}..={end} of {path:?} in skill {skill:?}: {reason}")]
    InvalidLineRange {
        /// The skill.
        skill: String,
        /// The path.
        path: String,
        /// The first line asked for.
        start: u64,
        /// The last line asked for.
        end: u64,
        /// Why it does not fit.
        reason: String,
    },
    /// A search without words.
    #[error("a skill search needs a query with at least one word")]
    EmptyQuery,
    /// A search named more skills than one search takes ([`super::MAX_SEARCH_SKILLS`]).
    #[error(
        "a skill search takes at most {limit} skill names, and {given} were given; leave \
         skillNames out to search every skill"
    )]
    TooManySkillNames {
        /// How many names were given (repeats included).
        given: usize,
        /// The bound.
        limit: usize,
    },
    /// A search's query or skill name is longer than its bound.
    #[error("{field} is {length} characters long; at most {limit} are allowed")]
    InputTooLong {
        /// What is too long (`query`, `a name in skillNames`).
        field: &'static str,
        /// Its length in characters.
        length: usize,
        /// The bound, in characters.
        limit: usize,
    },
    /// The agent's skills function failed.
    #[error("the skills function failed: {0}")]
    Dynamic(#[source] BoxError),
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}
