//! `Memory` driving a real agent on every backend: the in-memory store, SQLite (a temporary file
//! per test) and PostgreSQL (a fresh schema per test, when `KESTREL_TEST_POSTGRES_URL` is set;
//! otherwise those tests say they are skipped and pass).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kestrel_core::agent::{Agent, AgentError, GenerateResult, RunOptions};
use kestrel_core::event::EventKind;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    LanguageModel, ModelError, ModelRequest, ModelStream, ScriptedModel, ScriptedResponse,
};
use kestrel_core::tool::{ToolError, create_tool};
use kestrel_memory::{
    Error, GenerateTitle, Memory, UPDATE_WORKING_MEMORY, WorkingMemory, WorkingMemoryScope,
};
use kestrel_storage::{MessageStatus, NewMessage, NewThread, Scope, Selection, StoredMessage};
use serde_json::{Value, json};

use crate::common::{Store, run};

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
        .execute(|v: Value, _ctx| async move { Ok::<_, ToolError>(v) })
}

fn agent(memory: &Memory, model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("assistant")
        .instructions("You are a test assistant.")
        .model(model)
        .tool(echo_tool())
        .memory(memory.clone().shared())
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

// ---------------------------------------------------------------------------------------------
// Scenarios

/// The input is stored before the model is called: a model failing on step 1 leaves the user
/// message stored, complete, with its id.
async fn input_is_stored_before_the_first_step_and_survives_a_model_error(store: Store) {
    let memory = Memory::new(store.clone());
    let failure = ModelError::BadRequest {
        provider: "scripted".into(),
        status: 400,
        message: "context too long".into(),
    };
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::error(failure)));
    let input = Message::user("Plan my trip to Lisbon");
    let result = agent(&memory, model)
        .generate(input.clone(), on("t1", "alice"))
        .await;
    assert!(
        matches!(result, Err(AgentError::Model { .. })),
        "{result:?}"
    );

    let messages = stored(&store, "t1", "alice").await;
    assert_eq!(ids(&messages), std::slice::from_ref(&input.id));
    assert_eq!(messages[0].to_message(), input);
    assert_eq!(messages[0].status, MessageStatus::Complete);
}

/// A model that records, at each call, the roles stored in a thread, then answers from a script.
struct ProbingModel {
    script: ScriptedModel,
    store: Store,
    thread: (String, String),
    seen: std::sync::Mutex<Vec<Vec<Role>>>,
}

#[async_trait::async_trait]
impl LanguageModel for ProbingModel {
    fn provider(&self) -> &str {
        "probe"
    }

    fn model_id(&self) -> &str {
        "probe"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let (thread, resource) = &self.thread;
        let now = roles(&stored(&self.store, thread, resource).await);
        self.seen.lock().unwrap().push(now);
        self.script.stream(request).await
    }
}

/// The input is stored before the first model call and each step's assistant message and tool
/// results before the next one; stored ids are the streamed ids.
async fn steps_are_stored_as_they_end_with_the_streamed_ids(store: Store) {
    let memory = Memory::new(store.clone());
    let model = Arc::new(ProbingModel {
        script: ScriptedModel::new()
            .respond(ScriptedResponse::tool_call("c1", "echo", json!({"x": 1})))
            .respond(ScriptedResponse::text_deltas(["It ", "is ", "1."])),
        store: store.clone(),
        thread: ("t1".into(), "alice".into()),
        seen: Default::default(),
    });
    let agent = Agent::builder("assistant")
        .model(model.clone())
        .tool(echo_tool())
        .memory(memory.shared())
        .build()
        .unwrap();
    let input = Message::user("What is x?");
    let mut stream = agent.stream(input.clone(), on("t1", "alice"));
    let mut step_ids = Vec::new();
    let mut delta_ids = HashSet::new();
    while let Some(event) = stream.next().await {
        match &event.kind {
            EventKind::StepStart(p) => step_ids.push(p.message_id.clone()),
            EventKind::TextDelta(p) => {
                delta_ids.insert(p.id.clone());
            }
            _ => {}
        }
    }
    let result = stream.result().await.unwrap();

    let seen = model.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            vec![Role::User],
            vec![Role::User, Role::Assistant, Role::Tool]
        ],
        "what was stored when each step's model call started"
    );
    let messages = stored(&store, "t1", "alice").await;
    assert_eq!(
        roles(&messages),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert!(messages.iter().all(|m| m.status == MessageStatus::Complete));
    assert_eq!(messages[0].id, input.id);
    assert_eq!([messages[1].id.clone(), messages[3].id.clone()], *step_ids);
    let run_steps: Vec<String> = result.steps.iter().map(|s| s.message_id.clone()).collect();
    assert_eq!(run_steps, step_ids);
    assert_eq!(delta_ids, HashSet::from([step_ids[1].clone()]));
    let response_ids: Vec<String> = result
        .response_messages
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(response_ids, ids(&messages)[1..]);
    assert_eq!(messages[3].to_message().text(), "It is 1.");
    assert!(matches!(
        &messages[2].parts[..],
        [Part::ToolResult { tool_call_id, is_error: false, .. }] if tool_call_id == "c1"
    ));
}

/// A run sees exactly the last `last_messages` stored messages, before its input.
async fn the_window_holds_the_last_messages(store: Store) {
    let seeded: Vec<Message> = (1..=12)
        .map(|i| {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            text_message(&format!("m{i}"), role, &format!("message {i}"))
        })
        .collect();
    seed(&store, "t1", "alice", seeded).await;
    let memory = Memory::builder(store.clone())
        .last_messages(4)
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("ok")));
    agent(&memory, model.clone())
        .generate("message 13", on("t1", "alice"))
        .await
        .unwrap();
    let sent = conversation(&model.requests()[0]);
    let texts: Vec<String> = sent.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "message 9",
            "message 10",
            "message 11",
            "message 12",
            "message 13"
        ]
    );
    let sent_ids: Vec<&str> = sent[..4].iter().map(|m| m.id.as_str()).collect();
    assert_eq!(sent_ids, ["m9", "m10", "m11", "m12"]);

    // The default is 10.
    let memory = Memory::new(store.clone());
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("ok")));
    agent(&memory, model.clone())
        .generate("message 15", on("t1", "alice"))
        .await
        .unwrap();
    let sent = conversation(&model.requests()[0]);
    assert_eq!(sent.len(), 11);
    assert_eq!(sent[0].text(), "message 5");
}

/// A window cut between a tool call and its results includes the call; results whose call is
/// gone are left out.
async fn a_window_starting_at_tool_results_keeps_their_call_and_drops_orphans(store: Store) {
    seed(
        &store,
        "t1",
        "alice",
        vec![
            text_message("u1", Role::User, "first"),
            text_message("a1", Role::Assistant, "hello"),
            text_message("u2", Role::User, "echo something"),
            call_message("a2", "c1"),
            result_message("r2", "c1"),
            text_message("a3", Role::Assistant, "echoed"),
        ],
    )
    .await;
    let memory = Memory::builder(store.clone())
        .last_messages(2)
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("ok"))
            .respond(ScriptedResponse::text("ok")),
    );
    let agent = agent(&memory, model.clone());
    agent.generate("next", on("t1", "alice")).await.unwrap();
    let sent: Vec<String> = conversation(&model.requests()[0])
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(
        sent[..3],
        ["a2", "r2", "a3"],
        "the call comes with its result"
    );

    // A result whose call was deleted is an orphan: it is left out.
    seed(
        &store,
        "t2",
        "alice",
        vec![
            text_message("v1", Role::User, "echo"),
            call_message("v2", "c9"),
            result_message("v3", "c9"),
            text_message("v4", Role::Assistant, "done"),
        ],
    )
    .await;
    store
        .delete_messages("t2", "alice", &["v2".to_owned()])
        .await
        .unwrap();
    agent.generate("again", on("t2", "alice")).await.unwrap();
    let sent: Vec<String> = conversation(&model.requests()[1])
        .iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], "v4", "the orphan result v3 is not sent");
}

/// A read-only memory shows history and working memory, stores nothing, creates no thread and
/// offers no tools.
async fn read_only_recalls_but_never_writes(store: Store) {
    seed(
        &store,
        "t1",
        "alice",
        vec![
            text_message("u1", Role::User, "I live in Porto"),
            text_message("a1", Role::Assistant, "Noted"),
        ],
    )
    .await;
    store
        .set_working_memory(&Scope::resource("alice"), "# User\n- City: Porto")
        .await
        .unwrap();
    let memory = Memory::builder(store.clone())
        .read_only(true)
        .working_memory(WorkingMemory::template("# User\n- City:"))
        .build()
        .unwrap();
    assert!(memory.is_read_only());
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Porto"))
            .respond(ScriptedResponse::text("Who?")),
    );
    let agent = agent(&memory, model.clone());
    assert!(agent.tools().get(UPDATE_WORKING_MEMORY).is_none());
    agent
        .generate("Where do I live?", on("t1", "alice"))
        .await
        .unwrap();
    let request = &model.requests()[0];
    let sent: Vec<String> = conversation(request).iter().map(|m| m.text()).collect();
    assert_eq!(sent, ["I live in Porto", "Noted", "Where do I live?"]);
    let system = system_text(request);
    assert!(system.contains("- City: Porto"), "{system}");
    assert!(system.contains("cannot change it"), "{system}");
    assert_eq!(ids(&stored(&store, "t1", "alice").await), ["u1", "a1"]);

    agent.generate("Hello", on("fresh", "alice")).await.unwrap();
    assert!(store.get_thread("fresh").await.unwrap().is_none());
}

/// The title comes from a slow model in the background: the response does not wait for it, it
/// is stored once, and a later run does not ask again.
async fn titles_are_generated_once_without_delaying_the_response(store: Store) {
    let title_delay = Duration::from_secs(2);
    let title_model = Arc::new(
        ScriptedModel::new()
            .with_model_id("titles")
            .respond(ScriptedResponse::text("\"Weather in Lisbon\"").with_delay(title_delay)),
    );
    let memory = Memory::builder(store.clone())
        .generate_title(GenerateTitle::new(title_model.clone()).instructions("Title it."))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Sunny."))
            .respond(ScriptedResponse::text("Still sunny.")),
    );
    let agent = agent(&memory, model);

    let start = Instant::now();
    agent
        .generate("What's the weather in Lisbon?", on("t1", "alice"))
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(
        took < title_delay / 2,
        "the response waited for the title ({took:?})"
    );
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title, None, "the title model is still thinking");

    eventually("the title", || {
        let store = store.clone();
        async move {
            let thread = store.get_thread("t1").await.unwrap().unwrap();
            thread.title.as_deref() == Some("Weather in Lisbon")
        }
    })
    .await;
    let request = &title_model.requests()[0];
    assert_eq!(request.messages[0].text(), "Title it.");
    assert_eq!(request.messages[1].text(), "What's the weather in Lisbon?");

    agent.generate("And now?", on("t1", "alice")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        title_model.calls(),
        1,
        "a titled thread is not titled again"
    );
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title.as_deref(), Some("Weather in Lisbon"));
}

/// A title model that fails leaves the thread untitled and the run successful.
async fn a_failing_title_model_is_not_fatal(store: Store) {
    let failure = ModelError::BadRequest {
        provider: "scripted".into(),
        status: 400,
        message: "no".into(),
    };
    let title_model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::error(failure)));
    let memory = Memory::builder(store.clone())
        .generate_title(GenerateTitle::new(title_model.clone()))
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("Hi.")));
    let result = agent(&memory, model)
        .generate("Hello", on("t1", "alice"))
        .await;
    assert_eq!(result.unwrap().text, "Hi.");
    eventually("the title attempt", || {
        let calls = title_model.calls();
        async move { calls == 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let thread = store.get_thread("t1").await.unwrap().unwrap();
    assert_eq!(thread.title, None);
}

/// Template working memory in resource scope: updated by the tool in one thread, seen in the
/// resource's other threads, not by another resource.
async fn working_memory_template_is_shared_by_the_resource_threads(store: Store) {
    let template = "# User\n- Name:\n- City:";
    let memory = Memory::builder(store.clone())
        .working_memory(WorkingMemory::template(template))
        .build()
        .unwrap();
    let notes = "# User\n- Name: Ada\n- City: Lisbon";
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "w1",
                UPDATE_WORKING_MEMORY,
                json!({"memory": notes}),
            ))
            .respond(ScriptedResponse::text("Nice to meet you, Ada."))
            .respond(ScriptedResponse::text("You are Ada."))
            .respond(ScriptedResponse::text("I don't know.")),
    );
    let agent = agent(&memory, model.clone());
    let tool = agent.tools().get(UPDATE_WORKING_MEMORY).unwrap();
    assert_eq!(tool.input_schema()["required"], json!(["memory"]));

    let first = agent
        .generate("I'm Ada from Lisbon.", on("t1", "alice"))
        .await
        .unwrap();
    assert!(!first.tool_results[0].is_error, "{:?}", first.tool_results);
    assert_eq!(first.tool_results[0].result, json!({"success": true}));
    let saved = store
        .get_working_memory(&Scope::resource("alice"))
        .await
        .unwrap();
    assert_eq!(saved.as_deref(), Some(notes));
    // Before the update, the template stood in for the empty memory.
    let system = system_text(&model.requests()[0]);
    assert!(
        system.contains(&format!("<working_memory_data>\n{template}\n")),
        "{system}"
    );

    agent
        .generate("Who am I?", on("t2", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[2]);
    assert!(system.contains("- Name: Ada"), "{system}");
    assert!(system.contains(UPDATE_WORKING_MEMORY));

    agent.generate("Who am I?", on("t3", "bob")).await.unwrap();
    let system = system_text(&model.requests()[3]);
    assert!(!system.contains("Ada"), "{system}");
}

/// `update_working_memory` needs a thread and a resource: a run without them is not offered
/// it (a small local model picked it for a weather question and could only fail), while the
/// agent's own tools stay. Where it is offered it is marked auxiliary.
async fn memory_tools_are_offered_only_to_runs_with_a_thread(store: Store) {
    let memory = Memory::builder(store.clone())
        .working_memory(WorkingMemory::template("# User\n- Name:"))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::text("Hello."))
            .respond(ScriptedResponse::text("Hello again.")),
    );
    let agent = agent(&memory, model.clone());
    agent.generate("Hi", RunOptions::new()).await.unwrap();
    agent.generate("Hi", on("t1", "alice")).await.unwrap();
    let offered = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(offered(0), ["echo"]);
    assert_eq!(offered(1), ["echo", UPDATE_WORKING_MEMORY]);
    // Memory's tools are marked auxiliary, so no model is ever made to call them.
    let auxiliary: Vec<bool> = model.requests()[1]
        .tools
        .iter()
        .map(|t| t.auxiliary)
        .collect();
    assert_eq!(auxiliary, [false, true]);
}

/// Schema working memory in thread scope: an update that does not match the schema is refused
/// (the model reads the error, nothing changes); a valid one is stored for this thread only.
async fn working_memory_schema_is_per_thread_and_rejects_invalid_updates(store: Store) {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0}
        },
        "required": ["name"],
        "additionalProperties": false
    });
    let memory = Memory::builder(store.clone())
        .working_memory(WorkingMemory::schema(schema.clone()).scope(WorkingMemoryScope::Thread))
        .build()
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .respond(ScriptedResponse::tool_call(
                "w1",
                UPDATE_WORKING_MEMORY,
                json!({"name": "Ada", "age": "old"}),
            ))
            .respond(ScriptedResponse::tool_call(
                "w2",
                UPDATE_WORKING_MEMORY,
                json!({"name": "Ada", "age": 36}),
            ))
            .respond(ScriptedResponse::text("Noted."))
            .respond(ScriptedResponse::text("You are Ada, 36."))
            .respond(ScriptedResponse::text("I don't know.")),
    );
    let agent = agent(&memory, model.clone());
    assert_eq!(
        agent
            .tools()
            .get(UPDATE_WORKING_MEMORY)
            .unwrap()
            .input_schema(),
        &schema
    );
    let thread = Scope::thread("t1", "alice");

    let result = agent
        .generate("I'm Ada, 36.", on("t1", "alice"))
        .await
        .unwrap();
    let outcomes: Vec<bool> = result.tool_results.iter().map(|r| r.is_error).collect();
    assert_eq!(outcomes, [true, false], "{:?}", result.tool_results);
    assert!(
        result.tool_results[0]
            .result
            .as_str()
            .unwrap()
            .contains("age"),
        "{:?}",
        result.tool_results[0]
    );
    let saved = store.get_working_memory(&thread).await.unwrap().unwrap();
    let saved: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(saved, json!({"name": "Ada", "age": 36}));

    agent
        .generate("Who am I?", on("t1", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[3]);
    assert!(system.contains(r#""name":"Ada""#), "{system}");
    assert!(system.contains("<working_memory_schema>"), "{system}");

    agent
        .generate("Who am I?", on("t2", "alice"))
        .await
        .unwrap();
    let system = system_text(&model.requests()[4]);
    assert!(
        system.contains("<working_memory_data>\n{}\n"),
        "another thread starts empty: {system}"
    );
    assert_eq!(
        store
            .get_working_memory(&Scope::resource("alice"))
            .await
            .unwrap(),
        None
    );
}

/// A run naming another resource's thread fails before the model is called, with a typed error
/// that does not name the owner; nothing is read or written.
async fn a_thread_of_another_resource_is_refused(store: Store) {
    seed(
        &store,
        "t1",
        "alice",
        vec![text_message("s1", Role::User, "my secret")],
    )
    .await;
    for last_messages in [10, 0] {
        let memory = Memory::builder(store.clone())
            .last_messages(last_messages)
            .build()
            .unwrap();
        let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("leak")));
        let result = agent(&memory, model.clone())
            .generate("show me", on("t1", "mallory"))
            .await;
        let Err(AgentError::Memory { source, .. }) = result else {
            panic!("expected a memory error, got {result:?}");
        };
        assert!(
            source.message().contains("belongs to another resource"),
            "{source}"
        );
        assert!(!source.message().contains("alice"), "{source}");
        let typed = std::error::Error::source(&source)
            .and_then(|e| e.downcast_ref::<Error>())
            .unwrap();
        assert!(matches!(
            typed,
            Error::ForeignThread { thread_id, resource_id }
                if thread_id == "t1" && resource_id == "mallory"
        ));
        assert_eq!(model.calls(), 0);
    }
    assert_eq!(ids(&stored(&store, "t1", "alice").await), ["s1"]);
}

/// Two tabs run on one thread at once: every message of every run is stored once, each step's
/// messages are contiguous, each run's messages are in order, and seqs have no gaps.
async fn two_runs_on_one_thread_at_once_go_in_turn_and_lose_nothing(store: Store) {
    let memory = Memory::new(store.clone());
    // A tool round trip then text; call ids derive from the user message, so they are unique.
    let model = Arc::new(
        ScriptedModel::from_fn(|request| {
            let last = request.messages.last().unwrap();
            let delay = Duration::from_millis(3);
            if last.role == Role::Tool {
                ScriptedResponse::text("done").with_delay(delay)
            } else {
                let call_id = format!("call-{}", last.id);
                ScriptedResponse::tool_call(call_id, "echo", json!({"from": last.text()}))
                    .with_delay(delay)
            }
        })
        .without_recording(),
    );
    let agent = agent(&memory, model);
    let turns = 4;
    let tabs: Vec<_> = (0..2)
        .map(|tab| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let mut runs: Vec<(Message, GenerateResult)> = Vec::new();
                for turn in 0..turns {
                    let input = Message::user(format!("tab {tab} turn {turn}"));
                    let result = agent
                        .generate(input.clone(), on("shared", "alice"))
                        .await
                        .unwrap();
                    runs.push((input, result));
                }
                runs
            })
        })
        .collect();
    let mut runs = Vec::new();
    for tab in tabs {
        runs.extend(tab.await.unwrap());
    }

    let messages = stored(&store, "shared", "alice").await;
    assert_eq!(
        messages.len(),
        runs.len() * 4,
        "nothing lost, nothing doubled"
    );
    let seqs: Vec<i64> = messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=messages.len() as i64).collect::<Vec<_>>());
    let position = |id: &str| messages.iter().position(|m| m.id == id).unwrap();

    let distinct: HashSet<&str> = messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(distinct.len(), messages.len());
    let mut starts = Vec::new();
    for (input, result) in &runs {
        let mut run_ids = vec![input.id.clone()];
        run_ids.extend(result.response_messages.iter().map(|m| m.id.clone()));
        assert_eq!(run_ids.len(), 4);
        let places: Vec<usize> = run_ids.iter().map(|id| position(id)).collect();
        assert!(
            places.windows(2).all(|w| w[0] < w[1]),
            "a run's messages are in order"
        );
        assert_eq!(
            places[2],
            places[1] + 1,
            "a step's call and results are contiguous"
        );
        let roles: Vec<Role> = places.iter().map(|&p| messages[p].role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        // The thread's lease puts runs on one thread in turn: a run's messages are contiguous.
        assert_eq!(
            places[3] - places[0],
            3,
            "runs on one thread never interleave"
        );
        starts.push((places[0], input.text()));
    }
    // Both tabs ran at once: their runs took turns on the thread instead of one tab running
    // all its turns first.
    starts.sort();
    let tabs_in_order: Vec<bool> = starts.iter().map(|(_, t)| t.starts_with("tab 0")).collect();
    let switches = tabs_in_order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        switches > 1,
        "the tabs' runs never overlapped, so this test proved nothing: {starts:?}"
    );
}
