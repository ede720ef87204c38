//! The OpenAPI document, generated from the route definitions themselves.
//!
//! Routes are registered through [`Routes`], which adds each handler to the axum router and
//! records its path, method, summary and the JSON schemas of its query and body (derived with
//! `schemars` from the very types the handlers deserialize). A route cannot exist without its
//! entry in the document, and a body type's schema cannot drift from what the handler accepts.

use std::collections::BTreeMap;

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// How a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A JSON document.
    Json,
    /// A stream of Kestrel events: `data: <event JSON>` per event, then `data: [DONE]`.
    Events,
    /// The AI SDK UI message stream (`x-vercel-ai-ui-message-stream: v1`).
    UiStream,
    /// SSE comments and events of a thread subscription.
    Subscription,
}

/// What the document says about one operation.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    summary: &'static str,
    tag: &'static str,
    answer: Answer,
    body: Option<fn(&mut SchemaGenerator) -> Schema>,
    query: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// Statuses besides 200 (and the 4xx every route may give) worth naming.
    created: bool,
}

impl Doc {
    /// An operation answering with JSON.
    pub(crate) fn json(tag: &'static str, summary: &'static str) -> Self {
        Self {
            summary,
            tag,
            answer: Answer::Json,
            body: None,
            query: None,
            created: false,
        }
    }

    /// An operation answering with another kind of body.
    pub(crate) fn answering(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }

    /// Its JSON body is a `T`.
    pub(crate) fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(|generator| generator.subschema_for::<T>());
        self
    }

    /// Its query string holds the fields of `T`.
    pub(crate) fn query<T: JsonSchema>(mut self) -> Self {
        self.query = Some(|generator| generator.root_schema_for::<T>());
        self
    }

    /// It answers 201 Created.
    pub(crate) fn created(mut self) -> Self {
        self.created = true;
        self
    }
}

/// A router that documents what it routes.
pub(crate) struct Routes<S> {
    /// Each route's path (without the prefix `into_parts` adds) and handler.
    routes: Vec<(String, MethodRouter<S>)>,
    operations: Vec<(String, MethodFilter, Doc)>,
}

impl<S: Clone + Send + Sync + 'static> Routes<S> {
    /// No routes yet.
    pub(crate) fn new() -> Self {
        Self {
            routes: Vec::new(),
            operations: Vec::new(),
        }
    }

    /// Routes `method path` to `handler`, documented by `doc`. Paths use axum's `{param}`
    /// syntax, which is also OpenAPI's.
    pub(crate) fn route<H, T>(
        mut self,
        method: MethodFilter,
        path: &str,
        handler: H,
        doc: Doc,
    ) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        self.routes.push((path.to_owned(), on(method, handler)));
        self.operations.push((path.to_owned(), method, doc));
        self
    }

    /// A `GET` route.
    pub(crate) fn get<H: Handler<T, S>, T: 'static>(self, path: &str, h: H, doc: Doc) -> Self {
        self.route(MethodFilter::GET, path, h, doc)
    }

    /// A `POST` route.
    pub(crate) fn post<H: Handler<T, S>, T: 'static>(self, path: &str, h: H, doc: Doc) -> Self {
        self.route(MethodFilter::POST, path, h, doc)
    }

    /// A `PATCH` route.
    pub(crate) fn patch<H: Handler<T, S>, T: 'static>(self, path: &str, h: H, doc: Doc) -> Self {
        self.route(MethodFilter::PATCH, path, h, doc)
    }

    /// A `DELETE` route.
    pub(crate) fn delete<H: Handler<T, S>, T: 'static>(self, path: &str, h: H, doc: Doc) -> Self {
        self.route(MethodFilter::DELETE, path, h, doc)
    }

    /// Adds the routes of `other`.
    pub(crate) fn merge(mut self, other: Routes<S>) -> Self {
        self.routes.extend(other.routes);
        self.operations.extend(other.operations);
        self
    }

    /// The router and the operations, paths prefixed with `prefix` (`/api`). The routes are
    /// registered with their full paths, the very paths the document names.
    pub(crate) fn into_parts(self, prefix: &str) -> (Router<S>, Vec<Operation>) {
        let operations = self
            .operations
            .into_iter()
            .map(|(path, method, doc)| Operation {
                path: format!("{prefix}{path}"),
                method,
                doc,
            })
            .collect();
        let router = self
            .routes
            .into_iter()
            .fold(Router::new(), |router, (path, handler)| {
                router.route(&format!("{prefix}{path}"), handler)
            });
        (router, operations)
    }
}

/// One documented operation, with its full path.
#[derive(Debug, Clone)]
pub(crate) struct Operation {
    path: String,
    method: MethodFilter,
    doc: Doc,
}

impl Operation {
    /// An operation routed elsewhere than through [`Routes`].
    pub(crate) fn new(path: &str, method: MethodFilter, doc: Doc) -> Self {
        Self {
            path: path.to_owned(),
            method,
            doc,
        }
    }
}

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
                "schema": {"type": "string", "maxLength": crate::wire::MAX_ID_LEN},
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

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    })
}

fn success_response(answer: Answer) -> Value {
    match answer {
        Answer::Json => json!({
            "description": "OK",
            "content": {"application/json": {"schema": {}}},
        }),
        Answer::Events => json!({
            "description": "Server-sent events: `data: <event JSON>` per Kestrel event, then `data: [DONE]`",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }),
        Answer::UiStream => json!({
            "description": "The AI SDK UI message stream (header `x-vercel-ai-ui-message-stream: v1`): `data: <chunk JSON>` per chunk, then `data: [DONE]`",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }),
        Answer::Subscription => json!({
            "description": "Server-sent events: `: connected`, then the thread's events, with `: heartbeat` comments",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }),
    }
}

/// The OpenAPI 3.1 document of `operations`.
pub(crate) fn document(operations: &[Operation], secured: bool) -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for op in operations {
        let mut parameters = path_parameters(&op.path);
        if let Some(query) = op.doc.query {
            parameters.extend(query_parameters(&query(&mut generator)));
        }
        let mut responses = Map::new();
        let ok = success_response(op.doc.answer);
        responses.insert(if op.doc.created { "201" } else { "200" }.into(), ok);
        responses.insert(
            "400".into(),
            error_response("The query or the JSON is malformed"),
        );
        if op.doc.body.is_some() {
            responses.insert(
                "413".into(),
                error_response("The body is larger than the server's limit"),
            );
            responses.insert(
                "422".into(),
                error_response("The body does not have the shape this route takes"),
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
            "description": "Kestrel's agents over HTTP: Mastra's routes under /api, and the AI SDK chat route.",
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

/// `post /api/agents/{agent_id}/generate` → `postAgentsAgentIdGenerate`-like ids, unique per
/// method and path.
fn operation_id(method: &str, path: &str) -> String {
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
