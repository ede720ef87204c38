//! Memory isolation of delegations on every backend: the parent's thread holds its own turn
//! (with the delegation's call and result) and nothing of the sub-agent's run; the sub-agent's
//! thread (found by metadata) holds only the prompt and its answer, under the parent's
//! resource; each delegation gets a fresh thread, or one per parent thread when asked; nothing
//! is duplicated after a reload.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{Agent, DelegationOptions, DelegationStartOutcome, RunOptions};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{Selection, ThreadQuery};
use serde_json::json;

on_every_backend!(
    a_delegation_stores_only_the_prompt_and_answer_in_a_thread_of_its_own,
    stable_sub_agent_threads_keep_one_thread_per_parent_thread,
);

fn tool_results(req: &ModelRequest) -> usize {
    req.messages.iter().filter(|m| m.role == Role::Tool).count()
}

/// A parent that delegates `times` times to `researcher`, then answers.
fn parent(store: &Store, researcher: Agent, times: usize) -> Agent {
    let model = Arc::new(ScriptedModel::from_fn(move |req| {
        let done = tool_results(req);
        if done < times {
            ScriptedResponse::tool_call(
                format!("d{done}"),
                "agent-researcher",
                json!({"prompt": format!("research part {done}")}),
            )
        } else {
            ScriptedResponse::text("all done")
        }
    }));
    Agent::builder("supervisor")
        .model(model)
        .agents([researcher])
        .memory(Memory::new(Arc::clone(store)))
        .build()
        .unwrap()
}

/// A sub-agent with memory that says how many messages it saw.
fn researcher(store: &Store) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let prompt = req.messages.last().unwrap().text();
        ScriptedResponse::text(format!("findings for {prompt}"))
    }));
    let agent = Agent::builder("researcher")
        .description("Researches")
        .model(model.clone())
        .memory(Memory::new(Arc::clone(store)))
        .build()
        .unwrap();
    (agent, model)
}

async fn texts(store: &Store, thread: &str, resource: &str) -> Vec<(Role, String)> {
    store
        .list_messages(thread, Some(resource), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect()
}

async fn a_delegation_stores_only_the_prompt_and_answer_in_a_thread_of_its_own(store: Store) {
    let (researcher, researcher_model) = researcher(&store);
    let supervisor = parent(&store, researcher, 2);
    let hooks = DelegationOptions::new().on_delegation_start(|_| async {
        let metadata = json!({"tenantId": "acme"}).as_object().unwrap().clone();
        Ok(DelegationStartOutcome::proceed().thread_metadata(metadata))
    });
    let result = supervisor
        .generate("Study kestrels")
        .memory("t1", "alice")
        .delegation(hooks)
        .await
        .unwrap();
    assert_eq!(result.text, "all done");

    // The parent's thread: its input, two delegation steps, the answer. No sub-agent messages.
    let parent_thread = store
        .list_messages("t1", Some("alice"), Selection::all())
        .await
        .unwrap()
        .messages;
    let roles: Vec<Role> = parent_thread.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    let calls: Vec<&str> = parent_thread
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall { tool_name, .. } => Some(tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["agent-researcher", "agent-researcher"]);

    // The sub-agent's threads: one per delegation, found by the start hook's metadata, under
    // the parent's resource, each holding the prompt and the answer only.
    let query = ThreadQuery {
        resource_id: Some("alice".into()),
        metadata: Some(json!({"tenantId": "acme", "parentThreadId": "t1"})),
        ..ThreadQuery::default()
    };
    let threads = store.list_threads(query).await.unwrap();
    assert_eq!(threads.total, 2);
    let mut stored = Vec::new();
    for thread in &threads.items {
        assert_eq!(thread.metadata["agentId"], "researcher");
        assert_eq!(thread.metadata["delegatedBy"], json!(result.run_id));
        stored.push(texts(&store, &thread.id, "alice").await);
    }
    stored.sort_by_key(|messages| messages[0].1.clone());
    assert_eq!(
        stored,
        [
            vec![
                (Role::User, "research part 0".to_owned()),
                (Role::Assistant, "findings for research part 0".to_owned()),
            ],
            vec![
                (Role::User, "research part 1".to_owned()),
                (Role::Assistant, "findings for research part 1".to_owned()),
            ],
        ]
    );
    // The sub-agent saw the parent's conversation as context, though none of it was stored.
    let second = &researcher_model.requests()[1];
    assert_eq!(second.messages[0].text(), "Study kestrels");

    // A reload of the parent's thread shows each message once.
    let again = texts(&store, "t1", "alice").await;
    assert_eq!(again.len(), 6);
}

async fn stable_sub_agent_threads_keep_one_thread_per_parent_thread(store: Store) {
    let (researcher, researcher_model) = researcher(&store);
    let supervisor = parent(&store, researcher, 2);
    let options = RunOptions::new()
        .memory("t2", "bob")
        .delegation(DelegationOptions::new().stable_sub_agent_threads(true));
    supervisor
        .generate("Study owls")
        .options(options)
        .await
        .unwrap();
    let stored = texts(&store, "t2:researcher", "bob").await;
    assert_eq!(
        stored,
        [
            (Role::User, "research part 0".to_owned()),
            (Role::Assistant, "findings for research part 0".to_owned()),
            (Role::User, "research part 1".to_owned()),
            (Role::Assistant, "findings for research part 1".to_owned()),
        ]
    );
    // The second delegation recalled the first from the sub-agent's own thread.
    let second = &researcher_model.requests()[1];
    let seen: Vec<String> = second.messages.iter().map(|m| m.text()).collect();
    assert!(
        seen.contains(&"findings for research part 0".to_owned()),
        "{seen:?}"
    );
}
