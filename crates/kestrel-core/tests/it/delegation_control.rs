//! People in the loop of delegations: an approval or a suspension inside a sub-agent, at any
//! depth, stops the parent too, surfaces on the parent's stream, and is decided with the
//! parent's run id; the sub-agent's run continues, then the parent's. Pause, resume and abort
//! by id reach the active sub-agent. Decisions straight on a delegated run are refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kestrel_core::agent::{Agent, AgentError, RunControlError, Waiting};
use kestrel_core::event::{Event, EventKind};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{FinishReason, ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::store::{InMemoryRunStore, RunPhase, SharedRunStore};
use kestrel_core::tool::{FnTool, create_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Table {
    table: String,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// The text of the last tool message's results, if the model reads one last.
fn last_results(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last()?;
    (last.role == Role::Tool).then(|| {
        last.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult {
                    result, is_error, ..
                } => Some(format!(
                    "{}{}",
                    if *is_error { "error: " } else { "" },
                    result
                        .as_str()
                        .map_or_else(|| result.to_string(), str::to_owned)
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" | ")
    })
}

/// A model that calls `tool` once, then answers `<prefix>: <the results>`.
fn calls_then_answers(
    id: &'static str,
    tool: &'static str,
    args: Value,
    prefix: &'static str,
) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |req| match last_results(req) {
        Some(results) => ScriptedResponse::text(format!("{prefix}: {results}")),
        None => ScriptedResponse::tool_call(id, tool, args.clone()),
    }))
}

fn delete_records(runs: Arc<AtomicUsize>) -> FnTool {
    create_tool("delete_records")
        .description("Deletes customer records")
        .require_approval(true)
        .execute(move |input: Table, _ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(format!("deleted {:?}", input.table))
            }
        })
}

/// A parent that delegates to `child` once and answers with what it got.
fn parent_of(child: Agent, store: &SharedRunStore) -> (Agent, Arc<ScriptedModel>) {
    let id = child.id().to_owned();
    let tool: &'static str = Box::leak(format!("agent-{id}").into_boxed_str());
    let model = calls_then_answers(
        "d1",
        tool,
        json!({"prompt": "Clean up the test data"}),
        "parent",
    );
    let agent = Agent::builder("supervisor")
        .model(model.clone())
        .agents([child])
        .run_store(store.clone())
        .build()
        .unwrap();
    (agent, model)
}

fn store() -> SharedRunStore {
    Arc::new(InMemoryRunStore::new())
}

async fn collect(
    mut stream: kestrel_core::agent::AgentStream,
) -> (
    Vec<Event>,
    Result<kestrel_core::agent::GenerateResult, AgentError>,
) {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    (events, stream.result().await)
}

#[tokio::test]
async fn an_approval_inside_a_sub_agent_is_decided_through_the_parent() {
    let deletions = Arc::new(AtomicUsize::new(0));
    let cleaner_model =
        calls_then_answers("c1", "delete_records", json!({"table": "test"}), "cleaned");
    let store = store();
    // The sub-agent shares the store (as agents of one `Kestrel` instance do), so its run
    // can be found straight, and refused.
    let cleaner = Agent::builder("cleaner")
        .description("Cleans up data")
        .model(cleaner_model.clone())
        .tool(delete_records(deletions.clone()))
        .run_store(store.clone())
        .build()
        .unwrap();
    let (supervisor, parent_model) = parent_of(cleaner, &store);

    let (events, result) = collect(supervisor.stream("Tidy up").into_stream()).await;
    let result = result.unwrap();
    assert_eq!(result.finish_reason, FinishReason::Suspended);
    assert_eq!(
        deletions.load(Ordering::SeqCst),
        0,
        "nothing runs before the approval"
    );
    // The sub-agent's call is what the parent waits on, with the delegation in its path.
    assert_eq!(result.waiting.len(), 1);
    let waiting = &result.waiting[0];
    assert_eq!(waiting.tool_call_id, "c1");
    assert_eq!(waiting.tool_name, "delete_records");
    assert_eq!(waiting.waiting, Waiting::Approval);
    assert_eq!(waiting.via.len(), 1);
    assert_eq!(waiting.via[0].tool_call_id, "d1");
    assert_eq!(waiting.via[0].agent_id, "cleaner");
    // On the parent's stream: a top-level approval request with the parent's run id.
    let approval = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallApproval(p) => Some((e.run_id.to_string(), p.clone())),
            _ => None,
        })
        .expect("a tool-call-approval on the parent's stream");
    assert_eq!(approval.0, result.run_id);
    assert_eq!(approval.1.tool_call_id, "c1");
    assert_eq!(approval.1.via, waiting.via);
    let json = Event::agent(
        result.run_id.as_str().into(),
        EventKind::ToolCallApproval(approval.1.clone()),
    )
    .to_json();
    assert!(
        json.contains(r#""via":[{"toolCallId":"d1","agentId":"cleaner""#),
        "{json}"
    );
    // The parent is listed as suspended on that call.
    let listed = supervisor
        .list_suspended_runs(Default::default())
        .await
        .unwrap();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].tool_calls[0].tool_call_id, "c1");

    // Deciding straight on the sub-agent's run is refused: it answers to the parent.
    let child_run = waiting.via[0].run_id.clone();
    let cleaner = supervisor.sub_agent("cleaner").unwrap().clone();
    let direct = cleaner.run(&child_run).approve("c1").stream().await;
    assert!(
        matches!(direct, Err(RunControlError::Delegated { .. })),
        "{direct:?}"
    );
    // A stale fingerprint is refused through the parent too.
    let stale = supervisor
        .run(&result.run_id)
        .approve("c1")
        .fingerprint("nope")
        .stream()
        .await;
    assert!(
        matches!(stale, Err(RunControlError::FingerprintMismatch { .. })),
        "{stale:?}"
    );

    let stream = supervisor
        .run(&result.run_id)
        .approve("c1")
        .fingerprint(&waiting.fingerprint)
        .stream()
        .await
        .unwrap();
    let (events, done) = collect(stream).await;
    let done = done.unwrap();
    assert_eq!(done.run_id, result.run_id, "the same run goes on");
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(deletions.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(done.text, r#"parent: cleaned: deleted "test""#);
    // The sub-agent's continued run streams nested under the delegation's call.
    let nested_result = events.iter().any(|e| match &e.kind {
        EventKind::ToolOutput(p) => p.tool_call_id == "d1" && p.output["type"] == "tool-result",
        _ => false,
    });
    assert!(
        nested_result,
        "the sub-agent's tool result streams nested under d1"
    );
    assert_eq!(cleaner_model.calls(), 2);
    assert_eq!(parent_model.calls(), 2);
    // Both snapshots are closed.
    assert_eq!(
        store.load(&result.run_id).await.unwrap().unwrap().phase,
        RunPhase::Completed
    );
    assert_eq!(
        store.load(&child_run).await.unwrap().unwrap().phase,
        RunPhase::Completed
    );
    // A second decision finds nothing to decide.
    let again = supervisor.run(&result.run_id).approve("c1").stream().await;
    assert!(
        matches!(again, Err(RunControlError::NotSuspended { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_decline_inside_a_sub_agent_reaches_its_model() {
    let deletions = Arc::new(AtomicUsize::new(0));
    let cleaner = Agent::builder("cleaner")
        .model(calls_then_answers(
            "c1",
            "delete_records",
            json!({"table": "t"}),
            "cleaner",
        ))
        .tool(delete_records(deletions.clone()))
        .build()
        .unwrap();
    let store = store();
    let (supervisor, _) = parent_of(cleaner, &store);
    let stopped = supervisor.generate("Tidy up").await.unwrap();
    let done = supervisor
        .run(&stopped.run_id)
        .decline("c1", Some("not on a Friday".into()))
        .await
        .unwrap();
    assert_eq!(deletions.load(Ordering::SeqCst), 0);
    assert_eq!(done.text, "parent: cleaner: error: not on a Friday");
}

/// A tool that asks a person for a value, validated by its resume schema.
fn ask_budget() -> FnTool {
    create_tool("ask_budget")
        .description("Asks the user for the budget")
        .resume_schema(json!({
            "type": "object",
            "properties": {"budget": {"type": "integer"}},
            "required": ["budget"]
        }))
        .execute(|_input: Nothing, ctx| async move {
            match ctx.resume_data() {
                Some(data) => Ok(format!("budget {}", data["budget"])),
                None => Err(ctx.suspend(json!({"question": "What is the budget?"}))),
            }
        })
}

#[tokio::test]
async fn a_suspension_two_delegations_deep_is_resumed_through_the_top_run() {
    let planner = Agent::builder("planner")
        .description("Plans with a budget")
        .model(calls_then_answers("p1", "ask_budget", json!({}), "plan"))
        .tool(ask_budget())
        .build()
        .unwrap();
    let manager = Agent::builder("manager")
        .description("Manages planning")
        .model(calls_then_answers(
            "m1",
            "agent-planner",
            json!({"prompt": "Plan it"}),
            "managed",
        ))
        .agents([planner])
        .build()
        .unwrap();
    let store = store();
    let (supervisor, _) = parent_of(manager, &store);

    let (events, stopped) = collect(supervisor.stream("Plan the trip").into_stream()).await;
    let stopped = stopped.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let waiting = &stopped.waiting[0];
    assert_eq!(waiting.tool_call_id, "p1");
    assert!(
        matches!(&waiting.waiting, Waiting::Resume { payload } if payload["question"] == "What is the budget?")
    );
    let path: Vec<&str> = waiting.via.iter().map(|h| h.agent_id.as_str()).collect();
    assert_eq!(path, ["manager", "planner"]);
    let suspended = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallSuspended(p) if e.run_id.as_ref() == stopped.run_id => {
                Some(p.clone())
            }
            _ => None,
        })
        .expect("a top-level tool-call-suspended");
    assert_eq!(suspended.tool_call_id, "p1");
    assert!(
        suspended.resume_schema.contains("budget"),
        "the grandchild tool's schema: {}",
        suspended.resume_schema
    );

    // Data that does not match the grandchild tool's schema is refused, and nothing changes.
    let bad = supervisor
        .run(&stopped.run_id)
        .resume("p1", json!({"budget": "lots"}))
        .await;
    assert!(
        matches!(bad, Err(RunControlError::InvalidResumeData { .. })),
        "{bad:?}"
    );
    let done = supervisor
        .run(&stopped.run_id)
        .resume("p1", json!({"budget": 900}))
        .await
        .unwrap();
    assert_eq!(done.text, "parent: managed: plan: budget 900");
    for hop in &waiting.via {
        let run = store.load(&hop.run_id).await.unwrap().unwrap();
        assert_eq!(run.phase, RunPhase::Completed, "{}", hop.agent_id);
    }
}

#[tokio::test]
async fn an_unknown_call_lists_what_the_parent_waits_on() {
    let deletions = Arc::new(AtomicUsize::new(0));
    let cleaner = Agent::builder("cleaner")
        .model(calls_then_answers(
            "c1",
            "delete_records",
            json!({"table": "t"}),
            "cleaner",
        ))
        .tool(delete_records(deletions))
        .build()
        .unwrap();
    let store = store();
    let (supervisor, _) = parent_of(cleaner, &store);
    let stopped = supervisor.generate("Tidy up").await.unwrap();
    let err = supervisor
        .run(&stopped.run_id)
        .approve("nope")
        .stream()
        .await
        .unwrap_err();
    match err {
        RunControlError::CallNotWaiting { waiting, .. } => assert_eq!(waiting, ["c1"]),
        other => panic!("{other:?}"),
    }
}

/// A sub-agent that works in `steps` slow steps (a tool call each, then an answer).
fn slow_worker(steps: usize, store: &SharedRunStore) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::from_fn(move |req| {
        let done = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        if done < steps {
            ScriptedResponse::tool_call(format!("w{done}"), "work", json!({}))
                .with_delay(Duration::from_millis(40))
        } else {
            ScriptedResponse::text(format!("worked {done} steps"))
        }
    }));
    let work = create_tool("work")
        .description("Does one unit of work")
        .execute(|_: Nothing, _ctx| async { Ok("ok") });
    let agent = Agent::builder("worker")
        .description("Works")
        .model(model.clone())
        .tool(work)
        .max_steps(10)
        .run_store(store.clone())
        .build()
        .unwrap();
    (agent, model)
}

/// Starts `run_id`, lets the sub-agent finish a step or two, and pauses the parent.
async fn pause_mid_way(supervisor: &Agent, run_id: &str) {
    let stream = supervisor.stream("Work").run_id(run_id).into_stream();
    let ((_, result), ()) = tokio::join!(collect(stream), async {
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(supervisor.run(run_id).pause());
    });
    // A pause is a stop like a suspension: the run's result, saying why it stopped.
    let stopped = result.unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Paused);
    assert!(stopped.waiting.is_empty());
}

#[tokio::test]
async fn pausing_the_parent_pauses_the_sub_agent_and_resume_continues_both() {
    let store = store();
    let (worker, worker_model) = slow_worker(4, &store);
    let (supervisor, parent_model) = parent_of(worker, &store);
    let run_id = "run-paused";
    pause_mid_way(&supervisor, run_id).await;
    let parent = store.load(run_id).await.unwrap().unwrap();
    assert_eq!(parent.phase, RunPhase::WaitingForSubtask);
    let child_id = parent.state.active_sub_runs()[0].run_id.clone();
    let child = store.load(&child_id).await.unwrap().unwrap();
    assert_eq!(child.phase, RunPhase::Paused);
    let steps_before = child.state.steps.len();
    assert!(
        (1..4).contains(&steps_before),
        "paused mid-way: {steps_before}"
    );
    let calls_before = worker_model.calls();

    // Resuming the sub-agent straight is refused; the parent's resume continues it.
    let worker = supervisor.sub_agent("worker").unwrap();
    let direct = worker.run(&child_id).proceed().stream().await;
    assert!(
        matches!(direct, Err(RunControlError::Delegated { .. })),
        "{direct:?}"
    );
    let done = supervisor.run(run_id).proceed().await.unwrap();
    assert_eq!(done.text, "parent: worked 4 steps");
    // No step ran twice: the sub-agent made exactly the calls it had left.
    assert_eq!(worker_model.calls() - calls_before, 5 - steps_before);
    assert_eq!(parent_model.calls(), 2);
    assert_eq!(
        store.load(&child_id).await.unwrap().unwrap().phase,
        RunPhase::Completed
    );
    let again = supervisor.run(run_id).proceed().stream().await;
    assert!(
        matches!(again, Err(RunControlError::NotResumable { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn aborting_a_stored_parent_aborts_its_sub_agent_first() {
    let store = store();
    let (worker, _) = slow_worker(4, &store);
    let (supervisor, _) = parent_of(worker, &store);
    let run_id = "run-to-abort";
    pause_mid_way(&supervisor, run_id).await;
    let child_id = store
        .load(run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .active_sub_runs()[0]
        .run_id
        .clone();
    let marked = supervisor.run(run_id).abort().await.unwrap();
    assert_eq!(marked, 2, "the sub-agent's run, then the parent's");
    for id in [run_id, child_id.as_str()] {
        let run = store.load(id).await.unwrap().unwrap();
        assert_eq!(run.phase, RunPhase::Aborted);
        assert!(matches!(
            run.state.status,
            kestrel_core::agent::RunStatus::Finished {
                reason: FinishReason::Abort,
                ..
            }
        ));
    }
    let resumed = supervisor.run(run_id).proceed().stream().await;
    assert!(
        matches!(resumed, Err(RunControlError::NotResumable { .. })),
        "{resumed:?}"
    );
}

#[tokio::test]
async fn a_run_in_progress_cannot_be_resumed_beside_itself() {
    let store = store();
    let (worker, _) = slow_worker(3, &store);
    let (supervisor, _) = parent_of(worker, &store);
    let run_id = "run-busy";
    let stream = supervisor.stream("Work").run_id(run_id).into_stream();
    let running = tokio::spawn(collect(stream));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let second = supervisor.run(run_id).proceed().stream().await;
    assert!(
        matches!(second, Err(RunControlError::NotResumable { .. })),
        "{second:?}"
    );
    let (_, result) = running.await.unwrap();
    assert_eq!(result.unwrap().text, "parent: worked 3 steps");
}

/// A store in which, when armed, another writer changes the given run just before a
/// decision's saves land (an abort of the sub-agent, a second server deciding).
#[derive(Debug)]
struct Interfering {
    inner: InMemoryRunStore,
    armed: std::sync::Mutex<Option<String>>,
}

#[async_trait::async_trait]
impl kestrel_core::store::RunStore for Interfering {
    async fn save(
        &self,
        state: &kestrel_core::agent::RunState,
        phase: RunPhase,
        expected_version: Option<i64>,
    ) -> Result<i64, kestrel_core::store::RunStoreError> {
        self.inner.save(state, phase, expected_version).await
    }

    async fn save_all(
        &self,
        saves: &[(&kestrel_core::agent::RunState, RunPhase, Option<i64>)],
    ) -> Result<Vec<i64>, kestrel_core::store::RunStoreError> {
        let target = self.armed.lock().unwrap().take();
        if let Some(run_id) = target {
            let other = self.inner.load(&run_id).await?.unwrap();
            self.inner
                .save(&other.state, other.phase, Some(other.version))
                .await?;
        }
        self.inner.save_all(saves).await
    }

    async fn load(
        &self,
        run_id: &str,
    ) -> Result<Option<kestrel_core::store::StoredRun>, kestrel_core::store::RunStoreError> {
        self.inner.load(run_id).await
    }

    async fn list_in_phases(
        &self,
        phases: &[RunPhase],
        query: &kestrel_core::store::SuspendedRunsQuery,
    ) -> Result<kestrel_core::store::SuspendedRunsPage, kestrel_core::store::RunStoreError> {
        self.inner.list_in_phases(phases, query).await
    }
}

#[tokio::test]
async fn a_conflicting_decision_inside_a_sub_agent_leaves_nothing_half_decided() {
    let deletions = Arc::new(AtomicUsize::new(0));
    let interfering = Arc::new(Interfering {
        inner: InMemoryRunStore::new(),
        armed: std::sync::Mutex::new(None),
    });
    let store: SharedRunStore = interfering.clone();
    let cleaner = Agent::builder("cleaner")
        .description("Cleans up data")
        .model(calls_then_answers(
            "c1",
            "delete_records",
            json!({"table": "test"}),
            "cleaned",
        ))
        .tool(delete_records(deletions.clone()))
        .run_store(store.clone())
        .build()
        .unwrap();
    let (supervisor, _) = parent_of(cleaner, &store);
    let result = supervisor.generate("Tidy up").await.unwrap();
    assert_eq!(result.finish_reason, FinishReason::Suspended);
    let child_run = result.waiting[0].via[0].run_id.clone();
    let parent_before = store.load(&result.run_id).await.unwrap().unwrap();

    // The sub-agent's run changes under the decision: the decision is refused, and the
    // parent is exactly as it was (still waiting, still listed), not left running undriven.
    *interfering.armed.lock().unwrap() = Some(child_run.clone());
    let refused = supervisor.run(&result.run_id).approve("c1").await;
    assert!(
        matches!(&refused, Err(RunControlError::Conflict { run_id }) if *run_id == child_run),
        "{refused:?}"
    );
    let parent_after = store.load(&result.run_id).await.unwrap().unwrap();
    assert_eq!(parent_after.phase, RunPhase::Suspended);
    assert_eq!(parent_after.version, parent_before.version);
    let listed = supervisor
        .list_suspended_runs(Default::default())
        .await
        .unwrap();
    assert_eq!(
        listed.runs.len(),
        1,
        "the parent is still listed as waiting"
    );
    assert_eq!(deletions.load(Ordering::SeqCst), 0);

    // Decided again, it goes through: the sub-agent runs its tool once, then the parent ends.
    let done = supervisor.run(&result.run_id).approve("c1").await.unwrap();
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(deletions.load(Ordering::SeqCst), 1);
}
