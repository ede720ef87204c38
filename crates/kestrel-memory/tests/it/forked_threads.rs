//! Forked threads on every backend: a thread's `send(..).fork(..)` copies the thread up to now
//! into a new thread and runs the message there, leaving the original (and its active run)
//! untouched; forks of another resource's thread, of a missing thread or into a taken id are
//! refused with typed errors, creating nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{Agent, RunOptions, ThreadError};
use kestrel_core::memory::ForkError;
use kestrel_core::message::Role;
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{Selection, ThreadQuery};
use serde_json::json;

on_every_backend!(
    a_fork_copies_the_thread_and_runs_the_message_there,
    a_fork_leaves_the_active_run_of_the_original_alone,
    bad_forks_are_refused_and_create_nothing,
);

const THREAD: &str = "t1";
const RESOURCE: &str = "alice";

fn agent_on(store: &Store, model: Arc<ScriptedModel>) -> Agent {
    let memory = Memory::builder()
        .storage(Arc::clone(store))
        .last_messages(20)
        .build()
        .unwrap();
    Agent::builder("assistant")
        .model(model)
        .memory(memory)
        .build()
        .unwrap()
}

/// The texts of a thread, in order.
async fn texts(store: &Store, thread: &str) -> Vec<(Role, String)> {
    store
        .list_messages(thread, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect()
}

/// An echo of the last user message, and the history the model saw.
fn echo(req: &ModelRequest) -> ScriptedResponse {
    let users: Vec<String> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text())
        .collect();
    ScriptedResponse::text(format!(
        "Re: {} (seen {})",
        users.last().unwrap(),
        users.len()
    ))
}

async fn a_fork_copies_the_thread_and_runs_the_message_there(store: Store) {
    let agent = agent_on(&store, Arc::new(ScriptedModel::from_fn(echo)));
    for text in ["plan a trip", "to Lisbon"] {
        agent
            .generate(text)
            .options(RunOptions::new().memory(THREAD, RESOURCE))
            .await
            .unwrap();
    }
    let before = texts(&store, THREAD).await;
    assert_eq!(before.len(), 4);

    let sent = agent
        .thread(RESOURCE, THREAD)
        .send("what about Porto instead?")
        .fork(None, None)
        .await
        .unwrap();
    assert!(sent.accepted);
    assert_ne!(sent.thread_id, THREAD);
    let result = sent.stream.unwrap().result().await.unwrap();
    // The fork's run saw the whole conversation so far.
    assert_eq!(result.text, "Re: what about Porto instead? (seen 3)");

    let forked = texts(&store, &sent.thread_id).await;
    assert_eq!(forked[..4], before[..]);
    assert_eq!(
        forked[4..],
        [
            (Role::User, "what about Porto instead?".to_owned()),
            (
                Role::Assistant,
                "Re: what about Porto instead? (seen 3)".to_owned()
            ),
        ]
    );
    assert_eq!(
        texts(&store, THREAD).await,
        before,
        "the original is untouched"
    );
    let fork = store.get_thread(&sent.thread_id).await.unwrap().unwrap();
    assert_eq!(fork.resource_id, RESOURCE);
    assert_eq!(fork.metadata["clone"]["sourceThreadId"], json!(THREAD));

    // A fork into a chosen id, stored only (no run).
    let sent = agent
        .thread(RESOURCE, THREAD)
        .send("a note")
        .fork(Some("t1-notes".into()), Some("Notes".into()))
        .if_idle(kestrel_core::agent::IfIdle::Persist)
        .await
        .unwrap();
    assert_eq!(sent.thread_id, "t1-notes");
    assert!(sent.stream.is_none());
    let notes = store.get_thread("t1-notes").await.unwrap().unwrap();
    assert_eq!(notes.title.as_deref(), Some("Notes"));
    let notes = texts(&store, "t1-notes").await;
    assert_eq!(notes.len(), 5);
    assert_eq!(notes[4], (Role::User, "a note".to_owned()));
}

async fn a_fork_leaves_the_active_run_of_the_original_alone(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().map(|m| m.text()).unwrap_or_default();
        if last == "slow question" {
            ScriptedResponse::text("slow answer").with_delay(Duration::from_millis(400))
        } else {
            ScriptedResponse::text(format!("fast: {last}"))
        }
    }));
    let agent = agent_on(&store, model);
    let mut slow = agent
        .stream("slow question")
        .options(RunOptions::new().memory(THREAD, RESOURCE))
        .into_stream();
    // Its first event: the slow run holds the thread.
    slow.next().await.unwrap();
    assert_eq!(
        agent.thread(RESOURCE, THREAD).active_run().as_deref(),
        Some(slow.run_id())
    );
    let sent = agent
        .thread(RESOURCE, THREAD)
        .send("side question")
        .fork(None, None)
        .await
        .unwrap();
    // Not delivered to the active run: a run of its own, on the fork.
    assert_ne!(sent.run_id.as_deref(), Some(slow.run_id()));
    let side = sent.stream.unwrap().result().await.unwrap();
    assert_eq!(side.text, "fast: side question");
    let slow = slow.result().await.unwrap();
    assert_eq!(slow.text, "slow answer");
    let original = texts(&store, THREAD).await;
    assert_eq!(
        original,
        [
            (Role::User, "slow question".to_owned()),
            (Role::Assistant, "slow answer".to_owned()),
        ]
    );
    let fork = texts(&store, &sent.thread_id).await;
    assert_eq!(fork.last().unwrap().1, "fast: side question");
    assert!(!fork.iter().any(|(_, t)| t == "slow answer"));
}

async fn bad_forks_are_refused_and_create_nothing(store: Store) {
    let agent = agent_on(&store, Arc::new(ScriptedModel::from_fn(echo)));
    agent
        .generate("hello")
        .options(RunOptions::new().memory(THREAD, RESOURCE))
        .await
        .unwrap();
    let count = || async {
        store
            .list_threads(ThreadQuery::default())
            .await
            .unwrap()
            .total
    };
    let threads = count().await;

    let err = agent
        .thread("mallory", THREAD)
        .send("steal")
        .fork(None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ThreadError::Fork(ForkError::ThreadOfOtherResource { thread_id, resource_id })
            if thread_id == THREAD && resource_id == "mallory"),
        "{err:?}"
    );
    assert!(
        !err.to_string().contains(RESOURCE),
        "the owner is not revealed: {err}"
    );

    let err = agent
        .thread(RESOURCE, "nope")
        .send("x")
        .fork(None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ThreadError::Fork(ForkError::ThreadNotFound { thread_id }) if thread_id == "nope"),
        "{err:?}"
    );

    let err = agent
        .thread(RESOURCE, THREAD)
        .send("x")
        .fork(Some(THREAD.into()), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ThreadError::Fork(ForkError::ThreadExists { .. })),
        "{err:?}"
    );
    assert_eq!(count().await, threads, "no thread was created");
    assert_eq!(texts(&store, THREAD).await.len(), 2);

    // An agent without memory cannot fork.
    let plain = Agent::builder("plain")
        .model(Arc::new(ScriptedModel::new()))
        .build()
        .unwrap();
    let err = plain
        .thread(RESOURCE, THREAD)
        .send("x")
        .fork(None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, ThreadError::NoMemory { .. }), "{err:?}");
}
