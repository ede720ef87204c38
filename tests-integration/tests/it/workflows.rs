//! Workflows registered on a `Kestrel` instance keep their runs in the instance's memory
//! storage: a run suspended on one instance is resumed on the next one over the same store (a
//! restart), and the store lists it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kestrel_core::workflow::{Workflow, WorkflowStatus, create_step};
use kestrel_storage::on_every_backend;
use kestrel_storage::testing::Store;
use kestrel_storage::{PageRequest, WorkflowRunFilter};
use serde_json::{Value, json};

use super::fixture::Instance;

fn approval_workflow() -> Workflow {
    let draft = create_step("draft")
        .execute(|n: Value, _ctx| async move { Ok(json!({"text": format!("draft {}", n["n"])})) });
    let review = create_step("review").execute(|draft: Value, ctx| async move {
        match ctx.resume_data() {
            None => Err(ctx.suspend(json!({"review": draft["text"]}))),
            Some(verdict) => Ok(json!({"text": draft["text"], "approved": verdict["approved"]})),
        }
    });
    Workflow::builder("publish")
        .then(draft)
        .then(review)
        .commit()
        .unwrap()
}

async fn a_suspended_workflow_run_survives_a_restart(store: Store) {
    let before = Instance::on(&store).workflow(approval_workflow()).build();
    let run = before
        .workflow("publish")
        .unwrap()
        .create_run()
        .resource("alice");
    let stopped = run.start(json!({"n": 1})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    assert_eq!(
        stopped.suspend_payload["review"],
        json!({"review": "draft 1"})
    );
    drop(before);

    let after = Instance::on(&store).workflow(approval_workflow()).build();
    let done = after
        .workflow("publish")
        .unwrap()
        .create_run_with_id(run.run_id())
        .resume(None, json!({"approved": true}))
        .await
        .unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(
        done.result,
        Some(json!({"text": "draft 1", "approved": true}))
    );
    let listed = store
        .list_workflow_runs(WorkflowRunFilter {
            workflow_id: Some("publish".into()),
            resource_id: Some("alice".into()),
            page: PageRequest::new(0, 10),
            ..WorkflowRunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.items[0].status, WorkflowStatus::Success);
    let unknown = after.workflow("nope").unwrap_err().to_string();
    assert!(unknown.contains("publish"), "{unknown}");
}

on_every_backend!(a_suspended_workflow_run_survives_a_restart);
