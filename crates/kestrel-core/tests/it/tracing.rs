//! Every run a trace: an agent run with a tool and a delegation leaves one trace whose spans
//! (Mastra's types, parents following the delegation) are kept in the instance's span store;
//! a run stopped for a person and continued later stays in its trace; a caller's
//! `traceparent` puts the run in its trace; an untraced instance records nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_core::trace::{
    Sampling, SpanRecord, SpanType, TraceContext, TraceQuery, TracingConfig,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

/// How many tool results the conversation holds.
fn results(req: &kestrel_core::model::ModelRequest) -> usize {
    req.messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter(|p| matches!(p, Part::ToolResult { .. }))
        .count()
}

/// An assistant that asks the weather tool, then the `research` sub-agent, then answers.
fn instance(config: TracingConfig, approval: bool) -> Kestrel {
    let research = Agent::builder("research")
        .description("Finds facts")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Kestrels hover")
        })))
        .build()
        .unwrap();
    let weather = create_tool("get_weather")
        .description("The weather")
        .require_approval(approval)
        .execute(|c: City, _ctx| async move {
            Ok(json!({"city": c.city, "sky": "clear", "apiKey": "sk-secret"}))
        });
    let model = Arc::new(ScriptedModel::from_fn(|req| match results(req) {
        0 => ScriptedResponse::tool_call("w1", "get_weather", json!({"city": "Lisbon"})),
        1 => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "facts"})),
        _ => ScriptedResponse::text("All done."),
    }));
    let assistant = Agent::builder("assistant")
        .model(model)
        .tool(weather)
        .agents([research.clone()])
        .build()
        .unwrap();
    Kestrel::builder()
        .tracing(config)
        .agent(assistant)
        .agent(research)
        .build()
        .unwrap()
}

async fn spans_of(kestrel: &Kestrel, trace_id: &str) -> Vec<SpanRecord> {
    kestrel.tracer().unwrap().flush().await;
    kestrel.span_store().unwrap().trace(trace_id).await.unwrap()
}

fn one<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found: Vec<&SpanRecord> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "{name} in {:#?}", names(spans));
    found[0]
}

fn names(spans: &[SpanRecord]) -> Vec<String> {
    spans.iter().map(|s| s.name.clone()).collect()
}

#[tokio::test]
async fn a_run_with_a_tool_and_a_delegation_is_one_trace() {
    let kestrel = instance(TracingConfig::new(), false);
    let agent = kestrel.agent("assistant").unwrap();
    let result = agent.generate("Weather and facts?").await.unwrap();
    assert_eq!(result.text, "All done.");
    let trace_id = result.trace_id.clone().expect("the run has a trace");
    assert!(TraceContext::is_trace_id(&trace_id), "{trace_id}");
    let spans = spans_of(&kestrel, &trace_id).await;

    let run = one(&spans, "agent run: 'assistant'");
    assert_eq!(run.span_type, SpanType::AgentRun);
    assert!(run.is_root());
    assert_eq!(run.entity_id.as_deref(), Some("assistant"));
    assert_eq!(run.run_id.as_deref(), Some(result.run_id.as_str()));
    assert_eq!(run.input, Some(json!("Weather and facts?")));
    assert_eq!(run.output, Some(json!("All done.")));
    assert_eq!(run.attributes["finishReason"], "stop");

    // Three model calls, under the run, each with its usage and finish reason.
    let calls: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| {
            s.span_type == SpanType::ModelGeneration
                && s.parent_span_id.as_deref() == Some(run.span_id.as_str())
        })
        .collect();
    assert_eq!(calls.len(), 3, "{:#?}", names(&spans));
    assert_eq!(calls[0].attributes["finishReason"], "tool-calls");
    assert!(calls[0].attributes["usage"].is_object());

    // The tool call, its input and output, the key redacted.
    let tool = one(&spans, "tool: 'get_weather'");
    assert_eq!(tool.span_type, SpanType::ToolCall);
    assert_eq!(tool.parent_span_id.as_deref(), Some(run.span_id.as_str()));
    assert_eq!(tool.attributes["toolCallId"], "w1");
    assert_eq!(tool.input, Some(json!({"city": "Lisbon"})));
    assert_eq!(tool.output.as_ref().unwrap()["apiKey"], "[REDACTED]");
    assert_eq!(tool.output.as_ref().unwrap()["sky"], "clear");

    // The delegation: a tool call, and the sub-agent's run under it, its model call under it.
    let delegation = one(&spans, "tool: 'agent-research'");
    let sub_run = one(&spans, "agent run: 'research'");
    assert_eq!(
        sub_run.parent_span_id.as_deref(),
        Some(delegation.span_id.as_str())
    );
    assert_eq!(sub_run.output, Some(json!("Kestrels hover")));
    let sub_call = spans
        .iter()
        .find(|s| {
            s.span_type == SpanType::ModelGeneration
                && s.parent_span_id.as_deref() == Some(sub_run.span_id.as_str())
        })
        .expect("the sub-agent's model call");
    assert!(sub_call.ended_at >= sub_call.started_at);
    assert!(spans.iter().all(|s| s.trace_id == trace_id));

    // The store lists it, filtered by agent.
    let listed = kestrel
        .span_store()
        .unwrap()
        .list_traces(&TraceQuery {
            entity_id: Some("assistant".into()),
            ..TraceQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.total, 1);
    assert_eq!(listed.traces[0].root.trace_id, trace_id);
}

#[tokio::test]
async fn a_run_continued_after_a_decision_stays_in_its_trace() {
    let kestrel = instance(TracingConfig::new(), true);
    let agent = kestrel.agent("assistant").unwrap();
    let stopped = agent.generate("Weather and facts?").await.unwrap();
    let trace_id = stopped.trace_id.clone().unwrap();
    let done = agent.run(&stopped.run_id).approve("w1").await.unwrap();
    assert_eq!(done.text, "All done.");
    assert_eq!(done.trace_id.as_deref(), Some(trace_id.as_str()));
    let spans = spans_of(&kestrel, &trace_id).await;
    let first = one(&spans, "agent run: 'assistant'");
    assert_eq!(first.attributes["finishReason"], "suspended");
    let resumed = one(&spans, "agent run: 'assistant' (resumed)");
    assert_eq!(
        resumed.parent_span_id.as_deref(),
        Some(first.span_id.as_str())
    );
    let tool = one(&spans, "tool: 'get_weather'");
    assert_eq!(
        tool.parent_span_id.as_deref(),
        Some(resumed.span_id.as_str())
    );
}

#[tokio::test]
async fn a_callers_trace_is_joined_and_an_unsampled_instance_records_nothing() {
    let kestrel = instance(TracingConfig::new(), false);
    let agent = kestrel.agent("assistant").unwrap();
    let parent =
        TraceContext::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap();
    let result = agent
        .generate("Weather and facts?")
        .options(kestrel_core::agent::RunOptions::new().trace(parent))
        .await
        .unwrap();
    assert_eq!(
        result.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    let spans = spans_of(&kestrel, "4bf92f3577b34da6a3ce929d0e0e4736").await;
    let run = one(&spans, "agent run: 'assistant'");
    assert_eq!(run.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));

    let off = instance(TracingConfig::new().sampling(Sampling::Never), false);
    let result = off
        .agent("assistant")
        .unwrap()
        .generate("Weather?")
        .await
        .unwrap();
    assert_eq!(result.trace_id, None);
    off.tracer().unwrap().flush().await;
    let listed = off
        .span_store()
        .unwrap()
        .list_traces(&TraceQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 0);
}

#[tokio::test]
async fn the_span_store_is_pruned_to_the_retention() {
    let retention = kestrel_core::trace::Retention {
        max_traces: Some(2),
        ..Default::default()
    };
    let kestrel = instance(TracingConfig::new().retention(retention), false);
    let agent = kestrel.agent("assistant").unwrap();
    for _ in 0..4 {
        agent.generate("Weather and facts?").await.unwrap();
    }
    let tracer = kestrel.tracer().unwrap();
    tracer.flush().await;
    let store = kestrel.span_store().unwrap();
    assert_eq!(
        store
            .list_traces(&TraceQuery::default())
            .await
            .unwrap()
            .total,
        4
    );
    assert!(tracer.prune().await.unwrap() > 0);
    let kept = store.list_traces(&TraceQuery::default()).await.unwrap();
    assert_eq!(kept.total, 2);
    // The newest are kept.
    assert!(kept.traces[0].root.started_at >= kept.traces[1].root.started_at);

    // Retention off keeps everything.
    let forever = instance(
        TracingConfig::new().retention(kestrel_core::trace::Retention::default()),
        false,
    );
    forever
        .agent("assistant")
        .unwrap()
        .generate("Weather?")
        .await
        .unwrap();
    forever.tracer().unwrap().flush().await;
    assert_eq!(forever.tracer().unwrap().prune().await.unwrap(), 0);
}

#[tokio::test]
async fn start_and_finish_name_the_trace_as_mastras_chunks_do() {
    use futures::StreamExt;
    use kestrel_core::event::EventKind;
    let kestrel = instance(TracingConfig::new(), false);
    let mut stream = kestrel
        .agent("assistant")
        .unwrap()
        .stream("Weather and facts?")
        .into_stream();
    let mut starts = Vec::new();
    let mut finishes = Vec::new();
    while let Some(event) = stream.next().await {
        let json = serde_json::to_value(&event).unwrap();
        match &event.kind {
            EventKind::Start(_) => starts.push(json),
            EventKind::Finish(_) => finishes.push(json),
            _ => {}
        }
    }
    let result = stream.result().await.unwrap();
    let trace_id = result.trace_id.unwrap();
    // The assistant's, and its sub-agent's (the same trace).
    assert!(!starts.is_empty() && !finishes.is_empty());
    for event in starts.iter().chain(&finishes) {
        assert_eq!(
            event["payload"]["metadata"]["traceId"],
            trace_id.as_str(),
            "{event}"
        );
    }

    // An untraced instance's events say nothing of traces.
    let kestrel = Kestrel::builder()
        .agent(
            Agent::builder("plain")
                .model(Arc::new(ScriptedModel::from_fn(|_| {
                    ScriptedResponse::text("hi")
                })))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let mut stream = kestrel.agent("plain").unwrap().stream("Hi").into_stream();
    while let Some(event) = stream.next().await {
        let json = serde_json::to_value(&event).unwrap();
        assert!(json["payload"].get("metadata").is_none(), "{json}");
    }
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn the_frameworks_own_diagnostics_name_the_run_and_its_trace() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let kestrel = instance(TracingConfig::new(), false);
    let result = kestrel
        .agent("assistant")
        .unwrap()
        .generate("Weather and facts?")
        .await
        .unwrap();
    let trace_id = result.trace_id.unwrap();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let step = logs
        .lines()
        .find(|l| l.contains("kestrel.step") && l.contains(&result.run_id))
        .unwrap_or_else(|| panic!("no step span of the run in:\n{logs}"));
    assert!(step.contains(&format!("trace_id={trace_id}")), "{step}");
    let tool = logs
        .lines()
        .find(|l| l.contains("kestrel.tool_call") && l.contains("get_weather"))
        .unwrap_or_else(|| panic!("no tool call span in:\n{logs}"));
    assert!(tool.contains(&format!("trace_id={trace_id}")), "{tool}");
    assert!(
        tool.contains(&format!("run_id={}", result.run_id)),
        "{tool}"
    );
}

#[tokio::test]
async fn a_client_tools_result_is_a_client_tool_call_span_in_the_runs_trace() {
    let location = create_tool("get_location")
        .description("The user's location, from the browser")
        .input_schema(json!({"type": "object", "properties": {}}))
        .client::<serde_json::Value>();
    let model = Arc::new(ScriptedModel::from_fn(|req| match results(req) {
        0 => ScriptedResponse::tool_call("c1", "get_location", json!({"precise": true})),
        _ => ScriptedResponse::text("You are in Lisbon."),
    }));
    let guide = Agent::builder("guide")
        .model(model)
        .tool(location)
        .build()
        .unwrap();
    let kestrel = Kestrel::builder()
        .tracing(TracingConfig::new())
        .agent(guide)
        .build()
        .unwrap();
    let agent = kestrel.agent("guide").unwrap();
    let stopped = agent.generate("where am I?").await.unwrap();
    let trace_id = stopped.trace_id.clone().unwrap();
    let done = agent
        .run(&stopped.run_id)
        .submit("c1", json!({"city": "Lisbon", "token": "t-1"}), false)
        .await
        .unwrap();
    assert_eq!(done.trace_id.as_deref(), Some(trace_id.as_str()));
    let spans = spans_of(&kestrel, &trace_id).await;
    let resumed = one(&spans, "agent run: 'guide' (resumed)");
    let client = one(&spans, "client tool: 'get_location'");
    assert_eq!(client.span_type, SpanType::ClientToolCall);
    assert_eq!(
        client.parent_span_id.as_deref(),
        Some(resumed.span_id.as_str())
    );
    assert_eq!(client.attributes["toolCallId"], "c1");
    assert_eq!(client.input, Some(json!({"precise": true})));
    assert_eq!(
        client.output,
        Some(json!({"city": "Lisbon", "token": "[REDACTED]"}))
    );
    assert_eq!(client.run_id.as_deref(), Some(stopped.run_id.as_str()));
    assert!(!client.is_error());
    // The agent never ran it: no `tool_call` span for it.
    assert!(
        spans.iter().all(|s| s.span_type != SpanType::ToolCall),
        "{:#?}",
        names(&spans)
    );

    // A result submitted as an error fails the span.
    let failed = agent.generate("where now?").await.unwrap();
    agent
        .run(&failed.run_id)
        .submit("c1", json!("permission denied"), true)
        .await
        .unwrap();
    let spans = spans_of(&kestrel, failed.trace_id.as_deref().unwrap()).await;
    let client = one(&spans, "client tool: 'get_location'");
    assert_eq!(
        client.error.as_ref().map(|e| e.message.as_str()),
        Some("permission denied")
    );
}
