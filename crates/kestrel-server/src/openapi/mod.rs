//! The OpenAPI document, generated from the route definitions themselves.
//!
//! Routes are registered through [`Routes`], which adds each handler to the axum router and
//! records its path, method, summary and the JSON schemas of its query and body (derived with
//! `schemars` from the very types the handlers deserialize). A route cannot exist without its
//! entry in the document, and a body type's schema cannot drift from what the handler accepts.
//! The bounds a body's schema states are enforced from that same schema ([`bounds`]).
//!
//! - this module: how routes are registered and what each says of itself ([`Routes`], [`Doc`]);
//! - [`document`]: the document those entries make (parameters, bodies, answers, schemas);
//! - [`links`]: what the document says across operations (answers some routes give besides
//!   the common ones, and the links from one operation's answer to the next request).

mod bounds;
mod document;
mod links;

use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Extension, Router};
use schemars::generate::SchemaGenerator;
use schemars::{JsonSchema, Schema};
use serde_json::Value;

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
        if let Some(bounds) = doc.body.and_then(document::body_bounds) {
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

/// The OpenAPI 3.1 document of `operations`.
pub(crate) fn document(operations: &[Operation], secured: bool) -> Value {
    let mut doc = document::paths_and_schemas(operations, secured);
    links::add_links(&mut doc);
    links::add_statuses(&mut doc);
    document::bound_integers(&mut doc);
    doc
}
