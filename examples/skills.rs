//! Skills: a folder skill (`examples/skills/code-review`, a `SKILL.md` with a reference and a
//! script) and an inline one built in code. The agent sees only their names and descriptions
//! until it loads one with the `skill` tool; then it reads the skill's files with `skill_read`
//! and searches them with `skill_search`.
//!
//! `cargo run -p kestrel --example skills`
//!
//! Without configuration a scripted model plays the LLM (its tool calls are below), so the
//! example runs the same everywhere; with `KESTREL_MODEL` set (say `openai/gpt-5-mini` and
//! `OPENAI_API_KEY`) the agent decides for itself.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::model::ModelSpec;
use kestrel::prelude::*;
use kestrel::skill::Skill;
use serde_json::json;

/// The folder skill shipped with the examples.
const CODE_REVIEW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/skills/code-review"
);

/// `KESTREL_MODEL`, else a script: load the skill, read its checklist, search, answer.
fn model() -> ModelSpec {
    if let Ok(spec) = std::env::var("KESTREL_MODEL")
        && !spec.is_empty()
    {
        return ModelSpec::Id(spec);
    }
    ModelSpec::Model(Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "call-1",
                "skill",
                json!({"name": "code-review"}),
            ))
            .respond(ScriptedResponse::tool_call(
                "call-2",
                "skill_read",
                json!({"skillName": "code-review", "path": "references/checklist.md", "startLine": 3, "endLine": 5}),
            ))
            .respond(ScriptedResponse::tool_call(
                "call-3",
                "skill_search",
                json!({"query": "changelog wording", "topK": 2}),
            ))
            .respond(ScriptedResponse::text(
                "1. `parse` unwraps the config file: return the error instead, naming the path.\n\
                 Good: the new function is small and documented.",
            )),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let review = Skill::from_dir(CODE_REVIEW)?;
    let notes = create_skill(
        "release-notes",
        "Writes release notes from a list of changes.",
        "Group the changes under Added, Changed and Fixed; see references/style.md.",
    )
    .reference(
        "style.md",
        "# Changelog wording\n\nOne line per change, in the past tense, naming what a user sees.",
    )
    .build()?;

    let agent = Agent::builder("reviewer")
        .instructions("You review Rust changes. Use your skills.")
        .model(model())
        .max_steps(6)
        .skills([review, notes])
        .build()?;

    let mut stream = agent
        .stream("Review this change: `let config = parse(path).unwrap();`")
        .into_stream();
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::ToolCall(call) => println!("> {} {}", call.tool_name, call.args),
            EventKind::ToolResult(result) => {
                let text = result.result.as_str().unwrap_or_default();
                for line in text.lines().take(6) {
                    println!("  | {line}");
                }
            }
            EventKind::TextDelta(delta) => print!("{}", delta.text),
            _ => {}
        }
    }
    println!();
    let result = stream.result().await?;
    let used: Vec<&str> = result
        .tool_calls
        .iter()
        .map(|c| c.tool_name.as_str())
        .collect();
    println!(
        "({} steps; tools used: {})",
        result.steps.len(),
        used.join(", ")
    );
    Ok(())
}
