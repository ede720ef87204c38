//! Traces over HTTP: a run started with a `traceparent` joins the caller's trace and answers
//! its `traceId`; `/api/observability/traces` lists it (filtered, paged), gives it whole and
//! span by span, and deletes it; unknown (or impossible) traces are 404s, and an instance
//! without tracing answers 404 `no_tracing`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_core::tool::create_tool;
use kestrel_core::trace::TracingConfig;
use kestrel_server::Server;
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

fn kestrel(tracing: bool) -> Kestrel {
    let weather = create_tool("get_weather")
        .description("The weather")
        .execute(|c: City, _ctx| async move { Ok(json!({"city": c.city, "sky": "clear"})) });
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        if req
            .messages
            .iter()
            .any(|m| m.role == kestrel_core::message::Role::Tool)
        {
            ScriptedResponse::text("Clear skies.")
        } else {
            ScriptedResponse::tool_call("w1", "get_weather", json!({"city": "Lisbon"}))
        }
    }));
    let agent = Agent::builder("weather")
        .model(model)
        .tool(weather)
        .build()
        .unwrap();
    let builder = Kestrel::builder().agent(agent);
    let builder = if tracing {
        builder.tracing(TracingConfig::new())
    } else {
        builder
    };
    builder.build().unwrap()
}

async fn serve(kestrel: Kestrel) -> String {
    let server = Server::new(kestrel);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

#[tokio::test]
async fn a_runs_trace_is_listed_read_and_deleted() {
    let kestrel = kestrel(true);
    let base = serve(kestrel.clone()).await;
    let http = reqwest::Client::new();
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let answered: Value = http
        .post(format!("{base}/agents/weather/generate"))
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .json(&json!({"messages": [{"role": "user", "content": "Weather in Lisbon?"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answered["text"], "Clear skies.", "{answered}");
    assert_eq!(answered["traceId"], trace_id);
    kestrel.tracer().unwrap().flush().await;

    let get = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.unwrap() }
    };
    let listed: Value = get(format!("{base}/observability/traces?entityId=weather"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["pagination"]["total"], 1, "{listed}");
    assert_eq!(listed["pagination"]["hasMore"], false);
    let root = &listed["spans"][0];
    assert_eq!(root["traceId"], trace_id);
    assert_eq!(root["spanType"], "agent_run");
    assert_eq!(root["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(root["status"], "success");
    assert_eq!(root["spanCount"], 4, "{root}");
    assert!(root["startedAt"].as_str().unwrap().ends_with('Z'), "{root}");
    let none: Value = get(format!("{base}/observability/traces?entityId=nobody"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(none["pagination"]["total"], 0);

    let whole: Value = get(format!("{base}/observability/traces/{trace_id}"))
        .await
        .json()
        .await
        .unwrap();
    let spans = whole["spans"].as_array().unwrap();
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"tool: 'get_weather'"), "{names:?}");
    let tool = spans.iter().find(|s| s["spanType"] == "tool_call").unwrap();
    let one: Value = get(format!(
        "{base}/observability/traces/{trace_id}/spans/{}",
        tool["spanId"].as_str().unwrap()
    ))
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(one["output"]["sky"], "clear");

    // Bad and unknown ids.
    let bad = get(format!("{base}/observability/traces/not-a-trace")).await;
    assert_eq!(bad.status(), 404);
    let unknown = get(format!("{base}/observability/traces/{}", "a".repeat(32))).await;
    assert_eq!(unknown.status(), 404);
    let unknown_query = get(format!("{base}/observability/traces?colour=red")).await;
    assert_eq!(unknown_query.status(), 400);

    let deleted: Value = http
        .post(format!("{base}/observability/traces/delete"))
        .json(&json!({"traceIds": [trace_id, "not-a-trace"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(deleted["deleted"], 4);
    let gone = get(format!("{base}/observability/traces/{trace_id}")).await;
    assert_eq!(gone.status(), 404);
}

#[tokio::test]
async fn an_instance_without_tracing_says_so() {
    let base = serve(kestrel(false)).await;
    let answer = reqwest::get(format!("{base}/observability/traces"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_tracing", "{body}");
}

#[tokio::test]
async fn tracing_options_name_tag_and_place_the_run() {
    let kestrel = kestrel(true);
    let base = serve(kestrel.clone()).await;
    let http = reqwest::Client::new();
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let answered: Value = http
        .post(format!("{base}/agents/weather/generate"))
        // The body's trace is more explicit than the header's.
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .json(&json!({
            "messages": "Weather in Lisbon?",
            "tracingOptions": {
                "traceId": trace_id,
                "parentSpanId": "b7ad6b7169203331",
                "rootSpanName": "checkout assistant",
                "tags": ["beta", "eu"],
                "metadata": {"plan": "pro", "apiKey": "sk-secret"},
                "userId": "user-7"
            }
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answered["traceId"], trace_id, "{answered}");
    kestrel.tracer().unwrap().flush().await;
    let trace: Value = http
        .get(format!("{base}/observability/traces/{trace_id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let root = trace["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spanType"] == "agent_run")
        .unwrap();
    assert_eq!(root["name"], "checkout assistant");
    assert_eq!(root["parentSpanId"], "b7ad6b7169203331");
    assert_eq!(root["tags"], json!(["beta", "eu"]));
    assert_eq!(root["userId"], "user-7");
    assert_eq!(root["metadata"]["plan"], "pro");
    assert_eq!(root["metadata"]["apiKey"], "[REDACTED]");
    let listed: Value = http
        .get(format!("{base}/observability/traces?userId=user-7"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["pagination"]["total"], 1, "{listed}");

    for (bad, names) in [
        (json!({"traceId": "XYZ"}), "traceId"),
        (json!({"parentSpanId": "b7ad6b7169203331"}), "parentSpanId"),
        (
            json!({"traceId": null, "parentSpanId": "b7ad6b7169203331"}),
            "parentSpanId",
        ),
        (
            json!({"traceId": trace_id, "parentSpanId": "0000000000000000"}),
            "parentSpanId",
        ),
        (json!({"tags": vec!["t"; 33]}), "tags"),
        (json!({"rootSpanName": " "}), "rootSpanName"),
        (json!({"spanName": "x"}), "spanName"),
    ] {
        let response = http
            .post(format!("{base}/agents/weather/generate"))
            .json(&json!({"messages": "Hi", "tracingOptions": bad}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert!(status == 422 || status == 400, "{bad}: {status} {body}");
        assert!(body.contains(names), "{bad}: {body}");
    }
}
