//! Two instances of a cluster on one store (in memory, SQLite, PostgreSQL), sharing in-process
//! leases and bus: a run driven by one is refused to the other, an abort or a message sent to
//! the other reaches it, and an owner that stopped renewing its lease (as a paused process
//! does) loses the run to the other, whose work its late writes cannot overwrite.
//! (`kestrel-server`'s tests run the same over Redis, with separate processes.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kestrel_core::agent::{Agent, BackgroundTasks, BackgroundTool, RunControlError};
use kestrel_core::cluster::{Cluster, InProcessBus};
use kestrel_core::event::EventKind;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::lease::{InProcessLeases, Lease, LeaseError, LeaseProvider};
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{FinishReason, ScriptedModel, ScriptedResponse};
use kestrel_core::store::RunPhase;
use kestrel_core::tool::{FnTool, create_tool};
use kestrel_storage::Selection;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::fixture::Instance;

const THREAD: &str = "thread-c";
const RESOURCE: &str = "alice";
const TTL: Duration = Duration::from_millis(300);

/// In-process leases whose holders can be "paused": their renewals do nothing, as those of
/// a process stopped with SIGSTOP, so their leases run out.
#[derive(Debug, Default)]
pub(crate) struct PausableLeases {
    leases: InProcessLeases,
    paused: Mutex<HashSet<String>>,
}

impl PausableLeases {
    pub(crate) fn pause(&self, instance: &str) {
        self.paused.lock().unwrap().insert(instance.to_owned());
    }

    fn is_paused(&self, holder: &str) -> bool {
        let instance = holder.split('/').next().unwrap_or(holder);
        self.paused.lock().unwrap().contains(instance)
    }
}

#[async_trait::async_trait]
impl LeaseProvider for PausableLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.leases.acquire(key, holder, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, LeaseError> {
        if self.is_paused(&lease.holder) {
            return Ok(true);
        }
        self.leases.renew(lease, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LeaseError> {
        self.leases.release(lease).await
    }

    async fn transfer(
        &self,
        lease: &Lease,
        to: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.leases.transfer(lease, to, ttl).await
    }

    async fn holder(&self, key: &str) -> Result<Option<Lease>, LeaseError> {
        self.leases.holder(key).await
    }
}

/// The model calls `wait` once, then answers with every user message it saw, joined.
fn model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|req| {
        let last = req.messages.last().unwrap();
        let tool_done = last.role == Role::Tool
            || req
                .messages
                .iter()
                .any(|m| m.parts.iter().any(|p| matches!(p, Part::ToolResult { .. })));
        if tool_done {
            let users: Vec<String> = req
                .messages
                .iter()
                .filter(|m| m.role == Role::User)
                .map(|m| m.text())
                .collect();
            ScriptedResponse::text(format!("heard: {}", users.join(" + ")))
        } else {
            ScriptedResponse::tool_call("call-1", "wait", json!({}))
        }
    }))
}

/// A tool that waits for a permit of `gate` (none: it returns at once), counting its runs.
fn wait_tool(gate: Option<Arc<Semaphore>>, runs: Arc<AtomicUsize>) -> FnTool {
    wait_tool_approved(gate, runs, false)
}

/// [`wait_tool`], needing a person's approval when `approval`.
fn wait_tool_approved(
    gate: Option<Arc<Semaphore>>,
    runs: Arc<AtomicUsize>,
    approval: bool,
) -> FnTool {
    create_tool("wait")
        .description("Waits")
        .require_approval(approval)
        .input_schema(json!({"type": "object"}))
        .execute(move |_input: Value, _ctx| {
            let (gate, runs) = (gate.clone(), runs.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                if let Some(gate) = gate {
                    gate.acquire().await.unwrap().forget();
                }
                Ok("waited".to_owned())
            }
        })
}

fn instance(
    store: &Store,
    cluster: &Cluster,
    id: &str,
    gate: Option<Arc<Semaphore>>,
    runs: Arc<AtomicUsize>,
) -> Kestrel {
    instance_with(store, cluster, id, wait_tool(gate, runs))
}

/// An instance of `cluster` on `store`, whose memory shows a run the last 20 messages of its
/// thread.
fn member(store: &Store, cluster: &Cluster, id: &str) -> Instance {
    Instance::on(store)
        .last_messages(20)
        .cluster(cluster.clone().instance_id(id).lease_ttl(TTL))
}

fn instance_with(store: &Store, cluster: &Cluster, id: &str, tool: FnTool) -> Kestrel {
    member(store, cluster, id)
        .agent(Agent::builder("assistant").model(model()).tool(tool))
        .build()
}

/// A cluster on `leases` whose instances do not sweep by themselves (a test that wants a
/// sweep sets its interval, or calls `recover_runs`), so a takeover happens when the test says.
pub(crate) fn cluster(leases: Arc<PausableLeases>) -> Cluster {
    Cluster::new(leases, Arc::new(InProcessBus::default())).sweep_interval(Duration::ZERO)
}

type Driving = tokio::task::JoinHandle<(
    Vec<kestrel_core::event::Event>,
    Result<kestrel_core::agent::GenerateResult, kestrel_core::agent::AgentError>,
)>;

/// Instances A (whose tool waits for `gate`) and B of one cluster, and a run on A whose tool
/// has started.
struct Started {
    leases: Arc<PausableLeases>,
    a: Kestrel,
    b: Kestrel,
    gate: Arc<Semaphore>,
    runs: Arc<AtomicUsize>,
    run_id: String,
    driving: Driving,
}

impl Started {
    async fn on(store: &Store, input: &str) -> Self {
        let leases = Arc::new(PausableLeases::default());
        let cluster = cluster(Arc::clone(&leases));
        let gate = Arc::new(Semaphore::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let a = instance(store, &cluster, "a", Some(gate.clone()), runs.clone());
        let b = instance(store, &cluster, "b", None, runs.clone());
        let stream = a
            .agent("assistant")
            .unwrap()
            .stream(input)
            .memory(THREAD, RESOURCE)
            .into_stream();
        let run_id = stream.run_id().to_owned();
        let driving = tokio::spawn(stream.collect());
        started(&runs, 1).await;
        Self {
            leases,
            a,
            b,
            gate,
            runs,
            run_id,
            driving,
        }
    }
}

/// Waits until the tool has started `n` times.
async fn started(runs: &AtomicUsize, n: usize) {
    for _ in 0..500 {
        if runs.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the tool did not start");
}

async fn thread_texts(store: &Store) -> Vec<(Role, String)> {
    store
        .list_messages(THREAD, Some(RESOURCE), Selection::all())
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| (m.role, m.to_message().text()))
        .collect()
}

/// The thread holds one turn, each message once: the question, the tool call, its result,
/// the answer.
async fn assert_one_turn(store: &Store) {
    let texts = thread_texts(store).await;
    let roles: Vec<Role> = texts.iter().map(|(role, _)| *role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
        "{texts:?}"
    );
    assert_eq!(texts[3].1, "heard: hello");
}

/// A run in progress on A: B refuses to resume it, and B's abort stops it on A.
async fn a_run_on_one_instance_is_refused_and_aborted_from_another(store: Store) {
    let Started {
        a,
        b,
        gate,
        run_id,
        driving,
        ..
    } = Started::on(&store, "hello").await;

    let on_b = b.agent("assistant").unwrap();
    let refused = on_b.run(&run_id).proceed().stream().await;
    assert!(
        matches!(
            refused,
            Err(RunControlError::NotResumable {
                reason: "it is in progress on another instance",
                ..
            })
        ),
        "{refused:?}"
    );
    // A caller pinned to another resource does not reach it.
    let foreign = on_b.run(&run_id).resource("mallory").abort().await;
    assert!(
        matches!(foreign, Err(RunControlError::RunNotFound { .. })),
        "{foreign:?}"
    );

    let marked = on_b.run(&run_id).abort().await.unwrap();
    assert_eq!(marked, 0, "the owner records the abort itself");
    let (events, result) = tokio::time::timeout(Duration::from_secs(5), driving)
        .await
        .expect("the run on A stopped")
        .unwrap();
    assert!(
        matches!(events.last().map(|e| &e.kind), Some(EventKind::Abort(_))),
        "{:?}",
        events.last()
    );
    assert!(result.is_err() || result.unwrap().finish_reason == FinishReason::Abort);
    let stored = a.run_store().load(&run_id).await.unwrap().unwrap();
    assert_eq!(stored.phase, RunPhase::Aborted);
    gate.add_permits(10);
}

/// A message sent on B to the thread whose run is active on A goes into that run's next step.
async fn a_message_sent_on_another_instance_reaches_the_active_run(store: Store) {
    let Started {
        b,
        gate,
        run_id,
        driving,
        ..
    } = Started::on(&store, "first").await;

    let sent = b
        .agent("assistant")
        .unwrap()
        .thread(RESOURCE, THREAD)
        .send("second")
        .await
        .unwrap();
    assert!(sent.accepted);
    assert_eq!(sent.run_id.as_deref(), Some(run_id.as_str()));
    assert!(sent.stream.is_none(), "delivered, not a new run");
    gate.add_permits(1);
    let (_, result) = driving.await.unwrap();
    let result = result.unwrap();
    assert_eq!(result.text, "heard: first + second");
    let texts = thread_texts(&store).await;
    let users: Vec<&str> = texts
        .iter()
        .filter(|(role, _)| *role == Role::User)
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(users, ["first", "second"], "{texts:?}");

    // The thread is idle now: a message sent on B wakes a run on B.
    let sent = b
        .agent("assistant")
        .unwrap()
        .thread(RESOURCE, THREAD)
        .send("third")
        .await
        .unwrap();
    let (_, woken) = sent.stream.expect("a new run").collect().await;
    assert!(woken.unwrap().text.contains("third"));
}

/// A's lease runs out while its tool works (A is "paused"); B takes the run over from its last
/// snapshot and finishes it. When A wakes, its late writes are refused: the thread holds
/// B's answer once, and A's run ends with the fencing error.
async fn a_paused_owner_loses_its_run_and_its_late_writes_are_refused(store: Store) {
    let Started {
        leases,
        b,
        gate,
        runs,
        run_id,
        driving,
        ..
    } = Started::on(&store, "hello").await;

    leases.pause("a");
    tokio::time::sleep(TTL * 2).await;
    let (_, taken_over) = b
        .agent("assistant")
        .unwrap()
        .run(&run_id)
        .proceed()
        .stream()
        .await
        .expect("B takes the run over once A's lease ran out")
        .collect()
        .await;
    let taken_over = taken_over.unwrap();
    assert_eq!(taken_over.text, "heard: hello");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the step in flight ran again on B"
    );

    // A wakes up: its tool returns, and everything it writes is refused.
    let run_id_of_a = run_id.clone();
    gate.add_permits(1);
    let (events, late) = driving.await.unwrap();
    let error = late.expect_err("A's run cannot go on");
    assert!(
        matches!(error, kestrel_core::agent::AgentError::RunTakenOver { ref run_id } if *run_id == run_id_of_a),
        "{error}"
    );
    assert!(
        matches!(events.last().map(|e| &e.kind), Some(EventKind::Error(_))),
        "{:?}",
        events.last()
    );
    let stored = b.run_store().load(&run_id).await.unwrap().unwrap();
    assert_eq!(stored.phase, RunPhase::Completed, "B's end stands");
    assert_one_turn(&store).await;
}

/// Instance A, whose run's tool started and which then died (its leases run out, it never
/// renews them), and instance B, sweeping every `b_sweeps` (zero: never).
struct Dead {
    a: Kestrel,
    b: Kestrel,
    runs: Arc<AtomicUsize>,
    run_id: String,
    _driving: Driving,
}

impl Dead {
    async fn on(store: &Store, b_sweeps: Duration) -> Self {
        let leases = Arc::new(PausableLeases::default());
        let cluster = cluster(Arc::clone(&leases));
        let gate = Arc::new(Semaphore::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let a = instance(store, &cluster, "a", Some(gate), runs.clone());
        let b_cluster = cluster.clone().sweep_interval(b_sweeps);
        let b = instance(store, &b_cluster, "b", None, runs.clone());
        let stream = a
            .agent("assistant")
            .unwrap()
            .stream("hello")
            .memory(THREAD, RESOURCE)
            .into_stream();
        let run_id = stream.run_id().to_owned();
        let driving = tokio::spawn(stream.collect());
        started(&runs, 1).await;
        leases.pause("a");
        Self {
            a,
            b,
            runs,
            run_id,
            _driving: driving,
        }
    }
}

/// A dies mid-tool (its lease runs out and it never comes back): B's sweep finds the run and
/// finishes it from its last snapshot, with nobody asking.
async fn a_dead_instances_run_is_taken_over_by_the_sweep(store: Store) {
    let Dead {
        a, b, runs, run_id, ..
    } = Dead::on(&store, Duration::from_millis(50)).await;
    assert_eq!(b.instance_id(), Some("b"));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stored = b.run_store().load(&run_id).await.unwrap().unwrap();
        if stored.phase == RunPhase::Completed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not taken over: {:?}",
            stored.phase
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_one_turn(&store).await;
    // Nothing is left to recover.
    assert!(b.recover_runs().await.is_empty());
    assert!(a.recover_runs().await.is_empty());
}

/// A dies mid-tool and no sweep runs: the next run on the thread, on B, first takes the dead
/// instance's run over (lazily), which finishes before the new run takes the thread.
async fn a_new_run_on_the_thread_first_finishes_a_dead_instances_run(store: Store) {
    let Dead {
        b, runs, run_id, ..
    } = Dead::on(&store, Duration::ZERO).await;
    // Past the lease, and past the age of the dead run's last snapshot.
    tokio::time::sleep(TTL * 2).await;

    let answer = b
        .agent("assistant")
        .unwrap()
        .generate("again")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap();
    assert_eq!(
        answer.text, "heard: hello + again",
        "the new run saw the old one's answer"
    );
    let stored = b.run_store().load(&run_id).await.unwrap().unwrap();
    assert_eq!(stored.phase, RunPhase::Completed);
    let texts = thread_texts(&store).await;
    let answers: Vec<&str> = texts
        .iter()
        .filter(|(role, text)| *role == Role::Assistant && !text.is_empty())
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(
        answers,
        ["heard: hello", "heard: hello + again"],
        "{texts:?}"
    );
    // The dead run's step ran again on B; the new run's model, seeing a tool result in its
    // history, answered at once.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Instance `id` with `boss`, which hands work to `helper` in the background; the helper's
/// tool waits for `gate` (none: at once).
fn background_instance(
    store: &Store,
    cluster: &Cluster,
    id: &str,
    gate: Option<Arc<Semaphore>>,
    runs: Arc<AtomicUsize>,
) -> Kestrel {
    let helper = Agent::builder("helper")
        .description("Helps")
        .model(model())
        .tool(wait_tool(gate, runs))
        .build()
        .unwrap();
    let boss_model = Arc::new(ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedResponse::text("Started.")
        } else {
            ScriptedResponse::tool_call("call-help", "agent-helper", json!({"prompt": "help"}))
        }
    }));
    let boss = Agent::builder("boss")
        .model(boss_model)
        .agents([helper.clone()])
        .background_tasks(BackgroundTasks::new().tool("helper", BackgroundTool::enabled()));
    member(store, cluster, id)
        .agent(boss)
        .agent_as_is(helper)
        .build()
}

/// A dies while a background sub-agent it started works: B's sweep continues the task's run
/// and delivers its result to the thread of the run that started it, once.
async fn a_background_task_of_a_dead_instance_finishes_elsewhere(store: Store) {
    let leases = Arc::new(PausableLeases::default());
    let cluster = cluster(Arc::clone(&leases));
    let gate = Arc::new(Semaphore::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let a = background_instance(&store, &cluster, "a", Some(gate), runs.clone());
    let sweeping = cluster.clone().sweep_interval(Duration::from_millis(50));
    let _b = background_instance(&store, &sweeping, "b", None, runs.clone());
    let answer = a
        .agent("boss")
        .unwrap()
        .generate("go")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap();
    assert_eq!(answer.text, "Started.");
    started(&runs, 1).await;
    leases.pause("a");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let reports = loop {
        let reports: Vec<String> = thread_texts(&store)
            .await
            .into_iter()
            .filter(|(role, text)| *role == Role::System && text.starts_with("[background task"))
            .map(|(_, text)| text)
            .collect();
        if !reports.is_empty() {
            break reports;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the background task was not finished elsewhere: {:?}",
            thread_texts(&store).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains("finished") && reports[0].ends_with("heard: go + help"),
        "{reports:?}"
    );
    // The task's step ran again on B, its tool with it.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// An approved call runs at most once: A approves and starts the tool, then stops renewing
/// its lease (paused); B continues the run and, finding the call started, settles it with an
/// error instead of running the tool again.
async fn an_approved_call_is_not_run_again_after_its_instance_stopped(store: Store) {
    let leases = Arc::new(PausableLeases::default());
    let cluster = cluster(Arc::clone(&leases));
    let gate = Arc::new(Semaphore::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let a = instance_with(
        &store,
        &cluster,
        "a",
        wait_tool_approved(Some(gate.clone()), runs.clone(), true),
    );
    let b = instance_with(
        &store,
        &cluster,
        "b",
        wait_tool_approved(None, runs.clone(), true),
    );
    let stopped = a
        .agent("assistant")
        .unwrap()
        .generate("hello")
        .memory(THREAD, RESOURCE)
        .await
        .unwrap();
    assert_eq!(stopped.finish_reason, FinishReason::Suspended);
    let approved = a
        .agent("assistant")
        .unwrap()
        .run(&stopped.run_id)
        .approve("call-1")
        .stream()
        .await
        .unwrap();
    let _dead = tokio::spawn(approved.collect());
    started(&runs, 1).await;
    leases.pause("a");
    tokio::time::sleep(TTL * 2).await;

    let (events, done) = b
        .agent("assistant")
        .unwrap()
        .run(&stopped.run_id)
        .proceed()
        .stream()
        .await
        .unwrap()
        .collect()
        .await;
    let done = done.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the approved tool ran once");
    let error = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolError(p) => Some(p.error.to_string()),
            _ => None,
        })
        .expect("the interrupted call is settled with an error");
    assert!(error.contains("interrupted"), "{error}");
    assert!(done.text.starts_with("heard:"), "{}", done.text);
    gate.add_permits(1);
}

/// More abandoned runs than one listing holds: one sweep finds and finishes every one.
async fn one_sweep_recovers_more_runs_than_a_page(store: Store) {
    use kestrel_core::agent::{RunSettings, RunState};
    let leases = Arc::new(PausableLeases::default());
    let cluster = cluster(leases);
    let runs = Arc::new(AtomicUsize::new(0));
    let b = instance(&store, &cluster, "b", None, runs.clone());
    // What an instance that died left behind: runs saved as running, nobody holding them.
    let count = 150;
    for n in 0..count {
        let settings = RunSettings::default();
        let state = RunState::new(
            format!("orphan-{n}"),
            "assistant".into(),
            vec![kestrel_core::message::Message::user("hello")],
            5,
            settings,
        );
        b.run_store()
            .save(&state, RunPhase::Running, None)
            .await
            .unwrap();
    }
    tokio::time::sleep(TTL * 2).await;
    let mut taken = b.recover_runs().await;
    assert_eq!(
        taken.len(),
        count,
        "every abandoned run is taken over at once"
    );
    taken.sort();
    taken.dedup();
    assert_eq!(taken.len(), count);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for n in 0..count {
        loop {
            let stored = b
                .run_store()
                .load(&format!("orphan-{n}"))
                .await
                .unwrap()
                .unwrap();
            if stored.phase == RunPhase::Completed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "orphan-{n}: {:?}",
                stored.phase
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), count);
}

#[tokio::test]
async fn instance_ids_are_checked() {
    for bad in ["", "a/b", &"x".repeat(201)] {
        let built = Kestrel::builder()
            .cluster(Cluster::in_process().instance_id(bad))
            .build();
        assert!(
            matches!(
                built,
                Err(kestrel_core::kestrel::KestrelError::InvalidInstanceId { .. })
            ),
            "{bad:?}: {built:?}"
        );
    }
    let built = Kestrel::builder()
        .cluster(Cluster::in_process().instance_id("web-1"))
        .build()
        .unwrap();
    assert_eq!(built.instance_id(), Some("web-1"));
}

/// Ids as long as a server accepts (a kilobyte of UTF-8 each) make lease keys and holders
/// within every provider's limit: the run, its thread's lease and its own take them.
async fn runs_with_the_longest_ids_take_their_leases(store: Store) {
    let leases = Arc::new(PausableLeases::default());
    let cluster = cluster(leases);
    let kestrel = instance(&store, &cluster, "a", None, Arc::new(AtomicUsize::new(0)));
    let long = |c: &str| c.repeat(256);
    let (thread, resource, run_id) = (long("🧵"), long("🦀"), long("🏃"));
    let done = kestrel
        .agent("assistant")
        .unwrap()
        .generate("hello")
        .memory(&thread, &resource)
        .options(kestrel_core::agent::RunOptions::new().run_id(&run_id))
        .await
        .unwrap();
    assert_eq!(done.text, "heard: hello");
    assert_eq!(done.run_id, run_id);
}

on_every_backend!(
    runs_with_the_longest_ids_take_their_leases,
    one_sweep_recovers_more_runs_than_a_page,
    an_approved_call_is_not_run_again_after_its_instance_stopped,
    a_dead_instances_run_is_taken_over_by_the_sweep,
    a_new_run_on_the_thread_first_finishes_a_dead_instances_run,
    a_background_task_of_a_dead_instance_finishes_elsewhere,
    a_run_on_one_instance_is_refused_and_aborted_from_another,
    a_message_sent_on_another_instance_reaches_the_active_run,
    a_paused_owner_loses_its_run_and_its_late_writes_are_refused,
);
