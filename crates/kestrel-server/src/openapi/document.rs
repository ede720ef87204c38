//! The document the registered routes make: each operation's path and query parameters, its
//! body, its answers (typed success bodies, the errors every route may give), and the schemas
//! they name, generated once with `schemars`.

use std::collections::BTreeMap;

use axum::routing::MethodFilter;
use schemars::Schema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use super::{Answer, Bounds, Operation};

fn method_name(method: MethodFilter) -> &'static str {
    if method == MethodFilter::GET {
        "get"
    } else if method == MethodFilter::POST {
        "post"
    } else if method == MethodFilter::PATCH {
        "patch"
    } else if method == MethodFilter::DELETE {
        "delete"
    } else {
        "put"
    }
}

/// `{agent_id}` → `agentId`-style names are not used: OpenAPI names the parameters as the
/// path does.
fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            json!({
                "name": name,
                "in": "path",
                "required": true,
                // No control characters: the path check refuses them, as bodies do in ids.
                "schema": {
                    "type": "string",
                    "maxLength": crate::ids::MAX_ID_LEN,
                    "pattern": crate::ids::ID_PATTERN,
                },
            })
        })
        .collect()
}

/// A query struct's properties as query parameters.
fn query_parameters(schema: &Schema) -> Vec<Value> {
    let Some(object) = schema.as_object() else {
        return Vec::new();
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut parameter = json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "schema": schema,
            });
            if let Some(description) = schema.get("description") {
                parameter["description"] = description.clone();
            }
            parameter
        })
        .collect()
}

pub(super) fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    })
}

fn success_response(answer: Answer, returns: Option<Schema>) -> Value {
    match answer {
        Answer::Json => json!({
            "description": "OK",
            "content": {"application/json": {"schema": returns.map_or(json!({}), |s| s.to_value())}},
        }),
        Answer::Events => json!({
            "description": "Server-sent events: `data: <event JSON>` per Kestrel event, then `data: [DONE]`",
            "content": {"text/event-stream": {"schema": sse_event_schema()}},
        }),
        Answer::UiStream => json!({
            "description": "The AI SDK UI message stream (header `x-vercel-ai-ui-message-stream: v1`): `data: <chunk JSON>` per chunk, then `data: [DONE]`",
            "content": {"text/event-stream": {"schema": sse_event_schema()}},
        }),
        Answer::Subscription => json!({
            "description": "Server-sent events: `: connected`, then the thread's events, with `: heartbeat` comments",
            "content": {"text/event-stream": {"schema": sse_event_schema()}},
        }),
        Answer::Records => json!({
            "description": "The run's events, each as its JSON followed by the record separator U+001E (no `[DONE]`): the stream ends with `workflow-finish`",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }),
    }
}

/// The schema of one server-sent event (its `event`, `data`, `id` and `retry` fields): what
/// OpenAPI 3.1 tools read the `schema` of `text/event-stream` as (3.2 names it `itemSchema`).
fn sse_event_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "event": {"type": "string"},
            "data": {"type": "string", "description": "JSON, or `[DONE]` at the end of a run's stream"},
            "id": {"type": "string"},
            "retry": {"type": "integer", "minimum": 0},
        },
    })
}

/// The generator of the document's schemas, definitions under `/components/schemas`.
fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator()
}

/// The bounds the body schema `body` states, as the document shows it; `None` when it states
/// none.
pub(super) fn body_bounds(body: fn(&mut SchemaGenerator) -> Schema) -> Option<Bounds> {
    let mut generator = generator();
    let schema = body(&mut generator);
    let definitions = generator.take_definitions(true);
    Bounds::compile(schema.as_value(), &definitions)
}

/// The document of `operations`, before [`super::links`] adds what spans operations.
pub(super) fn paths_and_schemas(operations: &[Operation], secured: bool) -> Value {
    let mut generator = generator();
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for op in operations {
        let mut parameters = path_parameters(&op.path);
        if let Some(query) = op.doc.query {
            parameters.extend(query_parameters(&query(&mut generator)));
        }
        let mut responses = Map::new();
        let returns = op.doc.returns.map(|returns| returns(&mut generator));
        let ok = success_response(op.doc.answer, returns);
        responses.insert(if op.doc.created { "201" } else { "200" }.into(), ok);
        responses.insert(
            "400".into(),
            error_response("The path, the query or the JSON is malformed"),
        );
        // Every route: the Host check (DNS rebinding), the per-token and per-server limits,
        // and the request timeout (non-streaming routes); writes: the Origin check.
        responses.insert(
            "421".into(),
            error_response("The request names a host this server does not answer to"),
        );
        responses.insert(
            "429".into(),
            error_response(
                "Too many runs in progress, or streams open for this token (see Retry-After)",
            ),
        );
        responses.insert(
            "503".into(),
            error_response("The request took longer than the server's request timeout"),
        );
        if op.method != MethodFilter::GET {
            responses.insert(
                "403".into(),
                error_response(
                    "A request from another origin that changes state (or, with a token, one \
                     that may not act for this resource)",
                ),
            );
        }
        if op.doc.body.is_some() {
            responses.insert(
                "413".into(),
                error_response("The body is larger than the server's limit"),
            );
            responses.insert(
                "415".into(),
                error_response("The body is not sent as `Content-Type: application/json`"),
            );
            responses.insert(
                "422".into(),
                error_response(
                    "The body does not have the shape this route takes, or a string, array or \
                     map in it is longer than its schema's maxLength, maxItems or maxProperties \
                     (the message names the field)",
                ),
            );
        }
        if secured {
            responses.insert(
                "401".into(),
                error_response("No bearer token, or not a valid one"),
            );
            responses.insert(
                "403".into(),
                error_response("The token may not act for this resource"),
            );
        }
        responses.insert("404".into(), error_response("Nothing by that id"));
        // Routes that call a model answer for its provider (a stored agent may name any).
        if op.method != MethodFilter::GET && matches!(op.doc.tag, "runs" | "networks" | "chat") {
            responses.insert(
                "502".into(),
                error_response("The model provider failed (its text is logged, not sent)"),
            );
        }
        if let Some(conflict) = op.doc.conflict {
            responses.insert("409".into(), error_response(conflict));
        }
        let mut operation = json!({
            "summary": op.doc.summary,
            "tags": [op.doc.tag],
            "operationId": operation_id(method_name(op.method), &op.path),
            "parameters": parameters,
            "responses": responses,
        });
        if let Some(body) = op.doc.body {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": body(&mut generator)}},
            });
        }
        paths
            .entry(op.path.as_str())
            .or_default()
            .insert(method_name(op.method).into(), operation);
    }
    let mut schemas = generator.take_definitions(true);
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "description": "What went wrong, for programs (`invalid_body`, `not_found`…)"},
                    "message": {"type": "string", "description": "What went wrong, for people"},
                },
            }},
        }),
    );
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Kestrel",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Kestrel's agents over HTTP: Mastra's routes under /api, and the AI SDK chat route. No string of a body may hold U+0000 (422 on every route with a body).",
        },
        "paths": paths,
        "components": {"schemas": schemas},
    });
    if secured {
        doc["components"]["securitySchemes"] =
            json!({"bearer": {"type": "http", "scheme": "bearer"}});
        doc["security"] = json!([{"bearer": []}]);
    }
    doc
}

/// Gives every integer schema with a `format` of a sized integer (`uint32`: what `schemars`
/// says of a `u32`) the bounds of its type, which the handlers' `serde` enforces: a format
/// alone bounds nothing for a validator or a client.
pub(super) fn bound_integers(value: &mut Value) {
    match value {
        Value::Object(object) => {
            let bounds: Option<(i64, u64)> = match object.get("format").and_then(Value::as_str) {
                Some("uint8") => Some((0, u8::MAX.into())),
                Some("uint16") => Some((0, u16::MAX.into())),
                Some("uint32") => Some((0, u32::MAX.into())),
                Some("uint64" | "uint") => Some((0, u64::MAX)),
                Some("int8") => Some((i8::MIN.into(), i8::MAX as u64)),
                Some("int16") => Some((i16::MIN.into(), i16::MAX as u64)),
                Some("int32") => Some((i32::MIN.into(), i32::MAX as u64)),
                Some("int64" | "int") => Some((i64::MIN, i64::MAX as u64)),
                _ => None,
            };
            if let Some((minimum, maximum)) = bounds {
                object.entry("minimum").or_insert_with(|| minimum.into());
                object.entry("maximum").or_insert_with(|| maximum.into());
            }
            object.values_mut().for_each(bound_integers);
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

/// `post /api/agents/{agent_id}/generate` → `postAgentsAgentIdGenerate`-like ids, unique per
/// method and path.
pub(super) fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for word in path
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && *w != "api")
    {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}
