//! Runs that stop for a person survive a restart: a run stops (approval, suspension), the whole
//! `Kestrel` instance and its store are dropped, a new instance is built on the same SQLite file
//! or PostgreSQL schema, finds the run, and continues it: same run id, the tool runs once, and
//! the thread holds every message exactly once, in order, with the streamed ids.
//! Decisions racing on one call, from two instances on one database, have one winner.
//! A process that stops mid-delegation loses nothing: a new instance resumes the parent, which
//! finds its sub-agent's run in the store, continues it from its last finished step, then
//! itself.
//! PostgreSQL runs when `KESTREL_TEST_POSTGRES_URL` is set (else it says it is skipped).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kestrel_core::agent::{Agent, RunControlError, Waiting};
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{FinishReason, ScriptedModel, ScriptedResponse};
use kestrel_core::store::{IntoStores, RunPhase, SuspendedRunsQuery};
use kestrel_core::tool::{FnTool, create_tool};
use kestrel_storage::testing::{drop_schema, postgres_url, test_schema};
use kestrel_storage::{PgOptions, PostgresStorage, Selection, SqliteStorage, Storage};
use serde_json::{Value, json};

use super::fixture::Instance;

const THREAD: &str = "thread-1";
const RESOURCE: &str = "alice";

/// Where the durable state lives between the two instances.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres { url: String, schema: String },
}

/// An open store and how to close it.
enum Open {
    Sqlite(SqliteStorage),
    Postgres(PostgresStorage),
}

impl Open {
    fn storage(&self) -> Arc<dyn Storage> {
        match self {
            Open::Sqlite(s) => Arc::new(s.clone()),
            Open::Postgres(s) => Arc::new(s.clone()),
        }
    }

    async fn close(self) {
        match self {
            Open::Sqlite(s) => s.close().await,
            Open::Postgres(s) => s.close().await,
        }
    }
}

impl Backend {
    fn sqlite() -> Option<Self> {
        Some(Backend::Sqlite(tempfile::tempdir().unwrap()))
    }

    fn postgres() -> Option<Self> {
        Some(Backend::Postgres {
            url: postgres_url()?,
            schema: test_schema(),
        })
    }

    async fn open(&self) -> Open {
        match self {
            Backend::Sqlite(dir) => Open::Sqlite(
                SqliteStorage::open(dir.path().join("kestrel.db"))
                    .await
                    .unwrap(),
            ),
            Backend::Postgres { url, schema } => Open::Postgres(
                PostgresStorage::connect(url, PgOptions::schema(schema.clone()))
                    .await
                    .unwrap(),
            ),
        }
    }

    async fn teardown(self) {
        if let Backend::Postgres { url, schema } = self {
            drop_schema(&url, &schema).await;
        }
    }
}

/// The model calls `tool` once, then answers with the tool's result.
fn model(tool: &'static str, args: Value) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req| {
        let last = req.messages.last().unwrap();
        if last.role == Role::Tool {
            let Some(Part::ToolResult { result, .. }) = last.parts.first() else {
                panic!("a tool message without a result")
            };
            ScriptedResponse::text(format!("done: {}", result.as_str().unwrap_or("?")))
        } else {
            ScriptedResponse::tool_call("call-1", tool, args.clone())
        }
    }))
}

/// A `Kestrel` instance (a "process") on `store`: the agent with memory; the storage, given
/// once, holds both the instance's runs and the memory's threads.
fn instance(store: Arc<dyn Storage>, tool: FnTool, tool_name: &'static str) -> Kestrel {
    let agent = Agent::builder("assistant")
        .model(model(tool_name, json!({"to": "bob@example.com"})))
        .tool(tool);
    Instance::on(&store).agent(agent).build()
}

fn send_email(runs: Arc<AtomicUsize>) -> FnTool {
    create_tool("send_email")
        .description("Sends an email")
        .require_approval(true)
        .input_schema(json!({"type": "object", "properties": {"to": {"type": "string"}}}))
        .execute(move |input: Value, _ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(format!("sent to {}", input["to"].as_str().unwrap_or("?")))
            }
        })
}

fn ask_nights(entered: Arc<AtomicUsize>) -> FnTool {
    create_tool("book")
        .description("Books a hotel")
        .input_schema(json!({"type": "object"}))
        .resume_schema(json!({"type": "object", "required": ["nights"]}))
        .execute(move |_input: Value, ctx| {
            let entered = entered.clone();
            async move {
                entered.fetch_add(1, Ordering::SeqCst);
                match ctx.resume_data() {
                    None => Err(ctx.suspend(json!({"question": "How many nights?"}))),
                    Some(data) => Ok(format!("booked for {} nights", data["nights"])),
                }
            }
        })
}

/// The thread's messages: each id once, in order, as [role, text or tool parts].
async fn check_thread(store: &Arc<dyn Storage>, streamed_ids: &[String], final_text: &str) {
    let all = store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages;
    let roles: Vec<Role> = all.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
        "{all:#?}"
    );
    let mut ids: Vec<&str> = all.iter().map(|m| m.id.as_str()).collect();
    let stored_ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every message exactly once");
    for id in streamed_ids {
        assert!(stored_ids.contains(id), "streamed id {id} is stored");
    }
    assert_eq!(all[3].to_message().text(), final_text);
    let seqs: Vec<i64> = all.iter().map(|m| m.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

/// The assistant message ids the stream announced (`start` / `step-start`).
fn message_ids(events: &[kestrel_core::event::Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::StepStart(p) => Some(p.message_id.clone()),
            _ => None,
        })
        .collect()
}

async fn approval_survives_a_restart(backend: Backend) {
    let runs = Arc::new(AtomicUsize::new(0));
    // The first process: the run stops for approval.
    let first = backend.open().await;
    let kestrel = instance(first.storage(), send_email(runs.clone()), "send_email");
    let agent = kestrel.agent("assistant").unwrap();
    let (events, stopped) = agent
        .stream("email bob")
        .memory(THREAD, RESOURCE)
        .into_stream()
        .collect()
        .await;
    let stopped = stopped.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let EventKind::ToolCallApproval(approval) = &events.last().unwrap().kind else {
        panic!("the run did not stop for approval")
    };
    let fingerprint = approval.fingerprint.clone();
    let mut streamed = message_ids(&events);
    drop(kestrel);
    first.close().await;

    // The second process: a new instance on the same database finds the run and approves it.
    let second = backend.open().await;
    let store = second.storage();
    let kestrel = instance(Arc::clone(&store), send_email(runs.clone()), "send_email");
    let agent = kestrel.agent("assistant").unwrap();
    let waiting = agent
        .list_suspended_runs(SuspendedRunsQuery {
            thread_id: Some(THREAD.into()),
            resource_id: Some(RESOURCE.into()),
            ..SuspendedRunsQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(waiting.total, 1);
    let found = &waiting.runs[0];
    assert_eq!(found.run_id, stopped.run_id);
    assert_eq!(found.tool_calls[0].tool_call_id, "call-1");
    assert_eq!(found.tool_calls[0].waiting, Waiting::Approval);
    assert_eq!(found.tool_calls[0].args, json!({"to": "bob@example.com"}));

    let run = agent.run(&stopped.run_id).resource(RESOURCE);
    let stream = run
        .approve("call-1")
        .fingerprint(&fingerprint)
        .stream()
        .await
        .unwrap();
    let (events, done) = stream.collect().await;
    let done = done.unwrap();
    streamed.extend(message_ids(&events));
    assert_eq!(done.run_id, stopped.run_id);
    assert_eq!(done.text, "done: sent to bob@example.com");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    check_thread(&store, &streamed, "done: sent to bob@example.com").await;
    // Decided: no longer listed, and a second approval is refused.
    let waiting = agent
        .list_suspended_runs(SuspendedRunsQuery::default())
        .await
        .unwrap();
    assert_eq!(waiting.total, 0);
    assert!(
        run.approve("call-1")
            .fingerprint(&fingerprint)
            .stream()
            .await
            .is_err()
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    drop(kestrel);
    second.close().await;
    backend.teardown().await;
}

async fn suspension_survives_a_restart(backend: Backend) {
    let entered = Arc::new(AtomicUsize::new(0));
    let first = backend.open().await;
    let kestrel = instance(first.storage(), ask_nights(entered.clone()), "book");
    let agent = kestrel.agent("assistant").unwrap();
    let (events, stopped) = agent
        .stream("book a hotel")
        .memory(THREAD, RESOURCE)
        .into_stream()
        .collect()
        .await;
    let stopped = stopped.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let mut streamed = message_ids(&events);
    drop(kestrel);
    first.close().await;

    let second = backend.open().await;
    let store = second.storage();
    let kestrel = instance(Arc::clone(&store), ask_nights(entered.clone()), "book");
    let agent = kestrel.agent("assistant").unwrap();
    let run = agent.run(&stopped.run_id);
    // Data outside the resume schema is refused; the run stays suspended.
    assert!(
        run.resume("call-1", json!({"weeks": 1}))
            .stream()
            .await
            .is_err()
    );
    let (events, done) = run
        .resume("call-1", json!({"nights": 2}))
        .stream()
        .await
        .unwrap()
        .collect()
        .await;
    let done = done.unwrap();
    streamed.extend(message_ids(&events));
    assert_eq!(done.run_id, stopped.run_id);
    assert_eq!(done.text, "done: booked for 2 nights");
    assert_eq!(entered.load(Ordering::SeqCst), 2);
    check_thread(&store, &streamed, "done: booked for 2 nights").await;
    drop(kestrel);
    second.close().await;
    backend.teardown().await;
}

/// Eight decisions race on one call, across two instances on the same database: exactly one
/// wins, the tool runs at most once, and the losers change nothing.
async fn racing_decisions_have_one_winner(backend: Backend) {
    let runs = Arc::new(AtomicUsize::new(0));
    let open = backend.open().await;
    let first = instance(open.storage(), send_email(runs.clone()), "send_email");
    let second = instance(open.storage(), send_email(runs.clone()), "send_email");
    let stopped = first
        .agent("assistant")
        .unwrap()
        .generate("email bob")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let kestrel = if i % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            let run_id = stopped.run_id.clone();
            tokio::spawn(async move {
                let run = kestrel.agent("assistant").unwrap().run(run_id);
                if i % 4 < 2 {
                    run.approve("call-1").await
                } else {
                    run.decline("call-1", None).await
                }
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(result) => winners.push(result),
            Err(
                RunControlError::Conflict { .. }
                | RunControlError::NotSuspended { .. }
                | RunControlError::CallNotWaiting { .. },
            ) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let approved = !winners[0].tool_results[0].is_error;
    assert_eq!(runs.load(Ordering::SeqCst), usize::from(approved));
    let stored = open
        .storage()
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages;
    assert_eq!(stored.len(), 4, "the winner's messages, once");
    drop((first, second));
    open.close().await;
    backend.teardown().await;
}

/// A worker that takes `STEPS` slow steps (a `work` call each, counted in `worked`), then
/// answers; a supervisor that delegates to it once and answers with its text. Both keep
/// memory and their runs in `store`.
fn delegating_instance(
    store: Arc<dyn Storage>,
    worked: Arc<AtomicUsize>,
) -> (Kestrel, Arc<ScriptedModel>) {
    const STEPS: usize = 4;
    let worker_model = Arc::new(ScriptedModel::from_fn(|req| {
        let done = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        if done < STEPS {
            ScriptedResponse::tool_call(format!("w{done}"), "work", json!({}))
                .with_delay(std::time::Duration::from_millis(60))
        } else {
            ScriptedResponse::text(format!("worked {done} steps"))
        }
    }));
    let work = create_tool("work")
        .description("Does one unit of work")
        .input_schema(json!({"type": "object"}))
        .execute(move |_input: Value, _ctx| {
            let worked = worked.clone();
            async move {
                worked.fetch_add(1, Ordering::SeqCst);
                Ok("ok")
            }
        });
    let instance = Instance::on(&store);
    let worker = Agent::builder("worker")
        .description("Does long work")
        .model(worker_model.clone())
        .tool(work)
        .memory(instance.memory())
        .max_steps(10)
        .build()
        .unwrap();
    let supervisor = Agent::builder("supervisor")
        .model(model("agent-worker", json!({"prompt": "Do the work"})))
        .agents([worker]);
    (instance.agent(supervisor).build(), worker_model)
}

async fn a_delegation_survives_a_restart(backend: Backend) {
    let worked = Arc::new(AtomicUsize::new(0));
    let run_id = "run-delegating";
    // The first process delegates, and stops (a crash) while the sub-agent is in its second
    // step: the model call is in flight, nothing of that step has happened.
    let first = backend.open().await;
    let (kestrel, worker_model) = delegating_instance(first.storage(), worked.clone());
    let agent = kestrel.agent("supervisor").unwrap().clone();
    let task = tokio::spawn(async move {
        agent
            .generate("Get the work done")
            .run_id(run_id)
            .memory(THREAD, RESOURCE)
            .await
    });
    while worker_model.calls() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(worked.load(Ordering::SeqCst), 1);
    drop(kestrel);
    first.close().await;

    // The second process finds the parent waiting for its sub-agent, not for a person.
    let second = backend.open().await;
    let store = second.storage();
    let runs = Arc::clone(&store).into_stores().runs;
    let parent = runs.load(run_id).await.unwrap().unwrap();
    assert_eq!(parent.phase, RunPhase::WaitingForSubtask);
    let sub_runs = parent.state.active_sub_runs();
    assert_eq!(sub_runs.len(), 1);
    let child = runs.load(&sub_runs[0].run_id).await.unwrap().unwrap();
    assert_eq!(
        child.state.steps.len(),
        1,
        "the sub-agent's finished step is stored"
    );
    assert_eq!(child.state.delegated_by.as_ref().unwrap().run_id, run_id);
    let (kestrel, worker_model) = delegating_instance(Arc::clone(&store), worked.clone());
    let agent = kestrel.agent("supervisor").unwrap();
    let listed = agent
        .list_suspended_runs(SuspendedRunsQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 0, "it waits for no person");
    // Someone else's resource cannot resume it.
    let foreign = agent
        .run(run_id)
        .resource("mallory")
        .proceed()
        .stream()
        .await;
    assert!(
        matches!(foreign, Err(RunControlError::RunNotFound { .. })),
        "{foreign:?}"
    );

    let done = agent
        .run(run_id)
        .resource(RESOURCE)
        .proceed()
        .await
        .unwrap();
    assert_eq!(done.run_id, run_id);
    assert_eq!(done.text, "done: worked 4 steps");
    // The sub-agent went on from its stored step: three more steps and its answer, and the
    // work of each step was done once.
    assert_eq!(worker_model.calls(), 4);
    assert_eq!(worked.load(Ordering::SeqCst), 4);
    for id in [run_id, sub_runs[0].run_id.as_str()] {
        assert_eq!(
            runs.load(id).await.unwrap().unwrap().phase,
            RunPhase::Completed
        );
    }
    // The parent's thread: the request, the delegation call, its result, the answer; once.
    let parent_thread: Vec<(Role, String)> = store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect();
    let roles: Vec<Role> = parent_thread.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
        "{parent_thread:#?}"
    );
    // The sub-agent's own thread: its prompt, each step once, its answer.
    let thread = child.state.settings.thread_id.clone().unwrap();
    let resource = child.state.settings.resource_id.clone().unwrap();
    let sub_thread = store
        .list_messages(&thread, Some(&resource), Selection::all())
        .await
        .unwrap()
        .messages;
    let mut ids: Vec<&str> = sub_thread.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(sub_thread.len(), 1 + 4 * 2 + 1, "{sub_thread:#?}");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), sub_thread.len(), "every message once");
    drop(kestrel);
    second.close().await;
    backend.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_delegation_survives_a_restart() {
    a_delegation_survives_a_restart(Backend::sqlite().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_delegation_survives_a_restart() {
    if let Some(backend) = Backend::postgres() {
        a_delegation_survives_a_restart(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_racing_decisions_have_one_winner() {
    racing_decisions_have_one_winner(Backend::sqlite().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_racing_decisions_have_one_winner() {
    if let Some(backend) = Backend::postgres() {
        racing_decisions_have_one_winner(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_approval_survives_a_restart() {
    approval_survives_a_restart(Backend::sqlite().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_suspension_survives_a_restart() {
    suspension_survives_a_restart(Backend::sqlite().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_approval_survives_a_restart() {
    if let Some(backend) = Backend::postgres() {
        approval_survives_a_restart(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_suspension_survives_a_restart() {
    if let Some(backend) = Backend::postgres() {
        suspension_survives_a_restart(backend).await;
    }
}
