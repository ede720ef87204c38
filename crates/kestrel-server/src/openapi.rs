//! The OpenAPI document, generated from the route definitions themselves.
//!
//! Routes are registered through [`Routes`], which adds each handler to the axum router and
//! records its path, method, summary and the JSON schemas of its query and body (derived with
//! `schemars` from the very types the handlers deserialize). A route cannot exist without its
//! entry in the document, and a body type's schema cannot drift from what the handler accepts.
//! The bounds a body's schema states are enforced from that same schema ([`bounds`]).

mod bounds;

use std::collections::BTreeMap;

use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Extension, Router};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

pub(crate) use bounds::Bounds;

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
    /// A workflow's events as Mastra streams them: `text/plain`, each event's JSON followed
    /// by the record separator `\x1E`.
    Records,
}

/// What the document says about one operation.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    summary: &'static str,
    tag: &'static str,
    answer: Answer,
    body: Option<fn(&mut SchemaGenerator) -> Schema>,
    query: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// The schema of its success body, when it is typed.
    returns: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// Statuses besides 200 (and the 4xx every route may give) worth naming.
    created: bool,
    /// When it answers 409 Conflict.
    conflict: Option<&'static str>,
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
            returns: None,
            created: false,
            conflict: None,
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

    /// Its success body is a `T` (the document states its schema, and the fuzzer checks
    /// every answer against it).
    pub(crate) fn returns<T: JsonSchema>(mut self) -> Self {
        self.returns = Some(|generator| generator.subschema_for::<T>());
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

    /// It answers 409 Conflict when `description` holds.
    pub(crate) fn conflict(mut self, description: &'static str) -> Self {
        self.conflict = Some(description);
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
        let mut handler = on(method, handler);
        // The body's bounds, for `wire::Body` to enforce: compiled once, from the schema the
        // document shows.
        if let Some(bounds) = doc.body.and_then(body_bounds) {
            handler = handler.layer(Extension(bounds));
        }
        self.routes.push((path.to_owned(), handler));
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

fn error_response(description: &str) -> Value {
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
fn body_bounds(body: fn(&mut SchemaGenerator) -> Schema) -> Option<Bounds> {
    let mut generator = generator();
    let schema = body(&mut generator);
    let definitions = generator.take_definitions(true);
    Bounds::compile(schema.as_value(), &definitions)
}

/// The OpenAPI 3.1 document of `operations`.
pub(crate) fn document(operations: &[Operation], secured: bool) -> Value {
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
    add_links(&mut doc);
    add_statuses(&mut doc);
    bound_integers(&mut doc);
    doc
}

/// Gives every integer schema with a `format` of a sized integer (`uint32`: what `schemars`
/// says of a `u32`) the bounds of its type, which the handlers' `serde` enforces: a format
/// alone bounds nothing for a validator or a client.
fn bound_integers(value: &mut Value) {
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

/// Answers some operations give besides the ones every operation documents: 409 when the
/// run, call or thread is not in a state for the request (a call already decided, a busy
/// thread, a run id taken, a thread that exists, working memory that is off), 403 for a tool
/// that runs only inside a run, 204 when a chat has no running turn to re-attach to.
fn add_statuses(doc: &mut Value) {
    const CONFLICT: &str = "The run, tool call or thread is not in a state for this request";
    let conflicts = [
        GENERATE,
        STREAM,
        APPROVE,
        DECLINE,
        APPROVE_GENERATE,
        DECLINE_GENERATE,
        RESUME_STREAM,
        ABORT_RUN,
        RESUME_RUN,
        SEND_MESSAGE,
        SIGNALS,
        CREATE_THREAD,
        ("post", WORKING_MEMORY),
        CHAT,
        CHAT_STREAM,
    ];
    let mut statuses: Vec<(Op, &str, Value)> = conflicts
        .into_iter()
        .map(|op| (op, "409", error_response(CONFLICT)))
        .collect();
    statuses.push((
        EXECUTE_TOOL,
        "403",
        error_response(
            "The tool runs only inside a run (it needs approval, is a client tool, reads the \
             conversation or suspends)",
        ),
    ));
    statuses.push((
        ("patch", "/api/memory/threads/{thread_id}"),
        "409",
        error_response("The body names another resource: threads do not move"),
    ));
    statuses.push((
        CHAT_STREAM,
        "204",
        json!({"description": "No turn of this chat is running"}),
    ));
    for (op, status, response) in statuses {
        if let Some(responses) = responses_mut(doc, op) {
            responses.insert(status.to_owned(), response);
        }
    }
}

/// The responses of the operation `op` in `doc`, if it is there.
fn responses_mut(doc: &mut Value, (method, path): Op) -> Option<&mut Map<String, Value>> {
    let path = path.replace('~', "~0").replace('/', "~1");
    doc.pointer_mut(&format!("/paths/{path}/{method}/responses"))?
        .as_object_mut()
}

/// An operation named by its method and documented path.
type Op = (&'static str, &'static str);

const GENERATE: Op = ("post", "/api/agents/{agent_id}/generate");
const STREAM: Op = ("post", "/api/agents/{agent_id}/stream");
const APPROVE: Op = ("post", "/api/agents/{agent_id}/approve-tool-call");
const DECLINE: Op = ("post", "/api/agents/{agent_id}/decline-tool-call");
const APPROVE_GENERATE: Op = ("post", "/api/agents/{agent_id}/approve-tool-call-generate");
const DECLINE_GENERATE: Op = ("post", "/api/agents/{agent_id}/decline-tool-call-generate");
const RESUME_STREAM: Op = ("post", "/api/agents/{agent_id}/resume-stream");
const SUSPENDED_RUNS: Op = ("get", "/api/agents/{agent_id}/suspended-runs");
const ABORT_RUN: Op = ("post", "/api/agents/{agent_id}/runs/{run_id}/abort");
const RESUME_RUN: Op = ("post", "/api/agents/{agent_id}/runs/{run_id}/resume");
const SEND_MESSAGE: Op = ("post", "/api/agents/{agent_id}/send-message");
const SIGNALS: Op = ("post", "/api/agents/{agent_id}/signals");
const ABORT_THREAD: Op = ("post", "/api/agents/{agent_id}/threads/abort");
const SUBSCRIBE: Op = ("post", "/api/agents/{agent_id}/threads/subscribe");
const THREADS: Op = ("get", "/api/memory/threads");
const CREATE_THREAD: Op = ("post", "/api/memory/threads");
const THREAD: &str = "/api/memory/threads/{thread_id}";
const MESSAGES: Op = ("get", "/api/memory/threads/{thread_id}/messages");
const WORKING_MEMORY: &str = "/api/memory/threads/{thread_id}/working-memory";
const OBSERVATIONS: Op = ("get", "/api/memory/observational-memory");
const CHAT: Op = ("post", "/chat/{agent_id}");
const CHAT_MESSAGES: Op = ("get", "/chat/{agent_id}/{chat_id}/messages");
const CHAT_STREAM: Op = ("get", "/chat/{agent_id}/{chat_id}/stream");
const EXECUTE_TOOL: Op = ("post", "/api/agents/{agent_id}/tools/{tool_id}/execute");

/// One OpenAPI link: a value of an answer that feeds a parameter or a body field of a next
/// request.
struct Link {
    from: Op,
    status: &'static str,
    name: &'static str,
    to: Op,
    /// Target parameters (`path.run_id`, `query.resourceId`) and their runtime expressions.
    parameters: Value,
    /// Body fields (with runtime expressions for values) merged into the target's body.
    body: Option<Value>,
}

/// The links between operations: the run a `generate` (or the waiting-runs list) stopped feeds
/// the decisions, resumes and aborts of that run; a created (or listed) thread feeds the thread
/// routes, runs on that thread and its chat. Clients that follow links, and Schemathesis'
/// stateful tests (`.ci/fuzz`), reach real runs, threads and decisions through them.
fn links() -> Vec<Link> {
    let same_agent = || json!({"path.agent_id": "$request.path.agent_id"});
    let mut links = Vec::new();
    // A run that stopped: from `generate` (and the decisions, which continue it and may stop
    // again) its first waiting call; from `suspended-runs` the first waiting run's.
    let stopped = [
        (GENERATE, "/runId", "/suspended/0"),
        (APPROVE_GENERATE, "/runId", "/suspended/0"),
        (DECLINE_GENERATE, "/runId", "/suspended/0"),
        (SUSPENDED_RUNS, "/runs/0/runId", "/runs/0/toolCalls/0"),
    ];
    for (from, run, call) in stopped {
        let status = "200";
        let run = format!("$response.body#{run}");
        // The call's fingerprint too: a decision naming another is refused.
        let decision = json!({
            "runId": run,
            "toolCallId": format!("$response.body#{call}/toolCallId"),
            "fingerprint": format!("$response.body#{call}/fingerprint"),
        });
        for (name, to) in [
            ("approve", APPROVE),
            ("decline", DECLINE),
            ("approveGenerate", APPROVE_GENERATE),
            ("declineGenerate", DECLINE_GENERATE),
            ("resumeStream", RESUME_STREAM),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: same_agent(),
                body: Some(decision.clone()),
            });
        }
        for (name, to) in [("abortRun", ABORT_RUN), ("resumeRun", RESUME_RUN)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({"path.agent_id": "$request.path.agent_id", "path.run_id": &run}),
                body: None,
            });
        }
    }
    // A decision taken twice: the second finds the call decided.
    for from in [APPROVE_GENERATE, DECLINE_GENERATE] {
        links.push(Link {
            from,
            status: "200",
            name: "decideAgain",
            to: DECLINE_GENERATE,
            parameters: same_agent(),
            body: Some(json!({
                "runId": "$request.body#/runId",
                "toolCallId": "$request.body#/toolCallId",
                "fingerprint": "$request.body#/fingerprint",
            })),
        });
    }
    // A thread: created, or the first of a list.
    for (from, status, id, resource) in [
        (
            CREATE_THREAD,
            "201",
            "$response.body#/id",
            "$response.body#/resourceId",
        ),
        (
            THREADS,
            "200",
            "$response.body#/threads/0/id",
            "$response.body#/threads/0/resourceId",
        ),
    ] {
        let thread = json!({"path.thread_id": id, "query.resourceId": resource});
        for (name, to) in [
            ("getThread", ("get", THREAD)),
            ("updateThread", ("patch", THREAD)),
            ("deleteThread", ("delete", THREAD)),
            ("messages", MESSAGES),
            ("getWorkingMemory", ("get", WORKING_MEMORY)),
            ("setWorkingMemory", ("post", WORKING_MEMORY)),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: thread.clone(),
                body: None,
            });
        }
        links.push(Link {
            from,
            status,
            name: "observations",
            to: OBSERVATIONS,
            parameters: json!({"query.threadId": id, "query.resourceId": resource}),
            body: None,
        });
        for (name, to) in [("generate", GENERATE), ("stream", STREAM)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({}),
                body: Some(json!({"memory": {"thread": id, "resource": resource}})),
            });
        }
        for (name, to) in [
            ("sendMessage", SEND_MESSAGE),
            ("signal", SIGNALS),
            ("abortThread", ABORT_THREAD),
            ("subscribe", SUBSCRIBE),
        ] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({}),
                body: Some(json!({"resourceId": resource, "threadId": id})),
            });
        }
        links.push(Link {
            from,
            status,
            name: "chat",
            to: CHAT,
            parameters: json!({}),
            body: Some(json!({"id": id, "resourceId": resource})),
        });
        for (name, to) in [("chatMessages", CHAT_MESSAGES), ("chatStream", CHAT_STREAM)] {
            links.push(Link {
                from,
                status,
                name,
                to,
                parameters: json!({"path.chat_id": id}),
                body: None,
            });
        }
    }
    links
}

/// Adds [`links`] to the responses of `doc`, naming their targets by operation id; a link
/// whose operations or response are not in the document is left out.
fn add_links(doc: &mut Value) {
    for link in links() {
        let (target_method, target_path) = link.to;
        if responses_mut(doc, link.to).is_none() {
            continue;
        }
        let Some(response) = responses_mut(doc, link.from)
            .and_then(|responses| responses.get_mut(link.status))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let mut definition = json!({
            "operationId": operation_id(target_method, target_path),
            "parameters": link.parameters,
        });
        if let Some(body) = link.body {
            definition["requestBody"] = body;
        }
        if let Some(links) = response
            .entry("links")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            links.insert(link.name.to_owned(), definition);
        }
    }
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
