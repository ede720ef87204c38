//! `skill_search` and skill listings under hostile input: the bounds of the search's input
//! (in its schema and in the tool), and folders whose symlinks loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::model::ScriptedModel;
use kestrel_core::skill::{MAX_QUERY_CHARS, MAX_SEARCH_SKILLS, Skill};
use kestrel_core::tool::ToolContext;
use serde_json::json;

/// A skill folder `guide` under `dir` with one reference.
fn guide(dir: &Path) -> PathBuf {
    let root = dir.join("guide");
    std::fs::create_dir_all(root.join("references")).unwrap();
    std::fs::write(
        root.join("SKILL.md"),
        "---\nname: guide\ndescription: Field guide to birds.\n---\nLook up.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("references/pelicans.md"),
        "Pelicans scoop fish.\n",
    )
    .unwrap();
    root
}

fn agent_with(skill: Skill) -> Agent {
    Agent::builder("birder")
        .model(Arc::new(ScriptedModel::new()))
        .skills([skill])
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_search_repeating_a_name_past_the_bound_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(Skill::from_dir(guide(dir.path())).unwrap());
    let tools = agent.tools();
    let args = json!({"query": "pelicans", "skillNames": vec!["guide"; 10_000]});

    // The schema says so (what the model and `tools/{id}/execute` are checked against)...
    let schema = tools.get("skill_search").unwrap().input_schema();
    assert_eq!(
        schema["properties"]["skillNames"]["maxItems"],
        MAX_SEARCH_SKILLS
    );
    assert_eq!(schema["properties"]["query"]["maxLength"], MAX_QUERY_CHARS);
    assert!(tools.checked("skill_search", &args).is_err());

    // ...and the tool refuses it when called without the check.
    let tool = tools.get("skill_search").unwrap();
    let err = tool
        .execute(args, ToolContext::standalone("skill_search"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at most 64 skill names"), "{err}");

    let long = json!({"query": "p".repeat(MAX_QUERY_CHARS + 1)});
    assert!(tools.checked("skill_search", &long).is_err());
    let err = tool
        .execute(long, ToolContext::standalone("skill_search"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("query is 1001 characters long"),
        "{err}"
    );

    // Repeats within the bound are searched once: one hit, not 64.
    let repeated = json!({"query": "pelicans", "skillNames": vec!["guide"; 64], "topK": 20});
    let tool = tools.checked("skill_search", &repeated).unwrap();
    let found = tool
        .execute(repeated, ToolContext::standalone("skill_search"))
        .await
        .unwrap();
    let found = found.as_str().unwrap();
    assert_eq!(found.lines().count(), 1, "{found}");
    assert!(
        found.starts_with("[guide] references/pelicans.md"),
        "{found}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_folder_of_nested_symlink_loops_lists_each_file_once() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().unwrap();
    let root = guide(dir.path());
    let references = root.join("references").canonicalize().unwrap();
    let mut level = references.clone();
    for depth in 1..=5 {
        level = level.join(format!("l{depth}"));
        std::fs::create_dir(&level).unwrap();
        for link in ["a", "b", "c"] {
            symlink(&references, level.join(link)).unwrap();
        }
    }
    std::fs::write(level.join("deep.md"), "Deep down, ospreys.\n").unwrap();
    let skill = Skill::from_dir(&root).unwrap();

    let files = skill.files().await.unwrap();
    assert_eq!(
        files.references,
        [
            "references/l1/l2/l3/l4/l5/deep.md",
            "references/pelicans.md"
        ]
    );

    // The search lists the same files, and finds the deep one.
    let agent = agent_with(skill);
    let found = agent
        .tools()
        .get("skill_search")
        .unwrap()
        .execute(
            json!({"query": "ospreys"}),
            ToolContext::standalone("skill_search"),
        )
        .await
        .unwrap();
    let found = found.as_str().unwrap();
    assert_eq!(found.lines().count(), 1, "{found}");
    assert!(
        found.contains("references/l1/l2/l3/l4/l5/deep.md"),
        "{found}"
    );
}
