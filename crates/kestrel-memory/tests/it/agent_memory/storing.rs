//! What is stored, and when: the input before the first model call, each step as it ends with
//! the streamed ids, and concurrent runs on one thread that go in turn and lose nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{Agent, AgentError, GenerateResult};
use kestrel_core::event::EventKind;
use kestrel_core::message::{Message, Part, Role};
use kestrel_core::model::{
    LanguageModel, ModelError, ModelRequest, ModelStream, ScriptedModel, ScriptedResponse,
};
use kestrel_memory::Memory;
use kestrel_storage::MessageStatus;
use kestrel_storage::testing::Store;
use serde_json::json;

use super::{agent, echo_tool, ids, on, roles, stored};

/// The input is stored before the model is called: a model failing on step 1 leaves the user
/// message stored, complete, with its id.
pub(super) async fn input_is_stored_before_the_first_step_and_survives_a_model_error(store: Store) {
    let memory = Memory::new(store.clone());
    let failure = ModelError::BadRequest {
        provider: "scripted".into(),
        status: 400,
        message: "context too long".into(),
    };
    let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::error(failure)));
    let input = Message::user("Plan my trip to Lisbon");
    let result = agent(&memory, model)
        .generate(input.clone())
        .options(on("t1", "alice"))
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
pub(super) async fn steps_are_stored_as_they_end_with_the_streamed_ids(store: Store) {
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
        .memory(memory)
        .build()
        .unwrap();
    let input = Message::user("What is x?");
    let mut stream = agent
        .stream(input.clone())
        .options(on("t1", "alice"))
        .into_stream();
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

/// Two tabs run on one thread at once: every message of every run is stored once, each step's
/// messages are contiguous, each run's messages are in order, and seqs have no gaps.
pub(super) async fn two_runs_on_one_thread_at_once_go_in_turn_and_lose_nothing(store: Store) {
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
                        .generate(input.clone())
                        .options(on("shared", "alice"))
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
