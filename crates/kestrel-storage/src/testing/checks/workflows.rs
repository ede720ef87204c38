//! The checks of workflow runs: saves that create and replace, the status claim, listing
//! filters, deletes, and a workflow suspended in one "process" and resumed in the next.

use std::sync::Arc;

use kestrel_core::store::IntoStores;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::storage::Storage;
use crate::types::{PageRequest, WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus};

fn record(workflow: &str, run: &str, status: WorkflowStatus) -> WorkflowRunRecord {
    WorkflowRunRecord::new(workflow, run, status, raw(json!({"step": "one", "n": 1.5})))
}

/// A snapshot's JSON text.
fn raw(value: Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(&value).unwrap()
}

/// A stored snapshot, read as JSON (stores may give back equivalent text).
fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap()
}

/// A save creates the run, a later one replaces its snapshot and status (keeping its creation
/// time); a claim moves it between statuses once; a delete removes it.
pub async fn workflow_runs_save_claim_and_delete(store: Arc<dyn Storage>) {
    let mut first = record("w1", "r1", WorkflowStatus::Running);
    first.resource_id = Some("alice".into());
    let created = store.save_workflow_run(first.clone()).await.unwrap();
    assert_eq!(value(&created.snapshot), value(&first.snapshot));
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(value(&read.snapshot), json!({"step": "one", "n": 1.5}));
    assert_eq!(read.resource_id.as_deref(), Some("alice"));
    assert_eq!(read.status, WorkflowStatus::Running);
    assert!(
        store.get_workflow_run("w2", "r1").await.unwrap().is_none(),
        "runs are per workflow"
    );

    // A save with the same status and resource (the common boundary save) replaces the
    // snapshot; one that names another resource moves the run to it.
    let mut same = record("w1", "r1", WorkflowStatus::Running);
    same.snapshot = raw(json!({"step": "one and a half"}));
    same.resource_id = Some("alice".into());
    let saved = store.save_workflow_run(same).await.unwrap();
    assert_eq!(saved.created_at, created.created_at, "created once");
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(value(&read.snapshot), json!({"step": "one and a half"}));
    let mut moved = record("w1", "r1", WorkflowStatus::Running);
    moved.resource_id = Some("bob".into());
    store.save_workflow_run(moved).await.unwrap();
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(read.resource_id.as_deref(), Some("bob"));
    assert_eq!(read.created_at, created.created_at);

    let mut next = record("w1", "r1", WorkflowStatus::Suspended);
    next.snapshot = raw(json!({"step": "two"}));
    next.resource_id = Some("alice".into());
    let replaced = store.save_workflow_run(next).await.unwrap();
    assert_eq!(replaced.created_at, created.created_at, "created once");
    assert!(replaced.updated_at >= created.updated_at);
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(
        (read.status, value(&read.snapshot)),
        (WorkflowStatus::Suspended, json!({"step": "two"}))
    );

    let claim = |from, to| store.claim_workflow_run("w1", "r1", from, to);
    assert!(
        claim(WorkflowStatus::Suspended, WorkflowStatus::Running)
            .await
            .unwrap()
    );
    assert!(
        !claim(WorkflowStatus::Suspended, WorkflowStatus::Running)
            .await
            .unwrap(),
        "claimed once"
    );
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(read.status, WorkflowStatus::Running);

    // A running save over another stored status (no claim between) or another resource
    // lands whole: status, resource and snapshot.
    let stopped = record("w1", "r1", WorkflowStatus::Suspended);
    store.save_workflow_run(stopped).await.unwrap();
    let mut again = record("w1", "r1", WorkflowStatus::Running);
    again.snapshot = raw(json!({"step": "three"}));
    again.resource_id = None;
    let saved = store.save_workflow_run(again).await.unwrap();
    assert_eq!(saved.created_at, created.created_at, "created once");
    let read = store.get_workflow_run("w1", "r1").await.unwrap().unwrap();
    assert_eq!(
        (read.status, value(&read.snapshot), read.resource_id),
        (WorkflowStatus::Running, json!({"step": "three"}), None)
    );
    assert!(
        !store
            .claim_workflow_run(
                "w1",
                "nope",
                WorkflowStatus::Suspended,
                WorkflowStatus::Running
            )
            .await
            .unwrap()
    );

    assert!(store.delete_workflow_run("w1", "r1").await.unwrap());
    assert!(!store.delete_workflow_run("w1", "r1").await.unwrap());
    assert!(store.get_workflow_run("w1", "r1").await.unwrap().is_none());
    let bad = store
        .save_workflow_run(record("w1", "", WorkflowStatus::Running))
        .await;
    assert!(bad.is_err(), "an empty run id is refused");
}

/// Of eight claims racing on one suspended run, one wins.
pub async fn workflow_runs_concurrent_claims(store: Arc<dyn Storage>) {
    store
        .save_workflow_run(record("w1", "race", WorkflowStatus::Suspended))
        .await
        .unwrap();
    let claims = (0..8).map(|_| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .claim_workflow_run(
                    "w1",
                    "race",
                    WorkflowStatus::Suspended,
                    WorkflowStatus::Running,
                )
                .await
                .unwrap()
        })
    });
    let won = futures::future::join_all(claims)
        .await
        .into_iter()
        .filter(|won| *won.as_ref().unwrap())
        .count();
    assert_eq!(won, 1);
}

/// Listings filter by workflow, resource and status, newest first, in pages with a total.
pub async fn workflow_runs_list_filters(store: Arc<dyn Storage>) {
    for (n, (workflow, resource, status)) in [
        ("w1", "alice", WorkflowStatus::Success),
        ("w1", "bob", WorkflowStatus::Suspended),
        ("w1", "alice", WorkflowStatus::Suspended),
        ("w2", "alice", WorkflowStatus::Failed),
    ]
    .into_iter()
    .enumerate()
    {
        let mut run = record(workflow, &format!("r{n}"), status);
        run.resource_id = Some(resource.into());
        store.save_workflow_run(run).await.unwrap();
        // Distinct creation times, so the order is the order of the saves.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let list = |filter: WorkflowRunFilter| store.list_workflow_runs(filter);
    let ids = |page: crate::types::Page<WorkflowRunRecord>| {
        page.items.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
    };
    let w1 = WorkflowRunFilter {
        workflow_id: Some("w1".into()),
        page: PageRequest::new(0, 10),
        ..WorkflowRunFilter::default()
    };
    assert_eq!(ids(list(w1.clone()).await.unwrap()), ["r2", "r1", "r0"]);
    let suspended = WorkflowRunFilter {
        status: Some(WorkflowStatus::Suspended),
        ..w1.clone()
    };
    assert_eq!(ids(list(suspended).await.unwrap()), ["r2", "r1"]);
    let alice = WorkflowRunFilter {
        workflow_id: None,
        resource_id: Some("alice".into()),
        page: PageRequest::new(0, 10),
        ..WorkflowRunFilter::default()
    };
    assert_eq!(ids(list(alice).await.unwrap()), ["r3", "r2", "r0"]);
    let paged = list(WorkflowRunFilter {
        page: PageRequest::new(1, 2),
        ..w1
    })
    .await
    .unwrap();
    assert_eq!((paged.total, paged.items.len()), (3, 1));
    assert_eq!(paged.items[0].run_id, "r0");
}

/// A workflow run suspended on one instance of the workflow is resumed by another on the same
/// store (as after a restart), once: its earlier steps are not run again.
pub async fn workflow_runs_resume_from_the_store(store: Arc<dyn Storage>) {
    use kestrel_core::workflow::{Workflow, create_step};
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let build = |store: Arc<dyn Storage>| {
        let ran = Arc::clone(&ran);
        let first = create_step("first").execute(move |n: serde_json::Value, _ctx| {
            let ran = Arc::clone(&ran);
            async move {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(n)
            }
        });
        let ask = create_step("ask").execute(|n: serde_json::Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"q": "ok?"}))),
                Some(answer) => Ok(json!({"n": n["n"], "answer": answer})),
            }
        });
        Workflow::builder("durable")
            .store(store.into_stores().workflows)
            .then(first)
            .then(ask)
            .commit()
            .unwrap()
    };
    let before = build(Arc::clone(&store));
    let run = before.create_run();
    let stopped = run.start(json!({"n": 7})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    drop(before);

    let after = build(Arc::clone(&store));
    let resumed = after
        .create_run_with_id(run.run_id())
        .resume(Some("ask"), json!("yes"))
        .await
        .unwrap();
    assert_eq!(resumed.status, WorkflowStatus::Success);
    assert_eq!(resumed.result, Some(json!({"n": 7, "answer": "yes"})));
    assert_eq!(
        ran.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the first step ran once"
    );
    let stored = store
        .get_workflow_run("durable", run.run_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, WorkflowStatus::Success);
}

/// A workflow's snapshot policy decides what the store keeps: one that refuses the
/// step-boundary snapshots leaves no row until the run suspends; one that keeps them (on a
/// durable store) shows the run `running` while it goes on; once the policy refuses the run's
/// end, the snapshot stored before it is deleted, so no run is left `running` or `suspended`
/// after it finished.
pub async fn workflow_runs_snapshot_policy(store: Arc<dyn Storage>) {
    use kestrel_core::workflow::{Workflow, create_step};
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let build = |id: &str, keep: fn(WorkflowStatus) -> bool| {
        let peek_store = Arc::clone(&store);
        let workflow_id = id.to_owned();
        let seen = Arc::clone(&seen);
        // Reads what the store holds of its own run while the run is going on.
        let peek = create_step("peek").execute(move |n: Value, ctx| {
            let store = Arc::clone(&peek_store);
            let workflow_id = workflow_id.clone();
            async move {
                let stored = store
                    .get_workflow_run(&workflow_id, ctx.run_id())
                    .await
                    .map_err(|e| kestrel_core::workflow::StepError::new(e.to_string()))?;
                Ok(json!({"n": n["n"], "stored": stored.map(|r| r.status)}))
            }
        });
        let ask = create_step("ask").execute(|n: Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"q": "ok?"}))),
                Some(answer) => Ok(json!({"n": n["n"], "answer": answer})),
            }
        });
        Workflow::builder(id)
            .store(Arc::clone(&store).into_stores().workflows)
            .should_persist_snapshot(move |check| {
                seen.lock().unwrap().push((
                    check.status,
                    check.steps.keys().cloned().collect::<Vec<_>>(),
                ));
                keep(check.status)
            })
            .then(peek)
            .then(ask)
            .commit()
            .unwrap()
    };

    // Only the suspension is kept.
    let suspended_only = build("policy-suspended", |s| s == WorkflowStatus::Suspended);
    let run = suspended_only.create_run();
    let stopped = run.start(json!({"n": 1})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    assert_eq!(
        stopped.steps["peek"].output.as_deref(),
        Some(&json!({"n": 1, "stored": null})),
        "the boundary snapshots were refused: nothing stored while the run went on"
    );
    let stored = store
        .get_workflow_run("policy-suspended", run.run_id())
        .await
        .unwrap()
        .expect("the suspension is stored");
    assert_eq!(stored.status, WorkflowStatus::Suspended);
    {
        let seen = seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert_eq!(last.0, WorkflowStatus::Suspended);
        assert_eq!(last.1, ["ask", "peek"], "the policy sees the step results");
    }
    let resumed = suspended_only
        .create_run_with_id(run.run_id())
        .resume(Some("ask"), json!("yes"))
        .await
        .unwrap();
    assert_eq!(resumed.status, WorkflowStatus::Success);
    assert_eq!(resumed.result, Some(json!({"n": 1, "answer": "yes"})));
    assert!(
        store
            .get_workflow_run("policy-suspended", run.run_id())
            .await
            .unwrap()
            .is_none(),
        "the suspended snapshot went when the policy refused the run's end"
    );

    // Every snapshot but the end's: the run is stored while it goes on, and gone after.
    let all_but_end = build("policy-running", |s| s != WorkflowStatus::Success);
    let run = all_but_end.create_run();
    let stopped = run.start(json!({"n": 2})).await.unwrap();
    // Only a durable store gets the step boundaries' snapshots.
    let durable = Arc::clone(&store).into_stores().workflows.is_durable();
    let expected = if durable {
        json!("running")
    } else {
        Value::Null
    };
    assert_eq!(
        stopped.steps["peek"].output.as_deref(),
        Some(&json!({"n": 2, "stored": expected}))
    );
    let resumed = all_but_end
        .create_run_with_id(run.run_id())
        .resume(Some("ask"), json!("no"))
        .await
        .unwrap();
    assert_eq!(resumed.status, WorkflowStatus::Success);
    for workflow_id in ["policy-running", "policy-suspended"] {
        let left = store
            .list_workflow_runs(WorkflowRunFilter {
                workflow_id: Some(workflow_id.into()),
                page: PageRequest::new(0, 10),
                ..WorkflowRunFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(
            left.total, 0,
            "no finished run of {workflow_id} is left stored"
        );
    }
}

/// A save with a lease token raises the run's fence; one with a smaller token is refused and
/// writes nothing; a fence raised alone (an instance that took the run over) refuses the old
/// owner's next save; fences are per run and outlive the run's deletion; a save without a
/// token is not checked.
pub async fn workflow_runs_refuse_stale_lease_tokens(store: Arc<dyn Storage>) {
    use crate::error::StorageError;
    let fenced = |token: u64| {
        let mut record = record("wf-fence", "r", WorkflowStatus::Running);
        record.lease_token = Some(token);
        record
    };
    let mut first = fenced(10);
    first.snapshot = raw(json!({"at": "first"}));
    store.save_workflow_run(first).await.unwrap();
    let mut same = fenced(10);
    same.snapshot = raw(json!({"at": "same owner"}));
    store.save_workflow_run(same).await.unwrap();

    // Another instance takes the run over: it raises the fence before it reads the run.
    store.fence_workflow_run("wf-fence", "r", 20).await.unwrap();
    let mut stale = fenced(10);
    stale.status = WorkflowStatus::Success;
    stale.snapshot = raw(json!({"at": "stale owner"}));
    let refused = store.save_workflow_run(stale).await;
    assert!(
        matches!(
            refused,
            Err(StorageError::WorkflowRunFenced { ref workflow_id, ref run_id, token: 10, current: 20 })
                if workflow_id == "wf-fence" && run_id == "r"
        ),
        "{refused:?}"
    );
    let read = store
        .get_workflow_run("wf-fence", "r")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        value(&read.snapshot),
        json!({"at": "same owner"}),
        "nothing written"
    );
    assert_eq!(read.status, WorkflowStatus::Running);
    let lower = store.fence_workflow_run("wf-fence", "r", 15).await;
    assert!(
        matches!(
            lower,
            Err(StorageError::WorkflowRunFenced {
                token: 15,
                current: 20,
                ..
            })
        ),
        "{lower:?}"
    );

    // The new owner writes; so does a save without a token (not checked).
    let mut owner = fenced(20);
    owner.status = WorkflowStatus::Success;
    store.save_workflow_run(owner).await.unwrap();
    store
        .save_workflow_run(record("wf-fence", "r", WorkflowStatus::Success))
        .await
        .unwrap();

    // Per run: another run (of this workflow, or this run id in another workflow) is free.
    let mut other = record("wf-fence", "r2", WorkflowStatus::Running);
    other.lease_token = Some(1);
    store.save_workflow_run(other).await.unwrap();
    let mut elsewhere = record("wf-other", "r", WorkflowStatus::Running);
    elsewhere.lease_token = Some(1);
    store.save_workflow_run(elsewhere).await.unwrap();

    // A deleted run stays fenced: a stale owner cannot bring it back.
    assert!(store.delete_workflow_run("wf-fence", "r").await.unwrap());
    let revived = store.save_workflow_run(fenced(19)).await;
    assert!(
        matches!(revived, Err(StorageError::WorkflowRunFenced { .. })),
        "{revived:?}"
    );
    assert!(
        store
            .get_workflow_run("wf-fence", "r")
            .await
            .unwrap()
            .is_none()
    );
}

/// The same through the storage's [`kestrel_core::store::WorkflowStore`] port, as workflows see it: a stale save and a
/// stale fence are [`kestrel_core::workflow::WorkflowStoreError::is_fenced`].
pub async fn workflow_runs_fenced_through_the_workflow_store(store: Arc<dyn Storage>) {
    let workflows = store.into_stores().workflows;
    let snapshot: kestrel_core::workflow::WorkflowSnapshot = serde_json::from_value(json!({
        "workflowId": "wf-store", "runId": "r", "status": "running", "input": {},
        "steps": {}, "state": {}, "position": 0, "entryInput": {}, "stepExecutionPath": [],
        "leaseToken": 5
    }))
    .unwrap();
    workflows.save(&snapshot).await.unwrap();
    workflows.fence("wf-store", "r", 6).await.unwrap();
    let refused = workflows.save(&snapshot).await.unwrap_err();
    assert!(refused.is_fenced(), "{refused}");
    let lower = workflows.fence("wf-store", "r", 4).await.unwrap_err();
    assert!(lower.is_fenced(), "{lower}");
    let unrelated = workflows.fence("", "r", 4).await.unwrap_err();
    assert!(
        !unrelated.is_fenced(),
        "an invalid id is another error: {unrelated}"
    );
}
