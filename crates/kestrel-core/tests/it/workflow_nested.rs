//! Nested workflows: a workflow as a step of another. The inner steps' events reach the outer
//! stream with prefixed ids (`nested.ask`), an inner suspension suspends the outer run at the
//! path `["nested", "ask"]`, a resume at that path is checked against the inner step's schema
//! before anything is claimed, and an inner failure fails the outer run, naming it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use kestrel_core::workflow::{StepError, Workflow, WorkflowRunError, WorkflowStatus, create_step};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Approval {
    ok: bool,
}

/// `nested`: `a` (v + 1), then `ask`, which suspends until `{ok}` (with `gate`), then
/// passes its input on (but fails on v = 99).
fn inner(gate: bool) -> Workflow {
    let a = create_step("a")
        .execute(|n: Value, _ctx| async move { Ok(json!({"v": n["v"].as_i64().unwrap() + 1})) });
    let ask =
        create_step("ask")
            .resume_type::<Approval>()
            .execute(move |n: Value, ctx| async move {
                if gate && ctx.resume_data().is_none() {
                    return Err(ctx.suspend(json!({"q": "ok?"})));
                }
                if n["v"] == 99 {
                    return Err(StepError::new("ninety-nine is refused"));
                }
                Ok(n)
            });
    Workflow::builder("nested")
        .then(a)
        .then(ask)
        .commit()
        .unwrap()
}

/// `outer`: `prep` (v × 10), the nested workflow, then `done` ({v, done: true}).
fn outer(gate: bool) -> Workflow {
    let prep = create_step("prep")
        .execute(|n: Value, _ctx| async move { Ok(json!({"v": n["v"].as_i64().unwrap() * 10})) });
    let done = create_step("done")
        .execute(|n: Value, _ctx| async move { Ok(json!({"v": n["v"], "done": true})) });
    Workflow::builder("outer")
        .then(prep)
        .then(inner(gate))
        .then(done)
        .commit()
        .unwrap()
}

/// `(type, payload.id)` of each event.
fn shape(events: &[kestrel_core::event::Event]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let v: Value = serde_json::from_str(&e.to_json()).unwrap();
            (
                v["type"].as_str().unwrap().to_owned(),
                v["payload"]["id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn inner_steps_stream_with_prefixed_ids_and_their_output_flows_on() {
    let workflow = outer(false);
    let run = workflow.create_run();
    let stream = run.stream(json!({"v": 1})).await.unwrap();
    let events: Vec<_> = stream.collect().await;
    let got = shape(&events);
    let expected: Vec<(String, String)> = [
        ("workflow-start", ""),
        ("workflow-step-start", "prep"),
        ("workflow-step-result", "prep"),
        ("workflow-step-start", "nested"),
        ("workflow-step-start", "nested.a"),
        ("workflow-step-result", "nested.a"),
        ("workflow-step-start", "nested.ask"),
        ("workflow-step-result", "nested.ask"),
        ("workflow-step-result", "nested"),
        ("workflow-step-start", "done"),
        ("workflow-step-result", "done"),
        ("workflow-finish", ""),
    ]
    .iter()
    .map(|(t, id)| ((*t).to_owned(), (*id).to_owned()))
    .collect();
    assert_eq!(got, expected);
    let inner_start: Value = serde_json::from_str(&events[4].to_json()).unwrap();
    assert_eq!(inner_start["payload"]["stepName"], "nested.a");
    assert_eq!(inner_start["runId"], run.run_id());
    let result = workflow.create_run().start(json!({"v": 2})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Success);
    assert_eq!(result.result, Some(json!({"v": 21, "done": true})));
    assert_eq!(
        result.steps["nested"].output.as_deref(),
        Some(&json!({"v": 21}))
    );
}

#[tokio::test]
async fn an_inner_suspension_suspends_the_outer_run_at_its_path() {
    let workflow = outer(true);
    let run = workflow.create_run();
    let stream = run.stream(json!({"v": 1})).await.unwrap();
    let events: Vec<_> = stream.collect().await;
    let got = shape(&events);
    assert_eq!(
        got[got.len() - 3..],
        [
            (
                "workflow-step-suspended".to_owned(),
                "nested.ask".to_owned()
            ),
            ("workflow-step-suspended".to_owned(), "nested".to_owned()),
            ("workflow-finish".to_owned(), String::new()),
        ]
    );
    let suspended: Value = serde_json::from_str(&events[events.len() - 2].to_json()).unwrap();
    assert_eq!(
        suspended["payload"]["suspendPayload"],
        json!({"q": "ok?", "__workflow_meta": {"runId": run.run_id(), "path": ["ask"]}})
    );
    let snapshot = run.snapshot().await.unwrap().unwrap();
    assert_eq!(snapshot.status, WorkflowStatus::Suspended);

    // Checked down to the inner step before the run is claimed.
    let bad = run
        .resume_at(&["nested", "ask"], json!({"ok": "yes"}))
        .await;
    assert!(
        matches!(&bad, Err(WorkflowRunError::InvalidResumeData { step, .. }) if step == "ask"),
        "{bad:?}"
    );
    let wrong = run.resume_at(&["nested", "a"], json!({"ok": true})).await;
    assert!(
        matches!(wrong, Err(WorkflowRunError::NotSuspendedStep { .. })),
        "{wrong:?}"
    );
    let too_deep = run
        .resume_at(&["nested", "ask", "x"], json!({"ok": true}))
        .await;
    assert!(
        matches!(too_deep, Err(WorkflowRunError::NotSuspendedStep { .. })),
        "{too_deep:?}"
    );
    assert_eq!(
        run.snapshot().await.unwrap().unwrap().status,
        WorkflowStatus::Suspended,
        "a refused resume leaves the run suspended"
    );

    let resumed = run
        .resume_at_stream(&["nested", "ask"], json!({"ok": true}))
        .await
        .unwrap();
    let events: Vec<_> = resumed.collect().await;
    let got = shape(&events);
    assert!(
        got.contains(&("workflow-step-result".to_owned(), "nested.ask".to_owned())),
        "{got:?}"
    );
    let finish: Value = serde_json::from_str(&events.last().unwrap().to_json()).unwrap();
    assert_eq!(finish["payload"]["workflowStatus"], "success");
    assert_eq!(
        finish["payload"]["finalWorkflowResult"],
        json!({"v": 11, "done": true})
    );
}

#[tokio::test]
async fn the_result_names_the_inner_path_and_a_bare_resume_finds_it() {
    let workflow = outer(true);
    let run = workflow.create_run();
    let stopped = run.start(json!({"v": 3})).await.unwrap();
    assert_eq!(
        stopped.suspended,
        vec![vec!["nested".to_owned(), "ask".to_owned()]]
    );
    // One step waits, at any depth: no path needed.
    let done = run.resume(None, json!({"ok": true})).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(done.result, Some(json!({"v": 31, "done": true})));
    assert_eq!(
        done.steps["nested"].resume_payload,
        Some(json!({"ok": true}))
    );
}

#[tokio::test]
async fn an_inner_failure_fails_the_outer_run_naming_the_nested_workflow() {
    let prep = create_step("prep").execute(|_: Value, _ctx| async { Ok(json!({"v": 98})) });
    let workflow = Workflow::builder("outer")
        .then(prep)
        .then(inner(false))
        .commit()
        .unwrap();
    let failed = workflow.create_run().start(json!({})).await.unwrap();
    assert_eq!(failed.status, WorkflowStatus::Failed);
    let message = failed.error.unwrap().message;
    assert!(
        message.contains("nested") && message.contains("ninety-nine"),
        "{message}"
    );
}
