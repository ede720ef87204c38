//! Processors over HTTP: `GET /api/processors` and `/{id}` list the agents' processors with
//! Mastra's shape, `POST /{id}/execute` runs one hook over sent messages, and a processor's
//! tripwire reaches `generate` (200 with `finishReason: "tripwire"`) and the SSE stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_processors::{FilterStrategy, PiiDetector, Preset, RegexFilter, UnicodeNormalizer};
use kestrel_server::Server;
use serde_json::{Value, json};

const KEY: &str = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";

fn kestrel() -> Kestrel {
    let secrets = RegexFilter::new()
        .preset(Preset::Secrets)
        .strategy(FilterStrategy::Block);
    let leaky = Agent::builder("leaky")
        .model(Arc::new(ScriptedModel::from_fn(|req| {
            let asked = req.messages.last().map(|m| m.text()).unwrap_or_default();
            if asked.contains("key") {
                ScriptedResponse::text(format!("It is {KEY}"))
            } else {
                ScriptedResponse::text("Hello.")
            }
        })))
        .input_processor(UnicodeNormalizer::new())
        .output_processor(secrets.clone())
        .build()
        .unwrap();
    let careful = Agent::builder("careful")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("fine")
        })))
        .input_processor(PiiDetector::new())
        .input_processor(secrets)
        .build()
        .unwrap();
    Kestrel::builder()
        .agent(leaky)
        .agent(careful)
        .build()
        .unwrap()
}

async fn serve() -> String {
    let server = Server::new(kestrel());
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}/api")
}

async fn get(url: String) -> (u16, Value) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(url: String, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn processors_are_listed_with_their_hooks_and_agents() {
    let base = serve().await;
    let (status, listed) = get(format!("{base}/processors")).await;
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&String> = listed.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["pii-detector", "regex-filter", "unicode-normalizer"]);
    let filter = &listed["regex-filter"];
    assert_eq!(
        filter["phases"],
        json!(["input", "outputStep", "toolResult"])
    );
    assert_eq!(filter["agentIds"], json!(["careful", "leaky"]));
    assert_eq!(
        filter["configurations"],
        json!([{"agentId": "careful", "type": "input"}, {"agentId": "leaky", "type": "output"}])
    );
    assert_eq!(filter["isWorkflow"], false);
    assert_eq!(filter["name"], "Regex filter");

    let (status, one) = get(format!("{base}/processors/unicode-normalizer")).await;
    assert_eq!(status, 200);
    assert_eq!(one["phases"], json!(["input", "outputStep"]));
    let (status, missing) = get(format!("{base}/processors/nope")).await;
    assert_eq!(status, 404, "{missing}");
}

#[tokio::test]
async fn execute_runs_one_hook_over_the_messages() {
    let base = serve().await;
    let url = format!("{base}/processors/pii-detector/execute");
    let (status, done) = post(
        url.clone(),
        json!({
            "phase": "input",
            "messages": [
                {"id": "m1", "role": "user", "content": {"format": 2, "parts": [{"type": "text", "text": "mail ada@example.com"}]}},
                "call +1 415 555 2671"
            ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["success"], true);
    assert_eq!(done["phase"], "input");
    let texts: Vec<&str> = done["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"]["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["mail [EMAIL]", "call [PHONE]"]);
    assert_eq!(done["messageList"]["messages"], done["messages"]);
    assert_eq!(done["messages"][0]["content"]["format"], 2);
    assert_eq!(done["decisions"][0]["action"], "redact");

    // A tripwire is an answer, not an error status.
    let (status, blocked) = post(
        format!("{base}/processors/regex-filter/execute"),
        json!({
            "phase": "outputStep",
            "agentId": "leaky",
            "messages": [{"role": "user", "content": "key?"}, {"role": "assistant", "content": format!("here: {KEY}")}]
        }),
    )
    .await;
    assert_eq!(status, 200, "{blocked}");
    assert_eq!(blocked["success"], false);
    assert_eq!(blocked["tripwire"]["triggered"], true);
    assert_eq!(
        blocked["tripwire"]["reason"],
        "the answer matched openai-api-key"
    );
    assert!(blocked.get("messages").is_none());
    assert!(!blocked.to_string().contains("sk-proj"));

    // Bad asks name what is wrong.
    for (body, status, needle) in [
        (
            json!({"phase": "sideways", "messages": ["x"]}),
            422,
            "sideways",
        ),
        (
            json!({"phase": "outputStream", "messages": ["x"]}),
            422,
            "outputStream",
        ),
        (
            json!({"phase": "outputResult", "messages": ["x"]}),
            404,
            "has no outputResult hook",
        ),
        (json!({"phase": "input", "messages": []}), 422, "messages"),
        (
            json!({"phase": "input", "messages": [{"role": "robot", "content": "x"}]}),
            422,
            "robot",
        ),
    ] {
        let (got, error) = post(url.clone(), body.clone()).await;
        assert_eq!(got, status, "{body} -> {error}");
        assert!(error.to_string().contains(needle), "{body} -> {error}");
    }
    let (status, _) = post(
        format!("{base}/processors/pii-detector/execute"),
        json!({"phase": "input", "agentId": "leaky", "messages": ["x"]}),
    )
    .await;
    assert_eq!(status, 404, "the leaky agent has no pii-detector");
}

#[tokio::test]
async fn a_tripwire_reaches_generate_and_the_event_stream() {
    let base = serve().await;
    let (status, answer) = post(
        format!("{base}/agents/leaky/generate"),
        json!({"messages": "what is the key?"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["finishReason"], "tripwire");
    assert_eq!(answer["text"], "");
    assert_eq!(answer["tripwire"]["processorId"], "regex-filter");
    assert_eq!(
        answer["tripwire"]["reason"],
        "the answer matched openai-api-key"
    );
    assert!(!answer.to_string().contains("sk-proj"));

    let (status, fine) = post(
        format!("{base}/agents/leaky/generate"),
        json!({"messages": "hi"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(fine["text"], "Hello.");
    assert!(fine.get("tripwire").is_none());

    let body = reqwest::Client::new()
        .post(format!("{base}/agents/leaky/stream"))
        .json(&json!({"messages": "what is the key?"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!body.contains("sk-proj"), "{body}");
    let events: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        ["start", "step-start", "tripwire", "finish"],
        "{body}"
    );
    assert_eq!(events[2]["payload"]["processorId"], "regex-filter");
    assert_eq!(events[3]["payload"]["stepResult"]["reason"], "tripwire");
}
