//! The three tools an agent with skills gets: `skill`, `skill_read` and `skill_search`. They
//! hold no state of their own: each call resolves the agent's skills for its request context.

use std::collections::HashSet;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::search::{self, MAX_QUERY_CHARS, MAX_SEARCH_SKILLS};
use super::{LineRange, MAX_NAME_LEN, Skill, SkillError, SkillFileContent, SkillsSource};
use crate::tool::{SharedTool, Tool, ToolContext, ToolError, TypedTool};

/// The most hits one search returns.
const MAX_TOP_K: usize = 20;

/// The three tools, over these skills. With a fixed set, the schemas list the skills' names
/// as the only values of `name` and `skillName`: a model under a grammar (the local model)
/// can then only name a skill that exists.
pub(crate) fn skill_tools(source: &SkillsSource) -> Vec<SharedTool> {
    let names = match source {
        SkillsSource::Fixed(set) => Some(set.names()),
        SkillsSource::Dynamic(_) => None,
    };
    vec![
        Named::shared(SkillTool(source.clone()), "name", names.as_deref()),
        Named::shared(SkillReadTool(source.clone()), "skillName", names.as_deref()),
        Arc::new(SkillSearchTool(source.clone())),
    ]
}

/// A typed tool whose input schema names the skills there are.
struct Named<T> {
    tool: T,
    schema: Value,
}

impl<T: TypedTool> Named<T> {
    fn shared(tool: T, field: &str, names: Option<&[String]>) -> SharedTool {
        let mut schema = tool.input_schema().clone();
        if let Some(names) = names
            && let Some(property) = schema.pointer_mut(&format!("/properties/{field}"))
            && let Value::Object(property) = property
        {
            property.insert("enum".into(), json!(names));
        }
        Arc::new(Named { tool, schema })
    }
}

#[async_trait::async_trait]
impl<T: TypedTool> Tool for Named<T> {
    fn id(&self) -> &str {
        self.tool.id()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        self.tool.execute(input, ctx).await
    }
}

struct SkillTool(SkillsSource);

/// The input of `skill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SkillInput {
    /// The skill's name, as the catalog lists it.
    name: String,
}

impl TypedTool for SkillTool {
    const NAME: &'static str = "skill";
    const DESCRIPTION: &'static str = "Loads a skill from <available_skills>: returns its \
        instructions and the lists of its reference, script and asset files.";
    type Input = SkillInput;
    type Output = String;
    type Error = SkillError;

    async fn call(&self, input: SkillInput, ctx: ToolContext) -> Result<String, SkillError> {
        let skills = self.0.resolve(ctx.request_context()).await?;
        let skill = skills.require(&input.name)?;
        let files = skill.files().await?;
        let mut out = skill.instructions().to_owned();
        for (title, list) in [
            ("References", &files.references),
            ("Scripts", &files.scripts),
            ("Assets", &files.assets),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("\n\n## {title}\n"));
            for path in list {
                out.push_str(&format!("\n- {path}"));
            }
        }
        Ok(out)
    }
}

struct SkillReadTool(SkillsSource);

/// The input of `skill_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkillReadInput {
    /// The skill's name.
    skill_name: String,
    /// The file, relative to the skill's folder (`references/guide.md`, `SKILL.md`).
    path: String,
    /// The first line to read (1-based); from the start when left out.
    // Plain integers in the schema (optional, never null): grammars of local models take them.
    #[serde(default)]
    #[schemars(with = "u64", range(min = 1))]
    start_line: Option<u64>,
    /// The last line to read (inclusive); to the end when left out.
    #[serde(default)]
    #[schemars(with = "u64", range(min = 1))]
    end_line: Option<u64>,
}

impl TypedTool for SkillReadTool {
    const NAME: &'static str = "skill_read";
    const DESCRIPTION: &'static str = "Reads a file of a skill by its path inside the skill \
        (as the `skill` tool lists them), optionally only lines startLine to endLine. Binary \
        files give only their size.";
    type Input = SkillReadInput;
    type Output = String;
    type Error = SkillError;

    async fn call(&self, input: SkillReadInput, ctx: ToolContext) -> Result<String, SkillError> {
        let skills = self.0.resolve(ctx.request_context()).await?;
        let skill = skills.require(&input.skill_name)?;
        let lines = LineRange {
            start: input.start_line,
            end: input.end_line,
        };
        Ok(match skill.read(&input.path, lines).await? {
            SkillFileContent::Text {
                text,
                start_line,
                end_line,
                total_lines,
            } => {
                if lines == LineRange::default() {
                    text
                } else {
                    format!(
                        "{} (lines {start_line}-{end_line} of {total_lines})\n{text}",
                        input.path
                    )
                }
            }
            SkillFileContent::Binary { size } => {
                format!("{} is a binary file of {size} bytes", input.path)
            }
        })
    }
}

struct SkillSearchTool(SkillsSource);

/// The input of `skill_search`. Its bounds are in its schema too, for the model to see.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkillSearchInput {
    /// What to look for (at most 1,000 characters).
    #[schemars(length(max = MAX_QUERY_CHARS))]
    query: String,
    /// Search only these skills (at most 64 names); all of them when left out.
    #[serde(default)]
    #[schemars(
        with = "Vec<String>",
        length(max = MAX_SEARCH_SKILLS),
        inner(length(max = MAX_NAME_LEN))
    )]
    skill_names: Option<Vec<String>>,
    /// How many passages to return (1 to 20; 5 when left out).
    #[serde(default)]
    #[schemars(with = "u32", range(min = 1, max = 20))]
    top_k: Option<u32>,
}

impl SkillSearchInput {
    /// Checks the bounds before anything is looked up, and gives the skill names asked for
    /// each once, in their first order.
    fn checked_names(&self) -> Result<Option<Vec<&str>>, SkillError> {
        if let Some(length) = too_long(&self.query, MAX_QUERY_CHARS) {
            return Err(SkillError::InputTooLong {
                field: "query",
                length,
                limit: MAX_QUERY_CHARS,
            });
        }
        let Some(names) = &self.skill_names else {
            return Ok(None);
        };
        if names.len() > MAX_SEARCH_SKILLS {
            return Err(SkillError::TooManySkillNames {
                given: names.len(),
                limit: MAX_SEARCH_SKILLS,
            });
        }
        let mut seen = HashSet::new();
        let mut unique = Vec::new();
        for name in names {
            if let Some(length) = too_long(name, MAX_NAME_LEN) {
                return Err(SkillError::InputTooLong {
                    field: "a name in skillNames",
                    length,
                    limit: MAX_NAME_LEN,
                });
            }
            if seen.insert(name.as_str()) {
                unique.push(name.as_str());
            }
        }
        Ok(Some(unique))
    }
}

/// The length of `text` in characters when it is over `limit`.
fn too_long(text: &str, limit: usize) -> Option<usize> {
    text.chars()
        .nth(limit)
        .is_some()
        .then(|| text.chars().count())
}

impl TypedTool for SkillSearchTool {
    const NAME: &'static str = "skill_search";
    const DESCRIPTION: &'static str = "Searches the text of the skills (instructions and \
        references) and returns the best matching passages with their skill, file and lines.";
    type Input = SkillSearchInput;
    type Output = String;
    type Error = SkillError;

    async fn call(&self, input: SkillSearchInput, ctx: ToolContext) -> Result<String, SkillError> {
        let names = input.checked_names()?;
        let skills = self.0.resolve(ctx.request_context()).await?;
        let chosen: Vec<Skill> = match names {
            Some(names) => names
                .into_iter()
                .map(|name| skills.require(name).cloned())
                .collect::<Result<_, _>>()?,
            None => skills.iter().cloned().collect(),
        };
        let top_k = input.top_k.map_or(5, |k| k as usize).clamp(1, MAX_TOP_K);
        let hits = search::search(chosen, input.query.clone(), top_k).await?;
        if hits.is_empty() {
            return Ok(format!(
                "No passage of the skills matches {:?}.",
                input.query
            ));
        }
        Ok(hits
            .iter()
            .map(|hit| {
                format!(
                    "[{}] {} (lines {}-{}) (score {:.2}) {}",
                    hit.skill_name, hit.path, hit.start_line, hit.end_line, hit.score, hit.preview
                )
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::skill::{SkillSet, create_skill, files};

    #[test]
    fn optional_inputs_are_plain_optional_fields() {
        let set = SkillSet::new([create_skill("a", "A.", "x").build().unwrap()]).unwrap();
        let tools = skill_tools(&SkillsSource::Fixed(Arc::new(set)));
        let read = tools[1].input_schema();
        assert_eq!(read["required"], json!(["skillName", "path"]));
        assert_eq!(read["properties"]["startLine"]["type"], "integer");
        assert_eq!(read["properties"]["startLine"]["minimum"], 1);
        let search = tools[2].input_schema();
        assert_eq!(search["required"], json!(["query"]));
        assert_eq!(search["properties"]["topK"]["type"], "integer");
        assert_eq!(search["properties"]["skillNames"]["type"], "array");
    }

    #[test]
    fn the_search_bounds_are_in_the_schema() {
        let set = SkillSet::new([create_skill("a", "A.", "x").build().unwrap()]).unwrap();
        let tools = skill_tools(&SkillsSource::Fixed(Arc::new(set)));
        let search = tools[2].input_schema();
        assert_eq!(search["properties"]["query"]["maxLength"], MAX_QUERY_CHARS);
        let names = &search["properties"]["skillNames"];
        assert_eq!(names["maxItems"], MAX_SEARCH_SKILLS);
        assert_eq!(names["items"]["maxLength"], MAX_NAME_LEN);
    }

    fn input(query: &str, names: Option<Vec<String>>) -> SkillSearchInput {
        SkillSearchInput {
            query: query.to_owned(),
            skill_names: names,
            top_k: None,
        }
    }

    #[test]
    fn search_inputs_past_their_bounds_are_refused() {
        let repeated = input("x", Some(vec!["a".to_owned(); 10_000]));
        let err = repeated.checked_names().unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::TooManySkillNames {
                    given: 10_000,
                    limit: 64
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("at most 64 skill names"), "{err}");

        let long_name = input("x", Some(vec!["a".repeat(65)]));
        let err = long_name.checked_names().unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::InputTooLong {
                    length: 65,
                    limit: 64,
                    ..
                }
            ),
            "{err:?}"
        );

        let long_query = input(&"é".repeat(MAX_QUERY_CHARS + 1), None);
        let err = long_query.checked_names().unwrap_err();
        assert!(
            matches!(err, SkillError::InputTooLong { field: "query", length, .. } if length == MAX_QUERY_CHARS + 1),
            "{err:?}"
        );
        // At the bounds, in characters: accepted.
        let at_bounds = input(&"é".repeat(MAX_QUERY_CHARS), Some(vec!["é".repeat(64)]));
        assert!(at_bounds.checked_names().is_ok());
    }

    #[test]
    fn repeated_skill_names_are_searched_once() {
        let names = ["b", "a", "b", "a", "b"].map(str::to_owned).to_vec();
        let repeated = input("x", Some(names));
        assert_eq!(repeated.checked_names().unwrap().unwrap(), ["b", "a"]);
    }

    #[tokio::test]
    async fn a_search_naming_one_skill_many_times_reads_its_files_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("guide");
        std::fs::create_dir_all(root.join("references")).unwrap();
        std::fs::write(
            root.join("SKILL.md"),
            "---\nname: guide\ndescription: Guides.\n---\nFollow it.\n",
        )
        .unwrap();
        let reference = root.join("references/a.md");
        std::fs::write(&reference, "Pelicans eat fish.\n").unwrap();
        let skill = crate::skill::Skill::from_dir(&root).unwrap();
        let set = SkillSet::new([skill]).unwrap();
        let tools = skill_tools(&SkillsSource::Fixed(Arc::new(set)));
        let ctx = || ToolContext::standalone("skill_search");

        let refused = tools[2]
            .execute(
                json!({"query": "pelicans", "skillNames": vec!["guide"; 10_000]}),
                ctx(),
            )
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("at most 64 skill names"),
            "{refused}"
        );
        assert_eq!(files::reads::count(&reference), 0);

        let found = tools[2]
            .execute(
                json!({"query": "pelicans", "skillNames": vec!["guide"; 64]}),
                ctx(),
            )
            .await
            .unwrap();
        let found = found.as_str().unwrap();
        assert_eq!(found.lines().count(), 1, "{found}");
        assert!(found.starts_with("[guide] references/a.md"), "{found}");
        assert_eq!(files::reads::count(&reference), 1);
    }
}
