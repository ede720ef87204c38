//! The `SKILL.md` format: YAML frontmatter between `---` lines, then a markdown body, and the
//! rules of the Agent Skills specification for its fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SkillError;

/// The longest name a skill may have, in characters.
pub const MAX_NAME_LEN: usize = 64;
/// The longest description a skill may have, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 1_024;
/// The longest `compatibility` note a skill may have, in characters.
pub const MAX_COMPATIBILITY_LEN: usize = 500;
/// Instructions longer than this many lines load with a warning.
pub const WARN_LINES: usize = 500;
/// Instructions longer than about this many tokens (four characters each) load with a warning.
pub const WARN_TOKENS: usize = 5_000;

/// What a skill's frontmatter says about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMetadata {
    /// The name: 1–64 characters of `a-z`, `0-9` and `-`, without a leading, trailing or
    /// double hyphen; a folder skill's equals its folder's name.
    pub name: String,
    /// What the skill is for and when to use it (1–1,024 characters): the model chooses
    /// skills by it.
    pub description: String,
    /// The license the skill is under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// What the skill needs from its environment (up to 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Free string keys and values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// The frontmatter as written, before the rules are checked: every field optional, so a
/// missing one gets an error of ours rather than the YAML parser's.
#[derive(Deserialize)]
struct RawFrontmatter {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

/// A parsed and validated `SKILL.md`.
#[derive(Debug, Clone)]
pub(crate) struct ParsedSkill {
    pub(crate) metadata: SkillMetadata,
    /// The markdown body.
    pub(crate) instructions: String,
    pub(crate) warnings: Vec<String>,
}

/// Splits, parses and validates the content of a `SKILL.md`. `file` names it in errors;
/// `directory` is the folder's name, which a folder skill's name must equal.
pub(crate) fn parse_skill_md(
    content: &str,
    file: &str,
    directory: Option<&str>,
) -> Result<ParsedSkill, SkillError> {
    let frontmatter_error = |line: u64, message: String| SkillError::Frontmatter {
        file: file.to_owned(),
        line,
        message,
    };
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let mut lines = content.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(frontmatter_error(
            1,
            "a SKILL.md starts with a `---` line opening its YAML frontmatter".to_owned(),
        ));
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(frontmatter_error(
            1,
            "the frontmatter opened on line 1 is never closed by a `---` line".to_owned(),
        ));
    }
    let body: String = lines.collect();
    let raw: RawFrontmatter = match serde_saphyr::from_str(&yaml) {
        Ok(raw) => raw,
        // Empty frontmatter parses as no document at all.
        Err(_) if yaml.trim().is_empty() => RawFrontmatter {
            name: None,
            description: None,
            license: None,
            compatibility: None,
            metadata: BTreeMap::new(),
        },
        Err(e) => {
            // The YAML starts on the file's second line.
            let line = e.location().map_or(1, |l| l.line().max(1)) + 1;
            let message = first_line(&e.to_string());
            return Err(frontmatter_error(
                line,
                format!("invalid frontmatter: {message}"),
            ));
        }
    };
    let Some(name) = raw.name else {
        return Err(frontmatter_error(
            1,
            "the frontmatter has no `name`".to_owned(),
        ));
    };
    let Some(description) = raw.description else {
        return Err(frontmatter_error(
            1,
            "the frontmatter has no `description`".to_owned(),
        ));
    };
    let metadata = SkillMetadata {
        name,
        description,
        license: raw.license,
        compatibility: raw.compatibility,
        metadata: raw.metadata,
    };
    validate_metadata(&metadata, file, directory)?;
    let instructions = body.trim().to_owned();
    let warnings = warnings(&metadata.name, &instructions);
    Ok(ParsedSkill {
        metadata,
        instructions,
        warnings,
    })
}

/// The first line of a parser's message (the rest is a snippet of the source).
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}

/// Checks the fields against the Agent Skills rules.
pub(crate) fn validate_metadata(
    metadata: &SkillMetadata,
    file: &str,
    directory: Option<&str>,
) -> Result<(), SkillError> {
    validate_name(&metadata.name, file)?;
    if let Some(directory) = directory
        && directory != metadata.name
    {
        return Err(SkillError::NameMismatch {
            file: file.to_owned(),
            name: metadata.name.clone(),
            directory: directory.to_owned(),
        });
    }
    let field = |field: &'static str, reason: String| SkillError::InvalidField {
        file: file.to_owned(),
        field,
        reason,
    };
    let description_len = metadata.description.trim().chars().count();
    if description_len == 0 {
        return Err(field("description", "must not be empty".to_owned()));
    }
    if description_len > MAX_DESCRIPTION_LEN {
        return Err(field(
            "description",
            format!("is {description_len} characters; the limit is {MAX_DESCRIPTION_LEN}"),
        ));
    }
    if let Some(compatibility) = &metadata.compatibility {
        let len = compatibility.chars().count();
        if len == 0 || len > MAX_COMPATIBILITY_LEN {
            return Err(field(
                "compatibility",
                format!("is {len} characters; it must have 1 to {MAX_COMPATIBILITY_LEN}"),
            ));
        }
    }
    Ok(())
}

/// The naming rule: `[a-z0-9-]{1,64}`, no leading, trailing or double hyphen.
pub(crate) fn validate_name(name: &str, file: &str) -> Result<(), SkillError> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.chars().count() > MAX_NAME_LEN {
        Some("it is longer than 64 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Some("only lowercase letters a-z, digits and hyphens are allowed")
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("it must not start or end with a hyphen")
    } else if name.contains("--") {
        Some("it must not contain two hyphens in a row")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(SkillError::InvalidName {
            file: file.to_owned(),
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The warnings of a skill whose instructions are long: they cost context on every use.
pub(crate) fn warnings(name: &str, instructions: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    let lines = instructions.lines().count();
    if lines > WARN_LINES {
        warnings.push(format!(
            "skill {name:?}: the instructions have {lines} lines; keep them under {WARN_LINES} \
             and move details to references/"
        ));
    }
    let tokens = instructions.chars().count() / 4;
    if tokens > WARN_TOKENS {
        warnings.push(format!(
            "skill {name:?}: the instructions are about {tokens} tokens; keep them under \
             {WARN_TOKENS} and move details to references/"
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn parse(content: &str) -> Result<ParsedSkill, SkillError> {
        parse_skill_md(content, "skills/review/SKILL.md", Some("review"))
    }

    #[test]
    fn a_skill_md_parses_into_metadata_and_body() {
        let skill = parse(
            "---\nname: review\ndescription: Reviews code.\nlicense: MIT\n\
             compatibility: needs git\nmetadata:\n  author: kim\n  version: \"1.2\"\n---\n\
             # Review\n\nRead the diff.\n",
        )
        .unwrap();
        assert_eq!(skill.metadata.name, "review");
        assert_eq!(skill.metadata.description, "Reviews code.");
        assert_eq!(skill.metadata.license.as_deref(), Some("MIT"));
        assert_eq!(skill.metadata.compatibility.as_deref(), Some("needs git"));
        assert_eq!(skill.metadata.metadata["author"], "kim");
        assert_eq!(skill.metadata.metadata["version"], "1.2");
        assert_eq!(skill.instructions, "# Review\n\nRead the diff.");
        assert!(skill.warnings.is_empty());
    }

    #[test]
    fn malformed_yaml_names_the_file_and_the_line() {
        let err = parse("---\nname: review\ndescription: [unclosed\n---\nbody\n").unwrap_err();
        match &err {
            SkillError::Frontmatter { file, line, .. } => {
                assert_eq!(file, "skills/review/SKILL.md");
                assert!((3..=4).contains(line), "line {line}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string().starts_with("skills/review/SKILL.md:"),
            "{err}"
        );
    }

    #[test]
    fn a_wrong_type_names_its_line() {
        let err = parse("---\nname: review\ndescription: ok\nmetadata:\n  tags: [a, b]\n---\n")
            .unwrap_err();
        let SkillError::Frontmatter { line, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(line, 5);
    }

    #[test]
    fn missing_delimiters_and_fields_are_refused() {
        for (content, needle) in [
            ("name: review\n", "starts with a `---` line"),
            ("---\nname: review\n", "never closed"),
            ("---\ndescription: x\n---\n", "no `name`"),
            ("---\nname: review\n---\n", "no `description`"),
            ("---\n---\n", "no `name`"),
        ] {
            let err = parse(content).unwrap_err();
            assert!(err.to_string().contains(needle), "{content:?}: {err}");
        }
    }

    #[test]
    fn names_follow_the_rules() {
        for good in ["a", "code-review", "v2", &"x".repeat(64)] {
            validate_name(good, "f").unwrap();
        }
        for (bad, reason) in [
            ("", "empty"),
            (&"x".repeat(65) as &str, "longer than 64"),
            ("Review", "lowercase"),
            ("code_review", "lowercase"),
            ("-review", "start or end"),
            ("review-", "start or end"),
            ("code--review", "two hyphens"),
            ("revue\u{e9}", "lowercase"),
        ] {
            let err = validate_name(bad, "f").unwrap_err();
            assert!(err.to_string().contains(reason), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_name_must_equal_the_folder() {
        let err = parse_skill_md(
            "---\nname: other\ndescription: x\n---\n",
            "skills/review/SKILL.md",
            Some("review"),
        )
        .unwrap_err();
        assert!(matches!(err, SkillError::NameMismatch { .. }), "{err:?}");
    }

    #[test]
    fn descriptions_are_bounded() {
        let empty = parse("---\nname: review\ndescription: \"  \"\n---\n").unwrap_err();
        assert!(
            empty.to_string().contains("description must not be empty"),
            "{empty}"
        );
        let long = format!(
            "---\nname: review\ndescription: {}\n---\n",
            "d".repeat(1_025)
        );
        let err = parse(&long).unwrap_err();
        assert!(err.to_string().contains("1025 characters"), "{err}");
        let limit = format!(
            "---\nname: review\ndescription: {}\n---\n",
            "d".repeat(1_024)
        );
        parse(&limit).unwrap();
    }

    #[test]
    fn long_instructions_load_with_warnings() {
        let body = "line\n".repeat(501);
        let skill = parse(&format!("---\nname: review\ndescription: x\n---\n{body}")).unwrap();
        assert_eq!(skill.warnings.len(), 1, "{:?}", skill.warnings);
        assert!(skill.warnings[0].contains("501 lines"));
        let wordy = "word ".repeat(4_100);
        let skill = parse(&format!("---\nname: review\ndescription: x\n---\n{wordy}")).unwrap();
        assert!(skill.warnings[0].contains("tokens"), "{:?}", skill.warnings);
    }
}
