//! Versions of agents (seed 000): a supervisor delegates to a writing sub-agent whose
//! instructions are kept in the storage as versions — a published one and a draft — and each
//! run chooses which the sub-agent runs. The choice carries through the delegation.
//!
//! `cargo run -p kestrel --example versions --features sqlite`
//!
//! The writing agent is written in code and lets versions change only its instructions
//! (`AgentBuilder::editable`). Last, an agent with no code at all runs from its stored
//! version (`Kestrel::find_agent`). Scripted models play the LLMs: the writing agent answers
//! with the instructions it was given, so the output shows which version ran.

use std::sync::Arc;

use kestrel::memory::Memory;
use kestrel::model::{ModelRegistry, SharedModel, UnknownModel};
use kestrel::prelude::*;
use kestrel::storage::{NewAgentVersion, NewStoredAgent, SqliteStorage, Storage};
use kestrel::version::{Editable, VersionChoice, Versions};
use serde_json::json;

/// Answers with the system prompt it runs under.
fn shows_its_instructions() -> ScriptedModel {
    ScriptedModel::from_fn(|req| {
        let system = req
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.text())
            .unwrap_or_default();
        ScriptedResponse::text(format!("(written under: {system})"))
    })
}

/// Delegates once to `agent-writing`, then passes its answer on.
fn supervises() -> ScriptedModel {
    ScriptedModel::from_fn(|req| {
        let answer = req
            .messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                Part::ToolResult { result, .. } => result.as_str().map(str::to_owned),
                _ => None,
            });
        match answer {
            Some(answer) => ScriptedResponse::text(format!("Here it is {answer}")),
            None => ScriptedResponse::tool_call(
                "call-1",
                "agent-writing",
                json!({"prompt": "A paragraph about kestrels"}),
            ),
        }
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let storage: Arc<dyn Storage> =
        Arc::new(SqliteStorage::open(dir.path().join("kestrel.db")).await?);

    // The writing agent's versions: v1 published, v2 a draft someone is trying out.
    let (_, v1) = storage
        .create_stored_agent(NewStoredAgent {
            id: "writing".into(),
            version: NewAgentVersion {
                config: json!({"instructions": "Write one formal paragraph."}),
                change_message: Some("first version".into()),
                ..NewAgentVersion::default()
            },
            publish: true,
            ..NewStoredAgent::default()
        })
        .await?;
    let v2 = storage
        .add_agent_version(
            "writing",
            NewAgentVersion {
                config: json!({"instructions": "Write one playful paragraph, with a pun."}),
                changed_fields: vec!["instructions".into()],
                change_message: Some("try a lighter tone".into()),
            },
        )
        .await?;
    println!(
        "writing: v{} published, v{} a draft",
        v1.version_number, v2.version_number
    );

    let writing = Agent::builder("writing")
        .instructions("Write one paragraph.")
        .model(Arc::new(shows_its_instructions()))
        .editable(Editable::instructions())
        .build()?;
    let supervisor = Agent::builder("supervisor")
        .instructions("Delegate the writing to agent-writing.")
        .model(Arc::new(supervises()))
        .agents([writing.clone()])
        .build()?;
    // Stored agents name their model as `provider/model`: here a provider whose every model
    // shows its instructions.
    let mut models = ModelRegistry::empty();
    models.register(
        "scripted",
        |_: &str, _: &str| -> Result<SharedModel, UnknownModel> {
            Ok(Arc::new(shows_its_instructions()))
        },
    );
    let kestrel = Kestrel::builder()
        .models(models)
        .agent(writing)
        .agent(supervisor)
        // Where the versions are kept (and the runs and threads), given once; the memory
        // of agents defined in the storage alone keeps its threads there.
        .storage(Arc::clone(&storage))
        .memory(Memory::default())
        .build()?;
    let supervisor = kestrel.agent("supervisor")?;

    let published = supervisor.generate("Write about kestrels").await?;
    println!("published: {}", published.text);
    let draft = supervisor
        .generate("Write about kestrels")
        .versions(Versions::new().agent("writing", VersionChoice::id(&v2.id)))
        .await?;
    println!("draft:     {}", draft.text);

    // Publishing the draft makes it what every run gets by default.
    storage
        .activate_agent_version("writing", Some(&v2.id))
        .await?;
    let now = supervisor.generate("Write about kestrels").await?;
    println!("after publishing v{}: {}", v2.version_number, now.text);

    // An agent with no code at all: its stored version is its definition (instructions,
    // model, and the instance's tools and agents it names).
    storage
        .create_stored_agent(NewStoredAgent {
            id: "greeter".into(),
            version: NewAgentVersion {
                config: json!({"instructions": "Greet warmly.", "model": "scripted/any"}),
                ..NewAgentVersion::default()
            },
            publish: true,
            ..NewStoredAgent::default()
        })
        .await?;
    let greeter = kestrel.find_agent("greeter").await?;
    println!("stored agent: {}", greeter.generate("Hello").await?.text);
    Ok(())
}
