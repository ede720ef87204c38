//! Skills end to end: folder and inline skills, the catalog the model sees, the three skill
//! tools as the model calls them, confinement of `skill_read`, and bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentBuildError};
use kestrel_core::context::RequestContext;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::skill::{LineRange, Skill, SkillError, SkillFileContent, create_skill};
use serde_json::{Value, json};

/// A skill folder `code-review` under `dir`, with a reference, a script, a binary asset and a
/// secret file next to (outside) the skill.
fn code_review_skill(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("code-review");
    std::fs::create_dir_all(root.join("references")).unwrap();
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::create_dir_all(root.join("assets")).unwrap();
    std::fs::write(
        root.join("SKILL.md"),
        "---\nname: code-review\ndescription: Reviews a diff for bugs and style.\n\
         license: MIT\nmetadata:\n  author: kestrel\n---\n# Code review\n\n\
         1. Read the diff.\n2. Check it against references/checklist.md.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("references/checklist.md"),
        "# Checklist\n\n- Every unwrap is justified.\n- Errors name what failed.\n\
         - Public items have doc comments.\n",
    )
    .unwrap();
    std::fs::write(root.join("scripts/lint.sh"), "#!/bin/sh\ncargo clippy\n").unwrap();
    std::fs::write(
        root.join("assets/logo.png"),
        [0x89, b'P', b'N', b'G', 0, 0, 1],
    )
    .unwrap();
    std::fs::write(dir.join("secret.txt"), "the password is hunter2\n").unwrap();
    root
}

/// The results of the tool calls of a run, by call id.
fn results(result: &kestrel_core::run::GenerateResult) -> Vec<(String, Value, bool)> {
    result
        .tool_results
        .iter()
        .map(|r| (r.tool_call_id.clone(), r.result.clone(), r.is_error))
        .collect()
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn the_model_sees_the_catalog_and_loads_reads_and_searches_skills() {
    let dir = tempfile::tempdir().unwrap();
    let root = code_review_skill(dir.path());
    let folder = Skill::from_dir(&root).unwrap();
    let inline = create_skill(
        "release-notes",
        "Writes release notes from a list of changes.",
        "Group changes under Added, Changed and Fixed.",
    )
    .reference(
        "style.md",
        "Write each change in the past tense.\nOne line each.",
    )
    .build()
    .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(
                ScriptedResponse::tool_call("c1", "skill", json!({"name": "code-review"}))
                    .and_tool_call(
                        "c2",
                        "skill_read",
                        r#"{"skillName": "code-review", "path": "references/checklist.md", "startLine": 3, "endLine": 4}"#,
                    )
                    .and_tool_call(
                        "c3",
                        "skill_read",
                        r#"{"skillName": "code-review", "path": "assets/logo.png"}"#,
                    )
                    .and_tool_call(
                        "c4",
                        "skill_search",
                        r#"{"query": "doc comments on public items"}"#,
                    )
                    .and_tool_call(
                        "c5",
                        "skill_read",
                        r#"{"skillName": "release-notes", "path": "references/style.md"}"#,
                    )
                    .and_tool_call("c6", "skill", r#"{"name": "no-such-skill"}"#),
            )
            .respond(ScriptedResponse::text("reviewed")),
    );
    let agent = Agent::builder("reviewer")
        .instructions("You review code.")
        .model(model.clone())
        .skills([inline, folder])
        .build()
        .unwrap();
    let result = agent.generate("review this").await.unwrap();
    assert_eq!(result.text, "reviewed");

    // The first request: the instructions, then the catalog sorted by name, then the usage.
    let request = &model.requests()[0];
    let system: Vec<String> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.text())
        .collect();
    assert_eq!(system.len(), 3, "{system:?}");
    assert_eq!(system[0], "You review code.");
    let catalog = &system[1];
    assert!(catalog.starts_with("<available_skills>"), "{catalog}");
    let review = catalog.find("<name>code-review</name>").unwrap();
    let notes = catalog.find("<name>release-notes</name>").unwrap();
    assert!(review < notes, "sorted by name: {catalog}");
    assert!(catalog.contains(&format!("<location>{}/SKILL.md</location>", root.display())));
    assert!(catalog.contains("<location>inline/release-notes/SKILL.md</location>"));
    assert!(
        !catalog.contains("Read the diff"),
        "instructions stay out of the catalog"
    );
    assert!(system[2].contains("`skill` tool"));
    let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    for tool in ["skill", "skill_read", "skill_search"] {
        assert!(offered.contains(&tool), "{offered:?}");
    }

    let results = results(&result);
    let (_, loaded, failed) = &results[0];
    assert!(!failed);
    let loaded = text_of(loaded);
    assert!(loaded.starts_with("# Code review"), "{loaded}");
    assert!(
        loaded.contains("## References\n\n- references/checklist.md"),
        "{loaded}"
    );
    assert!(
        loaded.contains("## Scripts\n\n- scripts/lint.sh"),
        "{loaded}"
    );
    assert!(
        loaded.contains("## Assets\n\n- assets/logo.png"),
        "{loaded}"
    );

    let ranged = text_of(&results[1].1);
    assert_eq!(
        ranged,
        "references/checklist.md (lines 3-4 of 5)\n- Every unwrap is justified.\n- Errors name what failed."
    );
    assert_eq!(
        text_of(&results[2].1),
        "assets/logo.png is a binary file of 7 bytes"
    );
    let hits = text_of(&results[3].1);
    let first = hits.lines().next().unwrap();
    assert!(
        first.starts_with("[code-review] references/checklist.md (lines 1-5)"),
        "{hits}"
    );
    assert_eq!(
        text_of(&results[4].1),
        "Write each change in the past tense.\nOne line each."
    );
    let (_, unknown, failed) = &results[5];
    assert!(failed);
    let unknown = text_of(unknown);
    // A fixed set's names are the only values the schema allows.
    assert!(
        unknown.contains("\"no-such-skill\" is not one of \"code-review\" or \"release-notes\""),
        "{unknown}"
    );
    let schema = agent
        .tools()
        .get("skill_read")
        .unwrap()
        .input_schema()
        .clone();
    assert_eq!(
        schema["properties"]["skillName"]["enum"],
        json!(["code-review", "release-notes"])
    );
}

#[tokio::test]
async fn skill_read_never_leaves_the_skill_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = code_review_skill(dir.path());
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(
            dir.path().join("secret.txt"),
            root.join("references/leak.md"),
        )
        .unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("assets/up")).unwrap();
        std::os::unix::fs::symlink(
            root.join("references/checklist.md"),
            root.join("references/alias.md"),
        )
        .unwrap();
    }
    let skill = Skill::from_dir(&root).unwrap();
    let secret = dir.path().join("secret.txt").display().to_string();
    let mut attempts = vec![
        "../secret.txt".to_owned(),
        "references/../../secret.txt".to_owned(),
        secret.clone(),
        "..\\secret.txt".to_owned(),
    ];
    if cfg!(unix) {
        attempts.push("references/leak.md".to_owned());
        attempts.push("assets/up/secret.txt".to_owned());
    }
    for path in &attempts {
        let err = skill.read(path, LineRange::default()).await.unwrap_err();
        assert!(
            matches!(&err, SkillError::PathOutside { skill, .. } if skill == "code-review"),
            "{path}: {err:?}"
        );
    }
    // A symlink that stays inside the skill reads; the ones out are not even listed.
    #[cfg(unix)]
    {
        let read = skill
            .read("references/alias.md", LineRange::default())
            .await
            .unwrap();
        assert!(matches!(
            read,
            SkillFileContent::Text { total_lines: 5, .. }
        ));
        let files = skill.files().await.unwrap();
        assert_eq!(
            files.references,
            ["references/alias.md", "references/checklist.md"]
        );
        assert_eq!(files.assets, ["assets/logo.png"]);
    }
    let missing = skill
        .read("references/none.md", LineRange::default())
        .await
        .unwrap_err();
    assert!(
        matches!(missing, SkillError::FileNotFound { .. }),
        "{missing:?}"
    );

    // Through the tool, the refusal is a failed result the model reads, and nothing leaks.
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "c1",
                "skill_read",
                json!({"skillName": "code-review", "path": secret}),
            ))
            .respond(ScriptedResponse::text("ok")),
    );
    let agent = Agent::builder("reviewer")
        .model(model)
        .skills([skill])
        .build()
        .unwrap();
    let result = agent.generate("read").await.unwrap();
    let (_, refused, failed) = &results(&result)[0];
    assert!(failed);
    let refused = text_of(refused);
    assert!(
        refused.contains("outside skill \"code-review\""),
        "{refused}"
    );
    assert!(!refused.contains("hunter2"));
}

#[tokio::test]
async fn skills_can_depend_on_the_request_context() {
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "c1",
                "skill",
                json!({"name": "pro-report"}),
            ))
            .respond(ScriptedResponse::text("free"))
            .respond(ScriptedResponse::tool_call(
                "c2",
                "skill",
                json!({"name": "pro-report"}),
            ))
            .respond(ScriptedResponse::text("pro")),
    );
    let agent = Agent::builder("helper")
        .model(model.clone())
        .skills_fn(|ctx: RequestContext| async move {
            let mut skills = vec![create_skill("basics", "The basics.", "Be brief.").build()?];
            if ctx.get_str("plan").as_deref() == Some("pro") {
                skills.push(create_skill("pro-report", "Long reports.", "Be thorough.").build()?);
            }
            Ok(skills)
        })
        .build()
        .unwrap();
    let free = agent.generate("go").await.unwrap();
    let (_, refused, failed) = &results(&free)[0];
    assert!(failed, "the free plan has no pro-report skill");
    assert_eq!(
        text_of(refused),
        "no skill is named \"pro-report\"; the skills are: basics"
    );
    assert!(
        !model.requests()[0].messages[0]
            .text()
            .contains("pro-report")
    );

    let ctx = RequestContext::new();
    ctx.set("plan", "pro");
    let pro = agent
        .generate("go")
        .request_context(ctx.clone())
        .await
        .unwrap();
    assert_eq!(text_of(&results(&pro)[0].1), "Be thorough.");
    assert!(
        model.requests()[2].messages[0]
            .text()
            .contains("<name>pro-report</name>")
    );
    let names = agent.skills(&ctx).await.unwrap().names();
    assert_eq!(names, ["basics", "pro-report"]);
}

#[tokio::test]
async fn two_skills_with_one_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = code_review_skill(dir.path());
    let twin = create_skill("code-review", "Another.", "x")
        .build()
        .unwrap();
    let err = Agent::builder("a")
        .model(Arc::new(ScriptedModel::new()))
        .skills([Skill::from_dir(&root).unwrap(), twin.clone()])
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AgentBuildError::DuplicateSkill { name, second, .. }
            if name == "code-review" && second == "inline/code-review/SKILL.md"),
        "{err:?}"
    );

    // From a skills function the duplicate fails the run, naming the function.
    let agent = Agent::builder("a")
        .model(Arc::new(
            ScriptedModel::new().respond(ScriptedResponse::text("x")),
        ))
        .skills_fn(move |_| {
            let twin = twin.clone();
            async move { Ok(vec![twin.clone(), twin]) }
        })
        .build()
        .unwrap();
    let err = agent.generate("go").await.unwrap_err();
    assert!(err.to_string().contains("skills failed"), "{err}");
    assert!(
        err.to_string()
            .contains("two skills are named \"code-review\""),
        "{err}"
    );
}

#[test]
fn malformed_skill_folders_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad-yaml");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("SKILL.md"),
        "---\nname: bad-yaml\ndescription: fine\nmetadata: {author: [\n---\nbody\n",
    )
    .unwrap();
    let err = Skill::from_dir(&bad).unwrap_err();
    let SkillError::Frontmatter { file, line, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(file.ends_with("bad-yaml/SKILL.md"), "{file}");
    assert!((4..=5).contains(line), "{err}");

    let renamed = dir.path().join("renamed");
    std::fs::create_dir_all(&renamed).unwrap();
    std::fs::write(
        renamed.join("SKILL.md"),
        "---\nname: original\ndescription: x\n---\n",
    )
    .unwrap();
    let err = Skill::from_dir(&renamed).unwrap_err();
    assert!(matches!(err, SkillError::NameMismatch { .. }), "{err:?}");

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = Skill::from_dir(&empty).unwrap_err();
    assert!(
        matches!(err, SkillError::MissingSkillFile { .. }),
        "{err:?}"
    );

    let err = create_skill("Bad_Name", "x", "y").build().unwrap_err();
    assert!(
        err.to_string()
            .starts_with("inline/Bad_Name/SKILL.md: skill name \"Bad_Name\" is invalid"),
        "{err}"
    );
    let err = create_skill("ok", "x", "y")
        .reference("../escape.md", "z")
        .build()
        .unwrap_err();
    assert!(matches!(err, SkillError::PathOutside { .. }), "{err:?}");
}

#[test]
fn discover_loads_every_skill_folder_sorted() {
    let dir = tempfile::tempdir().unwrap();
    code_review_skill(dir.path());
    let other = dir.path().join("alpha");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("SKILL.md"),
        "---\nname: alpha\ndescription: First.\n---\nA\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("not-a-skill")).unwrap();
    let skills = Skill::discover(dir.path()).unwrap();
    let names: Vec<&str> = skills.iter().map(Skill::name).collect();
    assert_eq!(names, ["alpha", "code-review"]);
    assert_eq!(skills[1].metadata().license.as_deref(), Some("MIT"));
    assert_eq!(skills[1].metadata().metadata["author"], "kestrel");
}

#[tokio::test]
async fn the_skill_tools_are_ordinary_tools_with_part_records() {
    // The tool call and its result land in the response messages like any other tool's.
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "c1",
                "skill",
                json!({"name": "haiku"}),
            ))
            .respond(ScriptedResponse::text("written")),
    );
    let agent = Agent::builder("poet")
        .model(model)
        .skills(
            [create_skill("haiku", "Writes haiku.", "Five, seven, five.")
                .build()
                .unwrap()],
        )
        .build()
        .unwrap();
    let result = agent.generate("a poem").await.unwrap();
    let tool_result = result
        .response_messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult {
                tool_name, result, ..
            } if tool_name == "skill" => Some(result),
            _ => None,
        })
        .unwrap();
    assert_eq!(tool_result, &json!("Five, seven, five."));
}
