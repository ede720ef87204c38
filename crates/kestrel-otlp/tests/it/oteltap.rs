//! Kestrel's traces reach a real OTLP receiver: `oteltap` (PyPI), an OTLP/HTTP-protobuf
//! receiver that prints every span it gets as a JSON line. An agent run with a tool and a
//! delegation arrives as its span tree, with Kestrel's ids, GenAI names, kinds and attributes.
//!
//! Needs `KESTREL_TEST_OTELTAP`: a Python with `oteltap` installed (`.ci/run` makes one);
//! without it the receiver test is skipped, and says so.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::message::{Part, Role};
use kestrel_core::model::{ModelRequest, ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_core::trace::{SpanRecord, TracingConfig};
use kestrel_otlp::{OtlpExporter, OtlpProtocol};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

fn tool_results(req: &ModelRequest) -> usize {
    req.messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter(|p| matches!(p, Part::ToolResult { .. }))
        .count()
}

/// An assistant that calls the weather tool, then delegates to `research`, then answers.
fn instance(exporter: OtlpExporter) -> Kestrel {
    let research = Agent::builder("research")
        .name("Research Agent")
        .description("Finds facts")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("Kestrels hover")
        })))
        .build()
        .unwrap();
    let weather = create_tool("get_weather")
        .description("The weather")
        .execute(|c: City, _ctx| async move { Ok(json!({"city": c.city, "sky": "clear"})) });
    let model = Arc::new(ScriptedModel::from_fn(|req| match tool_results(req) {
        0 => ScriptedResponse::tool_call("w1", "get_weather", json!({"city": "Lisbon"})),
        1 => ScriptedResponse::tool_call("d1", "agent-research", json!({"prompt": "facts"})),
        _ => ScriptedResponse::text("All done."),
    }));
    let assistant = Agent::builder("assistant")
        .name("Weather Agent")
        .model(model)
        .tool(weather)
        .agents([research.clone()])
        .build()
        .unwrap();
    Kestrel::builder()
        .tracing(TracingConfig::new())
        .span_sink(Arc::new(exporter))
        .agent(assistant)
        .agent(research)
        .build()
        .unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `oteltap` and the JSON lines it printed.
struct Receiver {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    port: u16,
}

impl Receiver {
    async fn start(python: &str) -> Self {
        let port = free_port();
        let mut child = tokio::process::Command::new(python)
            .args(["-m", "oteltap", "--port", &port.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("oteltap starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // It says when it listens.
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.recv().await {
                if line.contains("Listening") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(ready, Ok(true), "oteltap did not start on port {port}");
        Self { child, lines, port }
    }

    /// The spans printed, until `count` arrived (or 30 s went by).
    async fn spans(&mut self, count: usize) -> Vec<Value> {
        let mut spans = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), async {
            while spans.len() < count {
                let Some(line) = self.lines.recv().await else {
                    break;
                };
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    spans.extend(flatten(value));
                }
            }
        })
        .await;
        spans
    }
}

/// The spans in one printed line: a span itself, or an OTLP export request holding some.
fn flatten(value: Value) -> Vec<Value> {
    if value.get("name").is_some()
        && (value.get("spanId").is_some() || value.get("span_id").is_some())
    {
        return vec![value];
    }
    let mut out = Vec::new();
    for resource in value["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            out.extend(scope["spans"].as_array().into_iter().flatten().cloned());
        }
    }
    out
}

fn field<'a>(span: &'a Value, camel: &str, snake: &str) -> &'a Value {
    match span.get(camel) {
        Some(v) => v,
        None => &span[snake],
    }
}

/// An attribute's value, whatever shape the printer gives attributes (a list of OTLP
/// key-values, or an object).
fn attribute(span: &Value, key: &str) -> Option<Value> {
    let attributes = &span["attributes"];
    if let Some(list) = attributes.as_array() {
        let kv = list.iter().find(|kv| kv["key"] == key)?;
        let value = &kv["value"];
        return Some(
            [
                "stringValue",
                "intValue",
                "boolValue",
                "doubleValue",
                "arrayValue",
            ]
            .iter()
            .find_map(|k| value.get(*k).cloned())
            .unwrap_or_else(|| value.clone()),
        );
    }
    attributes.get(key).cloned()
}

fn hex(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_ascii_lowercase()
}

async fn records(kestrel: &Kestrel, trace_id: &str) -> Vec<SpanRecord> {
    kestrel.span_store().unwrap().trace(trace_id).await.unwrap()
}

#[tokio::test]
async fn an_agent_run_arrives_at_a_real_otlp_receiver_as_its_span_tree() {
    let Ok(python) = std::env::var("KESTREL_TEST_OTELTAP") else {
        eprintln!("skipped: set KESTREL_TEST_OTELTAP to a Python with oteltap installed");
        return;
    };
    let mut receiver = Receiver::start(&python).await;
    let exporter = OtlpExporter::builder()
        .endpoint(format!("http://127.0.0.1:{}/v1/traces", receiver.port))
        .protocol(OtlpProtocol::HttpProtobuf)
        .service_name("kestrel-test")
        .build()
        .unwrap();
    let kestrel = instance(exporter.clone());
    let result = kestrel
        .agent("assistant")
        .unwrap()
        .generate("Weather and facts?")
        .await
        .unwrap();
    let trace_id = result.trace_id.clone().unwrap();
    kestrel.tracer().unwrap().flush().await;
    exporter.flush().await;
    let stored = records(&kestrel, &trace_id).await;
    let got = receiver.spans(stored.len()).await;
    assert_eq!(
        got.len(),
        stored.len(),
        "every stored span arrives: {got:#?}"
    );
    assert_eq!(exporter.exported(), stored.len() as u64);
    assert_eq!(exporter.dropped(), 0);

    let by_name = |name: &str| -> Vec<&Value> {
        got.iter()
            .filter(|s| field(s, "name", "name") == name)
            .collect()
    };
    // The same ids as Kestrel's API.
    for span in &got {
        assert_eq!(
            hex(field(span, "traceId", "trace_id")),
            trace_id,
            "{span:#}"
        );
    }
    let root = by_name("invoke_agent Weather Agent");
    assert_eq!(root.len(), 1, "{got:#?}");
    let root = root[0];
    let root_id = hex(field(root, "spanId", "span_id"));
    let stored_root = stored.iter().find(|s| s.is_root()).unwrap();
    assert_eq!(root_id, stored_root.span_id);
    assert_eq!(
        attribute(root, "gen_ai.operation.name"),
        Some(json!("invoke_agent"))
    );
    assert_eq!(attribute(root, "gen_ai.agent.id"), Some(json!("assistant")));

    // Three model calls (client spans) under the root, usage on each.
    let chats: Vec<&Value> = by_name("chat mock")
        .into_iter()
        .filter(|chat| hex(field(chat, "parentSpanId", "parent_span_id")) == root_id)
        .collect();
    assert_eq!(
        chats.len(),
        3,
        "{:#?}",
        got.iter().map(|s| &s["name"]).collect::<Vec<_>>()
    );
    for chat in &chats {
        let kind = field(chat, "kind", "kind");
        assert!(
            kind == "SPAN_KIND_CLIENT" || kind == 3 || kind == "CLIENT",
            "{chat:#}"
        );
        assert!(
            attribute(chat, "gen_ai.usage.input_tokens").is_some(),
            "{chat:#}"
        );
    }

    // The tool call, with its call id and arguments.
    let tool = by_name("execute_tool get_weather");
    assert_eq!(tool.len(), 1, "{got:#?}");
    assert_eq!(
        hex(field(tool[0], "parentSpanId", "parent_span_id")),
        root_id
    );
    assert_eq!(attribute(tool[0], "gen_ai.tool.call.id"), Some(json!("w1")));
    let args = attribute(tool[0], "gen_ai.tool.call.arguments").unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args.as_str().unwrap()).unwrap(),
        json!({"city": "Lisbon"})
    );

    // The delegation: a tool call whose child is the sub-agent's run, its model call below.
    let delegation = by_name("execute_tool agent-research");
    assert_eq!(delegation.len(), 1, "{got:#?}");
    let delegation_id = hex(field(delegation[0], "spanId", "span_id"));
    let sub = by_name("invoke_agent Research Agent");
    assert_eq!(sub.len(), 1, "{got:#?}");
    assert_eq!(
        hex(field(sub[0], "parentSpanId", "parent_span_id")),
        delegation_id
    );
    let sub_id = hex(field(sub[0], "spanId", "span_id"));
    assert!(
        got.iter().any(
            |s| hex(field(s, "parentSpanId", "parent_span_id")) == sub_id
                && attribute(s, "gen_ai.operation.name") == Some(json!("chat"))
        ),
        "the sub-agent's model call hangs under its run: {got:#?}"
    );
    drop(receiver.child.start_kill());
}

/// A tiny OTLP/HTTP-JSON endpoint: the bodies it got.
async fn json_endpoint() -> (String, Arc<std::sync::Mutex<Vec<Value>>>) {
    use axum::routing::post;
    let bodies: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let kept = Arc::clone(&bodies);
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let kept = Arc::clone(&kept);
            async move {
                assert_eq!(headers["content-type"], "application/json");
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, bodies)
}

#[tokio::test]
async fn spans_go_as_json_when_asked() {
    let (url, bodies) = json_endpoint().await;
    let exporter = OtlpExporter::builder()
        .endpoint(url)
        .protocol(OtlpProtocol::HttpJson)
        .build()
        .unwrap();
    let kestrel = instance(exporter.clone());
    let result = kestrel
        .agent("assistant")
        .unwrap()
        .generate("Weather?")
        .await
        .unwrap();
    kestrel.tracer().unwrap().flush().await;
    exporter.flush().await;
    let bodies = bodies.lock().unwrap().clone();
    let spans: Vec<Value> = bodies.into_iter().flat_map(flatten).collect();
    let stored = records(&kestrel, result.trace_id.as_deref().unwrap()).await;
    assert_eq!(spans.len(), stored.len(), "{spans:#?}");
    assert!(
        spans
            .iter()
            .any(|s| s["name"] == "invoke_agent Weather Agent"),
        "{spans:#?}"
    );
    assert_eq!(exporter.dropped(), 0);
}

#[tokio::test]
async fn an_endpoint_that_is_down_costs_only_dropped_batches() {
    // Nothing listens on this port.
    let exporter = OtlpExporter::builder()
        .endpoint(format!("http://127.0.0.1:{}/v1/traces", free_port()))
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let kestrel = instance(exporter.clone());
    let result = kestrel
        .agent("assistant")
        .unwrap()
        .generate("Weather?")
        .await
        .unwrap();
    assert_eq!(result.text, "All done.");
    kestrel.tracer().unwrap().flush().await;
    exporter.flush().await;
    let stored = records(&kestrel, result.trace_id.as_deref().unwrap()).await;
    assert!(!stored.is_empty(), "the traces are still stored");
    assert_eq!(exporter.exported(), 0);
    assert_eq!(exporter.dropped(), stored.len() as u64);
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    // One batch may wait; the endpoint never answers in time, so later batches are dropped.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket); // accepted, never answered
        }
    });
    let exporter = OtlpExporter::builder()
        .endpoint(format!("http://127.0.0.1:{port}/v1/traces"))
        .timeout(Duration::from_secs(30))
        .max_queued_batches(1)
        .build()
        .unwrap();
    let kestrel = instance(exporter.clone());
    let agent = kestrel.agent("assistant").unwrap();
    for _ in 0..4 {
        agent.generate("Weather?").await.unwrap();
        kestrel.tracer().unwrap().flush().await;
    }
    assert!(
        exporter.dropped() > 0,
        "later batches are dropped, not waited for"
    );
    assert_eq!(exporter.exported(), 0);
}

#[test]
fn building_outside_a_runtime_is_a_clear_error() {
    let error = OtlpExporter::builder()
        .endpoint("http://127.0.0.1:4318/v1/traces")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("Tokio runtime"), "{error}");
}
