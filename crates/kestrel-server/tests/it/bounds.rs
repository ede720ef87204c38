//! Every bound the OpenAPI document states on a request body is enforced: driven by the
//! document alone, every `maxLength`, `maxItems`, `maxProperties` and `propertyNames.maxLength`
//! of every route's body schema (through `$ref`s, alternatives, items and maps) is broken by
//! one, in an otherwise minimal body, and the server refuses it naming the field and stores
//! nothing of it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::kestrel::Kestrel;
use kestrel_core::model::{ModelRegistry, ScriptedModel, ScriptedResponse, SharedModel};
use kestrel_core::tool::create_tool;
use kestrel_memory::Memory;
use kestrel_server::Server;
use kestrel_storage::InMemoryStorage;
use serde_json::{Map, Value, json};

use crate::openapi::{operations_of, resolve};

/// What every string the probes send starts with, and what no stored thing may hold after.
const MARK: &str = "probe";

fn echo() -> SharedModel {
    Arc::new(ScriptedModel::from_fn(|_| ScriptedResponse::text("hi")))
}

/// A server with something real behind each kind of path parameter: the stored agent `kept`,
/// the thread `t` of resource `r`, the tool `lookup`, the workflow `gate` and its suspended
/// run `run-1`.
async fn start() -> String {
    let mut models = ModelRegistry::empty();
    models.register("scripted", |_: &str, _: &str| Ok(echo()));
    let lookup = create_tool("lookup")
        .description("Looks up")
        .input_schema(json!({"type": "object"}))
        .execute(|_: Value, _ctx| async { Ok("found") });
    let memory = Memory::new(Arc::new(InMemoryStorage::new()));
    let mut builder = Kestrel::builder()
        .models(models)
        .agent(Agent::builder("echo").model(echo()).build().unwrap())
        .tool(lookup)
        .storage(Arc::clone(memory.storage().unwrap()))
        .memory(memory.clone());
    for workflow in crate::workflows::workflows() {
        builder = builder.workflow(workflow);
    }
    let server = Server::new(builder.build().unwrap()).memory(memory);
    let (listener, addr) = server.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    tokio::spawn(server.serve_on(listener, addr));
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    for (path, body) in [
        (
            "/api/memory/threads",
            json!({"resourceId": "r", "threadId": "t"}),
        ),
        (
            "/api/stored/agents",
            json!({"id": "kept", "instructions": "Keep.", "model": "scripted/echo"}),
        ),
        ("/api/workflows/gate/create-run?runId=run-1", json!({})),
        (
            "/api/workflows/gate/start-async?runId=run-1",
            json!({"inputData": {"v": 1}}),
        ),
    ] {
        let response = http
            .post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
    }
    base
}

/// The plausible id of each path parameter.
fn fill(name: &str) -> String {
    match name {
        "agent_id" => "kept",
        "thread_id" | "chat_id" => "t",
        "tool_id" => "lookup",
        "workflow_id" => "gate",
        "run_id" => "run-1",
        _ => "x",
    }
    .to_owned()
}

/// One body that breaks one bound of a schema.
struct Probe {
    /// The body (or, while it is built, the value at this level).
    value: Value,
    /// Where the broken value is, as the server names it: `memory.thread`, `tools[0]`.
    field: Vec<String>,
    /// The bound, as the server's message states it (`at most 256`).
    max: u64,
}

/// Builds the probes of a document: minimal values and values past bounds.
struct Prober<'d> {
    doc: &'d Value,
    /// Numbers the probes, so that whatever one of them left behind says which.
    tag: String,
}

impl Prober<'_> {
    /// `schema` with its `$ref`s followed; `None` for one already on `seen` (recursion).
    fn resolved<'a>(&'a self, schema: &'a Value, seen: &mut Vec<String>) -> Option<&'a Value> {
        let mut schema = schema;
        while let Some(pointer) = schema.get("$ref").and_then(Value::as_str) {
            if seen.iter().any(|s| s == pointer) {
                return None;
            }
            seen.push(pointer.to_owned());
            schema = resolve(self.doc, schema);
        }
        Some(schema)
    }

    /// A string of `length` characters, tagged.
    fn text(&self, length: usize) -> String {
        let mut text: String = self.tag.chars().take(length).collect();
        while text.chars().count() < length {
            text.push('Q');
        }
        text
    }

    /// The simplest value `schema` takes: its `const`, its first `enum` value or
    /// alternative, or the least of its first type that is not `null`.
    fn minimal(&self, schema: &Value, seen: &mut Vec<String>) -> Value {
        let depth = seen.len();
        let value = self.minimal_at(schema, seen);
        seen.truncate(depth);
        value
    }

    fn minimal_at(&self, schema: &Value, seen: &mut Vec<String>) -> Value {
        let Some(schema) = self.resolved(schema, seen) else {
            return Value::Null;
        };
        if let Some(value) = schema.get("const") {
            return value.clone();
        }
        if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
            return first.clone();
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alternatives) = schema.get(key).and_then(Value::as_array) {
                let first = alternatives
                    .iter()
                    .find(|a| a.get("type") != Some(&json!("null")))
                    .unwrap_or(&Value::Null);
                return self.minimal(first, seen);
            }
        }
        let kind = match schema.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|k| *k != "null")
                .unwrap_or("null"),
            _ => "null",
        };
        let at_least = |key: &str| schema.get(key).and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "string" => {
                let most = schema.get("maxLength").and_then(Value::as_u64);
                let length = (self.tag.len() as u64).max(at_least("minLength"));
                let length = most.map_or(length, |most| length.min(most));
                json!(self.text(length as usize))
            }
            "integer" | "number" => json!(at_least("minimum").max(1)),
            "boolean" => json!(false),
            "array" => {
                let item = schema.get("items").unwrap_or(&Value::Null);
                let items = (0..at_least("minItems").max(1))
                    .map(|_| self.minimal(item, seen))
                    .collect();
                Value::Array(items)
            }
            "object" => Value::Object(self.required(schema, seen)),
            _ => Value::Null,
        }
    }

    /// An object with the required properties of `schema`, each minimal, and what a body must
    /// say besides for the server to act on it, as a stored agent's name and model. Where a
    /// body names a thread, a resource or a run, the server's own: a body taken by mistake
    /// would change something a read shows.
    fn required(&self, schema: &Value, seen: &mut Vec<String>) -> Map<String, Value> {
        let properties = &schema["properties"];
        let mut object: Map<String, Value> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|name| {
                let value = match name {
                    "resourceId" | "resource" => json!("r"),
                    "threadId" => json!("t"),
                    "runId" => json!("run-1"),
                    _ => self.minimal(&properties[name], seen),
                };
                (name.to_owned(), value)
            })
            .collect();
        for (name, value) in [("name", json!(self.tag)), ("model", json!("scripted/echo"))] {
            if properties.get(name).is_some() && !object.contains_key(name) {
                object.insert(name.to_owned(), value);
            }
        }
        object
    }

    /// A probe for each bound of `schema` and of what it holds.
    fn probes(&self, schema: &Value, seen: &mut Vec<String>) -> Vec<Probe> {
        let depth = seen.len();
        let probes = self.probes_at(schema, seen);
        seen.truncate(depth);
        probes
    }

    fn probes_at(&self, schema: &Value, seen: &mut Vec<String>) -> Vec<Probe> {
        let Some(schema) = self.resolved(schema, seen) else {
            return Vec::new();
        };
        let mut probes = Vec::new();
        let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
        let entry = schema
            .get("additionalProperties")
            .filter(|a| a.is_object())
            .unwrap_or(&Value::Null);
        let at = |value: Value, max: u64| Probe {
            value,
            field: Vec::new(),
            max,
        };
        if let Some(max) = bound("maxLength") {
            probes.push(at(json!(self.text(max as usize + 1)), max));
        }
        if let Some(max) = bound("maxItems") {
            let item = schema.get("items").unwrap_or(&Value::Null);
            let items = (0..=max).map(|_| self.minimal(item, seen)).collect();
            probes.push(at(Value::Array(items), max));
        }
        if let Some(max) = bound("maxProperties") {
            let mut object = self.required(schema, seen);
            for n in 0..=max {
                object.insert(format!("{}{n}", self.tag), self.minimal(entry, seen));
            }
            probes.push(at(Value::Object(object), max));
        }
        if let Some(max) = schema
            .get("propertyNames")
            .and_then(|names| names.get("maxLength"))
            .and_then(Value::as_u64)
        {
            let mut object = self.required(schema, seen);
            object.insert(self.text(max as usize + 1), self.minimal(entry, seen));
            probes.push(at(Value::Object(object), max));
        }
        // What the schema holds: each broken value set in a minimal value of this schema.
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                for mut probe in self.probes(property, seen) {
                    let mut object = self.required(schema, seen);
                    object.insert(name.clone(), probe.value);
                    probe.value = Value::Object(object);
                    probe.field.insert(0, name.clone());
                    probes.push(probe);
                }
            }
        }
        if let Some(item) = schema.get("items") {
            for mut probe in self.probes(item, seen) {
                probe.value = json!([probe.value]);
                probe.field.insert(0, "[0]".to_owned());
                probes.push(probe);
            }
        }
        if entry.is_object() {
            let key = format!("{}key", self.tag);
            for mut probe in self.probes(entry, seen) {
                let mut object = self.required(schema, seen);
                object.insert(key.clone(), probe.value);
                probe.value = Value::Object(object);
                probe.field.insert(0, key.clone());
                probes.push(probe);
            }
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for alternative in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                probes.extend(self.probes(alternative, seen));
            }
        }
        probes
    }
}

/// `["memory", "thread"]` → `memory.thread`, `["tools", "[0]"]` → `tools[0]`.
fn field_name(field: &[String]) -> String {
    let mut name = String::new();
    for segment in field {
        if !name.is_empty() && !segment.starts_with('[') {
            name.push('.');
        }
        name.push_str(segment);
    }
    name
}

#[tokio::test]
async fn every_bound_the_document_states_on_a_body_is_enforced() {
    let base = start().await;
    let http = reqwest::Client::new();
    let doc: Value = http
        .get(format!("{base}/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut refused = Vec::new();
    let mut failures = Vec::new();
    let mut sent = 0;
    for op in operations_of(&doc, fill) {
        let Some(schema) = op
            .operation
            .pointer("/requestBody/content/application~1json/schema")
        else {
            continue;
        };
        let (method, path) = (&op.method, &op.path);
        // One tag per operation: the probes of one body are told apart by their field.
        let prober = Prober {
            doc: &doc,
            tag: format!("{MARK}{sent}-"),
        };
        for probe in prober.probes(schema, &mut Vec::new()) {
            sent += 1;
            let field = field_name(&probe.field);
            let response = http
                .request(method.clone(), format!("{base}{}", op.concrete))
                .json(&probe.value)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            if status != 422 {
                // Not read: it may be a stream that goes on.
                failures.push(format!("{method} {path} {field}: {status}"));
                continue;
            }
            let body: Value = response.json().await.unwrap();
            let message = body["error"]["message"].as_str().unwrap_or_default();
            let names = message.starts_with(&format!("{field}: "))
                && message.contains(&format!("at most {}", probe.max));
            if body["error"]["code"] != "invalid_body" || !names {
                failures.push(format!("{method} {path} {field}: {body}"));
            }
            refused.push(format!("{method} {path} {field}"));
        }
    }
    assert!(
        failures.is_empty(),
        "bounds the document states and the server does not enforce:\n{}",
        failures.join("\n")
    );
    // The document states bounds on ids, names, texts, lists and maps of most bodies.
    assert!(
        refused.len() >= 80,
        "only {} bounds: {refused:#?}",
        refused.len()
    );
    for expected in [
        "POST /api/stored/agents name",
        "POST /api/stored/agents instructions",
        "PATCH /api/stored/agents/{agent_id} description",
        "POST /api/stored/agents toolDescriptions",
        "POST /api/agents/{agent_id}/decline-tool-call reason",
        "POST /api/workflows/{workflow_id}/resume step",
        "POST /api/workflows/{workflow_id}/resume step[0]",
        "POST /api/agents/{agent_id}/generate memory.thread.id",
        "POST /api/agents/{agent_id}/generate versions.agents",
        "POST /api/memory/threads title",
    ] {
        assert!(
            refused.iter().any(|r| r == expected),
            "no probe for {expected}: {refused:#?}"
        );
    }

    // Nothing any of them sent was stored: every JSON answer of the document's reads, with
    // the ids the probes used, holds no trace of them.
    for op in operations_of(&doc, fill) {
        let json_answer = op
            .operation
            .pointer("/responses/200/content/application~1json")
            .is_some();
        // The document is rendered once, from the routes: it holds no body, but names fields
        // (`probes`) the mark can be part of.
        if op.method != reqwest::Method::GET || !json_answer || op.path == "/api/openapi.json" {
            continue;
        }
        let mut request = http.get(format!("{base}{}", op.concrete));
        let parameters = op.operation["parameters"].as_array().unwrap();
        for parameter in parameters.iter().filter(|p| p["in"] == "query") {
            let name = parameter["name"].as_str().unwrap();
            let value = match name {
                "resourceId" => "r",
                "threadId" => "t",
                "runId" => "run-1",
                "agentId" => "kept",
                _ if parameter["required"] == true => "x",
                _ => continue,
            };
            request = request.query(&[(name, value)]);
        }
        let answer = request.send().await.unwrap().text().await.unwrap();
        assert!(
            !answer.contains(MARK),
            "GET {} shows what a refused body sent: {answer}",
            op.path
        );
    }
}
