//! A workflow's snapshot policy (Mastra's `shouldPersistSnapshot`) on the default in-memory
//! store: a workflow that keeps no snapshots leaves nothing to read back, lets its run ids be
//! used again, and streams and returns the same; one that keeps suspensions can be resumed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kestrel_core::workflow::{
    Workflow, WorkflowRunError, WorkflowRunsQuery, WorkflowStatus, create_step,
};
use serde_json::{Value, json};

fn ask(id: &str, keep: fn(WorkflowStatus) -> bool, asked: Arc<AtomicUsize>) -> Workflow {
    let double = create_step("double").execute(|n: Value, _ctx| async move {
        Ok(json!({"n": n["n"].as_i64().unwrap_or(0) * 2}))
    });
    let ask = create_step("ask").execute(|n: Value, ctx| async move {
        match ctx.resume_data() {
            None if n["n"] == 2 => Err(ctx.suspend(json!({"q": "ok?"}))),
            None => Ok(n),
            Some(answer) => Ok(json!({"n": n["n"], "answer": answer})),
        }
    });
    Workflow::builder(id)
        .should_persist_snapshot(move |check| {
            asked.fetch_add(1, Ordering::SeqCst);
            keep(check.status)
        })
        .then(double)
        .then(ask)
        .commit()
        .unwrap()
}

async fn stored_runs(workflow: &Workflow) -> u64 {
    let query = WorkflowRunsQuery {
        workflow_id: Some(workflow.id().to_owned()),
        ..WorkflowRunsQuery::default()
    };
    workflow.store().list(&query).await.unwrap().total
}

#[tokio::test]
async fn a_workflow_that_keeps_no_snapshots_leaves_nothing_behind() {
    let asked = Arc::new(AtomicUsize::new(0));
    let workflow = ask("keep-none", |_| false, Arc::clone(&asked));
    let run = workflow.create_run();
    let result = run.start(json!({"n": 3})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Success);
    assert_eq!(result.result, Some(json!({"n": 6})));
    assert_eq!(
        result.steps.len(),
        2,
        "the result keeps every step's result"
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "asked once, at the end (not durable)"
    );
    assert!(run.snapshot().await.unwrap().is_none());
    assert_eq!(stored_runs(&workflow).await, 0);

    // Nothing says the id was used: it can run again, streamed.
    let mut stream = run.stream(json!({"n": 5})).await.unwrap();
    let mut kinds = Vec::new();
    while let Some(event) = stream.next().await {
        kinds.push(serde_json::to_value(&event).unwrap()["type"].clone());
    }
    assert_eq!(kinds.first(), Some(&json!("workflow-start")));
    assert_eq!(kinds.last(), Some(&json!("workflow-finish")));
    assert_eq!(
        stream.result().await.unwrap().result,
        Some(json!({"n": 10}))
    );
    assert_eq!(stored_runs(&workflow).await, 0);

    // A suspension that is not kept cannot be resumed, and says why.
    let stopped = workflow.create_run();
    let result = stopped.start(json!({"n": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Suspended);
    let error = stopped.resume(Some("ask"), json!("yes")).await.unwrap_err();
    assert!(
        matches!(error, WorkflowRunError::UnknownRun { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_workflow_that_keeps_suspensions_resumes_them_and_forgets_them_after() {
    let asked = Arc::new(AtomicUsize::new(0));
    let workflow = ask(
        "keep-suspended",
        |status| status == WorkflowStatus::Suspended,
        Arc::clone(&asked),
    );
    let done = workflow.create_run();
    done.start(json!({"n": 4})).await.unwrap();
    assert_eq!(
        stored_runs(&workflow).await,
        0,
        "a run that ended is not kept"
    );

    let run = workflow.create_run();
    let stopped = run.start(json!({"n": 1})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    let stored = run
        .snapshot()
        .await
        .unwrap()
        .expect("the suspension is kept");
    assert_eq!(stored.status, WorkflowStatus::Suspended);
    let resumed = workflow
        .create_run_with_id(run.run_id())
        .resume(Some("ask"), json!("yes"))
        .await
        .unwrap();
    assert_eq!(resumed.result, Some(json!({"n": 2, "answer": "yes"})));
    assert!(
        run.snapshot().await.unwrap().is_none(),
        "the suspension went when the run ended"
    );
    assert_eq!(stored_runs(&workflow).await, 0);
}

#[tokio::test]
async fn a_policy_that_panics_keeps_the_snapshot() {
    let step = create_step("one").execute(|n: Value, _ctx| async move { Ok(n) });
    let workflow = Workflow::builder("keep-on-panic")
        .should_persist_snapshot(|_| panic!("the policy broke"))
        .then(step)
        .commit()
        .unwrap();
    let run = workflow.create_run();
    let result = run.start(json!({"n": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Success);
    let stored = run.snapshot().await.unwrap().expect("kept, not lost");
    assert_eq!(stored.status, WorkflowStatus::Success);
}
