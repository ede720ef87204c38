//! Time travel: a stored run runs again from one of its steps, with new input or the input
//! that step had, keeping what came before; refusals are typed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use kestrel_core::workflow::{TimeTravel, Workflow, WorkflowRunError, WorkflowStatus, create_step};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct N {
    v: i64,
}

#[derive(Default)]
struct Runs {
    s1: AtomicUsize,
    s2: AtomicUsize,
    s3: AtomicUsize,
}

/// s1 (v + 1) → s2 (v × 10; suspends first when `gate` and the input is 99) → s3 (v - 1).
fn chain(runs: &Arc<Runs>) -> Workflow {
    let r = Arc::clone(runs);
    let s1 = create_step("s1").execute(move |n: Value, _ctx| {
        r.s1.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() + 1})) }
    });
    let r = Arc::clone(runs);
    let s2 = create_step("s2").execute(move |n: Value, ctx| {
        r.s2.fetch_add(1, Ordering::SeqCst);
        async move {
            if n["v"] == 99 && ctx.resume_data().is_none() {
                return Err(ctx.suspend(json!({"q": "sure?"})));
            }
            let times = ctx
                .resume_data()
                .and_then(|d| d["times"].as_i64())
                .unwrap_or(10);
            Ok(json!({"v": n["v"].as_i64().unwrap() * times}))
        }
    });
    let r = Arc::clone(runs);
    let s3 = create_step("s3").execute(move |n: Value, _ctx| {
        r.s3.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"v": n["v"].as_i64().unwrap() - 1})) }
    });
    Workflow::builder("chain")
        .then(s1)
        .then(s2)
        .then(s3)
        .commit()
        .unwrap()
}

fn counts(runs: &Runs) -> [usize; 3] {
    [
        runs.s1.load(Ordering::SeqCst),
        runs.s2.load(Ordering::SeqCst),
        runs.s3.load(Ordering::SeqCst),
    ]
}

#[tokio::test]
async fn a_run_travels_back_to_a_step_keeping_what_came_before() {
    let runs = Arc::new(Runs::default());
    let workflow = chain(&runs);
    let run = workflow.create_run();
    let first = run.start(json!({"v": 1})).await.unwrap();
    assert_eq!(first.result, Some(json!({"v": 19})));
    assert_eq!(counts(&runs), [1, 1, 1]);

    // New input for s2: s1 keeps its result, s2 and s3 run again.
    let stream = run
        .time_travel_stream(TimeTravel::to("s2").input(json!({"v": 5})))
        .await
        .unwrap();
    let events: Vec<Value> = stream
        .map(|e| serde_json::from_str(&e.to_json()).unwrap())
        .collect()
        .await;
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-start")
        .map(|e| e["payload"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["s2", "s3"]);
    assert_eq!(
        events.last().unwrap()["payload"]["finalWorkflowResult"],
        json!({"v": 49})
    );
    assert_eq!(counts(&runs), [1, 2, 2]);
    let stored = run.snapshot().await.unwrap().unwrap();
    assert_eq!(stored.status, WorkflowStatus::Success);
    assert_eq!(
        stored.steps["s1"].output.as_deref(),
        Some(&json!({"v": 2})),
        "kept"
    );
    assert_eq!(*stored.steps["s2"].payload, json!({"v": 5}));
    assert_eq!(stored.step_execution_path, ["s1", "s2", "s3"]);

    // Without input: the input the step had last.
    let again = run.time_travel(TimeTravel::to("s3")).await.unwrap();
    assert_eq!(again.result, Some(json!({"v": 49})));
    assert_eq!(counts(&runs), [1, 2, 3]);
}

#[tokio::test]
async fn a_suspended_run_travels_to_its_step_with_resume_data() {
    let runs = Arc::new(Runs::default());
    let workflow = chain(&runs);
    let run = workflow.create_run();
    let stopped = run.start(json!({"v": 98})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    let done = run
        .time_travel(TimeTravel::to("s2").resume_data(json!({"times": 2})))
        .await
        .unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(done.result, Some(json!({"v": 197})));
    assert_eq!(done.steps["s2"].resume_payload, Some(json!({"times": 2})));
}

#[tokio::test]
async fn time_travel_is_refused_with_a_typed_error() {
    let runs = Arc::new(Runs::default());
    let workflow = chain(&runs);
    let run = workflow.create_run();
    let unknown = run.time_travel(TimeTravel::to("s1")).await;
    assert!(
        matches!(unknown, Err(WorkflowRunError::UnknownRun { .. })),
        "{unknown:?}"
    );
    run.start(json!({"v": 1})).await.unwrap();
    let nowhere = run.time_travel(TimeTravel::to("s9")).await;
    assert!(
        matches!(&nowhere, Err(WorkflowRunError::UnknownStep { step, .. }) if step == "s9"),
        "{nowhere:?}"
    );
    // The new input is checked against the step's input schema.
    let typed = create_step("typed").execute(|n: N, _ctx| async move { Ok(json!({"v": n.v})) });
    let strict = Workflow::builder("strict").then(typed).commit().unwrap();
    let strict_run = strict.create_run();
    strict_run.start(json!({"v": 1})).await.unwrap();
    let bad = strict_run
        .time_travel(TimeTravel::to("typed").input(json!({"v": "one"})))
        .await;
    assert!(
        matches!(bad, Err(WorkflowRunError::InvalidInput { .. })),
        "{bad:?}"
    );

    // Resume data is checked against the step's resume schema, as a resume's is; nothing
    // runs again.
    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Answer {
        approved: bool,
    }
    let asks = create_step("asks")
        .resume_type::<Answer>()
        .execute(|n: Value, ctx| async move {
            match ctx.resume_data() {
                Some(answer) => Ok(json!({"v": n["v"], "answer": answer})),
                None => Err(ctx.suspend(json!({"q": "approve?"}))),
            }
        });
    let asking = Workflow::builder("asking").then(asks).commit().unwrap();
    let asking_run = asking.create_run();
    let stopped = asking_run.start(json!({"v": 1})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    let bad = asking_run
        .time_travel(TimeTravel::to("asks").resume_data(json!({"approved": "yes"})))
        .await;
    assert!(
        matches!(&bad, Err(WorkflowRunError::InvalidResumeData { step, .. }) if step == "asks"),
        "{bad:?}"
    );
    let still = asking_run.snapshot().await.unwrap().unwrap();
    assert_eq!(still.status, WorkflowStatus::Suspended, "nothing ran");
    let good = asking_run
        .time_travel(TimeTravel::to("asks").resume_data(json!({"approved": true})))
        .await
        .unwrap();
    assert_eq!(good.status, WorkflowStatus::Success);

    // A pending run has not run: nothing to travel in.
    let pending = workflow.create_run();
    pending.create().await.unwrap();
    let refused = pending
        .time_travel(TimeTravel::to("s1").input(json!({"v": 1})))
        .await;
    assert!(
        matches!(
            refused,
            Err(WorkflowRunError::TravelRefused {
                status: WorkflowStatus::Pending,
                ..
            })
        ),
        "{refused:?}"
    );
}
