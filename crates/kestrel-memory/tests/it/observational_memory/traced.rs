//! Tracing: in a tracing instance, the observation and reflection after a run are spans of the
//! run's trace, under its `memory: 'after run'` span, each with its model call.

use std::sync::Arc;
use std::time::Duration;

use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::trace::{SpanRecord, SpanType, TracingConfig};
use kestrel_memory::{Memory, ObservationalMemory, count_tokens};
use kestrel_storage::testing::Store;

use super::{agent, noting_model, on, settle};

/// The spans of `trace_id` once `name` is among them (the after-run span ends after the
/// observation's progress is counted).
async fn spans_with(kestrel: &Kestrel, trace_id: &str, name: &str) -> Vec<SpanRecord> {
    let tracer = kestrel.tracer().unwrap();
    let store = kestrel.span_store().unwrap();
    for _ in 0..200 {
        tracer.flush().await;
        let spans = store.trace(trace_id).await.unwrap();
        if spans.iter().any(|s| s.name == name) {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no span {name:?} in trace {trace_id}");
}

fn one<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found: Vec<&SpanRecord> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "{name} in {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

pub(super) async fn observation_and_reflection_are_spans_of_the_runs_trace(store: Store) {
    let line = "User is planning a long trip to Lisbon and Porto in May with two children.";
    let observer = Arc::new(
        ScriptedModel::from_fn(move |_| {
            ScriptedResponse::text(format!("- 2026-05-01 14:05 {line}"))
        })
        .with_model_id("observer-model"),
    );
    let reflector = Arc::new(
        ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("- 2026-05-02 09:00 User plans a May trip to Portugal.")
        })
        .with_model_id("reflector-model"),
    );
    let rendered = count_tokens(&format!("- 2026-05-01 14:05 {line}"));
    let options = ObservationalMemory::new(observer.clone())
        .reflector_model(reflector.clone())
        .message_tokens(1)
        .observation_tokens(rendered * 3 / 2);
    let progress = options.progress();
    let memory = Memory::builder()
        .observational_memory(options)
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .storage(Arc::clone(&store))
        .tracing(TracingConfig::new())
        .agent(agent(&memory, noting_model()))
        .build()
        .unwrap();
    let assistant = kestrel.agent("assistant").unwrap();

    // The first run: one observation, below the reflection threshold.
    let first = assistant
        .generate("Hello.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    settle(&progress, 1).await;
    let trace_id = first.trace_id.clone().unwrap();
    let spans = spans_with(&kestrel, &trace_id, "memory: 'after run'").await;
    let run = one(&spans, "agent run: 'assistant'");
    let after = one(&spans, "memory: 'after run'");
    assert_eq!(after.span_type, SpanType::MemoryOperation);
    assert_eq!(after.parent_span_id.as_deref(), Some(run.span_id.as_str()));
    assert_eq!(after.thread_id.as_deref(), Some("t1"));
    let observe = one(&spans, "memory: 'observe'");
    assert_eq!(observe.span_type, SpanType::MemoryOperation);
    assert_eq!(
        observe.parent_span_id.as_deref(),
        Some(after.span_id.as_str())
    );
    assert_eq!(observe.attributes["messages"], 2);
    assert_eq!(observe.attributes["observations"], 1);
    assert_eq!(observe.output, Some(serde_json::json!(line)));
    let call = one(&spans, "llm: 'observer-model'");
    assert_eq!(call.span_type, SpanType::ModelGeneration);
    assert_eq!(
        call.parent_span_id.as_deref(),
        Some(observe.span_id.as_str())
    );
    assert_eq!(call.attributes["role"], "observer");
    assert!(call.attributes["usage"].is_object());
    assert!(spans.iter().all(|s| s.name != "memory: 'reflect'"));

    // The second: past the threshold, the reflection too.
    let second = assistant
        .generate("More.")
        .options(on("t1", "alice"))
        .await
        .unwrap();
    settle(&progress, 2).await;
    let spans = spans_with(
        &kestrel,
        second.trace_id.as_deref().unwrap(),
        "memory: 'after run'",
    )
    .await;
    let after = one(&spans, "memory: 'after run'");
    let reflect = one(&spans, "memory: 'reflect'");
    assert_eq!(
        reflect.parent_span_id.as_deref(),
        Some(after.span_id.as_str())
    );
    assert_eq!(reflect.attributes["observations"], 2);
    assert!(
        reflect.attributes["tokensAfter"].as_u64().unwrap()
            < reflect.attributes["tokensBefore"].as_u64().unwrap()
    );
    let call = one(&spans, "llm: 'reflector-model'");
    assert_eq!(
        call.parent_span_id.as_deref(),
        Some(reflect.span_id.as_str())
    );
    assert!(!reflect.is_error() && !call.is_error());
}
