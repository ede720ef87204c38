//! Live threads on every backend: aborting a run or a thread (complete messages kept, the
//! partial text of the step in flight stored once, marked aborted), the per-thread lease
//! (concurrent runs on one thread go in turn, or fail fast), messages sent to a thread
//! (delivered into the active run's next step, answered even when they arrive as it ends,
//! waking a new run, stored, or dropped) and subscriptions that see every run of the thread.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{
    Agent, AgentError, BusyThread, IfActive, IfIdle, RunOptions, ThreadError,
};
use kestrel_core::event::EventKind;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{
    FinishReason, ModelEvent, ModelRequest, ScriptStep, ScriptedModel, ScriptedResponse, Usage,
};
use kestrel_core::tool::{ToolError, create_tool};
use kestrel_memory::Memory;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{MessageStatus, Selection, StoredMessage};
use serde_json::{Value, json};

on_every_backend!(
    an_abort_keeps_complete_messages_and_the_partial_text_once,
    an_abort_inside_a_watching_tool_keeps_the_step_text,
    abort_thread_stops_the_running_and_the_waiting_runs,
    runs_on_one_thread_go_in_turn_or_fail_fast,
    a_message_sent_to_the_active_run_reaches_its_next_step,
    a_message_arriving_as_the_run_ends_gets_an_answer,
    an_idle_thread_wakes_and_subscribers_see_every_run,
    persist_and_discard_do_what_they_say,
    a_signal_reaches_the_model_as_a_system_message,
);

const THREAD: &str = "t1";
const RESOURCE: &str = "alice";

fn options() -> RunOptions {
    RunOptions::new().memory(THREAD, RESOURCE)
}

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

async fn thread(store: &Store) -> Vec<StoredMessage> {
    store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
}

fn texts(messages: &[StoredMessage]) -> Vec<(Role, String)> {
    messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect()
}

/// Streams `deltas` with `pause` before each.
fn slow_text(deltas: &[&str], pause: Duration) -> ScriptedResponse {
    let mut steps = Vec::new();
    for delta in deltas {
        steps.push(ScriptStep::Delay(pause));
        steps.push(ScriptStep::Event(ModelEvent::TextDelta {
            text: (*delta).to_owned(),
        }));
    }
    ScriptedResponse::steps(steps).finish(FinishReason::Stop, Usage::default())
}

/// The user messages of a request, in order.
fn user_texts(req: &ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text())
        .collect()
}

async fn an_abort_keeps_complete_messages_and_the_partial_text_once(store: Store) {
    let model = Arc::new(ScriptedModel::new().respond(slow_text(
        &["Kestrels ", "hover ", "into ", "the ", "wind."],
        Duration::from_millis(40),
    )));
    let agent = agent_on(&store, model);
    let mut stream = agent
        .stream("Tell me about kestrels")
        .options(options())
        .into_stream();
    let run_id = stream.run_id().to_owned();
    let mut kinds = Vec::new();
    while let Some(event) = stream.next().await {
        if matches!(event.kind, EventKind::TextDelta(_)) && !kinds.contains(&"text-delta") {
            assert_eq!(agent.run(&run_id).abort().await.unwrap(), 0);
        }
        kinds.push(event.kind.type_name());
    }
    assert_eq!(kinds.last(), Some(&"abort"), "{kinds:?}");
    let error = stream.result().await.unwrap_err();
    assert!(matches!(error, AgentError::Aborted { .. }), "{error:?}");
    assert!(
        agent.run(&run_id).abort().await.is_err(),
        "the run is no longer in progress"
    );

    let stored = thread(&store).await;
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert_eq!(stored[0].status, MessageStatus::Complete);
    assert_eq!(stored[0].to_message().text(), "Tell me about kestrels");
    assert_eq!(stored[1].status, MessageStatus::Aborted);
    assert_eq!(stored[1].role, Role::Assistant);
    let partial = stored[1].to_message().text();
    assert!(partial.starts_with("Kestrels "), "{partial:?}");
    assert!(
        partial.len() < "Kestrels hover into the wind.".len(),
        "{partial:?}"
    );
}

async fn an_abort_inside_a_watching_tool_keeps_the_step_text(store: Store) {
    let model = Arc::new(
        ScriptedModel::new().respond(
            ScriptedResponse::text("Let me check the feeder camera.")
                .and_tool_call("call-1", "watch", "{}"),
        ),
    );
    let watch = create_tool("watch")
        .description("Watches a camera until told to stop")
        .input_schema(json!({"type": "object"}))
        .execute(|_input: Value, ctx| async move {
            ctx.abort_signal().aborted().await;
            Err::<Value, _>(ToolError::new("stopped"))
        });
    let memory = Memory::builder()
        .storage(Arc::clone(&store))
        .build()
        .unwrap();
    let agent = Agent::builder("assistant")
        .model(model)
        .tool(watch)
        .memory(memory)
        .build()
        .unwrap();
    let mut stream = agent.stream("Any birds?").options(options()).into_stream();
    let run_id = stream.run_id().to_owned();
    while let Some(event) = stream.next().await {
        if matches!(event.kind, EventKind::ToolCall(_)) {
            // Let the tool start watching, then abort.
            let agent = agent.clone();
            let run_id = run_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                let _ = agent.run(&run_id).abort().await;
            });
        }
    }
    assert!(matches!(
        stream.result().await.unwrap_err(),
        AgentError::Aborted { .. }
    ));
    let stored = thread(&store).await;
    assert_eq!(
        texts(&stored),
        [
            (Role::User, "Any birds?".to_owned()),
            (
                Role::Assistant,
                "Let me check the feeder camera.".to_owned()
            ),
        ]
    );
    assert_eq!(stored[1].status, MessageStatus::Aborted);
    // No orphan tool call is stored.
    assert!(
        stored[1]
            .parts
            .iter()
            .all(|p| !matches!(p, Part::ToolCall { .. }))
    );
}

async fn abort_thread_stops_the_running_and_the_waiting_runs(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|_| {
        slow_text(&["a", "b", "c", "d"], Duration::from_millis(100))
    }));
    let agent = agent_on(&store, model);
    let first = agent.stream("first").options(options()).into_stream();
    let second = agent.stream("second").options(options()).into_stream();
    let (first_run, second_run) = (first.run_id().to_owned(), second.run_id().to_owned());
    let first = tokio::spawn(first.collect());
    let second = tokio::spawn(second.collect());
    // Wait until one holds the thread (the other waits for it).
    for _ in 0..100 {
        if agent.thread(RESOURCE, THREAD).active_run().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(agent.thread(RESOURCE, THREAD).active_run().is_some());
    assert_eq!(agent.thread(RESOURCE, THREAD).abort().await.unwrap(), 2);
    for (task, run_id) in [(first, first_run), (second, second_run)] {
        let (events, result) = task.await.unwrap();
        assert!(
            matches!(result, Err(AgentError::Aborted { .. })),
            "{run_id}: {result:?}"
        );
        assert_eq!(events.last().map(|e| e.kind.type_name()), Some("abort"));
    }
    assert_eq!(agent.thread(RESOURCE, THREAD).active_run(), None);
}

async fn runs_on_one_thread_go_in_turn_or_fail_fast(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let asked = user_texts(req).last().cloned().unwrap_or_default();
        slow_text(&["answer to ", &asked], Duration::from_millis(50))
    }));
    let agent = agent_on(&store, model);
    // Two tabs at once.
    let tab1 = agent.generate("question one").options(options());
    let tab2 = agent.generate("question two").options(options());
    let (one, two) = tokio::join!(tab1, tab2);
    let (one, two) = (one.unwrap(), two.unwrap());
    let stored = thread(&store).await;
    let order: Vec<(Role, String)> = texts(&stored);
    let expected = |first: &str, second: &str| {
        vec![
            (Role::User, first.to_owned()),
            (Role::Assistant, format!("answer to {first}")),
            (Role::User, second.to_owned()),
            (Role::Assistant, format!("answer to {second}")),
        ]
    };
    assert!(
        order == expected("question one", "question two")
            || order == expected("question two", "question one"),
        "{order:#?}"
    );
    assert_ne!(one.run_id, two.run_id);

    // Fail fast: while a run holds the thread, another asking not to wait fails at once.
    let holder = agent
        .stream("question three")
        .options(options())
        .into_stream();
    let holder_run = holder.run_id().to_owned();
    let holder = tokio::spawn(holder.collect());
    for _ in 0..100 {
        if agent.thread(RESOURCE, THREAD).active_run().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let busy = agent
        .generate("question four")
        .options(options().on_busy_thread(BusyThread::Fail))
        .await
        .unwrap_err();
    let AgentError::ThreadBusy { active_run_id, .. } = &busy else {
        panic!("{busy:?}")
    };
    assert_eq!(active_run_id, &holder_run);
    holder.await.unwrap().1.unwrap();
    let stored = texts(&thread(&store).await);
    assert!(
        !stored
            .iter()
            .any(|(_, text)| text.contains("question four")),
        "a run that failed fast stored nothing: {stored:#?}"
    );
}

async fn a_message_sent_to_the_active_run_reaches_its_next_step(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().unwrap();
        if last.role == Role::User && last.text() == "Email Bob the report" {
            ScriptedResponse::tool_call("call-1", "slow_send", json!({}))
        } else {
            ScriptedResponse::text(format!("Saw: {}", user_texts(req).join(" / ")))
        }
    }));
    let slow_send = create_tool("slow_send")
        .description("Sends slowly")
        .input_schema(json!({"type": "object"}))
        .execute(|_input: Value, _ctx| async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok("sent")
        });
    let memory = Memory::builder()
        .storage(Arc::clone(&store))
        .build()
        .unwrap();
    let agent = Agent::builder("assistant")
        .model(model)
        .tool(slow_send)
        .memory(memory)
        .build()
        .unwrap();
    let mut stream = agent
        .stream("Email Bob the report")
        .options(options())
        .into_stream();
    let run_id = stream.run_id().to_owned();
    let mut sent = None;
    while let Some(event) = stream.next().await {
        if matches!(event.kind, EventKind::ToolCall(_)) && sent.is_none() {
            sent = Some(
                agent
                    .thread(RESOURCE, THREAD)
                    .send("Also copy Carol")
                    .await
                    .unwrap(),
            );
        }
    }
    let result = stream.result().await.unwrap();
    let sent = sent.unwrap();
    assert!(sent.accepted);
    assert_eq!(sent.run_id.as_deref(), Some(run_id.as_str()));
    assert!(sent.stream.is_none());
    assert_eq!(result.text, "Saw: Email Bob the report / Also copy Carol");
    let stored = texts(&thread(&store).await);
    let roles: Vec<Role> = stored.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::User,
            Role::Assistant
        ],
        "{stored:#?}"
    );
    assert_eq!(stored[3].1, "Also copy Carol");
}

async fn a_message_arriving_as_the_run_ends_gets_an_answer(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let users = user_texts(req);
        slow_text(
            &["Re: ", users.last().map(String::as_str).unwrap_or("")],
            Duration::from_millis(60),
        )
    }));
    let agent = agent_on(&store, model);
    let mut stream = agent.stream("first").options(options()).into_stream();
    let mut delivered = false;
    while let Some(event) = stream.next().await {
        // While the final answer is still streaming.
        if matches!(event.kind, EventKind::TextDelta(_)) && !delivered {
            delivered = true;
            let sent = agent.thread(RESOURCE, THREAD).send("second").await.unwrap();
            assert_eq!(sent.run_id.as_deref(), Some(stream.run_id()));
        }
    }
    let result = stream.result().await.unwrap();
    assert_eq!(
        result.steps.len(),
        2,
        "another step answered the late message"
    );
    assert_eq!(result.text, "Re: second");
    assert_eq!(
        texts(&thread(&store).await),
        [
            (Role::User, "first".to_owned()),
            (Role::Assistant, "Re: first".to_owned()),
            (Role::User, "second".to_owned()),
            (Role::Assistant, "Re: second".to_owned()),
        ]
    );
}

async fn an_idle_thread_wakes_and_subscribers_see_every_run(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        ScriptedResponse::text(format!("Re: {}", user_texts(req).last().unwrap()))
    }));
    let agent = agent_on(&store, model);
    let mut subscription = agent.thread(RESOURCE, THREAD).subscribe().await.unwrap();
    assert_eq!(subscription.active_run_id(), None);
    let mut woken = Vec::new();
    for text in ["hello", "again"] {
        let sent = agent.thread(RESOURCE, THREAD).send(text).await.unwrap();
        assert!(sent.accepted);
        let result = sent.stream.unwrap().result().await.unwrap();
        assert_eq!(Some(result.run_id.clone()), sent.run_id);
        woken.push(result.run_id);
    }
    // The subscription saw both runs, each event tagged with its run.
    let mut finished = Vec::new();
    while finished.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(5), subscription.next())
            .await
            .unwrap()
            .unwrap();
        if let EventKind::Finish(payload) = &event.kind {
            finished.push((event.run_id.to_string(), payload.output.text.clone()));
        }
    }
    assert_eq!(
        finished,
        [
            (woken[0].clone(), "Re: hello".to_owned()),
            (woken[1].clone(), "Re: again".to_owned()),
        ]
    );
    subscription.unsubscribe();
    assert_eq!(thread(&store).await.len(), 4);
}

async fn persist_and_discard_do_what_they_say(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("ok")));
    let agent = agent_on(&store, model.clone());
    let stored = agent
        .thread(RESOURCE, THREAD)
        .send("note for later")
        .if_idle(IfIdle::Persist)
        .await
        .unwrap();
    assert!(stored.accepted && stored.run_id.is_none());
    let dropped = agent
        .thread(RESOURCE, THREAD)
        .send("never mind")
        .if_idle(IfIdle::Discard)
        .await
        .unwrap();
    assert!(!dropped.accepted);
    assert_eq!(model.calls(), 0, "no run was started");
    assert_eq!(
        texts(&thread(&store).await),
        [(Role::User, "note for later".to_owned())]
    );
    // While a run is active: persist stores without touching the run, discard drops.
    let slow = Arc::new(ScriptedModel::from_fn(|_| {
        slow_text(&["thinking ", "hard"], Duration::from_millis(60))
    }));
    let busy_agent = agent_on(&store, slow);
    let mut stream = busy_agent
        .stream("question")
        .options(options())
        .into_stream();
    let mut outcomes = None;
    while let Some(event) = stream.next().await {
        if matches!(event.kind, EventKind::TextDelta(_)) && outcomes.is_none() {
            let persisted = busy_agent
                .thread(RESOURCE, THREAD)
                .send("side note")
                .if_active(IfActive::Persist)
                .await
                .unwrap();
            let discarded = busy_agent
                .thread(RESOURCE, THREAD)
                .send("ignored")
                .if_active(IfActive::Discard)
                .await
                .unwrap();
            outcomes = Some((persisted, discarded));
        }
    }
    let result = stream.result().await.unwrap();
    assert_eq!(result.steps.len(), 1, "nothing was delivered to the run");
    let (persisted, discarded) = outcomes.unwrap();
    assert!(persisted.accepted && !discarded.accepted);
    assert_eq!(persisted.run_id.as_deref(), Some(result.run_id.as_str()));
    let all = texts(&thread(&store).await);
    assert!(all.iter().any(|(_, t)| t == "side note"), "{all:#?}");
    assert!(!all.iter().any(|(_, t)| t == "ignored"), "{all:#?}");

    // Storing needs memory.
    let forgetful = Agent::builder("forgetful")
        .model(Arc::new(ScriptedModel::new()))
        .build()
        .unwrap();
    let error = forgetful
        .thread(RESOURCE, THREAD)
        .send("x")
        .if_idle(IfIdle::Persist)
        .await
        .unwrap_err();
    assert!(matches!(error, ThreadError::NoMemory { .. }), "{error:?}");
}

async fn a_signal_reaches_the_model_as_a_system_message(store: Store) {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let systems: Vec<String> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.text())
            .collect();
        ScriptedResponse::text(format!("system: {}", systems.join(" / ")))
    }));
    let agent = agent_on(&store, model);
    let sent = agent
        .thread(RESOURCE, THREAD)
        .signal("<system-reminder>The user is on mobile.</system-reminder>")
        .await
        .unwrap();
    let result = sent.stream.unwrap().result().await.unwrap();
    assert_eq!(
        result.text,
        "system: <system-reminder>The user is on mobile.</system-reminder>"
    );
    let stored = thread(&store).await;
    assert_eq!(stored[0].role, Role::System);
}
