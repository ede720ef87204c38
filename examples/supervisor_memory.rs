//! A supervisor with memory on SQLite, and how delegations keep the sub-agents' memory apart.
//!
//! `cargo run -p kestrel --features sqlite --example supervisor_memory`
//!
//! Scripted models play the LLMs unless `KESTREL_MODEL` is set (then every agent runs on it).
//!
//! The supervisor and its two sub-agents remember, in one SQLite file. A sub-agent receives the
//! supervisor's conversation as context, but what is stored for it is only its delegation: each
//! delegation runs in a fresh thread of its own (`<agent>:<uuid>`) under the supervisor's
//! resource, holding the prompt and the sub-agent's answer. The supervisor's thread holds its
//! own turn, delegation calls and results included, and nothing of the sub-agents' runs.
//! `thread_metadata` from the start hook tags the sub-agents' threads, so `list_threads` with
//! a metadata filter finds them again.

use std::sync::Arc;

use futures::StreamExt;
use kestrel::agent::{DelegationOptions, DelegationStartOutcome};
use kestrel::memory::Memory;
use kestrel::model::{ModelRequest, ModelSpec};
use kestrel::prelude::*;
use kestrel::storage::{Selection, SqliteStorage, Storage, ThreadQuery};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

/// The model of an agent: the configured one, or `script` when none is.
fn model_or(script: ScriptedModel) -> ModelSpec {
    match std::env::var("KESTREL_MODEL") {
        Ok(spec) if !spec.is_empty() => ModelSpec::Id(spec),
        _ => ModelSpec::Model(Arc::new(script)),
    }
}

/// The texts of the tool results the model has read so far.
fn results(req: &ModelRequest) -> Vec<String> {
    (req.messages.iter().filter(|m| m.role == Role::Tool))
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { result, .. } => Some(result.as_str().unwrap_or_default().into()),
            _ => None,
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Storage> =
        Arc::new(SqliteStorage::open(dir.path().join("kestrel.db")).await?);
    // One memory for the three agents, on the supervisor's storage (given below).
    let memory = || Memory::default().shared();

    let research = Agent::builder("research-agent")
        .description("Gathers factual information and returns bullet-point summaries.")
        .model(model_or(ScriptedModel::from_fn(|req| {
            // It sees the supervisor's conversation (the user's request) before its prompt.
            let seen = req.messages.iter().filter(|m| m.role == Role::User).count();
            ScriptedResponse::text(format!(
                "- AI tutors adapt to each pupil\n- (read {seen} user messages)"
            ))
        })))
        .memory(memory())
        .build()?;
    let writing = Agent::builder("writing-agent")
        .description("Transforms research into well-structured articles.")
        .model(model_or(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("AI tutors now adapt lessons to every pupil.")
        })))
        .memory(memory())
        .build()?;
    let supervisor = Agent::builder("parent-agent")
        .instructions(
            "You coordinate research and writing using specialized agents. Delegate to \
             research-agent for facts, then writing-agent for content.",
        )
        .model(model_or(ScriptedModel::from_fn(|req| {
            match results(req).as_slice() {
                [] => ScriptedResponse::tool_call(
                    "d1",
                    "agent-research-agent",
                    json!({"prompt": "Facts on AI in education"}),
                ),
                [facts] => ScriptedResponse::tool_call(
                    "d2",
                    "agent-writing-agent",
                    json!({"prompt": format!("Write from:\n{facts}")}),
                ),
                [.., article] => ScriptedResponse::text(article.clone()),
            }
        })))
        .agents([research, writing])
        .memory(memory())
        .storage(store.clone())
        .build()?;

    // Tag every sub-agent thread with the tenant.
    let hooks = DelegationOptions::new().on_delegation_start(|_| async {
        let metadata = json!({"tenantId": "acme"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        Ok(DelegationStartOutcome::proceed().thread_metadata(metadata))
    });
    let options = RunOptions::new()
        .max_steps(10)
        .memory("t1", "u1")
        .delegation(hooks);
    let mut text = supervisor
        .stream("Research AI in education and write an article")
        .options(options)
        .into_stream()
        .text_stream();
    while let Some(chunk) = text.next().await {
        print!("{chunk}");
    }
    let run = text.result().await?;
    println!("\n");

    let parent = store
        .list_messages("t1", Some("u1"), Selection::all())
        .await?
        .messages;
    let roles: Vec<String> = parent.iter().map(|m| format!("{:?}", m.role)).collect();
    println!("thread t1 (the supervisor's): {}", roles.join(", "));

    let query = ThreadQuery {
        resource_id: Some("u1".into()),
        metadata: Some(json!({"tenantId": "acme", "parentThreadId": "t1"})),
        ..ThreadQuery::default()
    };
    let threads = store.list_threads(query).await?;
    for thread in &threads.items {
        println!(
            "thread {} (agent {}, delegated by run {}):",
            thread.id, thread.metadata["agentId"], thread.metadata["delegatedBy"]
        );
        let stored = store
            .list_messages(&thread.id, Some("u1"), Selection::all())
            .await?
            .messages;
        for message in &stored {
            println!("  {:?}: {:?}", message.role, message.to_message().text());
        }
        if stored.len() != 2 || thread.metadata["delegatedBy"] != json!(run.run_id) {
            return Err("a sub-agent's thread should hold its prompt and answer only".into());
        }
    }
    if threads.total != 2 || parent.len() != 6 {
        return Err("expected two sub-agent threads and six messages in the supervisor's".into());
    }
    Ok(())
}
