//! `Memory` driving a real agent on every backend: the in-memory store, SQLite (a temporary file
//! per test) and PostgreSQL (a fresh schema per test, when `KESTREL_TEST_POSTGRES_URL` is set;
//! otherwise those tests say they are skipped and pass).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The scenarios, by topic; the list below runs each on every backend, the helpers follow.
mod recall;
mod storing;
mod titles;
mod working_memory;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kestrel_core::agent::{Agent, RunOptions};
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel};
use kestrel_core::tool::create_tool;
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{NewMessage, NewThread, Selection, StoredMessage};
use serde_json::{Value, json};

use recall::{
    a_thread_of_another_resource_is_refused,
    a_window_starting_at_tool_results_keeps_their_call_and_drops_orphans,
    read_only_recalls_but_never_writes, the_window_holds_the_last_messages,
};
use storing::{
    input_is_stored_before_the_first_step_and_survives_a_model_error,
    steps_are_stored_as_they_end_with_the_streamed_ids,
    two_runs_on_one_thread_at_once_go_in_turn_and_lose_nothing,
};
use titles::{
    a_failing_title_model_is_not_fatal, titles_are_generated_once_without_delaying_the_response,
};
use working_memory::{
    memory_tools_are_offered_only_to_runs_with_a_thread,
    working_memory_schema_is_per_thread_and_rejects_invalid_updates,
    working_memory_template_is_shared_by_the_resource_threads,
};

on_every_backend!(
    input_is_stored_before_the_first_step_and_survives_a_model_error,
    steps_are_stored_as_they_end_with_the_streamed_ids,
    the_window_holds_the_last_messages,
    a_window_starting_at_tool_results_keeps_their_call_and_drops_orphans,
    read_only_recalls_but_never_writes,
    titles_are_generated_once_without_delaying_the_response,
    a_failing_title_model_is_not_fatal,
    working_memory_template_is_shared_by_the_resource_threads,
    working_memory_schema_is_per_thread_and_rejects_invalid_updates,
    memory_tools_are_offered_only_to_runs_with_a_thread,
    a_thread_of_another_resource_is_refused,
    two_runs_on_one_thread_at_once_go_in_turn_and_lose_nothing,
);

// ---------------------------------------------------------------------------------------------
// Helpers

fn echo_tool() -> kestrel_core::tool::FnTool {
    create_tool("echo")
        .description("Echoes its input")
        .input_schema(json!({"type": "object"}))
        .execute(|v: Value, _ctx| async move { Ok(v) })
}

fn agent(memory: &Memory, model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("assistant")
        .instructions("You are a test assistant.")
        .model(model)
        .tool(echo_tool())
        .memory(memory.clone())
        .build()
        .unwrap()
}

fn on(thread: &str, resource: &str) -> RunOptions {
    RunOptions::new().memory(thread, resource)
}

async fn stored(store: &Store, thread: &str, resource: &str) -> Vec<StoredMessage> {
    store
        .list_messages(thread, Some(resource), Selection::all())
        .await
        .unwrap()
        .messages
}

fn ids(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

fn roles(messages: &[StoredMessage]) -> Vec<Role> {
    messages.iter().map(|m| m.role).collect()
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

/// A request's messages after the system messages.
fn conversation(request: &ModelRequest) -> Vec<Message> {
    request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .cloned()
        .collect()
}

async fn seed(store: &Store, thread: &str, resource: &str, messages: Vec<Message>) {
    if store.get_thread(thread).await.unwrap().is_none() {
        store
            .create_thread(NewThread::new(resource).id(thread))
            .await
            .unwrap();
    }
    let batch = messages.into_iter().map(NewMessage::from).collect();
    store
        .append_messages(thread, resource, batch)
        .await
        .unwrap();
}

fn call_message(id: &str, call_id: &str) -> Message {
    Message {
        id: id.into(),
        role: Role::Assistant,
        parts: vec![Part::ToolCall {
            tool_call_id: call_id.into(),
            tool_name: "echo".into(),
            args: json!({}),
        }],
    }
}

fn result_message(id: &str, call_id: &str) -> Message {
    Message {
        id: id.into(),
        role: Role::Tool,
        parts: vec![Part::ToolResult {
            tool_call_id: call_id.into(),
            tool_name: "echo".into(),
            result: json!({}),
            is_error: false,
            denied: false,
        }],
    }
}

fn text_message(id: &str, role: Role, text: &str) -> Message {
    Message {
        id: id.into(),
        role,
        parts: vec![Part::Text { text: text.into() }],
    }
}

/// Waits (up to 10 s) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
