//! Versions of agents on every backend (seed 000): a supervisor's writing sub-agent runs its
//! published version, a draft or a version by id, chosen per run or for the instance, carried
//! through the delegation; a run stopped for approval resumes on the version it started with,
//! also in a new instance; an unknown version id and a version setting fields the agent keeps
//! fail the run with typed errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentError};
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::Role;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_core::version::{Editable, VersionChoice, VersionError, Versions};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{NewAgentVersion, NewStoredAgent};
use serde_json::{Value, json};

use crate::fixture::Instance;

on_every_backend!(
    delegations_carry_the_version_each_agent_runs,
    a_resumed_run_keeps_its_version_across_instances,
    bad_versions_fail_the_run_with_typed_errors,
);

/// Answers with the system prompt it was given.
fn echo_instructions() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let system = req
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.text())
            .unwrap_or_default();
        ScriptedResponse::text(format!("[{system}]"))
    }))
}

/// Delegates to `agent-writing`, then answers with its result.
fn supervising() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        match req.messages.iter().rev().find_map(|m| {
            m.parts.iter().find_map(|p| match p {
                kestrel_core::message::Part::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
        }) {
            Some(result) => ScriptedResponse::text(format!("supervisor: {}", text(&result))),
            None => ScriptedResponse::tool_call(
                "call-w",
                "agent-writing",
                json!({"prompt": "write it"}),
            ),
        }
    }))
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

fn config(instructions: &str) -> NewAgentVersion {
    NewAgentVersion {
        config: json!({"instructions": instructions}),
        changed_fields: vec!["instructions".into()],
        change_message: None,
    }
}

/// The published v1 ("Write formally.") and a draft v2 ("Write like a pirate."); their ids.
async fn writing_versions(store: &Store) -> (String, String) {
    let (_, v1) = store
        .create_stored_agent(NewStoredAgent {
            id: "writing".into(),
            version: config("Write formally."),
            publish: true,
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let v2 = store
        .add_agent_version("writing", config("Write like a pirate."))
        .await
        .unwrap();
    (v1.id, v2.id)
}

fn instance(store: &Store, versions: Versions) -> Kestrel {
    let writing = Agent::builder("writing")
        .instructions("Write plainly.")
        .model(echo_instructions())
        .editable(Editable::instructions())
        .build()
        .unwrap();
    let supervisor = Agent::builder("supervisor")
        .model(supervising())
        .agents([writing.clone()])
        .build()
        .unwrap();
    Instance::on(store)
        .agent_as_is(writing)
        .agent_as_is(supervisor)
        .versions(versions)
        .build()
}

async fn delegations_carry_the_version_each_agent_runs(store: Store) {
    // Before any version is stored, the agent's own definition.
    let kestrel = instance(&store, Versions::new());
    let supervisor = kestrel.agent("supervisor").unwrap();
    let plain = supervisor.generate("go").await.unwrap();
    assert_eq!(plain.text, "supervisor: [Write plainly.]");

    let (_, draft) = writing_versions(&store).await;
    let published = supervisor.generate("go").await.unwrap();
    assert_eq!(published.text, "supervisor: [Write formally.]");
    let by_id = supervisor
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::id(&draft)))
        .await
        .unwrap();
    assert_eq!(by_id.text, "supervisor: [Write like a pirate.]");
    let as_draft = supervisor
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::draft()))
        .await
        .unwrap();
    assert_eq!(as_draft.text, "supervisor: [Write like a pirate.]");

    // An instance-wide default, under each run's own choice.
    let drafts = instance(
        &store,
        Versions::new().agent("writing", VersionChoice::draft()),
    );
    let supervisor = drafts.agent("supervisor").unwrap();
    assert_eq!(
        supervisor.generate("go").await.unwrap().text,
        "supervisor: [Write like a pirate.]"
    );
    let chosen = supervisor
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::published()))
        .await
        .unwrap();
    assert_eq!(chosen.text, "supervisor: [Write formally.]");
    // The agent on its own runs the same choices.
    let writing = drafts.agent("writing").unwrap();
    assert_eq!(
        writing.generate("go").await.unwrap().text,
        "[Write like a pirate.]"
    );
}

async fn a_resumed_run_keeps_its_version_across_instances(store: Store) {
    writing_versions(&store).await;
    let build = || {
        let model = Arc::new(ScriptedModel::from_fn(|req| {
            let system = req
                .messages
                .iter()
                .find(|m| m.role == Role::System)
                .map(|m| m.text())
                .unwrap_or_default();
            if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
                ScriptedResponse::text(format!("sent with [{system}]"))
            } else {
                ScriptedResponse::tool_call("call-1", "send", json!({}))
            }
        }));
        let send = create_tool("send")
            .description("Sends")
            .require_approval(true)
            .input_schema(json!({"type": "object"}))
            .execute(|_: Value, _ctx| async { Ok("sent") });
        let writing = Agent::builder("writing")
            .instructions("Write plainly.")
            .model(model)
            .tool(send)
            .editable(Editable::instructions())
            .build()
            .unwrap();
        Instance::on(&store).agent_as_is(writing).build()
    };
    let first = build();
    let (events, stopped) = first
        .agent("writing")
        .unwrap()
        .stream("send it")
        .versions(Versions::new().agent("writing", VersionChoice::draft()))
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
        .unwrap();
    drop(first);
    // Meanwhile a newer draft is saved: the stopped run keeps the version it started with.
    store
        .add_agent_version("writing", config("Write like a robot."))
        .await
        .unwrap();
    let second = build();
    let done = second
        .agent("writing")
        .unwrap()
        .run(&stopped.run_id)
        .resource("alice")
        .approve("call-1")
        .fingerprint(fingerprint)
        .await
        .unwrap();
    assert_eq!(done.text, "sent with [Write like a pirate.]");
}

async fn bad_versions_fail_the_run_with_typed_errors(store: Store) {
    writing_versions(&store).await;
    let kestrel = instance(&store, Versions::new());
    let writing = kestrel.agent("writing").unwrap();
    let err = writing
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::id("nope")))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::Version { source: VersionError::UnknownVersion { version_id, .. }, .. } if version_id == "nope"),
        "{err:?}"
    );
    // Another agent's version is unknown to this one.
    let (_, other) = store
        .create_stored_agent(NewStoredAgent {
            id: "other".into(),
            version: config("x"),
            ..NewStoredAgent::default()
        })
        .await
        .unwrap();
    let err = writing
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::id(&other.id)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            AgentError::Version {
                source: VersionError::UnknownVersion { .. },
                ..
            }
        ),
        "{err:?}"
    );
    // The writing agent lets versions change its instructions only.
    let model_change = store
        .add_agent_version(
            "writing",
            NewAgentVersion {
                config: json!({"instructions": "x", "model": "openai/gpt-5-mini"}),
                ..NewAgentVersion::default()
            },
        )
        .await
        .unwrap();
    let err = writing
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::id(&model_change.id)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::Version { source: VersionError::NotEditable { fields, .. }, .. } if fields == &["model"]),
        "{err:?}"
    );
    // Through a delegation, the sub-agent's failure is a failed call the supervisor reads.
    let supervisor = kestrel.agent("supervisor").unwrap();
    let result = supervisor
        .generate("go")
        .versions(Versions::new().agent("writing", VersionChoice::id("nope")))
        .await
        .unwrap();
    assert!(result.tool_results[0].is_error, "{:?}", result.tool_results);
}
