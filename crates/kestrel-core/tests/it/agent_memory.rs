//! The memory hook: context loaded before the first step, complete messages stored as each step
//! ends, with the ids the events streamed, and nothing stored twice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kestrel_core::agent::{Agent, AgentError, RunOptions, RunState};
use kestrel_core::context::RequestContext;
use kestrel_core::event::EventKind;
use kestrel_core::memory::{AgentMemory, MemoryError, MemoryScope, Persist, RecalledContext};
use kestrel_core::message::{Message, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use serde_json::{Value, json};

#[derive(Default)]
struct FakeMemory {
    threads: Mutex<HashMap<String, Vec<Message>>>,
    batches: Mutex<Vec<Vec<(Role, String)>>>,
    fail_persist: bool,
    /// Fails every `persist` after this many have succeeded.
    fail_after: Option<usize>,
    /// `recall` stores the input itself and says so.
    stores_input: bool,
}

#[async_trait::async_trait]
impl AgentMemory for FakeMemory {
    async fn recall(
        &self,
        scope: &MemoryScope,
        input: &[Message],
        _ctx: &RequestContext,
    ) -> Result<RecalledContext, MemoryError> {
        let history = self
            .threads
            .lock()
            .unwrap()
            .get(&scope.thread_id)
            .cloned()
            .unwrap_or_default();
        if self.stores_input {
            self.store(scope, input);
        }
        Ok(RecalledContext {
            system: vec![format!("Working memory of {}", scope.resource_id)],
            history,
            input_stored: self.stores_input,
        })
    }

    async fn persist(
        &self,
        scope: &MemoryScope,
        messages: &[Message],
        _how: Persist<'_>,
    ) -> Result<(), MemoryError> {
        let done = self.batches.lock().unwrap().len();
        if self.fail_persist || self.fail_after.is_some_and(|n| done >= n) {
            return Err(MemoryError::new("database is locked"));
        }
        self.store(scope, messages);
        Ok(())
    }
}

/// An agent on [`script`] with `echo` and `memory`.
fn scripted_agent(memory: Arc<FakeMemory>) -> Agent {
    Agent::builder("a")
        .model(Arc::new(script()))
        .tool(echo_tool())
        .memory(memory)
        .build()
        .unwrap()
}

/// The batches a run of [`script`] stores: its input, the step that called `echo`, the answer.
const SCRIPT_BATCHES: [&[Role]; 3] = [
    &[Role::User],
    &[Role::Assistant, Role::Tool],
    &[Role::Assistant],
];

impl FakeMemory {
    /// The roles of each stored batch.
    fn batch_roles(&self) -> Vec<Vec<Role>> {
        self.batches
            .lock()
            .unwrap()
            .iter()
            .map(|b| b.iter().map(|m| m.0).collect())
            .collect()
    }

    /// Appends `messages` to the thread as one batch; a message stored twice panics.
    fn store(&self, scope: &MemoryScope, messages: &[Message]) {
        let mut threads = self.threads.lock().unwrap();
        let thread = threads.entry(scope.thread_id.clone()).or_default();
        for m in messages {
            assert!(
                thread.iter().all(|t| t.id != m.id),
                "message {} stored twice",
                m.id
            );
            thread.push(m.clone());
        }
        self.batches
            .lock()
            .unwrap()
            .push(messages.iter().map(|m| (m.role, m.id.clone())).collect());
    }
}

fn echo_tool() -> kestrel_core::tool::FnTool {
    create_tool("echo")
        .description("Echoes")
        .input_schema(json!({"type": "object"}))
        .execute(|v: Value, _ctx| async move { Ok(v) })
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        .respond(ScriptedResponse::tool_call("e1", "echo", json!({"x": 1})))
        .respond(ScriptedResponse::text("first answer"))
        .respond(ScriptedResponse::text("second answer"))
}

#[tokio::test]
async fn messages_are_stored_as_steps_complete_with_the_streamed_ids() {
    let memory = Arc::new(FakeMemory::default());
    let model = Arc::new(script());
    let agent = Agent::builder("a")
        .instructions("Be brief.")
        .model(model.clone())
        .tool(echo_tool())
        .memory(memory.clone())
        .build()
        .unwrap();
    let (events, result) = agent
        .stream("hello")
        .memory("t1", "user-1")
        .into_stream()
        .collect()
        .await;
    let result = result.unwrap();

    let batches = memory.batches.lock().unwrap().clone();
    assert_eq!(
        memory.batch_roles(),
        SCRIPT_BATCHES,
        "the input first, then each step's complete messages"
    );
    // Assistant ids equal the streamed message ids.
    let streamed: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::StepStart(p) => Some(p.message_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, [batches[1][0].1.clone(), batches[2][0].1.clone()]);
    assert_eq!(result.steps[0].message_id, batches[1][0].1);

    // A second run on the thread sees the whole first exchange before its input, and the
    // memory's system text after the instructions.
    let result2 = agent
        .generate("again")
        .memory("t1", "user-1")
        .await
        .unwrap();
    assert_eq!(result2.text, "second answer");
    let sent = &model.requests()[2].messages;
    let roles: Vec<Role> = sent.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(sent[1].text(), "Working memory of user-1");
    assert_eq!(sent[6].text(), "again");
    // Only the new messages were stored; the response excludes the history.
    assert_eq!(memory.threads.lock().unwrap()["t1"].len(), 6);
    assert_eq!(result2.response_messages.len(), 1);
}

/// Issue 15, bug 5: the handshake between the agent and a memory that stores the input in
/// `recall` is explicit: `input_stored` says so and the agent never persists the input again.
#[tokio::test]
async fn an_input_recall_stored_is_not_persisted_again() {
    let memory = Arc::new(FakeMemory {
        stores_input: true,
        ..Default::default()
    });
    let agent = scripted_agent(memory.clone());
    agent
        .generate("hello")
        .memory("t5", "user-1")
        .await
        .unwrap();
    assert_eq!(
        memory.batch_roles(),
        SCRIPT_BATCHES,
        "the input once (by recall), then each step's messages"
    );
}

#[tokio::test]
async fn a_continued_run_stores_only_what_is_new() {
    let memory = Arc::new(FakeMemory::default());
    let build = |model: ScriptedModel| {
        Agent::builder("a")
            .model(Arc::new(model))
            .tool(echo_tool())
            .memory(memory.clone())
            .build()
            .unwrap()
    };
    let agent = build(script());
    let mut run = agent.start_run("hello", RunOptions::new().memory("t2", "u"));
    run.step().await.unwrap();
    let json = serde_json::to_string(&run.into_state()).unwrap();

    let fresh = build(ScriptedModel::new().respond(ScriptedResponse::text("done")));
    let state: RunState = serde_json::from_str(&json).unwrap();
    fresh
        .continue_run(state, RunOptions::new())
        .unwrap()
        .run()
        .await
        .unwrap();
    let stored = memory.threads.lock().unwrap()["t2"].clone();
    let roles: Vec<Role> = stored.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
}

/// The run failed with the memory's error, and its last event says so.
fn assert_failed_by_memory(
    events: &[kestrel_core::event::Event],
    result: Result<kestrel_core::agent::GenerateResult, AgentError>,
) {
    match result {
        Err(AgentError::Memory { source, .. }) => {
            assert_eq!(source.message(), "database is locked")
        }
        other => panic!("{other:?}"),
    }
    let last = events.last().unwrap().to_json();
    assert!(
        last.contains("\"kind\":\"memory\"") && last.contains("database is locked"),
        "{last}"
    );
}

#[tokio::test]
async fn a_memory_failure_fails_the_run_with_a_typed_error() {
    let agent = scripted_agent(Arc::new(FakeMemory {
        fail_persist: true,
        ..Default::default()
    }));
    let (events, result) = agent
        .stream("hello")
        .memory("t3", "u")
        .into_stream()
        .collect()
        .await;
    assert_failed_by_memory(&events, result);
}

/// Issue 15, bug 2: a memory failure between steps (here storing an iteration hook's feedback)
/// ends the run like any other failure: the `error` event, the typed error, and a run that is
/// not left running.
#[tokio::test]
async fn a_memory_failure_between_steps_fails_the_run_through_the_error_path() {
    use kestrel_core::agent::iteration::IterationDecision;
    let memory = Arc::new(FakeMemory {
        // The input, then the first step's answer; storing the feedback fails.
        fail_after: Some(2),
        ..Default::default()
    });
    let agent = Agent::builder("a")
        .model(Arc::new(
            ScriptedModel::new()
                .respond(ScriptedResponse::text("first answer"))
                .respond(ScriptedResponse::text("second answer")),
        ))
        .memory(memory.clone())
        .max_steps(3)
        .build()
        .unwrap();
    let options = RunOptions::new()
        .memory("t4", "u")
        .on_iteration_complete(|_| async {
            Ok(IterationDecision::proceed().feedback("Say more."))
        });
    let stream = agent.stream("hello").options(options).into_stream();
    let run_id = stream.run_id().to_string();
    let (events, result) = stream.collect().await;
    assert_eq!(
        memory.batches.lock().unwrap().len(),
        2,
        "the first step was stored"
    );
    assert_failed_by_memory(&events, result);
    if let Some(stored) = agent.run_store().load(&run_id).await.unwrap() {
        assert!(stored.state.is_finished(), "{:?}", stored.phase);
    }
}

#[tokio::test]
async fn without_a_thread_memory_is_not_touched() {
    let memory = Arc::new(FakeMemory::default());
    let agent = Agent::builder("a")
        .model(Arc::new(script()))
        .tool(echo_tool())
        .memory(memory.clone())
        .build()
        .unwrap();
    agent.generate("hello").await.unwrap();
    assert!(memory.batches.lock().unwrap().is_empty());
}
