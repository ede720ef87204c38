//! `/api/openapi.json`: generated from the routes, so every documented operation is routed,
//! every route the Mastra client uses is documented, and body schemas are the handlers' types.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ScriptedModel, ScriptedResponse};
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use serde_json::{Value, json};

async fn start(configure: impl FnOnce(Server) -> Server) -> String {
    let echo = Agent::builder("echo")
        .model(Arc::new(ScriptedModel::from_fn(|_| {
            ScriptedResponse::text("hi")
        })))
        .build()
        .unwrap();
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    let kestrel = Kestrel::builder()
        .agent(echo)
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone())
        .build()
        .unwrap();
    let server = configure(
        Server::new(kestrel)
            .memory(memory)
            .vector("x", Arc::new(kestrel_rag::InMemoryVectorStore::new())),
    );
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    format!("http://{addr}")
}

/// The server's OpenAPI document, fetched with `token` when one is given.
async fn document(base: &str, token: Option<&str>) -> Value {
    let mut request = reqwest::Client::new().get(format!("{base}/api/openapi.json"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Follows a `#/components/schemas/...` reference.
pub(crate) fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(pointer) => doc
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling $ref {pointer}")),
        None => schema,
    }
}

/// Every `$ref` in `value` points into the document.
fn check_refs(doc: &Value, value: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(pointer) = map.get("$ref").and_then(Value::as_str) {
                assert!(
                    doc.pointer(pointer.trim_start_matches('#')).is_some(),
                    "dangling $ref {pointer}"
                );
            }
            map.values().for_each(|v| check_refs(doc, v));
        }
        Value::Array(items) => items.iter().for_each(|v| check_refs(doc, v)),
        _ => {}
    }
}

/// One documented operation: its method, its documented path, its JSON, and the path with its
/// parameters filled by `fill` (`{agent_id}` → `fill("agent_id")`).
pub(crate) struct DocumentedOperation {
    pub(crate) method: reqwest::Method,
    pub(crate) path: String,
    pub(crate) operation: Value,
    pub(crate) concrete: String,
}

pub(crate) fn operations_of(
    doc: &Value,
    fill: impl Fn(&str) -> String,
) -> Vec<DocumentedOperation> {
    let mut all = Vec::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .split('/')
            .map(
                |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(name) => fill(name),
                    None => s.to_owned(),
                },
            )
            .collect::<Vec<_>>()
            .join("/");
        for (method, operation) in methods.as_object().unwrap() {
            all.push(DocumentedOperation {
                method: reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                path: path.clone(),
                operation: operation.clone(),
                concrete: concrete.clone(),
            });
        }
    }
    all
}

#[tokio::test]
async fn the_document_lists_every_route_with_its_schemas() {
    let base = start(|s| s).await;
    let response = reqwest::get(format!("{base}/api/openapi.json"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let doc: Value = response.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    check_refs(&doc, &doc);
    let paths = doc["paths"].as_object().unwrap();

    // What Mastra's client calls, by method and path.
    let expected = [
        ("get", "/api/agents"),
        ("get", "/api/agents/{agent_id}"),
        ("post", "/api/agents/{agent_id}/generate"),
        ("post", "/api/agents/{agent_id}/stream"),
        ("post", "/api/agents/{agent_id}/approve-tool-call"),
        ("post", "/api/agents/{agent_id}/decline-tool-call"),
        ("post", "/api/agents/{agent_id}/approve-tool-call-generate"),
        ("post", "/api/agents/{agent_id}/decline-tool-call-generate"),
        ("post", "/api/agents/{agent_id}/resume-stream"),
        ("get", "/api/agents/{agent_id}/suspended-runs"),
        ("post", "/api/agents/{agent_id}/threads/abort"),
        ("post", "/api/agents/{agent_id}/runs/{run_id}/abort"),
        ("post", "/api/agents/{agent_id}/send-message"),
        ("post", "/api/agents/{agent_id}/signals"),
        ("post", "/api/agents/{agent_id}/threads/subscribe"),
        ("get", "/api/agents/{agent_id}/tools"),
        ("post", "/api/agents/{agent_id}/tools/{tool_id}/execute"),
        ("get", "/api/memory/threads"),
        ("post", "/api/memory/threads"),
        ("get", "/api/memory/threads/{thread_id}"),
        ("patch", "/api/memory/threads/{thread_id}"),
        ("delete", "/api/memory/threads/{thread_id}"),
        ("get", "/api/memory/threads/{thread_id}/messages"),
        ("get", "/api/memory/threads/{thread_id}/working-memory"),
        ("post", "/api/memory/threads/{thread_id}/working-memory"),
        ("get", "/api/workflows"),
        ("get", "/api/workflows/run-counts"),
        ("get", "/api/workflows/{workflow_id}"),
        ("get", "/api/workflows/{workflow_id}/runs"),
        ("get", "/api/workflows/{workflow_id}/runs/{run_id}"),
        ("delete", "/api/workflows/{workflow_id}/runs/{run_id}"),
        ("post", "/api/workflows/{workflow_id}/create-run"),
        ("post", "/api/workflows/{workflow_id}/stream"),
        ("post", "/api/workflows/{workflow_id}/start-async"),
        ("post", "/api/workflows/{workflow_id}/start"),
        ("post", "/api/workflows/{workflow_id}/resume-stream"),
        ("post", "/api/workflows/{workflow_id}/resume-async"),
        ("post", "/api/workflows/{workflow_id}/resume"),
        ("post", "/api/workflows/{workflow_id}/resume-no-wait"),
        ("post", "/api/workflows/{workflow_id}/restart"),
        ("post", "/api/workflows/{workflow_id}/restart-async"),
        (
            "post",
            "/api/workflows/{workflow_id}/restart-all-active-workflow-runs",
        ),
        ("post", "/api/workflows/{workflow_id}/time-travel"),
        ("post", "/api/workflows/{workflow_id}/time-travel-async"),
        ("post", "/api/workflows/{workflow_id}/time-travel-stream"),
        ("post", "/api/workflows/{workflow_id}/runs/{run_id}/cancel"),
        ("get", "/api/vectors"),
        ("get", "/api/embedders"),
        ("post", "/api/vector/{vector_name}/upsert"),
        ("post", "/api/vector/{vector_name}/create-index"),
        ("post", "/api/vector/{vector_name}/query"),
        ("get", "/api/vector/{vector_name}/indexes"),
        ("get", "/api/vector/{vector_name}/indexes/{index_name}"),
        ("delete", "/api/vector/{vector_name}/indexes/{index_name}"),
        ("get", "/api/openapi.json"),
        ("post", "/chat/{agent_id}"),
        ("get", "/chat/{agent_id}/{chat_id}/stream"),
        ("get", "/chat/{agent_id}/{chat_id}/messages"),
    ];
    for (method, path) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is not documented"
        );
    }

    // Bodies are the handlers' types: generate takes `messages` (required) and `memory`.
    let generate = &paths["/api/agents/{agent_id}/generate"]["post"];
    let body = resolve(
        &doc,
        &generate["requestBody"]["content"]["application/json"]["schema"],
    );
    assert!(body["properties"]["messages"].is_object(), "{body}");
    assert!(body["properties"]["memory"].is_object(), "{body}");
    assert!(
        body["required"]
            .as_array()
            .unwrap()
            .contains(&json!("messages"))
    );
    assert_eq!(generate["parameters"][0]["name"], "agent_id");

    // A typed answer's schema is the handler's type: a thread's messages are Mastra's
    // MastraDBMessage, parts inside `content` (format 2).
    let messages = &paths["/api/memory/threads/{thread_id}/messages"]["get"];
    let page = resolve(
        &doc,
        &messages["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let message = resolve(&doc, &page["properties"]["messages"]["items"]);
    let content = resolve(&doc, &message["properties"]["content"]);
    assert!(content["properties"]["parts"].is_object(), "{content}");
    assert!(content["properties"]["format"].is_object(), "{content}");
    assert!(message["properties"].get("parts").is_none(), "{message}");
    assert_eq!(generate["parameters"][0]["in"], "path");
    let stream = &paths["/api/agents/{agent_id}/stream"]["post"];
    assert!(stream["responses"]["200"]["content"]["text/event-stream"].is_object());
    let list = &paths["/api/memory/threads"]["get"];
    let names: Vec<&str> = list["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "resourceId",
        "page",
        "perPage",
        "orderBy[field]",
        "orderBy[direction]",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(paths["/api/memory/threads"]["post"]["responses"]["201"].is_object());
    // The vector routes' bodies are exactly what they take: Mastra's fields (and Kestrel's),
    // nothing else.
    let upsert = &paths["/api/vector/{vector_name}/upsert"]["post"];
    let upsert_body = resolve(
        &doc,
        &upsert["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(upsert_body["additionalProperties"], false, "{upsert_body}");
    assert_eq!(
        upsert_body["required"],
        json!(["indexName", "vectors"]),
        "{upsert_body}"
    );
    assert_eq!(
        upsert_body["properties"]["vectors"]["items"]["maxItems"],
        16_000
    );
    let create_index = &paths["/api/vector/{vector_name}/create-index"]["post"];
    assert!(
        create_index["responses"]["409"].is_object(),
        "{create_index}"
    );
    let query = &paths["/api/vector/{vector_name}/query"]["post"];
    let query_body = resolve(
        &doc,
        &query["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(
        query_body["properties"]["topK"]["maximum"], 10_000,
        "{query_body}"
    );
    let chat = &paths["/chat/{agent_id}"]["post"];
    let chat_body = resolve(
        &doc,
        &chat["requestBody"]["content"]["application/json"]["schema"],
    );
    for field in [
        "id",
        "messages",
        "trigger",
        "runId",
        "resumeData",
        "version",
    ] {
        assert!(
            chat_body["properties"][field].is_object(),
            "{field}: {chat_body}"
        );
    }
    assert!(
        chat["responses"]["200"]["description"]
            .as_str()
            .unwrap()
            .contains("x-vercel-ai-ui-message-stream")
    );

    // Operation ids are unique.
    let mut ids: Vec<&str> = paths
        .values()
        .flat_map(|p| p.as_object().unwrap().values())
        .map(|op| op["operationId"].as_str().unwrap())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count);
    // No token configured: no security requirement.
    assert!(doc.get("security").is_none());
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let base = start(|s| s).await;
    let doc = document(&base, None).await;
    let http = reqwest::Client::new();
    let mut checked = 0;
    for op in operations_of(&doc, |_| "x".to_owned()) {
        let (method, path, concrete) = (&op.method, &op.path, &op.concrete);
        let mut request = http.request(method.clone(), format!("{base}{concrete}"));
        if method != reqwest::Method::GET && method != reqwest::Method::DELETE {
            request = request.json(&json!({}));
        }
        let response = request
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert_ne!(status, 405, "{method} {path} is documented but not routed");
        let body = response.text().await.unwrap_or_default();
        assert!(
            !body.contains("no such route"),
            "{method} {path} is documented but not routed"
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} operations");
}

#[tokio::test]
async fn a_server_with_a_token_documents_bearer_auth() {
    let base = start(|s| s.token("secret")).await;
    let http = reqwest::Client::new();
    let refused = http
        .get(format!("{base}/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let doc = document(&base, Some("secret")).await;
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert!(
        doc["paths"]["/api/agents"]["get"]["responses"]["401"].is_object(),
        "{}",
        doc["paths"]["/api/agents"]["get"]
    );
}

#[tokio::test]
async fn every_operation_refuses_a_caller_without_the_token() {
    let base = start(|s| s.token("secret")).await;
    let http = reqwest::Client::new();
    let doc = document(&base, Some("secret")).await;
    let mut checked = 0;
    for op in operations_of(&doc, |_| "x".to_owned()) {
        let (method, path, concrete) = (&op.method, &op.path, &op.concrete);
        for token in [None, Some("wrong")] {
            let mut request = http.request(method.clone(), format!("{base}{concrete}"));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            if method != reqwest::Method::GET && method != reqwest::Method::DELETE {
                request = request.json(&json!({"messages": "hi", "resourceId": "r"}));
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{method} {path} with {token:?}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unauthorized", "{method} {path}");
            checked += 1;
        }
    }
    assert!(checked >= 60, "only {checked} requests");
}

#[tokio::test]
async fn every_operation_with_a_body_names_a_malformed_or_mistyped_one() {
    let base = start(|s| s).await;
    let http = reqwest::Client::new();
    let doc = document(&base, None).await;
    let created = http
        .post(format!("{base}/api/memory/threads"))
        .json(&json!({"resourceId": "r", "threadId": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let mut checked = 0;
    // Real ids where the route looks them up before reading the body.
    let fill = |name: &str| match name {
        "agent_id" => "echo".to_owned(),
        "thread_id" => "t".to_owned(),
        _ => "r".to_owned(),
    };
    for op in operations_of(&doc, fill) {
        let (method, path, concrete) = (&op.method, &op.path, &op.concrete);
        if op.operation.get("requestBody").is_none() {
            continue;
        }
        let send = |body: &'static str| {
            http.request(method.clone(), format!("{base}{concrete}"))
                .header("content-type", "application/json")
                .body(body)
                .send()
        };
        let malformed = send("{not json").await.unwrap();
        assert_eq!(malformed.status(), 400, "{method} {path}: malformed JSON");
        let body: Value = malformed.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_json", "{method} {path}");

        let mistyped = send("[1, 2]").await.unwrap();
        assert_eq!(mistyped.status(), 422, "{method} {path}: an array");
        let body: Value = mistyped.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_body", "{method} {path}");
        assert!(
            !body["error"]["message"].as_str().unwrap().is_empty(),
            "{method} {path}"
        );

        let unsupported = http
            .request(method.clone(), format!("{base}{concrete}"))
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(unsupported.status(), 415, "{method} {path}: text/plain");
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} operations take a body");
}

#[tokio::test]
async fn links_name_operations_parameters_and_body_fields_of_the_document() {
    let base = start(|s| s).await;
    let doc = document(&base, None).await;
    let operations: Vec<DocumentedOperation> = operations_of(&doc, |_| "x".to_owned());
    let by_id = |id: &str| {
        operations
            .iter()
            .find(|op| op.operation["operationId"] == id)
            .unwrap_or_else(|| panic!("a link names {id}, which is not in the document"))
    };
    let mut checked = 0;
    for op in &operations {
        for (status, response) in op.operation["responses"].as_object().unwrap() {
            let Some(links) = response.get("links").and_then(Value::as_object) else {
                continue;
            };
            assert!(
                status.starts_with('2'),
                "{} {}: links on {status}",
                op.method,
                op.path
            );
            for (name, link) in links {
                let target = by_id(link["operationId"].as_str().unwrap());
                for key in link["parameters"].as_object().unwrap().keys() {
                    let (location, parameter) = key.split_once('.').unwrap();
                    assert!(
                        target.operation["parameters"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|p| p["in"] == location && p["name"] == parameter),
                        "link {name} of {} {}: {} {} has no {key}",
                        op.method,
                        op.path,
                        target.method,
                        target.path
                    );
                }
                if let Some(body) = link.get("requestBody") {
                    let schema = resolve(
                        &doc,
                        &target.operation["requestBody"]["content"]["application/json"]["schema"],
                    );
                    for field in body.as_object().unwrap().keys() {
                        assert!(
                            schema["properties"][field].is_object(),
                            "link {name}: {} {} takes no body field {field}",
                            target.method,
                            target.path
                        );
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} links");
}
