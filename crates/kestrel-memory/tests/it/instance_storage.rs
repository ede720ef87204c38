//! Storage given once: a `Memory` without a store of its own keeps its threads in the storage
//! of the instance its agent joins (or of the agent itself), and its tools and processors
//! reach that store too; a memory with a store of its own keeps it; a memory with none
//! anywhere says so on each run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentError, RunOptions};
use kestrel_core::kestrel::{Kestrel, KestrelError};
use kestrel_core::message::Message;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::{Error, Memory, UPDATE_WORKING_MEMORY, WorkingMemory};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{InMemoryStorage, Scope, Selection};
use serde_json::json;

fn talker(memory: &Memory, replies: &[&str]) -> kestrel_core::agent::AgentBuilder {
    let model = replies.iter().fold(ScriptedModel::new(), |model, reply| {
        model.respond(ScriptedResponse::text(*reply))
    });
    Agent::builder("talker")
        .model(Arc::new(model))
        .memory(memory.clone())
}

fn on(thread: &str, resource: &str) -> RunOptions {
    RunOptions::new().memory(thread, resource)
}

async fn stored_texts(store: &Store, thread: &str, resource: &str) -> Vec<String> {
    store
        .list_messages(thread, Some(resource), Selection::all())
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| {
            Message {
                id: m.id,
                role: m.role,
                parts: m.parts,
            }
            .text()
        })
        .collect()
}

/// An agent of an instance, with `Memory::default()`: its threads are in the instance's
/// storage, and a second run recalls the first.
pub(super) async fn a_memory_without_a_store_uses_the_instances(store: Store) {
    let memory = Memory::default();
    assert!(memory.storage().is_none());
    let agent = talker(&memory, &["Hello Ada.", "You are Ada."])
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(&store))
        .agent(agent)
        .build()
        .unwrap();
    assert!(
        memory.storage().is_some(),
        "the memory took the instance's store"
    );
    let agent = kestrel.agent("talker").unwrap();
    agent
        .generate("I am Ada.")
        .options(on("t1", "ada"))
        .await
        .unwrap();
    let second = agent
        .generate("Who am I?")
        .options(on("t1", "ada"))
        .await
        .unwrap();
    assert_eq!(second.text, "You are Ada.");
    assert_eq!(
        stored_texts(&store, "t1", "ada").await,
        ["I am Ada.", "Hello Ada.", "Who am I?", "You are Ada."]
    );
}

/// An agent on its own, given a storage: its memory keeps threads there, and the working
/// memory tool (made when the memory was built, before it had a store) writes there too.
pub(super) async fn an_agents_own_storage_is_its_memorys_and_its_tools(store: Store) {
    let memory = Memory::builder()
        .working_memory(WorkingMemory::template("# User\n- Name:"))
        .build()
        .unwrap();
    let model = ScriptedModel::new()
        .respond(ScriptedResponse::tool_call(
            "w1",
            UPDATE_WORKING_MEMORY,
            json!({"memory": "# User\n- Name: Ada"}),
        ))
        .respond(ScriptedResponse::text("Noted."));
    let agent = Agent::builder("talker")
        .model(Arc::new(model))
        .memory(memory)
        .storage(Arc::clone(&store))
        .build()
        .unwrap();
    let result = agent
        .generate("I am Ada.")
        .options(on("t1", "ada"))
        .await
        .unwrap();
    assert!(
        !result.tool_results[0].is_error,
        "{:?}",
        result.tool_results
    );
    let saved = store
        .get_working_memory(&Scope::resource("ada"))
        .await
        .unwrap();
    assert_eq!(saved.as_deref(), Some("# User\n- Name: Ada"));
    assert_eq!(stored_texts(&store, "t1", "ada").await.len(), 4);
}

/// A memory given a store of its own keeps it: the instance's storage holds the runs, the
/// memory's store the threads.
pub(super) async fn a_memory_with_a_store_of_its_own_keeps_it(store: Store) {
    let own: Store = Arc::new(InMemoryStorage::new());
    let memory = Memory::builder().storage(Arc::clone(&own)).build().unwrap();
    let agent = talker(&memory, &["Hello."]).build().unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(&store))
        .agent(agent)
        .build()
        .unwrap();
    kestrel
        .agent("talker")
        .unwrap()
        .generate("Hi")
        .options(on("t1", "ada"))
        .await
        .unwrap();
    assert_eq!(stored_texts(&own, "t1", "ada").await, ["Hi", "Hello."]);
    assert!(store.get_thread("t1").await.unwrap().is_none());
}

/// One memory that took one instance's storage refuses another instance's, when that
/// instance is built (not on a run, with threads in the wrong database).
pub(super) async fn a_memory_in_two_instances_with_two_stores_is_refused(store: Store) {
    let memory = Memory::default();
    Kestrel::builder()
        .storage(Arc::clone(&store))
        .agent(talker(&memory, &[]).build().unwrap())
        .build()
        .unwrap();
    // The same store again is fine.
    Kestrel::builder()
        .storage(Arc::clone(&store))
        .agent(talker(&memory, &[]).build().unwrap())
        .build()
        .unwrap();
    let other: Store = Arc::new(InMemoryStorage::new());
    let error = Kestrel::builder()
        .storage(other)
        .agent(talker(&memory, &[]).build().unwrap())
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, KestrelError::Memory { agent: Some(agent), .. } if agent == "talker"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("another instance's storage"),
        "{error}"
    );
}

/// A memory with no store anywhere answers each run with a typed error naming both ways to
/// give it one; nothing ran.
#[tokio::test]
async fn a_memory_without_any_store_says_so() {
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("unused")));
    let agent = Agent::builder("talker")
        .model(model.clone())
        .memory(Memory::default())
        .build()
        .unwrap();
    let error = agent
        .generate("Hi")
        .options(on("t1", "ada"))
        .await
        .unwrap_err();
    let AgentError::Memory { source, .. } = &error else {
        panic!("expected a memory error, got {error:?}");
    };
    let source = std::error::Error::source(source)
        .and_then(|s| s.downcast_ref::<Error>())
        .unwrap();
    assert!(matches!(source, Error::NoStorage), "{source:?}");
    let text = error.to_string();
    assert!(text.contains("Kestrel::builder().storage"), "{text}");
    assert!(model.requests().is_empty(), "the model was not called");
}

on_every_backend!(
    a_memory_without_a_store_uses_the_instances,
    an_agents_own_storage_is_its_memorys_and_its_tools,
    a_memory_with_a_store_of_its_own_keeps_it,
    a_memory_in_two_instances_with_two_stores_is_refused,
);
