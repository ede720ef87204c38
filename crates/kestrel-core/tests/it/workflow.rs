//! Workflows: the five-step workflow Mastra's fixtures were captured from (s1 → parallel(a, b)
//! → branch(hi | lo) → s3), whose streamed events match Mastra's field by field (ids and
//! times aside); results, bails, suspensions, failures, panics and commit checks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use kestrel_core::event::Event;
use kestrel_core::workflow::{
    IntoStep, Step, StepError, StepStatus, Workflow, WorkflowBuildError, WorkflowRunError,
    WorkflowStatus, create_step, when,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct V {
    v: i64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct X {
    x: i64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Y {
    y: i64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Ab {
    a: X,
    b: Y,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Hi {
    hi: V,
}

/// s1 → parallel(a, b) → branch(hi if x + y > 5 | lo otherwise), then `last`.
fn five_steps(id: &str, last: impl Step + 'static) -> Workflow {
    let s1 = create_step("s1").execute(|n: V, _ctx| async move { Ok(V { v: n.v * 2 }) });
    let a = create_step("a").execute(|n: V, _ctx| async move { Ok(X { x: n.v * 2 }) });
    let b = create_step("b").execute(|n: V, _ctx| async move { Ok(Y { y: n.v * 3 }) });
    let hi = create_step("hi").execute(|ab: Ab, _ctx| async move { Ok(V { v: ab.a.x + ab.b.y }) });
    let lo = create_step("lo").execute(|ab: Ab, _ctx| async move { Ok(V { v: ab.a.x - ab.b.y }) });
    let sum = |input: &Value| input["a"]["x"].as_i64().unwrap() + input["b"]["y"].as_i64().unwrap();
    Workflow::builder(id)
        .then(s1)
        .parallel([a, b])
        .branch([
            (when(move |c| async move { Ok(sum(&c.input) > 5) }), hi),
            (when(move |c| async move { Ok(sum(&c.input) <= 5) }), lo),
        ])
        .then(last)
        .commit()
        .unwrap()
}

fn w9() -> Workflow {
    let s3 = create_step("s3").execute(|h: Hi, _ctx| async move { Ok(V { v: h.hi.v * 10 }) });
    five_steps("w9", s3)
}

/// The events as JSON with what differs between runs (ids and times) blanked.
fn normalized(events: impl IntoIterator<Item = Value>) -> Vec<Value> {
    events
        .into_iter()
        .map(|mut event| {
            event["runId"] = json!("run");
            if let Some(payload) = event.get_mut("payload").and_then(Value::as_object_mut) {
                for key in [
                    "stepCallId",
                    "startedAt",
                    "endedAt",
                    "suspendedAt",
                    "resumedAt",
                ] {
                    if let Some(value) = payload.get_mut(key) {
                        *value = json!(key);
                    }
                }
                if let Some(run_id) = payload.get_mut("runId") {
                    *run_id = json!("run");
                }
            }
            event
        })
        .collect()
}

fn fixture(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub(crate) async fn streamed(
    workflow: &Workflow,
    input: Value,
) -> (Vec<Event>, kestrel_core::workflow::WorkflowResult) {
    collect(workflow.create_run().stream(input).await.unwrap()).await
}

async fn collect(
    mut stream: kestrel_core::workflow::WorkflowStream,
) -> (Vec<Event>, kestrel_core::workflow::WorkflowResult) {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    (events, stream.result().await.unwrap())
}

pub(crate) fn json_of(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

#[tokio::test]
async fn the_five_step_workflow_streams_mastras_events() {
    let (events, result) = streamed(&w9(), json!({"v": 1})).await;
    assert_eq!(
        normalized(json_of(&events)),
        normalized(fixture("mastra-workflow-stream.json"))
    );
    // The events round-trip through their wire form.
    for event in &events {
        let back: Event = serde_json::from_value(serde_json::to_value(event).unwrap()).unwrap();
        assert_eq!(&back, event);
    }
    assert_eq!(result.status, WorkflowStatus::Success);
    assert_eq!(result.result, Some(json!({"v": 100})));
    assert_eq!(result.step_execution_path, ["s1", "s3"]);
    assert_eq!(
        result.steps["hi"].output.as_deref(),
        Some(&json!({"v": 10}))
    );
    assert!(
        !result.steps.contains_key("lo"),
        "the false arm did not run"
    );
}

#[tokio::test]
async fn start_returns_the_same_result_without_events() {
    let result = w9().create_run().start(json!({"v": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Success);
    assert_eq!(result.result, Some(json!({"v": 100})));
    assert_eq!(result.input, json!({"v": 1}));
    assert_eq!(*result.steps["a"].payload, json!({"v": 2}));
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Approval {
    ok: bool,
}

/// W10: the five steps with `ask` last, which suspends until it is resumed with `{ok}`.
fn w10() -> Workflow {
    let ask = create_step("ask")
        .resume_type::<Approval>()
        .execute(|h: Hi, ctx| async move {
            match ctx.resume_data() {
                None => Err(ctx.suspend(json!({"q": "approve?"}))),
                Some(data) if data["ok"] == true => Ok(V { v: h.hi.v + 1 }),
                Some(_) => Ok(V { v: 0 }),
            }
        });
    five_steps("w10", ask)
}

#[tokio::test]
async fn a_suspended_run_resumes_as_mastras_does() {
    let workflow = w10();
    let run = workflow.create_run();
    let (first, suspended) = collect(run.stream(json!({"v": 1})).await.unwrap()).await;
    let expected = normalized(fixture("mastra-workflow-suspend-resume.json"));
    let split = expected
        .iter()
        .position(|e| e["type"] == "workflow-finish")
        .unwrap()
        + 1;
    assert_eq!(normalized(json_of(&first)), expected[..split]);
    assert_eq!(suspended.status, WorkflowStatus::Suspended);
    assert_eq!(suspended.suspended, vec![vec!["ask".to_owned()]]);
    assert_eq!(suspended.suspend_payload["ask"], json!({"q": "approve?"}));

    // Resumed through a fresh handle on the same run id, as another request would.
    let again = workflow.create_run_with_id(run.run_id());
    let (second, resumed) = collect(
        again
            .resume_stream(Some("ask"), json!({"ok": true}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(normalized(json_of(&second)), expected[split..]);
    // The resumed step keeps its first start time.
    assert_eq!(
        second[1].kind_json()["startedAt"],
        first.iter().rev().nth(2).unwrap().kind_json()["startedAt"]
    );
    assert_eq!(resumed.status, WorkflowStatus::Success);
    assert_eq!(resumed.result, Some(json!({"v": 11})));
    assert_eq!(
        resumed.steps["s1"].output.as_deref(),
        Some(&json!({"v": 2})),
        "earlier results are kept"
    );
    assert_eq!(
        resumed.steps["ask"].resume_payload,
        Some(json!({"ok": true}))
    );
}

/// The payload of an event, as JSON.
trait KindJson {
    fn kind_json(&self) -> Value;
}

impl KindJson for Event {
    fn kind_json(&self) -> Value {
        serde_json::to_value(self).unwrap()["payload"].clone()
    }
}

#[tokio::test]
async fn a_resume_is_checked_and_claimed_once() {
    let workflow = w10();
    let run = workflow.create_run();
    assert_eq!(
        run.start(json!({"v": 1})).await.unwrap().status,
        WorkflowStatus::Suspended
    );
    let unknown = workflow
        .create_run_with_id("nope")
        .resume(None, json!({}))
        .await;
    assert!(
        matches!(unknown, Err(WorkflowRunError::UnknownRun { .. })),
        "{unknown:?}"
    );
    let wrong_step = run.resume(Some("s1"), json!({"ok": true})).await;
    let Err(WorkflowRunError::NotSuspendedStep { suspended, .. }) = wrong_step else {
        panic!("resumed the wrong step: {wrong_step:?}");
    };
    assert_eq!(suspended, ["ask"]);
    let bad_data = run.resume(Some("ask"), json!({"ok": "yes"})).await;
    let Err(WorkflowRunError::InvalidResumeData { step, errors }) = bad_data else {
        panic!("took bad data: {bad_data:?}");
    };
    assert_eq!(step, "ask");
    assert!(errors.iter().any(|e| e.contains("ok")), "{errors:?}");
    let again = run.start(json!({"v": 1})).await;
    assert!(
        matches!(again, Err(WorkflowRunError::AlreadyStarted { .. })),
        "{again:?}"
    );

    // Eight resumers race: one wins.
    let racing = (0..8).map(|_| {
        let run = workflow.create_run_with_id(run.run_id());
        async move { run.resume(None, json!({"ok": true})).await }
    });
    let outcomes = futures::future::join_all(racing).await;
    let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    assert_eq!(won[0].result, Some(json!({"v": 11})));
    // A loser that read the run before the winner's claim is told it lost the claim; one
    // that read it after, that it is no longer suspended.
    assert!(
        outcomes.iter().all(|o| matches!(
            o,
            Ok(_)
                | Err(WorkflowRunError::AlreadyClaimed { .. })
                | Err(WorkflowRunError::NotSuspended { .. })
        )),
        "{outcomes:?}"
    );
    let done = run.resume(None, json!({"ok": true})).await;
    assert!(
        matches!(
            done,
            Err(WorkflowRunError::NotSuspended {
                status: WorkflowStatus::Success,
                ..
            })
        ),
        "{done:?}"
    );
    let cancel = run.cancel().await;
    assert!(
        matches!(cancel, Err(WorkflowRunError::Ended { .. })),
        "{cancel:?}"
    );
}

#[tokio::test]
async fn a_suspended_parallel_arm_resumes_alone_and_a_suspended_run_can_be_canceled() {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let quick = create_step("quick").execute(move |n: V, _ctx| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(X { x: n.v })
        }
    });
    let asks = create_step("asks").execute(|n: V, ctx| async move {
        match ctx.resume_data() {
            None => Err(ctx.suspend(json!({"why": "check"}))),
            Some(extra) => Ok(Y {
                y: n.v + extra["add"].as_i64().unwrap_or(0),
            }),
        }
    });
    let workflow = Workflow::builder("arms")
        .parallel([quick.into_step(), asks.into_step()])
        .commit()
        .unwrap();
    let run = workflow.create_run();
    let stopped = run.start(json!({"v": 5})).await.unwrap();
    assert_eq!(stopped.status, WorkflowStatus::Suspended);
    assert_eq!(stopped.steps["quick"].status, StepStatus::Success);
    let done = run.resume(Some("asks"), json!({"add": 2})).await.unwrap();
    assert_eq!(
        done.result,
        Some(json!({"quick": {"x": 5}, "asks": {"y": 7}}))
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the finished arm did not run again"
    );

    let other = workflow.create_run();
    other.start(json!({"v": 1})).await.unwrap();
    other.cancel().await.unwrap();
    let snapshot = other.snapshot().await.unwrap().unwrap();
    assert_eq!(snapshot.status, WorkflowStatus::Canceled);
    let late = other.resume(None, json!({})).await;
    assert!(
        matches!(
            late,
            Err(WorkflowRunError::NotSuspended {
                status: WorkflowStatus::Canceled,
                ..
            })
        ),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_bail_ends_the_run_with_its_value() {
    let stop = create_step("stop").execute(|n: V, ctx| async move {
        if n.v > 0 {
            return Err(ctx.bail(json!({"early": n.v})));
        }
        Ok(n)
    });
    let never = create_step("never").execute(|_n: V, _ctx| async move {
        panic!("a step after a bail ran");
        #[allow(unreachable_code)]
        Ok(V { v: 0 })
    });
    let workflow = Workflow::builder("bail")
        .then(stop)
        .then(never)
        .commit()
        .unwrap();
    let (events, result) = streamed(&workflow, json!({"v": 3})).await;
    assert_eq!(result.status, WorkflowStatus::Success);
    assert_eq!(result.result, Some(json!({"early": 3})));
    assert_eq!(result.steps["stop"].status, StepStatus::Success);
    let bailed = json_of(&events)
        .into_iter()
        .find(|e| e["type"] == "workflow-step-result")
        .unwrap();
    assert_eq!(bailed["payload"]["status"], "bailed");
}

#[tokio::test]
async fn a_failing_or_panicking_step_fails_the_run_naming_it() {
    let fails = create_step("fails")
        .execute(|_n: V, _ctx| async move { Err::<V, _>(StepError::new("the service said no")) });
    let workflow = Workflow::builder("failing").then(fails).commit().unwrap();
    let (events, result) = streamed(&workflow, json!({"v": 1})).await;
    assert_eq!(result.status, WorkflowStatus::Failed);
    assert_eq!(
        result.error.as_ref().unwrap().message,
        "the service said no"
    );
    let finish = json_of(&events).pop().unwrap();
    assert_eq!(finish["type"], "workflow-finish");
    assert_eq!(finish["payload"]["workflowStatus"], "failed");
    assert_eq!(
        finish["payload"]["metadata"]["errorMessage"],
        "the service said no"
    );

    let panics = create_step("panics").execute(|_n: V, _ctx| async move {
        panic!("boom");
        #[allow(unreachable_code)]
        Ok(V { v: 0 })
    });
    let workflow = Workflow::builder("panicking")
        .then(panics)
        .commit()
        .unwrap();
    let result = workflow.create_run().start(json!({"v": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Failed);
    assert!(result.error.unwrap().message.contains("\"panics\""));
}

#[tokio::test]
async fn a_condition_that_errors_fails_the_run_naming_the_arm() {
    let arm = create_step("arm").execute(|n: V, _ctx| async move { Ok(n) });
    let workflow = Workflow::builder("cond")
        .branch([(when(|_c| async { Err(StepError::new("no data")) }), arm)])
        .commit()
        .unwrap();
    let result = workflow.create_run().start(json!({"v": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Failed);
    let message = result.error.unwrap().message;
    assert!(
        message.contains("\"arm\"") && message.contains("no data"),
        "{message}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let refused = w9().create_run().start(json!({"v": "one"})).await;
    let refused = refused.map_err(|e| match e {
        e @ WorkflowRunError::InvalidInput { .. } => e,
        other => panic!("{other}"),
    });
    let Err(WorkflowRunError::InvalidInput { workflow, errors }) = refused else {
        panic!("accepted: {refused:?}");
    };
    assert_eq!(workflow, "w9");
    assert!(errors.iter().any(|e| e.contains("v")), "{errors:?}");
}

#[tokio::test]
async fn state_and_earlier_results_reach_later_steps() {
    let first = create_step("first").execute(|n: V, ctx| async move {
        ctx.set_state(json!({"seen": n.v}));
        Ok(V { v: n.v + 1 })
    });
    let second = create_step("second").execute(|n: V, ctx| async move {
        let first = ctx.step_result("first").unwrap();
        Ok(V {
            v: n.v
                + ctx.state()["seen"].as_i64().unwrap()
                + first["v"].as_i64().unwrap()
                + ctx.init_data()["v"].as_i64().unwrap(),
        })
    });
    let workflow = Workflow::builder("state")
        .then(first)
        .then(second)
        .commit()
        .unwrap();
    let result = workflow.create_run().start(json!({"v": 1})).await.unwrap();
    // 2 (input) + 1 (state) + 2 (first's output) + 1 (the run's input)
    assert_eq!(result.result, Some(json!({"v": 6})));
    assert_eq!(result.state, json!({"seen": 1}));
}

#[test]
fn commit_refuses_bad_graphs_naming_what_is_wrong() {
    let step = |id: &str| create_step(id).execute(|n: V, _ctx| async move { Ok(n) });
    let empty = Workflow::builder("empty").commit();
    assert!(
        matches!(empty, Err(WorkflowBuildError::Empty { .. })),
        "{empty:?}"
    );
    let twice = Workflow::builder("twice")
        .then(step("s"))
        .then(step("s"))
        .commit();
    assert!(
        matches!(&twice, Err(WorkflowBuildError::DuplicateStep { step, .. }) if step == "s"),
        "{twice:?}"
    );
    let bad_id = Workflow::builder("bad id").then(step("s")).commit();
    assert!(matches!(
        bad_id,
        Err(WorkflowBuildError::InvalidId {
            what: "workflow",
            ..
        })
    ));
    let no_arms = Workflow::builder("no-arms")
        .then(step("s"))
        .parallel(Vec::<kestrel_core::workflow::FnStep>::new())
        .commit();
    assert!(matches!(
        no_arms,
        Err(WorkflowBuildError::EmptyGroup {
            what: "parallel",
            ..
        })
    ));
    // `hi` needs `a` and `b`; a step giving `{v}` cannot feed it.
    let hi = create_step("hi").execute(|ab: Ab, _ctx| async move { Ok(V { v: ab.a.x }) });
    let mismatch = Workflow::builder("mismatch")
        .then(step("s"))
        .then(hi)
        .commit();
    let Err(WorkflowBuildError::InputMismatch {
        step, field, from, ..
    }) = mismatch
    else {
        panic!("committed: {mismatch:?}");
    };
    assert_eq!(
        (step.as_str(), field.as_str(), from.as_str()),
        ("hi", "a", "step \"s\"")
    );
}

#[tokio::test]
async fn loops_run_until_their_condition_says_and_count_iterations() {
    let inc = || create_step("inc").execute(|n: V, _ctx| async move { Ok(V { v: n.v + 1 }) });
    let until = Workflow::builder("until")
        .dountil(
            inc(),
            when(|c| async move { Ok(c.input["v"].as_i64() >= Some(5)) }),
        )
        .commit()
        .unwrap();
    let (events, result) = streamed(&until, json!({"v": 1})).await;
    assert_eq!(result.result, Some(json!({"v": 5})));
    let counts: Vec<Value> = json_of(&events)
        .into_iter()
        .filter(|e| e["type"] == "workflow-step-start")
        .map(|e| e["payload"]["metadata"]["iterationCount"].clone())
        .collect();
    assert_eq!(counts, [json!(1), json!(2), json!(3), json!(4)]);

    let dowhile = Workflow::builder("while")
        .dowhile(inc(), when(|c| async move { Ok(c.iteration_count < 3) }))
        .commit()
        .unwrap();
    let result = dowhile.create_run().start(json!({"v": 0})).await.unwrap();
    assert_eq!(result.result, Some(json!({"v": 3})), "three iterations");
}

#[tokio::test]
async fn foreach_keeps_the_items_order_and_reports_progress() {
    let double = create_step("double").execute(|n: i64, _ctx| async move {
        // Later items finish first: the output keeps the input's order anyway.
        tokio::time::sleep(std::time::Duration::from_millis(30 - 10 * n as u64)).await;
        Ok(n * 2)
    });
    let workflow = Workflow::builder("each")
        .input_schema(json!({"type": "array", "items": {"type": "integer"}}))
        .foreach(double, 3)
        .commit()
        .unwrap();
    let (events, result) = streamed(&workflow, json!([1, 2, 3])).await;
    assert_eq!(result.result, Some(json!([2, 4, 6])));
    let events = json_of(&events);
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "workflow-step-progress")
        .collect();
    assert_eq!(progress.len(), 3);
    assert_eq!(progress[2]["payload"]["completedCount"], 3);
    assert_eq!(
        progress[0]["payload"]["currentIndex"], 2,
        "the fastest item first"
    );
    let done = events
        .iter()
        .find(|e| e["type"] == "workflow-step-result")
        .unwrap();
    assert_eq!(done["payload"]["output"], json!([2, 4, 6]));

    let double = || create_step("double").execute(|n: i64, _ctx| async move { Ok(n * 2) });
    // A workflow that starts with a foreach takes an array of the step's inputs.
    let first = Workflow::builder("each-first")
        .foreach(double(), 1)
        .commit()
        .unwrap();
    let refused = first.create_run().start(json!(3)).await;
    assert!(
        matches!(refused, Err(WorkflowRunError::InvalidInput { .. })),
        "{refused:?}"
    );
    // What reaches a foreach at run time must be an array too.
    let three = create_step("three").execute(|_: Value, _ctx| async move { Ok(json!(3)) });
    let not_a_list = Workflow::builder("each-bad")
        .then(three)
        .foreach(double(), 1)
        .commit()
        .unwrap();
    let result = not_a_list.create_run().start(json!({})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Failed);
    assert!(result.error.unwrap().message.contains("needs an array"));
}

#[tokio::test]
async fn map_sleep_and_retries() {
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = attempts.clone();
    let flaky = create_step("flaky").retries(2).execute(move |n: V, ctx| {
        let seen = seen.clone();
        async move {
            seen.store(ctx.retry_count(), std::sync::atomic::Ordering::SeqCst);
            if ctx.retry_count() < 2 {
                return Err(StepError::new("try again"));
            }
            Ok(n)
        }
    });
    let workflow = Workflow::builder("misc")
        .then(flaky)
        .map(|input, _ctx| async move { Ok(json!({"v": input["v"].as_i64().unwrap() * 10})) })
        .sleep(std::time::Duration::from_millis(20))
        .commit()
        .unwrap();
    let started = std::time::Instant::now();
    let (events, result) = streamed(&workflow, json!({"v": 4})).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(20));
    assert_eq!(result.result, Some(json!({"v": 40})));
    assert_eq!(
        attempts.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "retried twice"
    );
    let types: Vec<String> = json_of(&events)
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["payload"]["id"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        types.contains(&"workflow-step-result mapping_misc_1".to_owned()),
        "{types:?}"
    );
    assert!(
        types.contains(&"workflow-step-waiting sleep_2".to_owned()),
        "{types:?}"
    );

    let never = create_step("never")
        .execute(|_n: V, _ctx| async move { Err::<V, _>(StepError::new("always")) });
    let workflow = Workflow::builder("no-retry").then(never).commit().unwrap();
    let result = workflow.create_run().start(json!({"v": 1})).await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Failed);
}

#[tokio::test]
async fn a_canceled_run_stops_and_says_so() {
    let workflow = Workflow::builder("slow")
        .then(create_step("first").execute(|n: V, _ctx| async move { Ok(n) }))
        .sleep(std::time::Duration::from_secs(30))
        .then(create_step("never").execute(|_n: V, _ctx| async move {
            panic!("ran after a cancel");
            #[allow(unreachable_code)]
            Ok(V { v: 0 })
        }))
        .commit()
        .unwrap();
    let run = workflow.create_run();
    let mut stream = run.stream(json!({"v": 1})).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if event.type_name() == "workflow-step-waiting" {
            run.cancel().await.unwrap();
        }
        events.push(event);
    }
    let result = stream.result().await.unwrap();
    assert_eq!(result.status, WorkflowStatus::Canceled);
    let types: Vec<&str> = events.iter().map(Event::type_name).collect();
    assert_eq!(
        &types[types.len() - 2..],
        ["workflow-canceled", "workflow-finish"]
    );
    let snapshot = run.snapshot().await.unwrap().unwrap();
    assert_eq!(snapshot.status, WorkflowStatus::Canceled);
}

#[tokio::test]
async fn a_resumed_step_reads_what_it_suspended_with() {
    let ask = create_step("ask").execute(|_n: Value, ctx| async move {
        match (ctx.resume_data(), ctx.suspend_data()) {
            (None, None) => Err(ctx.suspend(json!({"asked": "a name", "attempt": 1}))),
            (Some(data), Some(suspended)) => {
                Ok(json!({"name": data["name"], "asked": suspended["asked"]}))
            }
            other => Err(StepError::new(format!("unexpected {other:?}"))),
        }
    });
    let workflow = Workflow::builder("asking").then(ask).commit().unwrap();
    let run = workflow.create_run();
    let first = run.start(json!({})).await.unwrap();
    assert_eq!(first.status, WorkflowStatus::Suspended);
    let done = run.resume(None, json!({"name": "Ada"})).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    assert_eq!(done.result, Some(json!({"name": "Ada", "asked": "a name"})));
}
