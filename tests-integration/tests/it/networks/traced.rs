//! Traced networks and memory: a network run, each iteration a span under it, and under each
//! iteration its routing decision (the routing agent's run) and the primitive it ran (an
//! agent's run, a workflow's run, a tool call); a run's memory recall and persist. Kept in the
//! instance's storage, on every backend.

use super::*;
use kestrel_core::trace::{SpanRecord, SpanType, TraceQuery, TracingConfig};

fn children<'a>(spans: &'a [SpanRecord], parent: &SpanRecord) -> Vec<&'a SpanRecord> {
    spans
        .iter()
        .filter(|s| s.parent_span_id.as_deref() == Some(parent.span_id.as_str()))
        .collect()
}

/// The root and spans of the one trace of run `run_id`, once the tracer flushed.
async fn trace_of_run(kestrel: &Kestrel, run_id: &str) -> (SpanRecord, Vec<SpanRecord>) {
    kestrel.tracer().unwrap().flush().await;
    let store = kestrel.span_store().unwrap();
    let listed = store
        .list_traces(&TraceQuery {
            run_id: Some(run_id.to_owned()),
            ..TraceQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.total, 1, "{listed:#?}");
    let root = listed.traces[0].root.clone();
    let spans = store.trace(&root.trace_id).await.unwrap();
    (root, spans)
}

pub(super) async fn a_traced_network_run_is_a_tree_of_its_iterations(store: Store) {
    let router = scripted(vec![
        route("helper", "agent", "say hi", "helper can greet"),
        verdict(false, "now double", ""),
        route("doubler", "workflow", r#"{"v": 21}"#, "doubling"),
        verdict(false, "now shout", ""),
        route("shout", "tool", r#"{"text": "done"}"#, "shouting is a tool"),
        verdict(true, "all done", "DONE"),
    ]);
    let helper = Agent::builder("helper")
        .description("Greets people")
        .model(scripted(vec![ScriptedResponse::text("hi there")]))
        .build()
        .unwrap();
    let network = Agent::builder("router")
        .instructions("Greet, double and shout as asked.")
        .model(router)
        .agents([helper])
        .workflow(doubler())
        .tool(shout(false, Arc::default()));
    let kestrel = Instance::on(&store)
        .configure(|builder| builder.tracing(TracingConfig::new()))
        .agent(network)
        .build();
    let result = kestrel
        .agent("router")
        .unwrap()
        .network("Greet, double 21, shout")
        .memory(THREAD, RESOURCE)
        .max_steps(5)
        .result()
        .await
        .unwrap();
    assert_eq!(result.status, NetworkStatus::Complete, "{result:?}");
    let (root, spans) = trace_of_run(&kestrel, &result.run_id).await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let root = &root;
    assert_eq!(root.span_type, SpanType::WorkflowRun, "{names:#?}");

    let mut iterations: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| s.name.starts_with("network iteration: "))
        .collect();
    iterations.sort_by_key(|s| s.attributes["iteration"].as_u64());
    assert_eq!(iterations.len(), 3, "{names:#?}");
    let ran = |iteration: &SpanRecord| -> Vec<String> {
        children(&spans, iteration)
            .iter()
            .map(|s| s.name.clone())
            .collect()
    };
    // Each iteration: its routing agent's run, and the primitive it chose.
    for (iteration, (primitive, kind)) in iterations.iter().zip([
        ("agent run: 'helper'", "agent"),
        ("workflow run: 'doubler'", "workflow"),
        ("tool: 'shout'", "tool"),
    ]) {
        let names = ran(iteration);
        assert!(names.iter().any(|n| n == primitive), "{names:?}");
        assert!(
            children(&spans, iteration)
                .iter()
                .any(|s| s.span_type == SpanType::AgentRun && s.name != "agent run: 'helper'"),
            "the routing decision is a run under the iteration: {names:?}"
        );
        assert_eq!(iteration.attributes["primitiveType"], kind);
    }
    // The workflow's step and the tool's output are in the trace too.
    assert!(names.contains(&"workflow step: 'double'"), "{names:#?}");
    let shout = spans.iter().find(|s| s.name == "tool: 'shout'").unwrap();
    assert_eq!(shout.output, Some(json!("DONE")));
    assert_eq!(iterations[2].attributes.get("complete"), Some(&json!(true)));
    assert!(spans.iter().all(|s| !s.is_error()), "{spans:#?}");
}

pub(super) async fn a_traced_runs_memory_reads_and_writes_are_spans(store: Store) {
    let kestrel = Instance::on(&store)
        .configure(|builder| builder.tracing(TracingConfig::new()))
        .agent(Agent::builder("keeper").model(scripted(vec![ScriptedResponse::text("noted")])))
        .build();
    let result = kestrel
        .agent("keeper")
        .unwrap()
        .generate("Remember kestrels")
        .options(kestrel_core::agent::RunOptions::new().memory(THREAD, RESOURCE))
        .await
        .unwrap();
    kestrel.tracer().unwrap().flush().await;
    let spans = kestrel
        .span_store()
        .unwrap()
        .trace(result.trace_id.as_deref().unwrap())
        .await
        .unwrap();
    let run = spans
        .iter()
        .find(|s| s.span_type == SpanType::AgentRun)
        .unwrap();
    let memory: Vec<&SpanRecord> = children(&spans, run)
        .into_iter()
        .filter(|s| s.span_type == SpanType::MemoryOperation)
        .collect();
    let names: Vec<&str> = memory.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"memory: 'recall'"), "{names:?}");
    assert!(names.contains(&"memory: 'persist'"), "{names:?}");
    for span in &memory {
        assert_eq!(span.thread_id.as_deref(), Some(THREAD));
        assert_eq!(span.resource_id.as_deref(), Some(RESOURCE));
    }
    // The stored spans are in the instance's storage: the same store the thread is in.
    let persisted: u64 = memory
        .iter()
        .filter(|s| s.name == "memory: 'persist'")
        .filter_map(|s| s.attributes["messages"].as_u64())
        .sum();
    let recall = memory
        .iter()
        .find(|s| s.name == "memory: 'recall'")
        .unwrap();
    // The input is stored by the recall or by a persist; the answer by a persist.
    let by_recall = u64::from(recall.attributes["inputStored"] == json!(true));
    assert_eq!(persisted + by_recall, 2, "the input and the answer");
}

pub(super) async fn a_network_iteration_whose_routing_fails_is_a_failed_span(store: Store) {
    // Never a decision: the routing fails after its retry.
    let router = scripted(vec![
        ScriptedResponse::text("I would rather not."),
        ScriptedResponse::text("Still no."),
    ]);
    let helper = Agent::builder("helper")
        .description("Greets people")
        .model(scripted(vec![ScriptedResponse::text("hi there")]))
        .build()
        .unwrap();
    let network = Agent::builder("router")
        .instructions("Greet as asked.")
        .model(router)
        .agents([helper]);
    let kestrel = Instance::on(&store)
        .configure(|builder| builder.tracing(TracingConfig::new()))
        .agent(network)
        .build();
    let result = kestrel
        .agent("router")
        .unwrap()
        .network("Greet")
        .memory(THREAD, RESOURCE)
        .result()
        .await
        .unwrap();
    assert_eq!(result.status, NetworkStatus::Failed, "{result:?}");
    let (_, spans) = trace_of_run(&kestrel, &result.run_id).await;
    let iteration = spans
        .iter()
        .find(|s| s.name == "network iteration: 0")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    let error = iteration.error.as_ref().expect("the iteration failed");
    assert_eq!(error.kind.as_deref(), Some("routing"), "{error:?}");
    assert!(error.message.contains("routing agent"), "{error:?}");
}
