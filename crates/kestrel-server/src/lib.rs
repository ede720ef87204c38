//! Kestrel's HTTP server: the agents of a [`Kestrel`] instance behind Mastra's routes.
//!
//! Every route lives under `/api` with Mastra's paths, methods and camelCase JSON bodies, so a
//! front end written for Mastra's HTTP API keeps working. Agents' streams are server-sent
//! events: one `data: <event JSON>` per [`kestrel_core::event::Event`] (the same JSON the
//! library, the CLI and the tests see), then `data: [DONE]`. Workflows' streams are in
//! Mastra's format for them: `text/plain`, each event's JSON followed by `\x1E`.
//!
//! ```no_run
//! # async fn run(kestrel: kestrel_core::kestrel::Kestrel) -> Result<(), kestrel_server::ServeError> {
//! // Loopback needs no token; any other address refuses to start without one.
//! kestrel_server::Server::new(kestrel)
//!     .serve("127.0.0.1:4111".parse().expect("an address"))
//!     .await
//! # }
//! ```
//!
//! - **Runs outlive requests.** A client that disconnects from a stream does not stop its
//!   run: the run goes on to its end (or its next stop for a person) and is stored.
//! - **Browsers.** Requests for a host that is not a loopback name, an IP address or one of
//!   [`Server::allowed_hosts`] are refused (421: DNS rebinding), and so are requests that
//!   change state from an origin that is neither the server's own nor allowed by
//!   [`Server::cors_origins`] (403).
//! - **Security.** A bearer token ([`Server::token`], or `KESTREL_API_TOKEN` for
//!   [`Server::from_env`]) is checked on every route when set, and required to bind anything
//!   but loopback. A token can be pinned to a resource ([`Server::resource_token`]): its
//!   caller runs as that resource and cannot read, decide, resume or abort anything of
//!   another. Bodies are limited ([`Server::body_limit`], 1 MiB by default). CORS is off
//!   unless origins are allowed ([`Server::cors_origins`]).
//! - **Floods.** Runs in progress ([`Server::max_runs`]) and open streams per token
//!   ([`Server::max_streams_per_token`]) are bounded (429 with `Retry-After` past them),
//!   non-streaming requests time out ([`Server::request_timeout`]), ids are at most 256
//!   characters, and a client that stops reading a stream is let go, not buffered for.
//! - **Errors** are `{"error": {"code", "message"}}` with a 4xx naming what was wrong, or a
//!   5xx with a generic message: provider and storage error text is logged, never sent.
//! - **Vector stores** given to [`Server::vector`] are served under Mastra's
//!   `/api/vector/{vectorName}` routes (indexes, upsert, query) and listed at `/api/vectors`;
//!   embedders given to [`Server::embedder`] are listed at `/api/embedders`.

mod auth;
mod chat;
mod db_messages;
mod error;
mod extract;
mod guard;
mod ids;
mod limits;
mod lookup;
mod mcp;
mod mcp_client;
mod memory;
mod network;
mod observability;
mod openapi;
mod queue;
mod redact;
mod relay;

mod datasets;
mod paging;
mod processors;
mod routes;
mod scores;
mod skills;
mod sse;
mod stored;
mod studio;
mod vectors;
mod wire;
mod workflows;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, header};
use axum::serve::ListenerExt;
use kestrel_core::kestrel::Kestrel;
use kestrel_memory::Memory;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use error::ApiError;
pub use limits::{DEFAULT_MAX_RUNS, DEFAULT_MAX_STREAMS_PER_TOKEN, DEFAULT_REQUEST_TIMEOUT};
pub use vectors::{ServedEmbedder, ServedVectorStore};

/// The environment variable [`Server::from_env`] reads the bearer token from.
pub const API_TOKEN_ENV: &str = "KESTREL_API_TOKEN";

/// How many connections may wait to be accepted.
const LISTEN_BACKLOG: u32 = 4096;

/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Binding a non-loopback address without a token would expose every agent.
    #[error(
        "refusing to listen on {addr} without a bearer token: set {API_TOKEN_ENV} (or \
         Server::token) to serve beyond loopback"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A configured token is empty or only whitespace: it would protect nothing.
    #[error(
        "a bearer token is empty or only whitespace: set {API_TOKEN_ENV} (or Server::token) to \
         a secret, or leave it unset on loopback"
    )]
    EmptyToken,
    /// Two MCP servers were given one id.
    #[error("two MCP servers have the id {id:?}; each needs its own (it names its routes)")]
    DuplicateMcpServer {
        /// The id.
        id: String,
    },
    /// A vector store's name cannot be a path segment, or two stores were given one name.
    #[error("vector store {name:?}: {problem}")]
    VectorStoreName {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The address could not be bound or served.
    #[error("serving on {addr} failed: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The server's configuration and its [`Kestrel`] instance. Build one, then [`Server::router`]
/// (to mount it in your own axum app) or [`Server::serve`].
#[derive(Debug, Clone)]
pub struct Server {
    kestrel: Kestrel,
    tokens: Vec<auth::Grant>,
    cors_origins: Vec<String>,
    body_limit: usize,
    memory: Option<Memory>,
    abort_on_disconnect: bool,
    studio: bool,
    system_messages: bool,
    allowed_hosts: Vec<String>,
    max_runs: usize,
    max_streams_per_token: usize,
    request_timeout: std::time::Duration,
    /// The MCP servers served under `/api/mcp`, by id.
    mcp_servers: std::collections::BTreeMap<String, kestrel_mcp::McpServer>,
    /// Ids given to [`Server::mcp_server`] twice (the first is kept; serving refuses).
    mcp_conflicts: Vec<String>,
    /// The MCP servers the agents use, shown under `/api/mcp-client`.
    mcp_client: Option<kestrel_mcp::McpClient>,
    /// The vector stores served under `/api/vector`, by name.
    vectors: vectors::VectorStores,
    /// Names given to [`Server::vector`] that cannot be served (refused by [`Server::bind`]).
    vector_problems: Vec<(String, &'static str)>,
    /// The embedders `/api/embedders` lists.
    embedders: Vec<ServedEmbedder>,
}

/// What every handler reaches.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub kestrel: Kestrel,
    /// The memory the `/api/memory` routes (and chat history) read and write.
    pub memory: Option<lookup::ServedMemory>,
    /// Whether a client that goes away aborts the run it was streaming.
    pub abort_on_disconnect: bool,
    /// The chat turns running now, for re-attaching to them.
    pub chat_turns: Arc<chat::Turns>,
    /// Whether run bodies may carry messages with role `system`.
    pub system_messages: bool,
    /// How much the server takes on at once.
    pub limits: Arc<limits::Limits>,
    /// The MCP servers served under `/api/mcp`.
    pub mcp: mcp::McpServers,
    /// The MCP servers the agents use, under `/api/mcp-client`.
    pub mcp_client: Option<kestrel_mcp::McpClient>,
    /// The vector stores under `/api/vector`, by name.
    pub vectors: Arc<vectors::VectorStores>,
    /// The embedders `/api/embedders` lists.
    pub embedders: Arc<[ServedEmbedder]>,
}

impl Server {
    /// A server for `kestrel`'s agents, with no token, no CORS and a 1 MiB body limit.
    ///
    /// The `/api/memory` routes and the chat route's stored history serve the memory given to
    /// [`Server::memory`], else the instance's storage
    /// ([`KestrelBuilder::storage`](kestrel_core::kestrel::KestrelBuilder::storage)); with
    /// neither those routes answer 404 `no_memory`.
    pub fn new(kestrel: Kestrel) -> Self {
        Self {
            kestrel,
            tokens: Vec::new(),
            cors_origins: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            memory: None,
            abort_on_disconnect: false,
            studio: true,
            system_messages: false,
            allowed_hosts: Vec::new(),
            max_runs: DEFAULT_MAX_RUNS,
            max_streams_per_token: DEFAULT_MAX_STREAMS_PER_TOKEN,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            mcp_servers: std::collections::BTreeMap::new(),
            mcp_conflicts: Vec::new(),
            mcp_client: None,
            vectors: vectors::VectorStores::new(),
            vector_problems: Vec::new(),
            embedders: Vec::new(),
        }
    }

    /// Serves `store` under `/api/vector/{name}` (Mastra's vector routes: create, list,
    /// describe and delete indexes, upsert, query) and lists it at `GET /api/vectors`. Give an
    /// `Arc` of a store (listed as `memory`, `sqlite` or `pgvector` by its type), or a
    /// [`ServedVectorStore`] for a store shared as `Arc<dyn VectorStore>` or to describe it.
    /// A name is 1 to 64 letters, digits, `_` or `-`; a name that is not, or that is given
    /// twice, makes [`Server::bind`] fail.
    ///
    /// ```no_run
    /// # fn run(kestrel: kestrel_core::kestrel::Kestrel) {
    /// use std::sync::Arc;
    ///
    /// let server = kestrel_server::Server::new(kestrel)
    ///     .vector("default", Arc::new(kestrel_rag::InMemoryVectorStore::new()));
    /// # }
    /// ```
    pub fn vector(mut self, name: impl Into<String>, store: impl Into<ServedVectorStore>) -> Self {
        let name = name.into();
        if let Some(problem) = vectors::store_name_problem(&name) {
            self.vector_problems.push((name, problem));
            return self;
        }
        match self.vectors.entry(name) {
            std::collections::btree_map::Entry::Occupied(taken) => {
                self.vector_problems.push((
                    taken.key().clone(),
                    "two vector stores have this name; each needs its own",
                ));
            }
            std::collections::btree_map::Entry::Vacant(free) => {
                free.insert(store.into());
            }
        }
        self
    }

    /// Lists `embedder` at `GET /api/embedders` (`{id, provider, name, description,
    /// dimensions, maxInputTokens}`, as Mastra lists the embedding models it knows).
    pub fn embedder(mut self, embedder: ServedEmbedder) -> Self {
        self.embedders.push(embedder);
        self
    }

    /// Shows the MCP servers `client` connects to (the ones the instance's agents use) under
    /// `/api/mcp-client`, and on the Studio's MCP page: their status and errors, their tools,
    /// and a tool called by hand.
    pub fn mcp_client(mut self, client: kestrel_mcp::McpClient) -> Self {
        self.mcp_client = Some(client);
        self
    }

    /// Serves `server` to MCP clients at `/api/mcp/{id}/mcp` (Streamable HTTP, both protocol
    /// eras), lists it at `GET /api/mcp/v0/servers` and its tools at
    /// `GET /api/mcp/{id}/tools`. The MCP routes sit behind the same token, Host and Origin
    /// checks, body limit and timeouts as every route. Two servers with one id make
    /// [`Server::bind`] fail.
    pub fn mcp_server(mut self, server: kestrel_mcp::McpServer) -> Self {
        match self.mcp_servers.entry(server.id().to_owned()) {
            std::collections::btree_map::Entry::Occupied(taken) => {
                self.mcp_conflicts.push(taken.key().clone());
            }
            std::collections::btree_map::Entry::Vacant(free) => {
                free.insert(server);
            }
        }
        self
    }

    /// The memory the `/api/memory` routes (threads, messages, working memory, observations)
    /// and the chat route's stored history serve: usually the one the agents were given. A
    /// memory without a store of its own serves the instance's. Default: a
    /// [`Memory::default`] on the instance's storage, when it has one.
    pub fn memory(mut self, memory: Memory) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Makes a client that disconnects from a stream abort its run (stored as aborted, with
    /// the partial answer kept). By default the run goes on to its end or its next stop, is
    /// stored, and the client can re-attach.
    pub fn abort_on_disconnect(mut self, abort: bool) -> Self {
        self.abort_on_disconnect = abort;
        self
    }

    /// Takes messages with role `system` in run bodies (off by default: a client could
    /// otherwise rewrite the agent's instructions; such a message is refused with 422).
    pub fn allow_system_messages(mut self, allow: bool) -> Self {
        self.system_messages = allow;
        self
    }

    /// Serves the Studio web UI at `/` (on by default); `false` leaves only the API.
    pub fn studio(mut self, enabled: bool) -> Self {
        self.studio = enabled;
        self
    }

    /// [`Server::new`], with the token from `KESTREL_API_TOKEN` when it is set (set but
    /// blank, [`Server::bind`] refuses to start).
    pub fn from_env(kestrel: Kestrel) -> Self {
        let server = Self::new(kestrel);
        // A variable set to blanks is kept, so that serving refuses it instead of running
        // without the protection its owner asked for.
        match std::env::var(API_TOKEN_ENV) {
            Ok(token) => server.token(token.trim()),
            Err(_) => server,
        }
    }

    /// Requires `Authorization: Bearer <token>` on every route; this token may act for any
    /// resource. Several tokens may be added. An empty or whitespace-only token is refused by
    /// [`Server::bind`] ([`ServeError::EmptyToken`]) and never matches a request.
    pub fn token(self, token: impl Into<String>) -> Self {
        self.grant(token.into(), None, true)
    }

    /// Accepts `token`, pinned to `resource` when given, choosing stored versions when
    /// `versions`.
    fn grant(mut self, token: String, resource: Option<String>, versions: bool) -> Self {
        self.tokens.push(auth::Grant {
            token: token.into(),
            resource,
            versions,
        });
        self
    }

    /// Accepts a token pinned to one resource: its caller's runs belong to `resource_id`
    /// (a run body naming another resource is refused), its request context carries the
    /// resource under [`kestrel_core::context::RESOURCE_ID_KEY`], and runs, threads and
    /// decisions of other resources are out of its reach (403, or 404 for a run id).
    pub fn resource_token(self, token: impl Into<String>, resource_id: impl Into<String>) -> Self {
        self.grant(token.into(), Some(resource_id.into()), false)
    }

    /// [`Server::resource_token`], whose caller may also choose the stored versions its runs
    /// use (a run body's `versions`: drafts and version ids). A pinned token otherwise runs
    /// published versions only (403 for any other choice).
    pub fn resource_token_with_versions(
        self,
        token: impl Into<String>,
        resource_id: impl Into<String>,
    ) -> Self {
        self.grant(token.into(), Some(resource_id.into()), true)
    }

    /// Allows browsers on these origins (`https://app.example.com`, or `*` for any) to call
    /// the API.
    pub fn cors_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.cors_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Host names the server answers to besides loopback names (`localhost`, `*.localhost`)
    /// and IP addresses: the names it is reached by through a proxy or DNS
    /// (`kestrel.example.com`, or `*.example.com` for its subdomains). Requests for any other
    /// host are refused with 421, so a page that rebinds its own name to this machine cannot
    /// talk to the server.
    pub fn allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_hosts = hosts
            .into_iter()
            .map(|h| h.into().trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        self
    }

    /// The most runs in progress at once (those of every agent of the instance, sub-agents'
    /// included) before a request that would start or continue another is refused with 429
    /// and `Retry-After` ([`DEFAULT_MAX_RUNS`] by default).
    pub fn max_runs(mut self, runs: usize) -> Self {
        self.max_runs = runs.max(1);
        self
    }

    /// The most streams (run streams, chat turns, thread subscriptions) one token keeps open
    /// at once, past which another is refused with 429 and `Retry-After`
    /// ([`DEFAULT_MAX_STREAMS_PER_TOKEN`] by default; on a server without tokens every caller
    /// shares one count).
    pub fn max_streams_per_token(mut self, streams: usize) -> Self {
        self.max_streams_per_token = streams.max(1);
        self
    }

    /// How long a non-streaming request may take before it is answered with 503 `timeout`
    /// ([`DEFAULT_REQUEST_TIMEOUT`] by default). A run that such a request started (generate,
    /// a decision) goes on in the background and is stored as usual; streams are not cut.
    pub fn request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The memory the routes serve: the one given, or one on the instance's storage; it
    /// takes the instance's store when it has none of its own.
    fn served_memory(&self) -> Option<lookup::ServedMemory> {
        let memory = self.memory.clone().unwrap_or_default();
        if let Err(error) =
            kestrel_core::memory::AgentMemory::attach(&memory, self.kestrel.stores())
        {
            // Its own store stays; the routes serve that.
            tracing::warn!(%error, "the server's memory keeps the store it has");
        }
        let served = lookup::ServedMemory::new(memory);
        if served.is_none() && self.memory.is_some() {
            tracing::warn!(
                "the server's memory has no storage and neither has its instance: the \
                 /api/memory routes answer 404 no_memory"
            );
        }
        served
    }

    /// Refuses bodies larger than `bytes` with 413.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// The routes, ready to serve or to nest in a larger axum app. To serve them yourself, hand
    /// axum `router.with_state(()).into_make_service()`: given the `Router` itself, axum
    /// rebuilds its route table for every connection.
    pub fn router(&self) -> Router {
        let limits = Arc::new(limits::Limits::new(
            self.max_runs,
            self.max_streams_per_token,
            self.request_timeout,
        ));
        let state = Arc::new(AppState {
            kestrel: self.kestrel.clone(),
            memory: self.served_memory(),
            abort_on_disconnect: self.abort_on_disconnect,
            chat_turns: Arc::default(),
            system_messages: self.system_messages,
            limits: Arc::clone(&limits),
            mcp: mcp::McpServers {
                servers: self.mcp_servers.clone(),
                released: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            },
            mcp_client: self.mcp_client.clone(),
            vectors: Arc::new(self.vectors.clone()),
            embedders: self.embedders.clone().into(),
        });
        let guarded = |routes: Router<Arc<AppState>>| {
            routes
                .with_state(state.clone())
                .layer(DefaultBodyLimit::max(self.body_limit))
                .layer(axum::middleware::from_fn_with_state(
                    Arc::clone(&limits),
                    limits::timeout,
                ))
                .layer(axum::middleware::from_fn_with_state(
                    auth::Tokens(Arc::new(self.tokens.clone())),
                    auth::require_token,
                ))
        };
        let (api, mut operations) = routes::api()
            .merge(memory::routes())
            .merge(network::routes())
            .merge(skills::routes())
            .merge(observability::routes())
            .merge(scores::routes())
            .merge(processors::routes())
            .merge(datasets::routes())
            .merge(queue::routes())
            .merge(stored::routes())
            .merge(workflows::routes())
            .into_parts("/api");
        let (chat, chat_operations) = chat::routes().into_parts("");
        operations.extend(chat_operations);
        let (mcp_api, mcp_operations) =
            mcp::routes().merge(mcp_client::routes()).into_parts("/api");
        operations.extend(mcp_operations);
        let (vector_api, vector_operations) = vectors::routes().into_parts("/api");
        operations.extend(vector_operations);
        operations.push(openapi::Operation::new(
            "/api/openapi.json",
            axum::routing::MethodFilter::GET,
            openapi::Doc::json("meta", "This document"),
        ));
        // Rendered once: the routes do not change while the server runs.
        let document: Arc<str> = openapi::document(&operations, !self.tokens.is_empty())
            .to_string()
            .into();
        let api = guarded(api.route(
            "/api/openapi.json",
            axum::routing::get(move || {
                let document = Arc::clone(&document);
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        document.to_string(),
                    )
                }
            }),
        ));
        let mut router = Router::new()
            .merge(api)
            .merge(guarded(chat))
            .merge(guarded(
                mcp_api
                    .merge(self.mcp_endpoints())
                    .layer(axum::middleware::from_fn(mcp::unpinned_only)),
            ))
            .merge(guarded(
                vector_api.layer(axum::middleware::from_fn(vectors::unpinned_only)),
            ));
        if self.studio {
            // The Studio's files are public: they hold no data, and ask for a token when the
            // API needs one.
            router = router.merge(studio::routes());
        }
        let mut router = router.fallback(routes::not_found);
        if let Some(cors) = self.cors() {
            router = router.layer(cors);
        }
        // Outermost: a request for a foreign host or a cross-origin write reaches nothing.
        router
            .layer(axum::middleware::from_fn(wire::bounded_path))
            .layer(axum::middleware::from_fn_with_state(
                guard::Guard {
                    allowed_hosts: Arc::new(self.allowed_hosts.clone()),
                    cors_origins: Arc::new(self.cors_origins.clone()),
                },
                guard::check,
            ))
    }

    /// The Streamable HTTP endpoint of each MCP server. They are protocol endpoints, not REST
    /// routes: the OpenAPI document lists the MCP REST routes, not these.
    fn mcp_endpoints(&self) -> Router<Arc<AppState>> {
        let mut router = Router::new();
        for (id, server) in &self.mcp_servers {
            // The Host and Origin checks are the server's own (`guard`), for every route
            // alike.
            let config = kestrel_mcp::rmcp::transport::streamable_http_server::StreamableHttpServerConfig::default()
                .disable_allowed_hosts()
                .with_max_request_body_bytes(self.body_limit);
            router =
                router.route_service(&format!("/api/mcp/{id}/mcp"), server.http_service(config));
        }
        router
    }

    fn cors(&self) -> Option<CorsLayer> {
        if self.cors_origins.is_empty() {
            return None;
        }
        let origin = if self.cors_origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            let origins: Vec<HeaderValue> = self
                .cors_origins
                .iter()
                .filter_map(|o| match HeaderValue::from_str(o) {
                    Ok(value) => Some(value),
                    Err(_) => {
                        tracing::warn!(origin = %o, "ignoring a CORS origin that is not a valid header value");
                        None
                    }
                })
                .collect();
            AllowOrigin::list(origins)
        };
        Some(
            CorsLayer::new()
                .allow_origin(origin)
                .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
        )
    }

    /// Binds `addr` and serves until the process ends. Refuses a non-loopback address without
    /// a token.
    pub async fn serve(self, addr: SocketAddr) -> Result<(), ServeError> {
        let (listener, addr) = self.bind(addr).await?;
        self.serve_on(listener, addr).await
    }

    /// Binds `addr` (port 0 picks a free one) and returns the listener with the bound
    /// address; [`Server::serve_on`] then serves on it.
    pub async fn bind(
        &self,
        addr: SocketAddr,
    ) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
        if self
            .tokens
            .iter()
            .any(|grant| grant.token.trim().is_empty())
        {
            return Err(ServeError::EmptyToken);
        }
        if !addr.ip().is_loopback() && self.tokens.is_empty() {
            return Err(ServeError::TokenRequired { addr });
        }
        if let Some(id) = self.mcp_conflicts.first() {
            return Err(ServeError::DuplicateMcpServer { id: id.clone() });
        }
        if let Some((name, problem)) = self.vector_problems.first() {
            return Err(ServeError::VectorStoreName {
                name: name.clone(),
                problem,
            });
        }
        let io = |source| ServeError::Io { addr, source };
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .map_err(io)?;
        // As `TcpListener::bind` does, so a restarted server can take its port back at once.
        #[cfg(unix)]
        socket.set_reuseaddr(true).map_err(io)?;
        socket.bind(addr).map_err(io)?;
        // A burst of clients (a page of tabs reconnecting, a load test) must queue, not have
        // its connections dropped and retried a second later: the kernel caps this at
        // `net.core.somaxconn`.
        let listener = socket.listen(LISTEN_BACKLOG).map_err(io)?;
        let bound = listener
            .local_addr()
            .map_err(|source| ServeError::Io { addr, source })?;
        Ok((listener, bound))
    }

    /// Serves on a listener from [`Server::bind`].
    pub async fn serve_on(
        self,
        listener: tokio::net::TcpListener,
        addr: SocketAddr,
    ) -> Result<(), ServeError> {
        tracing::info!(%addr, "kestrel server listening");
        // Events are small writes that must leave at once: Nagle's algorithm would hold them
        // back for the peer's delayed ACK (up to 40 ms on Linux).
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "could not set TCP_NODELAY");
            }
        });
        // Handing axum the `Router` itself would rebuild its whole route table for every
        // connection (`Router::with_state` on a clone); resolved once here, each connection
        // only clones an `Arc`.
        let app = self.router().with_state(()).into_make_service();
        axum::serve(listener, app)
            .await
            .map_err(|source| ServeError::Io { addr, source })
    }
}

/// Serves `kestrel`'s agents on `addr`, with the token from `KESTREL_API_TOKEN` if set.
pub async fn serve(kestrel: Kestrel, addr: SocketAddr) -> Result<(), ServeError> {
    Server::from_env(kestrel).serve(addr).await
}
