//! Workflow runs are fenced as agent runs are. Instance A drives a run and is "paused" past
//! its lease in a step (its renewals do nothing, as a SIGSTOPped process's); B takes the run
//! over from its last stored boundary and finishes it. When A wakes, its step ends (the step
//! in flight ran twice: at-least-once), and its next write is refused by the store: A stops
//! before its next step, never writes `running` over B's finished run, and tells its caller
//! the run was handed over. On SQLite and PostgreSQL (the durable stores, which take a
//! snapshot at every boundary).
//!
//! A driver whose store stops answering (PostgreSQL behind a proxy that drops its answers)
//! hands the run over the same way: its caller is told the run goes on, never an outcome that
//! was not stored, and the next instance continues it from its last stored boundary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::kestrel::Kestrel;
use kestrel_core::workflow::{Workflow, WorkflowStatus, create_step};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use kestrel_core::cluster::Cluster;
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;

use super::cluster::{PausableLeases, cluster};
use super::fixture::Instance;

const TTL: Duration = Duration::from_millis(300);

/// How often each step ran, over both instances.
#[derive(Default)]
struct Ledger {
    first: AtomicUsize,
    work: AtomicUsize,
    last: AtomicUsize,
}

/// first → work (waits for `gate`, when given) → last.
fn workflow(ledger: &Arc<Ledger>, gate: Option<Arc<Semaphore>>) -> Workflow {
    let l = Arc::clone(ledger);
    let first = create_step("first").execute(move |n: Value, _ctx| {
        l.first.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() + 1})) }
    });
    let l = Arc::clone(ledger);
    let work = create_step("work").execute(move |n: Value, _ctx| {
        l.work.fetch_add(1, Ordering::SeqCst);
        let gate = gate.clone();
        async move {
            if let Some(gate) = gate {
                gate.acquire().await.unwrap().forget();
            }
            Ok(json!({"v": n["v"].as_i64().unwrap() * 10}))
        }
    });
    let l = Arc::clone(ledger);
    let last = create_step("last").execute(move |n: Value, _ctx| {
        l.last.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() + 5})) }
    });
    Workflow::builder("fenced")
        .then(first)
        .then(work)
        .then(last)
        .commit()
        .unwrap()
}

/// An instance of `cluster` (one per test: its instances share its bus) over `store`.
fn instance(store: &Store, cluster: &Cluster, id: &str, workflow: Workflow) -> Kestrel {
    Instance::on(store)
        .workflow(workflow)
        .cluster(cluster.clone().instance_id(id).lease_ttl(TTL))
        .build()
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} never happened");
}

/// Instances A (whose `work` step waits for `gate`) and B of one cluster, and a run on A
/// whose `work` step has started.
struct Pair {
    ledger: Arc<Ledger>,
    leases: Arc<PausableLeases>,
    gate: Arc<Semaphore>,
    shared: Cluster,
    a: Kestrel,
    b: Kestrel,
    run_id: String,
    driving: tokio::task::JoinHandle<
        Result<kestrel_core::workflow::WorkflowResult, kestrel_core::workflow::WorkflowRunError>,
    >,
}

impl Pair {
    async fn started(store: &Store) -> Self {
        let ledger = Arc::new(Ledger::default());
        let leases = Arc::new(PausableLeases::default());
        let gate = Arc::new(Semaphore::new(0));
        let shared = cluster(Arc::clone(&leases));
        let a = instance(store, &shared, "a", workflow(&ledger, Some(gate.clone())));
        let b = instance(store, &shared, "b", workflow(&ledger, None));
        let run = a.workflow("fenced").unwrap().create_run();
        let run_id = run.run_id().to_owned();
        let driving = tokio::spawn(async move { run.start(json!({"v": 1})).await });
        wait_until("A's step started", || {
            ledger.work.load(Ordering::SeqCst) == 1
        })
        .await;
        Self {
            ledger,
            leases,
            gate,
            shared,
            a,
            b,
            run_id,
            driving,
        }
    }
}

async fn a_paused_workflow_owner_is_fenced_off_its_run(store: Store) {
    let Pair {
        ledger,
        leases,
        gate,
        a: _a,
        b,
        run_id,
        driving,
        ..
    } = Pair::started(&store).await;

    // A is paused past its lease; B takes the run over from its last boundary and ends it.
    leases.pause("a");
    tokio::time::sleep(TTL * 2).await;
    let taken_over = b.recover_workflow_runs().await;
    assert_eq!(taken_over, vec![("fenced".to_owned(), run_id.clone())]);
    let on_b = b.workflow("fenced").unwrap().create_run_with_id(&run_id);
    let mut finished = None;
    for _ in 0..500 {
        let snapshot = on_b.snapshot().await.unwrap().unwrap();
        if snapshot.status == WorkflowStatus::Success {
            finished = Some(snapshot);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let finished = finished.expect("B finished the run");
    assert_eq!(finished.result.as_deref(), Some(&json!({"v": 25})));

    // A wakes: its step ends, its next write is refused, and it stops there.
    gate.add_permits(1);
    let late = driving.await.unwrap().unwrap();
    assert_eq!(late.status, WorkflowStatus::Running, "{late:?}");
    let error = late.error.expect("A says why it stopped");
    assert_eq!(error.name, "RunHandedOver");
    assert!(
        error.message.contains("another instance"),
        "{}",
        error.message
    );
    assert!(late.result.is_none(), "no outcome that was not stored");

    let stored = on_b.snapshot().await.unwrap().unwrap();
    assert_eq!(stored.status, WorkflowStatus::Success, "B's end stands");
    assert_eq!(stored.result.as_deref(), Some(&json!({"v": 25})));
    assert_eq!(
        ledger.first.load(Ordering::SeqCst),
        1,
        "before the boundary: once"
    );
    assert_eq!(
        ledger.work.load(Ordering::SeqCst),
        2,
        "the step in flight when A was paused ran again on B (at-least-once)"
    );
    assert_eq!(
        ledger.last.load(Ordering::SeqCst),
        1,
        "the step after A's late boundary ran once, on B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_end_cannot_be_stored_is_handed_over_not_reported_done() {
    use kestrel_chaos::{Fault, FaultProxy};

    let Some(pg) =
        super::proxied_postgres::ProxiedPostgres::start(Duration::from_millis(500)).await
    else {
        return;
    };
    let (proxy, through, direct) = (
        Arc::clone(&pg.proxy),
        Arc::clone(&pg.through),
        Arc::clone(&pg.direct),
    );

    // first → last; on A, `last` cuts the database's answers off as it ends.
    let ledger = Arc::new(Ledger::default());
    let build = |cut: Option<Arc<FaultProxy>>| {
        let l = Arc::clone(&ledger);
        let first = create_step("first").execute(move |n: Value, _ctx| {
            l.first.fetch_add(1, Ordering::SeqCst);
            async move { Ok(n) }
        });
        let l = Arc::clone(&ledger);
        let last = create_step("last").execute(move |n: Value, _ctx| {
            l.last.fetch_add(1, Ordering::SeqCst);
            if let Some(proxy) = &cut {
                proxy.set(Fault::DropAnswers);
            }
            async move { Ok(json!({"done": n["v"]})) }
        });
        Workflow::builder("cut")
            .then(first)
            .then(last)
            .commit()
            .unwrap()
    };
    let on = |store: &Store, workflow: Workflow| Instance::on(store).workflow(workflow).build();
    let a = on(&through, build(Some(Arc::clone(&proxy))));
    let run = a.workflow("cut").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let told = run.start(json!({"v": 7})).await.unwrap();
    assert_eq!(told.status, WorkflowStatus::Running, "{told:?}");
    let error = told.error.expect("the caller is told why");
    assert_eq!(error.name, "RunHandedOver");
    assert!(
        error.message.contains("could not be stored"),
        "{}",
        error.message
    );
    assert!(told.result.is_none());

    // What is stored is the last boundary the driver could store: `last` is to run.
    proxy.set(Fault::None);
    let b = on(&direct, build(None));
    let stored = b
        .workflow("cut")
        .unwrap()
        .create_run_with_id(&run_id)
        .snapshot()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, WorkflowStatus::Running);
    assert_eq!(stored.position, 1);

    // The next instance continues it from there.
    assert_eq!(
        b.recover_workflow_runs().await,
        vec![("cut".to_owned(), run_id.clone())]
    );
    let mut done = None;
    for _ in 0..500 {
        let snapshot = b
            .workflow("cut")
            .unwrap()
            .create_run_with_id(&run_id)
            .snapshot()
            .await
            .unwrap()
            .unwrap();
        if snapshot.status == WorkflowStatus::Success {
            done = Some(snapshot);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = done.expect("the run ended on B");
    assert_eq!(done.result.as_deref(), Some(&json!({"done": 7})));
    assert_eq!(ledger.first.load(Ordering::SeqCst), 1);
    assert_eq!(
        ledger.last.load(Ordering::SeqCst),
        2,
        "the step whose end could not be stored ran again (at-least-once)"
    );
    drop(a);
    drop(b);
    pg.teardown().await;
}

/// A cancel sent from an instance that does not drive the run reaches the one that does:
/// its driver stops, stores the run `canceled`, and runs nothing after; the cancel answers
/// only once that happened. The same for a run that sleeps on the other instance.
async fn a_cancel_on_another_instance_reaches_the_driver(store: Store) {
    let Pair {
        ledger,
        gate,
        shared,
        a: _a,
        b,
        run_id,
        driving,
        ..
    } = Pair::started(&store).await;
    b.workflow("fenced")
        .unwrap()
        .create_run_with_id(&run_id)
        .cancel()
        .await
        .expect("the cancel reaches A");
    gate.add_permits(1);
    let ended = driving.await.unwrap().unwrap();
    assert_eq!(ended.status, WorkflowStatus::Canceled, "{ended:?}");
    let stored = b
        .workflow("fenced")
        .unwrap()
        .create_run_with_id(&run_id)
        .snapshot()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, WorkflowStatus::Canceled);
    assert_eq!(
        ledger.last.load(Ordering::SeqCst),
        0,
        "nothing ran after the cancel"
    );

    // A run sleeping on A, canceled from B.
    let nap = |id: &str| {
        let before = create_step("before").execute(|n: Value, _ctx| async move { Ok(n) });
        let after = create_step("after").execute(|n: Value, _ctx| async move { Ok(n) });
        let napping = Workflow::builder("nap")
            .then(before)
            .sleep(Duration::from_secs(30))
            .then(after)
            .commit()
            .unwrap();
        instance(&store, &shared, id, napping)
    };
    let (a, b) = (nap("a2"), nap("b2"));
    let run = a.workflow("nap").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let driving = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    let on_b = b.workflow("nap").unwrap().create_run_with_id(&run_id);
    for _ in 0..500 {
        let snapshot = on_b.snapshot().await.unwrap();
        if snapshot.is_some_and(|s| s.status == WorkflowStatus::Waiting) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    on_b.cancel()
        .await
        .expect("the cancel reaches A's sleeping run");
    let ended = tokio::time::timeout(Duration::from_secs(10), driving)
        .await
        .expect("A's sleeping run stopped at once")
        .unwrap()
        .unwrap();
    assert_eq!(ended.status, WorkflowStatus::Canceled);
    let stored = on_b.snapshot().await.unwrap().unwrap();
    assert_eq!(stored.status, WorkflowStatus::Canceled);
}

on_every_backend!(@backend sqlite_store, sqlite;
    a_paused_workflow_owner_is_fenced_off_its_run,
    a_cancel_on_another_instance_reaches_the_driver
);
on_every_backend!(@backend postgres_store, postgres;
    a_paused_workflow_owner_is_fenced_off_its_run,
    a_cancel_on_another_instance_reaches_the_driver
);
