//! One server's connection: made on first use, checked on every use, and made again when the
//! transport died (a killed process, a restarted server). A dead transport is dropped, never
//! kept: the next call connects anew, and the call that found it dead says so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kestrel_core::abort::AbortSignal;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ElicitationCapability,
    FormElicitationCapability, Implementation, ProgressToken, ProtocolVersion, ServerResult,
    UrlElicitationCapability,
};
use rmcp::service::ServiceError;
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, Peer, PeerRequestOptions, RoleClient, RunningService,
};
use rmcp::transport::{
    StreamableHttpClientTransport, TokioChildProcess,
    streamable_http_client::StreamableHttpClientTransportConfig,
};
use tokio::io::AsyncBufReadExt;

use super::calls::Calls;
use super::config::{
    MAX_SCOPED_CONNECTIONS, McpServerConfig, Protocol, TransportConfig, header_pair,
    protocol_version,
};
use super::handler::{Handler, ServerLog};
use crate::error::McpError;

/// How many of a server's last log lines its status keeps.
pub(crate) const KEPT_LOG_LINES: usize = 50;

type Service = RunningService<RoleClient, Handler>;

/// Where a server's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ServerState {
    /// Not connected yet: the first call connects.
    Idle,
    /// Connected.
    Connected,
    /// The last attempt to connect, or the connection, failed; the next call tries again.
    Failed,
    /// The client was disconnected.
    Closed,
}

/// A server's connection as the Studio and `list_tools_with_errors` show it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerStatus {
    /// The server's name in the client.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Where its connection stands.
    pub state: ServerState,
    /// The protocol version spoken, once connected.
    pub protocol_version: Option<String>,
    /// The server's own name and version, once connected.
    pub server_info: Option<String>,
    /// Why the last attempt or call failed, when it did.
    pub last_error: Option<String>,
    /// The server's last log messages (`notifications/message`, and a stdio server's stderr).
    pub logs: Vec<ServerLog>,
}

pub(crate) struct Connection {
    pub(crate) name: String,
    pub(crate) config: McpServerConfig,
    /// How long a request waits.
    pub(crate) timeout: Duration,
    /// The live connection, and which one it is (a call that found a connection dead drops
    /// that one, not one a concurrent call made since).
    service: tokio::sync::Mutex<Option<(u64, Arc<Service>)>>,
    generation: std::sync::atomic::AtomicU64,
    status: Arc<Mutex<Status>>,
    closed: AtomicBool,
    /// The tool calls in flight, for the progress and questions the server sends about them.
    pub(crate) calls: Arc<Calls>,
    /// For a server whose headers come from each call's request context: a connection per
    /// header set, the most recently used last.
    scoped: Mutex<Vec<(String, Arc<Connection>)>>,
}

#[derive(Default)]
pub(crate) struct Status {
    pub(crate) state: Option<ServerState>,
    pub(crate) protocol_version: Option<String>,
    pub(crate) server_info: Option<String>,
    pub(crate) last_error: Option<String>,
    pub(crate) logs: std::collections::VecDeque<ServerLog>,
}

impl Status {
    pub(crate) fn log(&mut self, line: ServerLog) {
        if self.logs.len() == KEPT_LOG_LINES {
            self.logs.pop_front();
        }
        self.logs.push_back(line);
    }
}

fn lock(status: &Mutex<Status>) -> std::sync::MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    pub(crate) fn new(name: String, config: McpServerConfig, timeout: Duration) -> Self {
        Self {
            name,
            config,
            timeout,
            service: tokio::sync::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            status: Arc::new(Mutex::new(Status::default())),
            closed: AtomicBool::new(false),
            calls: Arc::default(),
            scoped: Mutex::new(Vec::new()),
        }
    }

    /// The connection a call with `request` makes its requests on: this one, or, for a server
    /// whose headers come from the call's request context, the one of those headers.
    pub(crate) fn for_request(
        self: &Arc<Self>,
        request: &kestrel_core::context::RequestContext,
    ) -> Result<Arc<Self>, McpError> {
        let TransportConfig::Http(http) = &self.config.transport else {
            return Ok(Arc::clone(self));
        };
        let Some(headers_from) = &http.headers_from else {
            return Ok(Arc::clone(self));
        };
        let headers = (headers_from.0)(request).map_err(|reason| McpError::Request {
            server: self.name.clone(),
            method: "tools/call".to_owned(),
            reason: format!("its headers could not be made: {reason}"),
        })?;
        for (name, value) in &headers {
            header_pair(&self.name, name, value).map_err(|e| McpError::Request {
                server: self.name.clone(),
                method: "tools/call".to_owned(),
                reason: e.to_string(),
            })?;
        }
        // Keyed by the headers themselves; kept in memory only, as the config's are.
        let key = headers
            .iter()
            .map(|(name, value)| format!("{}\n{value}", name.to_ascii_lowercase()))
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut scoped = self.scoped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = scoped.iter().position(|(k, _)| *k == key) {
            let entry = scoped.remove(at);
            let connection = Arc::clone(&entry.1);
            scoped.push(entry);
            return Ok(connection);
        }
        let mut config = self.config.clone();
        if let TransportConfig::Http(http) = &mut config.transport {
            http.headers.extend(headers);
            http.headers_from = None;
        }
        let connection = Arc::new(Self::new(self.name.clone(), config, self.timeout));
        scoped.push((key, Arc::clone(&connection)));
        if scoped.len() > MAX_SCOPED_CONNECTIONS {
            let (_, oldest) = scoped.remove(0);
            tokio::spawn(async move { oldest.close().await });
        }
        Ok(connection)
    }

    /// The connections of each header set, taken (to close them).
    fn take_scoped(&self) -> Vec<Arc<Self>> {
        let mut scoped = self.scoped.lock().unwrap_or_else(|e| e.into_inner());
        scoped.drain(..).map(|(_, connection)| connection).collect()
    }

    /// The connection's peer (and which connection it is), connecting first when there is
    /// none or it died.
    pub(crate) async fn peer(&self) -> Result<(u64, Peer<RoleClient>), McpError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(McpError::Closed {
                server: self.name.clone(),
            });
        }
        let mut slot = self.service.lock().await;
        if let Some((generation, service)) = slot.as_ref() {
            if !service.is_transport_closed() && !service.is_closed() {
                return Ok((*generation, service.peer().clone()));
            }
            // The transport died: drop it (a child process is stopped with it) and connect
            // again below.
            tracing::info!(server = %self.name, "the MCP connection went down; connecting again");
            *slot = None;
        }
        match self.connect().await {
            Ok(service) => {
                let peer = service.peer().clone();
                let info = peer.peer_info();
                {
                    let mut status = lock(&self.status);
                    status.state = Some(ServerState::Connected);
                    status.last_error = None;
                    status.protocol_version = info
                        .as_ref()
                        .map(|i| i.protocol_version.as_str().to_owned());
                    status.server_info = info
                        .as_ref()
                        .and_then(|i| i.server_info.as_ref())
                        .map(|s| format!("{} {}", s.name, s.version));
                }
                let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
                *slot = Some((generation, Arc::new(service)));
                Ok((generation, peer))
            }
            Err(error) => {
                self.failed(&error);
                Err(error)
            }
        }
    }

    /// Calls tool `params.name`; the request is cancelled on the server when `abort` fires
    /// or the call outlasts the timeout. `sent` learns the request's progress token (which the
    /// SDK chooses) before any progress can arrive.
    pub(crate) async fn call_tool(
        &self,
        params: CallToolRequestParams,
        abort: &AbortSignal,
        sent: impl FnOnce(&ProgressToken),
    ) -> Result<CallToolResponse, McpError> {
        let (generation, peer) = self.peer().await?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::no_options();
        let handle = self
            .request(
                generation,
                "tools/call",
                peer.send_cancellable_request(request, options),
            )
            .await?;
        sent(&handle.progress_token);
        // Dropped before the answer (an abort, a timeout, a caller gone), the request is
        // cancelled on the server.
        let mut guard = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = tokio::select! {
            answer = self.request(generation, "tools/call", handle.await_response()) => answer,
            () = abort.aborted() => return Err(McpError::Request {
                server: self.name.clone(),
                method: "tools/call".to_owned(),
                reason: "the run was aborted: the request was cancelled".to_owned(),
            }),
        };
        if !matches!(answer, Err(McpError::Timeout { .. })) {
            guard.id = None;
        }
        match answer? {
            ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
            ServerResult::InputRequiredResult(result) => {
                Ok(CallToolResponse::InputRequired(result))
            }
            ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
            // An empty answer: a result without content.
            ServerResult::EmptyResult(_) => Ok(CallToolResponse::Complete(
                rmcp::model::CallToolResult::success(Vec::new()),
            )),
            _ => Err(McpError::Request {
                server: self.name.clone(),
                method: "tools/call".to_owned(),
                reason: "the server answered with something other than a tool's result".to_owned(),
            }),
        }
    }

    /// Every tool the server lists (all pages).
    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let (generation, peer) = self.peer().await?;
        self.request(generation, "tools/list", peer.list_all_tools())
            .await
    }

    /// Every resource the server lists (all pages).
    pub(crate) async fn list_resources(&self) -> Result<Vec<rmcp::model::Resource>, McpError> {
        let (generation, peer) = self.peer().await?;
        self.request(generation, "resources/list", peer.list_all_resources())
            .await
    }

    /// The contents of resource `uri`.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<rmcp::model::ReadResourceResult, McpError> {
        let (generation, peer) = self.peer().await?;
        let params = rmcp::model::ReadResourceRequestParams::new(uri);
        self.request(generation, "resources/read", peer.read_resource(params))
            .await
    }

    /// Every prompt the server lists (all pages).
    pub(crate) async fn list_prompts(&self) -> Result<Vec<rmcp::model::Prompt>, McpError> {
        let (generation, peer) = self.peer().await?;
        self.request(generation, "prompts/list", peer.list_all_prompts())
            .await
    }

    /// Prompt `name` filled with `arguments`.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<rmcp::model::GetPromptResult, McpError> {
        let (generation, peer) = self.peer().await?;
        let params = rmcp::model::GetPromptRequestParams::new(name).with_arguments(arguments);
        match self
            .request(generation, "prompts/get", peer.get_prompt_once(params))
            .await?
        {
            rmcp::model::GetPromptResponse::Complete(prompt) => Ok(prompt),
            _ => Err(McpError::Request {
                server: self.name.clone(),
                method: "prompts/get".to_owned(),
                reason: "the server asked for input first, which this client does not answer yet"
                    .to_owned(),
            }),
        }
    }

    /// Waits for a request's answer within the timeout; a transport found dead is dropped.
    async fn request<T>(
        &self,
        generation: u64,
        method: &str,
        call: impl std::future::Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, McpError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => {
                // The transport may not know it is closed yet (its reader runs later): the
                // error says so.
                let lost = matches!(
                    error,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                );
                if self.drop_if_dead(generation, lost).await {
                    let error = McpError::Disconnected {
                        server: self.name.clone(),
                        reason: error.to_string(),
                    };
                    self.failed(&error);
                    return Err(error);
                }
                Err(McpError::Request {
                    server: self.name.clone(),
                    method: method.to_owned(),
                    reason: error.to_string(),
                })
            }
            Err(_) => Err(McpError::Timeout {
                server: self.name.clone(),
                method: method.to_owned(),
                timeout: self.timeout,
            }),
        }
    }

    /// Notes that a call or the connection failed.
    pub(crate) fn failed(&self, error: &McpError) {
        let mut status = lock(&self.status);
        if status.state != Some(ServerState::Closed) {
            status.state = Some(ServerState::Failed);
        }
        status.last_error = Some(error.to_string());
    }

    /// Drops connection `generation` when its transport is down (or `lost` says it is), so
    /// that the next call connects anew; whether it was down.
    async fn drop_if_dead(&self, generation: u64, lost: bool) -> bool {
        let mut slot = self.service.lock().await;
        let Some((current, service)) = slot.as_ref() else {
            return lost;
        };
        let dead = lost || service.is_transport_closed() || service.is_closed();
        if dead && *current == generation {
            let dropped = slot.take().map(|(_, service)| service);
            drop(slot);
            close(dropped).await;
        }
        dead
    }

    /// Drops the connection now (the next call connects anew), and those of each header set.
    pub(crate) async fn reset(&self) {
        let service = self.service.lock().await.take();
        close(service.map(|(_, service)| service)).await;
        for scoped in self.take_scoped() {
            Box::pin(scoped.close()).await;
        }
    }

    /// Closes the connection for good.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.reset().await;
        lock(&self.status).state = Some(ServerState::Closed);
    }

    pub(crate) fn status(&self) -> ServerStatus {
        let status = lock(&self.status);
        ServerStatus {
            name: self.name.clone(),
            transport: if self.config.is_stdio() {
                "stdio"
            } else {
                "http"
            },
            state: status.state.unwrap_or(ServerState::Idle),
            protocol_version: status.protocol_version.clone(),
            server_info: status.server_info.clone(),
            last_error: status.last_error.clone(),
            logs: status.logs.iter().cloned().collect(),
        }
    }

    async fn connect(&self) -> Result<Service, McpError> {
        let connect_error = |reason: String| McpError::Connect {
            server: self.name.clone(),
            reason,
        };
        let handler = Handler::new(
            self.name.clone(),
            Arc::clone(&self.status),
            client_config(&self.config.protocol),
            Arc::clone(&self.calls),
        );
        let lifecycle = lifecycle(&self.name, &self.config.protocol).map_err(|e| {
            // Checked when the client was built; kept as an error rather than a panic.
            connect_error(e.to_string())
        })?;
        let timeout = self.config.connect_timeout;
        let started = match &self.config.transport {
            TransportConfig::Stdio(stdio) => {
                let mut command = tokio::process::Command::new(&stdio.command);
                command.args(&stdio.args);
                if !stdio.inherit_env {
                    command.env_clear();
                    if let Ok(path) = std::env::var("PATH") {
                        command.env("PATH", path);
                    }
                }
                command.envs(&stdio.env);
                if let Some(cwd) = &stdio.cwd {
                    command.current_dir(cwd);
                }
                let (transport, stderr) = TokioChildProcess::builder(command)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| connect_error(format!("cannot start {:?}: {e}", stdio.command)))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(read_stderr(
                        self.name.clone(),
                        Arc::clone(&self.status),
                        stderr,
                    ));
                }
                tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle))
                    .await
            }
            TransportConfig::Http(http) => {
                let mut headers = HashMap::new();
                let mut given = http.headers.clone();
                if let Some(headers_from) = &http.headers_from {
                    // Outside any call (listing the tools): an empty request context.
                    let request = kestrel_core::context::RequestContext::new();
                    given.extend((headers_from.0)(&request).map_err(|reason| {
                        connect_error(format!("its headers could not be made: {reason}"))
                    })?);
                }
                for (name, value) in &given {
                    let (name, value) = header_pair(&self.name, name, value)
                        .map_err(|e| connect_error(e.to_string()))?;
                    headers.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(headers)
                    .max_concurrent_requests(http.max_concurrent_requests);
                let transport = StreamableHttpClientTransport::from_config(config);
                tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle))
                    .await
            }
        };
        match started {
            Ok(Ok(service)) => Ok(service),
            Ok(Err(error)) => Err(connect_error(error.to_string())),
            Err(_) => Err(connect_error(format!(
                "no answer to the handshake within {timeout:?}"
            ))),
        }
    }
}

/// How to open a session with `protocol`.
fn lifecycle(
    server: &str,
    protocol: &Protocol,
) -> Result<ClientLifecycleMode, crate::McpConfigError> {
    Ok(match protocol {
        Protocol::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
        Protocol::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Protocol::Legacy => ClientLifecycleMode::Initialize,
        Protocol::Pinned(version) => {
            let version = protocol_version(server, version)?;
            if version >= ProtocolVersion::V_2026_07_28 {
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![version],
                }
            } else {
                ClientLifecycleMode::Initialize
            }
        }
    })
}

/// The version an `initialize` handshake asks for under `protocol`.
fn initialize_version(protocol: &Protocol) -> ProtocolVersion {
    match protocol {
        // Checked when the client was built.
        Protocol::Pinned(version) => {
            protocol_version("", version).unwrap_or(ProtocolVersion::V_2025_11_25)
        }
        _ => ProtocolVersion::V_2025_11_25,
    }
}

/// What this client tells servers about itself: it answers their questions (elicitation, in
/// forms and by URL) through a person.
fn client_config(protocol: &Protocol) -> ClientConfig {
    let elicitation = ElicitationCapability::new()
        .with_form(FormElicitationCapability::new().with_schema_validation(true))
        .with_url(UrlElicitationCapability::new());
    ClientConfig::new(
        ClientCapabilities::builder()
            .enable_elicitation_with(elicitation)
            .build(),
        Implementation::new("kestrel", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(initialize_version(protocol))
}

/// Cancels a request on the server when dropped armed.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let cancelled = CancelledNotificationParam::new(
            Some(id),
            Some("the caller stopped waiting".to_owned()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}

async fn close(service: Option<Arc<Service>>) {
    let Some(service) = service else {
        return;
    };
    match Arc::try_unwrap(service) {
        // Closing waits for the child process to stop.
        Ok(service) => {
            let _ = service.cancel().await;
        }
        // A call in progress holds it: dropping the last handle cancels it.
        Err(shared) => drop(shared),
    }
}

/// Keeps a stdio server's stderr lines as its logs.
async fn read_stderr(
    server: String,
    status: Arc<Mutex<Status>>,
    stderr: tokio::process::ChildStderr,
) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(%server, "{line}");
        lock(&status).log(ServerLog::stderr(line));
    }
}
