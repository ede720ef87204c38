//! Workflow runs are traces too: the run, its parallel, conditional, loop, foreach and sleep
//! entries and each step are spans (Mastra's types), steps under their entry; an agent step's
//! run and a nested workflow's hang under their step; a suspended run resumed later continues
//! its trace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::{Agent, AgentStep};
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::trace::{SpanRecord, SpanType, TraceQuery, TracingConfig};
use kestrel_core::workflow::{Workflow, WorkflowStatus, create_step, when};
use serde_json::{Value, json};

fn add(id: &str, n: i64) -> kestrel_core::workflow::FnStep {
    create_step(id).execute(move |v: Value, _ctx| async move {
        Ok(json!({"v": v["v"].as_i64().unwrap_or(0) + n}))
    })
}

/// The pipeline, and the agent of its agent step (registered beside it, in the instance).
fn flow() -> (Workflow, Agent) {
    let inner = Workflow::builder("inner")
        .then(add("inner_add", 100))
        .commit()
        .unwrap();
    let writer = Agent::builder("writer")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("a poem")
        })))
        .build()
        .unwrap();
    let pipeline = Workflow::builder("pipeline")
        .then(add("start", 1))
        .parallel([add("left", 1), add("right", 2)])
        .then(create_step("merge").execute(|v: Value, _ctx| async move {
            Ok(json!({"v": v["left"]["v"].as_i64().unwrap_or(0)}))
        }))
        .branch([
            (
                when(|c| async move { Ok(c.input["v"].as_i64() > Some(0)) }),
                add("up", 1),
            ),
            (
                when(|c| async move { Ok(c.input["v"].as_i64() <= Some(0)) }),
                add("down", -1),
            ),
        ])
        // A branch's output is keyed by the arm that ran.
        .map(|v: Value, _ctx| async move { Ok(v["up"].clone()) })
        .dountil(
            add("inc", 1),
            when(|c| async move { Ok(c.input["v"].as_i64() >= Some(6)) }),
        )
        .map(|v: Value, _ctx| async move { Ok(json!([v, v])) })
        .foreach(add("each", 1), 2)
        .map(|v: Value, _ctx| async move { Ok(v[0].clone()) })
        .sleep(Duration::from_millis(1))
        .then(inner)
        .map(|_v: Value, _ctx| async move { Ok(json!({"prompt": "write"})) })
        .then(AgentStep::new(writer.clone()))
        .commit()
        .unwrap();
    (pipeline, writer)
}

async fn trace_of(kestrel: &Kestrel, workflow: &str) -> Vec<SpanRecord> {
    kestrel.tracer().unwrap().flush().await;
    let store = kestrel.span_store().unwrap();
    let listed = store
        .list_traces(&TraceQuery {
            entity_id: Some(workflow.into()),
            ..TraceQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.total, 1, "{listed:#?}");
    store.trace(&listed.traces[0].root.trace_id).await.unwrap()
}

fn named<'a>(spans: &'a [SpanRecord], name: &str) -> Vec<&'a SpanRecord> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "{name} in {:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

fn parent_of<'a>(spans: &'a [SpanRecord], span: &SpanRecord) -> &'a SpanRecord {
    let parent = span.parent_span_id.as_deref().expect("a parent");
    spans
        .iter()
        .find(|s| s.span_id == parent)
        .expect("the parent is in the trace")
}

#[tokio::test]
async fn a_workflow_run_is_a_trace_of_its_entries_and_steps() {
    let (pipeline, writer) = flow();
    let kestrel = Kestrel::builder()
        .tracing(TracingConfig::new())
        .workflow(pipeline)
        .agent(writer)
        .build()
        .unwrap();
    let result = kestrel
        .workflow("pipeline")
        .unwrap()
        .create_run()
        .start(json!({"v": 0}))
        .await
        .unwrap();
    assert_eq!(result.status, WorkflowStatus::Success, "{result:?}");
    let spans = trace_of(&kestrel, "pipeline").await;

    let run = one(&spans, "workflow run: 'pipeline'");
    assert_eq!(run.span_type, SpanType::WorkflowRun);
    assert!(run.is_root());
    assert_eq!(run.entity_type.as_deref(), Some("workflow"));
    assert_eq!(run.input, Some(json!({"v": 0})));
    assert!(run.output.is_some());

    // A lone step hangs under the run, with its input and output.
    let start = one(&spans, "workflow step: 'start'");
    assert_eq!(start.span_type, SpanType::WorkflowStep);
    assert_eq!(start.parent_span_id.as_deref(), Some(run.span_id.as_str()));
    assert_eq!(start.output, Some(json!({"v": 1})));

    // Grouping entries are spans of their own; their steps hang under them.
    for (entry, span_type, steps) in [
        (
            "workflow parallel",
            SpanType::WorkflowParallel,
            &["left", "right"][..],
        ),
        (
            "workflow conditional",
            SpanType::WorkflowConditional,
            &["up"][..],
        ),
        ("workflow loop: 'inc'", SpanType::WorkflowLoop, &["inc"][..]),
        (
            "workflow foreach: 'each'",
            SpanType::WorkflowLoop,
            &["each"][..],
        ),
    ] {
        let entry_span = one(&spans, entry);
        assert_eq!(entry_span.span_type, span_type);
        assert_eq!(
            entry_span.parent_span_id.as_deref(),
            Some(run.span_id.as_str())
        );
        for step in steps {
            let step_spans = named(&spans, &format!("workflow step: '{step}'"));
            assert!(!step_spans.is_empty(), "{step}");
            for span in step_spans {
                assert_eq!(
                    parent_of(&spans, span).span_id,
                    entry_span.span_id,
                    "{step}"
                );
            }
        }
    }
    // The arm not taken has no span; the loop ran until v reached 6; foreach ran per item.
    assert!(named(&spans, "workflow step: 'down'").is_empty());
    assert_eq!(named(&spans, "workflow step: 'inc'").len(), 3);
    assert_eq!(named(&spans, "workflow step: 'each'").len(), 2);
    assert_eq!(
        one(&spans, "workflow loop: 'inc'").attributes["loopType"],
        "dountil"
    );
    let sleep = spans
        .iter()
        .find(|s| s.span_type == SpanType::WorkflowSleep)
        .expect("the sleep's span");
    assert_eq!(sleep.parent_span_id.as_deref(), Some(run.span_id.as_str()));

    // A nested workflow's run hangs under its step.
    let inner_step = one(&spans, "workflow step: 'inner'");
    let inner_run = one(&spans, "workflow run: 'inner'");
    assert_eq!(
        inner_run.parent_span_id.as_deref(),
        Some(inner_step.span_id.as_str())
    );
    let inner_add = one(&spans, "workflow step: 'inner_add'");
    assert_eq!(parent_of(&spans, inner_add).span_id, inner_run.span_id);

    // An agent step's run hangs under its step, its model call under the run.
    let writer_step = one(&spans, "workflow step: 'writer'");
    let writer = one(&spans, "agent run: 'writer'");
    assert_eq!(
        writer.parent_span_id.as_deref(),
        Some(writer_step.span_id.as_str())
    );
    assert!(
        spans
            .iter()
            .any(|s| s.span_type == SpanType::ModelGeneration
                && s.parent_span_id.as_deref() == Some(writer.span_id.as_str()))
    );
    assert!(spans.iter().all(|s| s.trace_id == run.trace_id));
    assert!(spans.iter().all(|s| !s.is_error()), "{spans:#?}");
}

#[tokio::test]
async fn a_failed_step_fails_its_span_and_a_resumed_run_continues_its_trace() {
    let ask = create_step("ask").execute(|v: Value, ctx| async move {
        match ctx.resume_data() {
            None => Err(ctx.suspend(json!({"question": "ok?"}))),
            Some(answer) => Ok(json!({"v": v["v"], "answer": answer})),
        }
    });
    let approval = Workflow::builder("approval").then(ask).commit().unwrap();
    let broken = Workflow::builder("broken")
        .then(create_step("boom").execute(|_v: Value, _ctx| async move {
            Err::<Value, _>(kestrel_core::workflow::StepError::new("no fuel"))
        }))
        .commit()
        .unwrap();
    let kestrel = Kestrel::builder()
        .tracing(TracingConfig::new())
        .workflow(approval)
        .workflow(broken)
        .build()
        .unwrap();

    let failed = kestrel
        .workflow("broken")
        .unwrap()
        .create_run()
        .start(json!({}))
        .await
        .unwrap();
    assert_eq!(failed.status, WorkflowStatus::Failed);
    let spans = trace_of(&kestrel, "broken").await;
    let boom = one(&spans, "workflow step: 'boom'");
    assert_eq!(boom.error.as_ref().unwrap().message, "no fuel");
    assert!(one(&spans, "workflow run: 'broken'").is_error());

    let workflow = kestrel.workflow("approval").unwrap();
    let run = workflow.create_run();
    let run_id = run.run_id().to_owned();
    let first = run.start(json!({"v": 7})).await.unwrap();
    assert_eq!(first.status, WorkflowStatus::Suspended);
    let resumed = workflow
        .create_run_with_id(&run_id)
        .resume(None, json!("yes"))
        .await
        .unwrap();
    assert_eq!(resumed.status, WorkflowStatus::Success, "{resumed:?}");
    let spans = trace_of(&kestrel, "approval").await;
    one(&spans, "workflow run: 'approval'");
    let again = one(&spans, "workflow run: 'approval' (resumed)");
    assert_eq!(again.output.as_ref().unwrap()["answer"], "yes");
    let asks = named(&spans, "workflow step: 'ask'");
    assert_eq!(asks.len(), 2);
    assert!(
        asks.iter()
            .any(|s| s.attributes.get("suspended") == Some(&json!(true)))
    );
}
