//! Foreach items that suspend: the other items go on, the step suspends with the waiting
//! items' indices, and each is resumed on its own by index (Mastra's `forEachIndex`), the
//! items that had ended keeping their outputs; bad indices are typed errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kestrel_core::workflow::{StepStatus, Workflow, WorkflowRunError, WorkflowStatus, create_step};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Answer {
    ok: bool,
}

/// `review` over `[v…]`: an odd item suspends until it is answered; an even one doubles.
/// Then `count` sums the outputs.
fn reviews(runs: &Arc<AtomicUsize>) -> Workflow {
    let runs = Arc::clone(runs);
    let review = create_step("review")
        .resume_type::<Answer>()
        .execute(move |v: i64, ctx| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                if v % 2 == 0 {
                    return Ok(json!(v * 2));
                }
                match ctx.resume_data() {
                    None => Err(ctx.suspend(json!({"check": v}))),
                    Some(answer) if answer["ok"] == true => Ok(json!(v * 100)),
                    Some(_) => Ok(json!(0)),
                }
            }
        });
    let count = create_step("count").execute(|outputs: Vec<i64>, _ctx| async move {
        Ok(json!({"sum": outputs.iter().sum::<i64>(), "outputs": outputs}))
    });
    Workflow::builder("reviews")
        .foreach(review, 2)
        .then(count)
        .commit()
        .unwrap()
}

#[tokio::test]
async fn suspended_items_wait_while_the_others_end_and_each_is_resumed_by_index() {
    let runs = Arc::new(AtomicUsize::new(0));
    let workflow = reviews(&runs);
    let run = workflow.create_run();
    let stream = run.stream(json!([2, 1, 4, 3])).await.unwrap();
    let events: Vec<Value> = stream
        .map(|e| serde_json::from_str(&e.to_json()).unwrap())
        .collect()
        .await;
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-progress")
        .map(|e| e["payload"]["iterationStatus"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.iter().filter(|s| **s == "suspended").count(), 2);
    assert_eq!(statuses.iter().filter(|s| **s == "success").count(), 2);
    let suspended = events
        .iter()
        .find(|e| e["type"] == "workflow-step-suspended")
        .unwrap();
    let meta = &suspended["payload"]["suspendPayload"]["__foreach_meta"]["items"];
    assert_eq!(
        meta,
        &json!([{"index": 1, "payload": {"check": 1}}, {"index": 3, "payload": {"check": 3}}])
    );
    assert_eq!(
        events.last().unwrap()["payload"]["workflowStatus"],
        "suspended"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);

    // Two wait: a resume must say which.
    let unnamed = run.resume(None, json!({"ok": true})).await;
    assert!(
        matches!(&unnamed, Err(WorkflowRunError::NotSuspendedItem { index: None, suspended, .. }) if suspended == &[1, 3]),
        "{unnamed:?}"
    );
    let ended = run.resume_item(None, 0, json!({"ok": true})).await;
    assert!(
        matches!(
            ended,
            Err(WorkflowRunError::NotSuspendedItem { index: Some(0), .. })
        ),
        "{ended:?}"
    );
    let bad = run
        .resume_item(Some("review"), 1, json!({"ok": "yes"}))
        .await;
    assert!(
        matches!(bad, Err(WorkflowRunError::InvalidResumeData { .. })),
        "{bad:?}"
    );

    // Item 3 first: item 1 still waits, and the items that ended are not run again.
    let first = run
        .resume_item(Some("review"), 3, json!({"ok": true}))
        .await
        .unwrap();
    assert_eq!(first.status, WorkflowStatus::Suspended);
    assert_eq!(runs.load(Ordering::SeqCst), 5, "only item 3 ran");
    let step = &first.steps["review"];
    assert_eq!(step.status, StepStatus::Suspended);
    assert_eq!(step.output.as_deref(), Some(&json!([4, null, 8, 300])));
    // One left: no index needed.
    let done = run.resume(None, json!({"ok": false})).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(runs.load(Ordering::SeqCst), 6);
    assert_eq!(
        done.result,
        Some(json!({"sum": 312, "outputs": [4, 0, 8, 300]}))
    );
}

#[tokio::test]
async fn an_item_index_on_a_step_that_is_not_a_foreach_is_refused() {
    let ask = create_step("ask")
        .resume_type::<Answer>()
        .execute(|_: Value, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({}))),
                Some(_) => Ok(json!("ok")),
            }
        });
    let workflow = Workflow::builder("plain").then(ask).commit().unwrap();
    let run = workflow.create_run();
    assert_eq!(
        run.start(json!({})).await.unwrap().status,
        WorkflowStatus::Suspended
    );
    let refused = run.resume_item(Some("ask"), 0, json!({"ok": true})).await;
    assert!(
        matches!(refused, Err(WorkflowRunError::NotSuspendedItem { .. })),
        "{refused:?}"
    );
    let done = run.resume(Some("ask"), json!({"ok": true})).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
}

/// More events than the stream's backlog (256) within one poll of the run: the run waits for
/// the reader instead of dropping any, and they come in order.
#[tokio::test]
async fn a_stream_with_more_events_than_its_backlog_loses_none() {
    let double = create_step("double").execute(|v: i64, _ctx| async move { Ok(v * 2) });
    let workflow = Workflow::builder("many")
        .foreach(double, 1)
        .commit()
        .unwrap();
    let items: Vec<i64> = (0..600).collect();
    let stream = workflow.create_run().stream(json!(items)).await.unwrap();
    let events: Vec<Value> = stream
        .map(|e| serde_json::from_str(&e.to_json()).unwrap())
        .collect()
        .await;
    let completed: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-progress")
        .map(|e| e["payload"]["completedCount"].as_u64().unwrap())
        .collect();
    assert_eq!(completed, (1..=600).collect::<Vec<u64>>());
    let last = events.last().unwrap();
    assert_eq!(last["type"], "workflow-finish");
    let doubled: Vec<i64> = (0..600).map(|v| v * 2).collect();
    assert_eq!(last["payload"]["finalWorkflowResult"], json!(doubled));
}
