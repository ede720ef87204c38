//! How to reach one MCP server: a child process over stdio, or a Streamable HTTP endpoint;
//! which protocol era to speak; how long to wait; which of its tools need approval.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::ProtocolVersion;

use crate::error::McpConfigError;

/// How long a request waits for its answer when nothing else is set (Mastra's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many requests to one HTTP server may be in flight at once when nothing else is set
/// (rmcp's own default is 16: an agent's parallel tool calls and several runs sharing a client
/// would queue behind it).
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 64;

/// The most header sets ([`McpServerConfig::headers_from`]) a server keeps a connection for.
pub const MAX_SCOPED_CONNECTIONS: usize = 64;

/// How long connecting (starting the process, the handshake) may take when nothing else is set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Which era of the protocol to speak with a server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Protocol {
    /// Ask `server/discover` (2026-07-28) and fall back to `initialize` when the server does
    /// not know it (the default, as Mastra's).
    #[default]
    Auto,
    /// The stateless 2026-07-28 revision only (`server/discover`, per-request `_meta`).
    Stateless,
    /// The `initialize` handshake only (2025-11-25, the latest version of that era).
    Legacy,
    /// This exact version (`"2025-06-18"`, `"2026-07-28"`, ...): `initialize` for versions
    /// before 2026-07-28, `server/discover` from it on.
    Pinned(String),
}

/// One MCP server a client talks to. Build with [`McpServerConfig::stdio`] or
/// [`McpServerConfig::http`]; every setting has a default.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    pub(crate) transport: TransportConfig,
    pub(crate) protocol: Protocol,
    pub(crate) timeout: Option<Duration>,
    pub(crate) connect_timeout: Duration,
    pub(crate) approval: Approval,
}

#[derive(Debug, Clone)]
pub(crate) enum TransportConfig {
    Stdio(StdioConfig),
    Http(HttpConfig),
}

#[derive(Debug, Clone)]
pub(crate) struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub inherit_env: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct HttpConfig {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// Headers computed per call, from the run's request context.
    pub headers_from: Option<HeadersFrom>,
    pub allowed_hosts: Vec<String>,
    pub max_concurrent_requests: usize,
}

/// The headers of a call, from its run's request context (a user's token, say); `Err` says
/// why the call cannot be made.
pub type HeadersFn = dyn Fn(&kestrel_core::context::RequestContext) -> Result<Vec<(String, String)>, String>
    + Send
    + Sync;

/// A [`HeadersFn`], shared.
#[derive(Clone)]
pub(crate) struct HeadersFrom(pub std::sync::Arc<HeadersFn>);

impl std::fmt::Debug for HeadersFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeadersFrom")
    }
}

/// Which calls of a server's tools need a person's approval.
#[derive(Debug, Clone, Default)]
pub(crate) struct Approval {
    /// Every tool of the server.
    pub all: bool,
    /// These tools (by their name on the server).
    pub tools: Vec<String>,
}

impl McpServerConfig {
    /// A server started as a child process (`command` with [`McpServerConfig::args`]),
    /// spoken to over its stdin and stdout; its stderr goes to the log. The process is
    /// stopped when the client disconnects or is dropped.
    pub fn stdio(command: impl Into<String>) -> Self {
        Self::new(TransportConfig::Stdio(StdioConfig {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: true,
        }))
    }

    /// A server at a Streamable HTTP endpoint (`http://host:port/mcp`).
    pub fn http(url: impl Into<String>) -> Self {
        Self::new(TransportConfig::Http(HttpConfig {
            url: url.into(),
            headers: Vec::new(),
            headers_from: None,
            allowed_hosts: Vec::new(),
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }))
    }

    fn new(transport: TransportConfig) -> Self {
        Self {
            transport,
            protocol: Protocol::Auto,
            timeout: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            approval: Approval::default(),
        }
    }

    /// Adds an argument of the command (stdio).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        if let TransportConfig::Stdio(stdio) = &mut self.transport {
            stdio.args.push(arg.into());
        }
        self
    }

    /// Adds arguments of the command (stdio).
    pub fn args<I, S>(self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        args.into_iter().fold(self, McpServerConfig::arg)
    }

    /// Sets an environment variable of the process (stdio).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let TransportConfig::Stdio(stdio) = &mut self.transport {
            stdio.env.insert(key.into(), value.into());
        }
        self
    }

    /// Whether the process inherits this process's environment (stdio; default true). Without
    /// it, the process sees only [`McpServerConfig::env`] and `PATH`.
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        if let TransportConfig::Stdio(stdio) = &mut self.transport {
            stdio.inherit_env = inherit;
        }
        self
    }

    /// The process's working directory (stdio; default: this process's).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let TransportConfig::Stdio(stdio) = &mut self.transport {
            stdio.cwd = Some(dir.into());
        }
        self
    }

    /// Sends this header with every request (HTTP). An `Authorization` header is sent as
    /// given; [`McpServerConfig::bearer_token`] writes one.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let TransportConfig::Http(http) = &mut self.transport {
            http.headers.push((name.into(), value.into()));
        }
        self
    }

    /// Computes headers for each call from its run's request context (HTTP): per-user tokens,
    /// say, from what the request that started the run put there. Calls with the same headers
    /// share a connection (an MCP session), kept for up to [`MAX_SCOPED_CONNECTIONS`] header
    /// sets per server (the least recently used is closed past it). Listing the tools calls it
    /// with an empty context. An `Err` fails the call with its text.
    ///
    /// ```
    /// # use kestrel_mcp::McpServerConfig;
    /// let config = McpServerConfig::http("https://mcp.example.com/mcp").headers_from(|request| {
    ///     Ok(match request.get_str("user_token") {
    ///         Some(token) => vec![("authorization".to_owned(), format!("Bearer {token}"))],
    ///         None => Vec::new(),
    ///     })
    /// });
    /// ```
    pub fn headers_from(
        mut self,
        headers: impl Fn(
            &kestrel_core::context::RequestContext,
        ) -> Result<Vec<(String, String)>, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        if let TransportConfig::Http(http) = &mut self.transport {
            http.headers_from = Some(HeadersFrom(std::sync::Arc::new(headers)));
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request (HTTP).
    pub fn bearer_token(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("authorization", value)
    }

    /// The hosts the URL may name (HTTP; default: any). A configuration read from a file
    /// names its server's URL; this keeps it to the hosts meant.
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let TransportConfig::Http(http) = &mut self.transport {
            http.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        }
        self
    }

    /// How many requests may be in flight to this server at once (HTTP; default
    /// [`DEFAULT_MAX_CONCURRENT_REQUESTS`]); more wait for a free slot. At least 1.
    pub fn max_concurrent_requests(mut self, requests: usize) -> Self {
        if let TransportConfig::Http(http) = &mut self.transport {
            http.max_concurrent_requests = requests.max(1);
        }
        self
    }

    /// Which protocol era to speak (default [`Protocol::Auto`]).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// How long a request to this server waits for its answer (default: the client's, or
    /// [`DEFAULT_TIMEOUT`]). A request that times out is cancelled on the server.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long connecting may take (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether every call of this server's tools needs a person's approval first (default
    /// false).
    pub fn require_approval(mut self, required: bool) -> Self {
        self.approval.all = required;
        self
    }

    /// Calls of this tool (its name on the server) need a person's approval first.
    pub fn require_approval_for(mut self, tool: impl Into<String>) -> Self {
        self.approval.tools.push(tool.into());
        self
    }

    /// Whether this is a stdio server.
    pub fn is_stdio(&self) -> bool {
        matches!(self.transport, TransportConfig::Stdio(_))
    }

    /// Checks the configuration of server `name`.
    pub(crate) fn check(&self, name: &str) -> Result<(), McpConfigError> {
        if let Protocol::Pinned(version) = &self.protocol {
            protocol_version(name, version)?;
        }
        match &self.transport {
            TransportConfig::Stdio(stdio) => {
                if stdio.command.trim().is_empty() {
                    return Err(McpConfigError::EmptyCommand {
                        server: name.to_owned(),
                    });
                }
            }
            TransportConfig::Http(http) => {
                check_url(name, http)?;
                for (header, value) in &http.headers {
                    header_pair(name, header, value)?;
                }
            }
        }
        Ok(())
    }
}

/// The pinned version `version`, when this client speaks it.
pub(crate) fn protocol_version(
    server: &str,
    version: &str,
) -> Result<ProtocolVersion, McpConfigError> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|known| known.as_str() == version)
        .cloned()
        .ok_or_else(|| McpConfigError::UnknownProtocolVersion {
            server: server.to_owned(),
            version: version.to_owned(),
            known: ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(|v| v.as_str().to_owned())
                .collect(),
        })
}

fn check_url(server: &str, http: &HttpConfig) -> Result<(), McpConfigError> {
    let url = url::Url::parse(&http.url).map_err(|e| McpConfigError::InvalidUrl {
        server: server.to_owned(),
        url: http.url.clone(),
        reason: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(McpConfigError::UnsupportedScheme {
            server: server.to_owned(),
            scheme: url.scheme().to_owned(),
        });
    }
    let host = url.host_str().unwrap_or_default();
    if !http.allowed_hosts.is_empty() && !http.allowed_hosts.iter().any(|h| h == host) {
        return Err(McpConfigError::HostNotAllowed {
            server: server.to_owned(),
            host: host.to_owned(),
            allowed: http.allowed_hosts.clone(),
        });
    }
    Ok(())
}

/// Headers the Streamable HTTP transport sets itself (lower case, as `HeaderName` keeps them).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// A header as HTTP types, or what is wrong with it.
pub(crate) fn header_pair(
    server: &str,
    name: &str,
    value: &str,
) -> Result<(http::HeaderName, http::HeaderValue), McpConfigError> {
    let invalid = |reason: String| McpConfigError::InvalidHeader {
        server: server.to_owned(),
        name: name.to_owned(),
        reason,
    };
    let header = http::HeaderName::try_from(name).map_err(|e| invalid(e.to_string()))?;
    // The transport writes these itself.
    if RESERVED_HEADERS.contains(&header.as_str()) {
        return Err(invalid(
            "the MCP transport sets this header itself".to_owned(),
        ));
    }
    let mut value = http::HeaderValue::try_from(value).map_err(|e| invalid(e.to_string()))?;
    // Credentials stay out of debug output.
    if header == http::header::AUTHORIZATION {
        value.set_sensitive(true);
    }
    Ok((header, value))
}
