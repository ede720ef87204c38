//! Agents defined in the storage alone, on every backend: `Kestrel::find_agent` builds one
//! from its published version (else its latest) with the instance's tools and code agents it
//! names; a run may choose a draft that names other tools; one may run without memory; a
//! stopped run of a stored agent
//! is approved in a new instance; configs naming what the instance lacks, or fields a code
//! agent keeps, are refused before they are stored.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::{Kestrel, KestrelError};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ModelRegistry, ScriptedModel, ScriptedResponse, SharedModel};
use kestrel_core::tool::{SharedTool, create_tool};
use kestrel_core::version::{AgentConfig, VersionChoice, VersionError, Versions};
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{NewAgentVersion, NewStoredAgent};
use serde_json::{Value, json};

use crate::fixture::Instance;

on_every_backend!(
    a_stored_agent_runs_from_its_versions,
    a_stopped_run_of_a_stored_agent_is_approved_in_a_new_instance,
    configs_the_instance_cannot_run_are_refused,
);

/// Answers `[<system prompt>] tools=<sorted tool names>`; after a tool result, `done: <result>`.
fn echo() -> SharedModel {
    Arc::new(ScriptedModel::from_fn(|req| {
        if let Some(last) = req.messages.last().filter(|m| m.role == Role::Tool) {
            let result = last.parts.iter().find_map(|p| match p {
                Part::ToolResult { result, .. } => Some(result.to_string()),
                _ => None,
            });
            return ScriptedResponse::text(format!("done: {}", result.unwrap_or_default()));
        }
        let system = req
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.text())
            .unwrap_or_default();
        if req.messages.iter().any(|m| m.text().contains("send it")) {
            return ScriptedResponse::tool_call("call-1", "send", json!({}));
        }
        let mut tools: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
        tools.sort_unstable();
        ScriptedResponse::text(format!("[{system}] tools={}", tools.join(",")))
    }))
}

/// A registry with the provider `scripted`, whose every model is [`echo`].
fn registry() -> ModelRegistry {
    let mut registry = ModelRegistry::empty();
    registry.register("scripted", |_: &str, _: &str| Ok(echo()));
    registry
}

fn tool(id: &str) -> SharedTool {
    Arc::new(
        create_tool(id)
            .description(format!("The {id} tool"))
            .input_schema(json!({"type": "object"}))
            .execute(|_: Value, _ctx| async { Ok("ok") }),
    )
}

fn instance(store: &Store) -> Kestrel {
    let send = create_tool("send")
        .description("Sends")
        .require_approval(true)
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async { Ok("sent") });
    let writing = Agent::builder("writing")
        .instructions("Write plainly.")
        .model(echo())
        .build()
        .unwrap();
    Instance::on(store)
        .agent_as_is(writing)
        .configure(|kestrel| {
            kestrel
                .models(registry())
                .tools([tool("lookup"), tool("unused")])
                .tool(send)
        })
        .build()
}

fn version(config: Value) -> NewAgentVersion {
    NewAgentVersion {
        config,
        ..NewAgentVersion::default()
    }
}

async fn a_stored_agent_runs_from_its_versions(store: Store) {
    let kestrel = instance(&store);
    assert!(matches!(
        kestrel.find_agent("support").await,
        Err(KestrelError::AgentNotFound { .. })
    ));
    assert!(kestrel.stored_agent_ids().await.unwrap().is_empty());
    let (_, v1) = store
        .create_stored_agent(NewStoredAgent {
            id: "support".into(),
            version: version(json!({
                "instructions": "Help.",
                "model": "scripted/echo",
                "tools": ["lookup"],
                "agents": ["writing"],
                "defaultOptions": {"maxSteps": 3},
            })),
            publish: true,
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let support = kestrel.find_agent("support").await.unwrap();
    assert!(support.is_stored());
    assert_eq!(support.version_id(), Some(v1.id.as_str()));
    assert_eq!(support.static_instructions(), Some("Help."));
    assert_eq!(support.max_steps(), 3);
    assert_eq!(support.sub_agent_ids(), ["writing"]);
    assert_eq!(kestrel.stored_agent_ids().await.unwrap(), ["support"]);
    // A code agent is found without the storage, and is never a stored agent.
    assert!(!kestrel.find_agent("writing").await.unwrap().is_stored());
    assert!(kestrel.stored_agent("writing").await.unwrap().is_none());

    let answer = support.generate("hi").memory("t1", "alice").await.unwrap();
    assert_eq!(answer.text, "[Help.] tools=agent-writing,lookup");
    // The run is remembered in the instance's memory.
    let memory = Memory::new(Arc::clone(&store));
    let stored = memory
        .storage()
        .unwrap()
        .get_thread("t1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.resource_id, "alice");

    // A draft may name tools the published version does not: versions apply to the base.
    let v2 = store
        .add_agent_version(
            "support",
            version(json!({
                "instructions": "Help more.",
                "model": "scripted/echo",
                "tools": ["lookup", "unused"],
            })),
        )
        .await
        .unwrap();
    let published = support.generate("hi").await.unwrap();
    assert_eq!(published.text, "[Help.] tools=agent-writing,lookup");
    let draft = support
        .generate("hi")
        .versions(Versions::new().agent("support", VersionChoice::draft()))
        .await
        .unwrap();
    assert_eq!(draft.text, "[Help more.] tools=lookup,unused");
    let seen = support.at_version(&VersionChoice::draft()).await.unwrap();
    assert_eq!(seen.static_instructions(), Some("Help more."));
    assert_eq!(seen.version_id(), Some(v2.id.as_str()));
    assert!(seen.sub_agent_ids().is_empty());

    // With nothing published, a stored agent runs its latest version.
    store.activate_agent_version("support", None).await.unwrap();
    let latest = kestrel.find_agent("support").await.unwrap();
    assert_eq!(latest.version_id(), Some(v2.id.as_str()));
    let answer = latest.generate("hi").await.unwrap();
    assert_eq!(answer.text, "[Help more.] tools=lookup,unused");

    // A stored agent that remembers nothing: no memory, no memory tools, no thread stored.
    store
        .create_stored_agent(NewStoredAgent {
            id: "forgetful".into(),
            version: version(json!({"model": "scripted/echo", "memory": false})),
            publish: true,
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let forgetful = kestrel.find_agent("forgetful").await.unwrap();
    assert!(forgetful.memory().is_none());
    forgetful
        .generate("hi")
        .memory("t2", "alice")
        .await
        .unwrap();
    assert!(
        memory
            .storage()
            .unwrap()
            .get_thread("t2")
            .await
            .unwrap()
            .is_none()
    );

    // Deleted, it is gone.
    store.delete_stored_agent("support").await.unwrap();
    assert!(matches!(
        kestrel.find_agent("support").await,
        Err(KestrelError::AgentNotFound { .. })
    ));
}

async fn a_stopped_run_of_a_stored_agent_is_approved_in_a_new_instance(store: Store) {
    store
        .create_stored_agent(NewStoredAgent {
            id: "mailer".into(),
            version: version(json!({
                "instructions": "Mail.",
                "model": "scripted/echo",
                "tools": ["send"],
            })),
            publish: true,
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let first = instance(&store);
    let (events, stopped) = first
        .find_agent("mailer")
        .await
        .unwrap()
        .stream("send it")
        .memory("t1", "alice")
        .into_stream()
        .collect()
        .await;
    let stopped = stopped.unwrap();
    let fingerprint = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallApproval(a) => Some(a.fingerprint.clone()),
            _ => None,
        })
        .expect("the call waits for approval");
    drop(first);
    let second = instance(&store);
    let done = second
        .find_agent("mailer")
        .await
        .unwrap()
        .run(&stopped.run_id)
        .resource("alice")
        .approve("call-1")
        .fingerprint(fingerprint)
        .await
        .unwrap();
    assert_eq!(done.text, r#"done: "sent""#);
}

async fn configs_the_instance_cannot_run_are_refused(store: Store) {
    let kestrel = instance(&store);
    let config = |value: Value| serde_json::from_value::<AgentConfig>(value).unwrap();
    kestrel
        .check_agent_config(
            "new",
            &config(json!({"instructions": "x", "model": "scripted/a", "tools": ["lookup"]})),
        )
        .unwrap();
    let invalid = |result: Result<(), VersionError>| match result {
        Err(VersionError::Invalid { reason, .. }) => reason,
        other => panic!("expected Invalid, got {other:?}"),
    };
    let reason = invalid(kestrel.check_agent_config(
        "new",
        &config(json!({"model": "scripted/a", "tools": ["missing"]})),
    ));
    assert!(reason.contains("\"missing\""), "{reason}");
    let reason = invalid(kestrel.check_agent_config(
        "new",
        &config(json!({"model": "scripted/a", "agents": ["nobody"]})),
    ));
    assert!(reason.contains("\"nobody\""), "{reason}");
    let reason = invalid(kestrel.check_agent_config("new", &config(json!({"model": "nowhere/x"}))));
    assert!(reason.contains("nowhere"), "{reason}");
    // `writing` is in code and lets versions change nothing.
    match kestrel.check_agent_config("writing", &config(json!({"instructions": "x"}))) {
        Err(VersionError::NotEditable { fields, .. }) => assert_eq!(fields, ["instructions"]),
        other => panic!("expected NotEditable, got {other:?}"),
    }
    // A stored version that no longer fits the instance fails the lookup with a typed error.
    store
        .create_stored_agent(NewStoredAgent {
            id: "broken".into(),
            version: version(json!({"model": "scripted/a", "tools": ["gone"]})),
            publish: true,
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    match kestrel.find_agent("broken").await {
        Err(KestrelError::StoredAgent { id, message }) => {
            assert_eq!(id, "broken");
            assert!(message.contains("\"gone\""), "{message}");
        }
        other => panic!("expected StoredAgent, got {other:?}"),
    }
}
