//! Observational memory and the `recall` tool (and their spans) driving a real agent on every backend: the
//! in-memory store, SQLite (a temporary file per test) and PostgreSQL (a fresh schema per test,
//! when `KESTREL_TEST_POSTGRES_URL` is set; otherwise those tests say they are skipped and pass).
//!
//! The observer and reflector are `ScriptedModel`s answering from the request, with small token
//! thresholds; the tests wait for the background observation with `ObservationProgress`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The scenarios, by topic; the list below runs each on every backend, the helpers follow.
mod observing;
mod recall_tool;
mod reflection;
mod traced;

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_memory::{Memory, ObservationProgress};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{NewMessage, NewThread, Scope, Selection, StoredMessage};

use observing::{
    a_failing_observer_never_fails_the_run_and_is_retried,
    a_single_message_larger_than_the_threshold_is_observed,
    observations_replace_observed_messages_and_the_window_stays_full,
    resource_scope_observations_reach_the_resources_other_threads_only,
    the_observer_gets_instructions_as_system_and_the_conversation_as_data,
    thresholds_count_tokenizer_tokens,
};
use recall_tool::{
    recall_in_resource_scope_reads_the_resources_threads_and_never_another_resources,
    recall_pages_reads_and_searches_this_thread,
};
use reflection::reflection_condenses_observations_past_observation_tokens;
use traced::observation_and_reflection_are_spans_of_the_runs_trace;

on_every_backend!(
    observations_replace_observed_messages_and_the_window_stays_full,
    the_observer_gets_instructions_as_system_and_the_conversation_as_data,
    reflection_condenses_observations_past_observation_tokens,
    a_single_message_larger_than_the_threshold_is_observed,
    thresholds_count_tokenizer_tokens,
    a_failing_observer_never_fails_the_run_and_is_retried,
    resource_scope_observations_reach_the_resources_other_threads_only,
    recall_pages_reads_and_searches_this_thread,
    recall_in_resource_scope_reads_the_resources_threads_and_never_another_resources,
    observation_and_reflection_are_spans_of_the_runs_trace,
);

// ---------------------------------------------------------------------------------------------
// Helpers

fn on(thread: &str, resource: &str) -> RunOptions {
    RunOptions::new().memory(thread, resource)
}

/// An agent model that answers `Noted.` to everything.
fn noting_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("Noted.")))
}

fn agent(memory: &Memory, model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("assistant")
        .instructions("You are a test assistant.")
        .model(model)
        .memory(memory.clone())
        .build()
        .unwrap()
}

/// Waits (up to 20 s) until the background observation of `runs` runs is over.
async fn settle(progress: &ObservationProgress, runs: u64) {
    tokio::time::timeout(Duration::from_secs(20), progress.wait_for_runs(runs))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "observation of {runs} runs did not finish (finished: {})",
                progress.finished_runs()
            )
        });
}

async fn stored(store: &Store, thread: &str, resource: &str) -> Vec<StoredMessage> {
    store
        .list_messages(thread, Some(resource), Selection::all())
        .await
        .unwrap()
        .messages
}

async fn observation_texts(store: &Store, scope: &Scope) -> Vec<String> {
    store
        .list_observations(scope)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.text)
        .collect()
}

/// The texts of a request's system messages, joined.
fn system_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The texts of a request's messages after the system messages.
fn conversation(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(Message::text)
        .collect()
}

async fn seed(store: &Store, thread: &str, resource: &str, texts: &[&str]) {
    if store.get_thread(thread).await.unwrap().is_none() {
        store
            .create_thread(NewThread::new(resource).id(thread))
            .await
            .unwrap();
    }
    let batch = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let message = if i % 2 == 0 {
                Message::user(*text)
            } else {
                Message::assistant(*text)
            };
            NewMessage::from(message)
        })
        .collect();
    store
        .append_messages(thread, resource, batch)
        .await
        .unwrap();
}
