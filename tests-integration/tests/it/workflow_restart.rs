//! Workflow runs left behind by a process that died (its task dropped mid-step, as `kill -9`
//! leaves them): the next instance over the same store restarts them from their last step
//! boundary (`Kestrel::recover_workflow_runs`), a sleeping run wakes when it was due, the
//! steps that had ended are not run again, and a restart is refused for a run that is not
//! left behind. On SQLite and PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kestrel_core::kestrel::Kestrel;
use kestrel_core::workflow::{StepStatus, Workflow, WorkflowRunError, WorkflowStatus, create_step};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use serde_json::{Value, json};

use super::fixture::Instance;

/// How often each step ran, over every "process".
#[derive(Default)]
struct Counts {
    s1: AtomicUsize,
    a: AtomicUsize,
    b: AtomicUsize,
    s3: AtomicUsize,
}

/// s1 → parallel(a, b) → s3, over `{v}`. With `hang`, `b` never ends: the process dies in it.
fn workflow(counts: &Arc<Counts>, hang: bool) -> Workflow {
    let c = Arc::clone(counts);
    let s1 = create_step("s1").execute(move |n: Value, _ctx| {
        c.s1.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() + 1})) }
    });
    let c = Arc::clone(counts);
    let a = create_step("a").execute(move |n: Value, _ctx| {
        c.a.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() * 2})) }
    });
    let c = Arc::clone(counts);
    let b = create_step("b").execute(move |n: Value, _ctx| {
        c.b.fetch_add(1, Ordering::SeqCst);
        async move {
            if hang {
                std::future::pending::<()>().await;
            }
            Ok(json!({"v": n["v"].as_i64().unwrap() * 3}))
        }
    });
    let c = Arc::clone(counts);
    let s3 =
        create_step("s3").execute(move |p: Value, _ctx| {
            c.s3.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(json!({"v": p["a"]["v"].as_i64().unwrap() + p["b"]["v"].as_i64().unwrap()}))
            }
        });
    Workflow::builder("crunch")
        .then(s1)
        .parallel([a, b])
        .then(s3)
        .commit()
        .unwrap()
}

/// `nap`: `before` → sleep 300 ms → `after`.
fn napping() -> Workflow {
    let before = create_step("before").execute(|n: Value, _ctx| async move { Ok(n) });
    let after =
        create_step("after").execute(|n: Value, _ctx| async move { Ok(json!({"woke": n["v"]})) });
    Workflow::builder("nap")
        .then(before)
        .sleep(Duration::from_millis(300))
        .then(after)
        .commit()
        .unwrap()
}

/// Waits until the stored run is `status`, and returns its snapshot.
async fn stored_as(
    kestrel: &Kestrel,
    workflow: &str,
    run_id: &str,
    status: WorkflowStatus,
) -> kestrel_core::workflow::WorkflowSnapshot {
    let run = kestrel
        .workflow(workflow)
        .unwrap()
        .create_run_with_id(run_id);
    for _ in 0..400 {
        if let Some(snapshot) = run.snapshot().await.unwrap()
            && snapshot.status == status
        {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {run_id} never became {status:?}");
}

async fn a_run_left_mid_step_is_continued_from_its_last_boundary(store: Store) {
    let counts = Arc::new(Counts::default());
    let dying = Instance::on(&store)
        .workflow(workflow(&counts, true))
        .build();
    let run = dying.workflow("crunch").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    // `a` ended (a boundary inside the parallel entry), `b` hangs: then the process dies.
    let left = loop {
        let snapshot = stored_as(&dying, "crunch", &run_id, WorkflowStatus::Running).await;
        if snapshot
            .steps
            .get("a")
            .is_some_and(|a| a.status == StepStatus::Success)
        {
            break snapshot;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(left.position, 1, "the run was in the parallel entry");
    task.abort();
    let _ = task.await;
    drop(dying);

    let next = Instance::on(&store)
        .workflow(workflow(&counts, false))
        .build();
    let restarted = next.recover_workflow_runs().await;
    assert_eq!(restarted, vec![("crunch".to_owned(), run_id.clone())]);
    let done = stored_as(&next, "crunch", &run_id, WorkflowStatus::Success).await;
    // s1: 2; a: 4 (kept), b: 6 (run again); s3: 10.
    assert_eq!(done.result.as_deref(), Some(&json!({"v": 10})));
    assert_eq!(
        counts.s1.load(Ordering::SeqCst),
        1,
        "s1 ended before: not run again"
    );
    assert_eq!(
        counts.a.load(Ordering::SeqCst),
        1,
        "a ended before: not run again"
    );
    assert_eq!(
        counts.b.load(Ordering::SeqCst),
        2,
        "b was in flight: run again"
    );
    assert_eq!(counts.s3.load(Ordering::SeqCst), 1);
    // Nothing is left to restart, and an ended run is not restarted.
    assert!(next.recover_workflow_runs().await.is_empty());
    let again = next
        .workflow("crunch")
        .unwrap()
        .create_run_with_id(&run_id)
        .restart()
        .await;
    assert!(
        matches!(
            again,
            Err(WorkflowRunError::NotActive {
                status: WorkflowStatus::Success,
                ..
            })
        ),
        "{again:?}"
    );
}

async fn a_sleeping_run_wakes_after_a_restart(store: Store) {
    let dying = Instance::on(&store).workflow(napping()).build();
    let run = dying.workflow("nap").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 7})).await });
    let waiting = stored_as(&dying, "nap", &run_id, WorkflowStatus::Waiting).await;
    let sleep_id = waiting
        .steps
        .iter()
        .find(|(_, step)| step.status == StepStatus::Waiting)
        .map(|(id, _)| id.clone())
        .unwrap();
    assert!(sleep_id.starts_with("sleep_"), "{sleep_id}");
    task.abort();
    let _ = task.await;
    drop(dying);

    let next = Instance::on(&store).workflow(napping()).build();
    assert_eq!(next.recover_workflow_runs().await.len(), 1);
    let done = stored_as(&next, "nap", &run_id, WorkflowStatus::Success).await;
    assert_eq!(done.result.as_deref(), Some(&json!({"woke": 7})));
    let slept = &done.steps[&sleep_id];
    assert_eq!(slept.status, StepStatus::Success);
    // The sleep kept its start: it ended when it was due, not a whole sleep after the restart.
    assert_eq!(slept.started_at, waiting.steps[&sleep_id].started_at);
    assert!(slept.ended_at.unwrap() >= slept.started_at + 300);
}

async fn a_restart_is_refused_for_a_run_not_left_behind(store: Store) {
    let counts = Arc::new(Counts::default());
    let kestrel = Instance::on(&store)
        .workflow(workflow(&counts, true))
        .workflow(napping())
        .build();
    let crunch = kestrel.workflow("crunch").unwrap();
    let run = crunch.create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    stored_as(&kestrel, "crunch", &run_id, WorkflowStatus::Running).await;
    // Going on here: neither restarted nor recovered.
    let live = crunch.create_run_with_id(&run_id).restart().await;
    assert!(
        matches!(live, Err(WorkflowRunError::InProgress { .. })),
        "{live:?}"
    );
    assert!(kestrel.recover_workflow_runs().await.is_empty());
    // A cancel through another handle reaches it, and it ends canceled.
    crunch.create_run_with_id(&run_id).cancel().await.unwrap();
    task.abort();
    let unknown = crunch.create_run_with_id("nobody").restart().await;
    assert!(
        matches!(unknown, Err(WorkflowRunError::UnknownRun { .. })),
        "{unknown:?}"
    );
    // A pending run is not running: start it, not restart it.
    let pending = crunch.create_run();
    pending.create().await.unwrap();
    let refused = pending.restart().await;
    assert!(
        matches!(
            refused,
            Err(WorkflowRunError::NotActive {
                status: WorkflowStatus::Pending,
                ..
            })
        ),
        "{refused:?}"
    );
}

/// `wrapper`: `first`, then the nested `inner` (`slow`, which hangs when `hang`), then
/// `last`.
fn nesting(hang: bool, slow_runs: &Arc<AtomicUsize>) -> (Workflow, Workflow) {
    let runs = Arc::clone(slow_runs);
    let slow = create_step("slow").execute(move |n: Value, _ctx| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move {
            if hang {
                std::future::pending::<()>().await;
            }
            Ok(json!({"v": n["v"].as_i64().unwrap() + 1}))
        }
    });
    let inner = Workflow::builder("inner").then(slow).commit().unwrap();
    let first = create_step("first").execute(|n: Value, _ctx| async move { Ok(n) });
    let last =
        create_step("last").execute(|n: Value, _ctx| async move { Ok(json!({"out": n["v"]})) });
    let wrapper = Workflow::builder("wrapper")
        .then(first)
        .then(inner.clone())
        .then(last)
        .commit()
        .unwrap();
    (wrapper, inner)
}

async fn a_nested_run_left_behind_is_continued_by_its_outer_run(store: Store) {
    let slow_runs = Arc::new(AtomicUsize::new(0));
    let (wrapper, inner) = nesting(true, &slow_runs);
    let dying = Instance::on(&store)
        .workflow(wrapper)
        .workflow(inner)
        .build();
    let run = dying.workflow("wrapper").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    // The inner run is stored running (the nested step is in flight) under its own id.
    stored_as(&dying, "inner", &run_id, WorkflowStatus::Running).await;
    task.abort();
    let _ = task.await;
    drop(dying);

    let (wrapper, inner) = nesting(false, &slow_runs);
    let next = Instance::on(&store)
        .workflow(wrapper)
        .workflow(inner)
        .build();
    // Only the outer run is restarted: it continues the inner one.
    let restarted = next.recover_workflow_runs().await;
    assert_eq!(restarted, vec![("wrapper".to_owned(), run_id.clone())]);
    let done = stored_as(&next, "wrapper", &run_id, WorkflowStatus::Success).await;
    assert_eq!(done.result.as_deref(), Some(&json!({"out": 2})));
    assert_eq!(
        slow_runs.load(Ordering::SeqCst),
        2,
        "the step in flight ran again"
    );
    let inner_run = stored_as(&next, "inner", &run_id, WorkflowStatus::Success).await;
    assert_eq!(inner_run.result.as_deref(), Some(&json!({"v": 2})));
}

async fn a_run_left_behind_can_be_canceled(store: Store) {
    let counts = Arc::new(Counts::default());
    let dying = Instance::on(&store)
        .workflow(workflow(&counts, true))
        .build();
    let run = dying.workflow("crunch").unwrap().create_run();
    let run_id = run.run_id().to_owned();
    let task = tokio::spawn(async move { run.start(json!({"v": 1})).await });
    stored_as(&dying, "crunch", &run_id, WorkflowStatus::Running).await;
    task.abort();
    let _ = task.await;
    drop(dying);
    let next = Instance::on(&store)
        .workflow(workflow(&counts, true))
        .build();
    let crunch = next.workflow("crunch").unwrap();
    crunch.create_run_with_id(&run_id).cancel().await.unwrap();
    stored_as(&next, "crunch", &run_id, WorkflowStatus::Canceled).await;
    assert!(next.recover_workflow_runs().await.is_empty());
}

// The durable backends only: the in-memory one outlives nothing, so it is given no snapshots
// mid-run (a run there is lost with its process, as everything else it holds).
on_every_backend!(@backend sqlite_store, sqlite;
    a_run_left_mid_step_is_continued_from_its_last_boundary,
    a_sleeping_run_wakes_after_a_restart,
    a_restart_is_refused_for_a_run_not_left_behind,
    a_run_left_behind_can_be_canceled,
    a_nested_run_left_behind_is_continued_by_its_outer_run
);
on_every_backend!(@backend postgres_store, postgres;
    a_run_left_mid_step_is_continued_from_its_last_boundary,
    a_sleeping_run_wakes_after_a_restart,
    a_restart_is_refused_for_a_run_not_left_behind,
    a_run_left_behind_can_be_canceled,
    a_nested_run_left_behind_is_continued_by_its_outer_run
);
