//! What can go wrong: a configuration that cannot work ([`McpConfigError`], found when the
//! client is built), and a server that cannot be reached or answers with an error
//! ([`McpError`]). Each names the server, and the tool or method, it is about.

use std::time::Duration;

/// A client configuration that cannot work, found by [`crate::McpClientBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// A server name that cannot prefix tool names.
    #[error(
        "MCP server name {name:?} is not valid: use 1 to {max} ASCII letters, digits and '-' \
         (it prefixes the names of its tools: `<server>_<tool>`)",
        max = crate::client::MAX_SERVER_NAME_LEN
    )]
    InvalidServerName {
        /// The name given.
        name: String,
    },
    /// Two servers share a name.
    #[error("MCP server {name:?} is configured twice")]
    DuplicateServer {
        /// The name given twice.
        name: String,
    },
    /// A stdio server without a command.
    #[error("MCP server {server:?}: the command to start it is empty")]
    EmptyCommand {
        /// The server.
        server: String,
    },
    /// An HTTP server whose URL does not parse.
    #[error("MCP server {server:?}: {url:?} is not a valid URL: {reason}")]
    InvalidUrl {
        /// The server.
        server: String,
        /// The URL given.
        url: String,
        /// Why it does not parse.
        reason: String,
    },
    /// An HTTP server whose URL is not `http` or `https`.
    #[error("MCP server {server:?}: the URL must be http:// or https://, found {scheme}://")]
    UnsupportedScheme {
        /// The server.
        server: String,
        /// The scheme given.
        scheme: String,
    },
    /// An HTTP server whose host is not among its allowed hosts.
    #[error(
        "MCP server {server:?}: host {host:?} is not among its allowed hosts ({})",
        allowed.join(", ")
    )]
    HostNotAllowed {
        /// The server.
        server: String,
        /// The URL's host.
        host: String,
        /// The hosts allowed.
        allowed: Vec<String>,
    },
    /// A header that is not valid HTTP.
    #[error("MCP server {server:?}: header {name:?} is not valid HTTP: {reason}")]
    InvalidHeader {
        /// The server.
        server: String,
        /// The header's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A pinned protocol version this client does not speak.
    #[error(
        "MCP server {server:?}: protocol version {version:?} is not one this client speaks \
         (it speaks {})",
        known.join(", ")
    )]
    UnknownProtocolVersion {
        /// The server.
        server: String,
        /// The version given.
        version: String,
        /// The versions it speaks.
        known: Vec<String>,
    },
}

/// An MCP server that cannot be reached, or a request it refused.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// No server of that name is configured.
    #[error("unknown MCP server {name:?}; configured servers: {}", known.join(", "))]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// The configured servers.
        known: Vec<String>,
    },
    /// Starting the server (stdio) or connecting to it (HTTP) failed.
    #[error("could not connect to MCP server {server:?}: {reason}")]
    Connect {
        /// The server.
        server: String,
        /// Why (the process could not start, the host refused, the handshake failed).
        reason: String,
    },
    /// The connection went down (the process exited, the server restarted). The next call
    /// connects again.
    #[error("MCP server {server:?} is not connected ({reason}); the next call connects again")]
    Disconnected {
        /// The server.
        server: String,
        /// What happened.
        reason: String,
    },
    /// The client was disconnected ([`crate::McpClient::disconnect`]).
    #[error("the MCP client was disconnected; server {server:?} is not called any more")]
    Closed {
        /// The server.
        server: String,
    },
    /// A request got no answer in time (it was cancelled on the server).
    #[error("MCP server {server:?} did not answer {method} within {timeout:?}")]
    Timeout {
        /// The server.
        server: String,
        /// The request's method.
        method: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// The server answered a request with an error.
    #[error("MCP server {server:?} failed {method}: {reason}")]
    Request {
        /// The server.
        server: String,
        /// The request's method.
        method: String,
        /// The server's error.
        reason: String,
    },
    /// A tool the server lists cannot be a Kestrel tool (its name or schema).
    #[error("tool {tool:?} of MCP server {server:?} cannot be used: {reason}")]
    InvalidTool {
        /// The server.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Serving MCP failed (the transport broke before the session could start).
    #[error("serving MCP failed: {reason}")]
    Serve {
        /// What happened.
        reason: String,
    },
}
