//! The client side: [`McpClient`] gives agents the tools of MCP servers.
//!
//! Each server is named ([`McpClientBuilder::server`]) and configured with
//! [`McpServerConfig::stdio`] (a child process) or [`McpServerConfig::http`] (a Streamable
//! HTTP endpoint). Nothing connects until it is used: [`McpClient::list_tools`] connects to
//! every server, lists their tools, and gives each as an [`McpTool`] named
//! `<server>_<tool>` (Mastra's keys), ready for `Agent::builder(..).tools(..)`.
//!
//! A server that cannot be reached is never an empty list: [`McpClient::list_tools`] fails
//! naming it, and [`McpClient::list_tools_with_errors`] gives the tools of the servers that
//! answered beside the error of each that did not. A connection that dies (the process
//! exited, the server restarted) is dropped: the call that finds it dead fails saying so,
//! and the next one connects again.

mod calls;
mod config;
mod connection;
mod elicitation;
mod handler;
mod tool;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kestrel_core::tool::{SharedTool, Tool as _};

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_TIMEOUT, HeadersFn,
    MAX_SCOPED_CONNECTIONS, McpServerConfig, Protocol,
};
use connection::Connection;
pub use connection::{ServerState, ServerStatus};
pub use elicitation::{MAX_QUESTIONS, McpElicitation, PresetAnswers};
pub use handler::ServerLog;
pub use tool::McpTool;

use crate::error::{McpConfigError, McpError};

/// The longest server name: it prefixes its tools' names, which a model takes up to 64
/// characters long.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// A set of named MCP servers and their tools. Cheap to clone: clones share the connections.
/// See the [module docs](self).
#[derive(Clone)]
pub struct McpClient {
    servers: Arc<BTreeMap<String, Arc<Connection>>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Builder of an [`McpClient`]; see [`McpClient::builder`].
#[derive(Debug, Default)]
pub struct McpClientBuilder {
    servers: Vec<(String, McpServerConfig)>,
    timeout: Option<Duration>,
}

impl McpClientBuilder {
    /// Adds server `name` (1 to [`MAX_SERVER_NAME_LEN`] ASCII letters, digits and `-`).
    pub fn server(mut self, name: impl Into<String>, config: McpServerConfig) -> Self {
        self.servers.push((name.into(), config));
        self
    }

    /// How long a request waits for its answer, for servers that set no timeout of their
    /// own (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks every server's configuration; connects to none.
    pub fn build(self) -> Result<McpClient, McpConfigError> {
        let default_timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let mut servers = BTreeMap::new();
        for (name, config) in self.servers {
            if !valid_server_name(&name) {
                return Err(McpConfigError::InvalidServerName { name });
            }
            config.check(&name)?;
            if servers.contains_key(&name) {
                return Err(McpConfigError::DuplicateServer { name });
            }
            let timeout = config.timeout.unwrap_or(default_timeout);
            let connection = Connection::new(name.clone(), config, timeout);
            servers.insert(name, Arc::new(connection));
        }
        Ok(McpClient {
            servers: Arc::new(servers),
        })
    }
}

fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The tools of the servers that answered, and why each other failed
/// ([`McpClient::list_tools_with_errors`]).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ToolsWithErrors {
    /// The tools, sorted by server, in each server's order.
    pub tools: Vec<McpTool>,
    /// Why a server's tools, or one of its tools, could not be listed, by server name.
    pub errors: BTreeMap<String, Vec<McpError>>,
}

impl McpClient {
    /// A builder with no servers.
    pub fn builder() -> McpClientBuilder {
        McpClientBuilder::default()
    }

    /// The names of the servers, sorted.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }

    fn connection(&self, name: &str) -> Result<&Arc<Connection>, McpError> {
        self.servers
            .get(name)
            .ok_or_else(|| McpError::UnknownServer {
                name: name.to_owned(),
                known: self.server_names(),
            })
    }

    /// Every server's tools, as Kestrel tools named `<server>_<tool>`, shared and ready for
    /// an agent. Fails naming the first server (by name) that could not be reached or whose
    /// tools cannot be used; [`McpClient::list_tools_with_errors`] gives the rest anyway.
    pub async fn list_tools(&self) -> Result<Vec<SharedTool>, McpError> {
        let listed = self.list_tools_with_errors().await;
        if let Some(error) = listed.errors.into_values().flatten().next() {
            return Err(error);
        }
        Ok(shared(listed.tools))
    }

    /// Every server's tools beside the error of each server (or tool) that failed: a server
    /// that cannot be reached gives its error, never a silent empty list.
    pub async fn list_tools_with_errors(&self) -> ToolsWithErrors {
        let lists = futures::future::join_all(
            self.servers
                .values()
                .map(|connection| server_tools(Arc::clone(connection))),
        )
        .await;
        let mut listed = ToolsWithErrors::default();
        for (name, (tools, errors)) in self.servers.keys().zip(lists) {
            listed.tools.extend(tools);
            if !errors.is_empty() {
                listed.errors.insert(name.clone(), errors);
            }
        }
        listed
    }

    /// The tools of each server, by server name (Mastra's `listToolsets`): for tools given
    /// per request rather than to the agent once. Fails as [`McpClient::list_tools`] does.
    pub async fn list_toolsets(&self) -> Result<BTreeMap<String, Vec<SharedTool>>, McpError> {
        let mut sets = BTreeMap::new();
        for (name, connection) in self.servers.iter() {
            let (tools, errors) = server_tools(Arc::clone(connection)).await;
            if let Some(error) = errors.into_iter().next() {
                return Err(error);
            }
            sets.insert(name.clone(), shared(tools));
        }
        Ok(sets)
    }

    /// The tools of server `name`.
    pub async fn server_tools(&self, name: &str) -> Result<Vec<SharedTool>, McpError> {
        let (tools, errors) = server_tools(Arc::clone(self.connection(name)?)).await;
        match errors.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(shared(tools)),
        }
    }

    /// The resources server `name` lists (Mastra's `resources.list`).
    pub async fn list_resources(&self, name: &str) -> Result<Vec<rmcp::model::Resource>, McpError> {
        self.connection(name)?.list_resources().await
    }

    /// The contents of resource `uri` of server `name` (text or base64 blobs, as MCP gives
    /// them).
    pub async fn read_resource(
        &self,
        name: &str,
        uri: &str,
    ) -> Result<rmcp::model::ReadResourceResult, McpError> {
        self.connection(name)?.read_resource(uri).await
    }

    /// The prompts server `name` lists (Mastra's `prompts.list`).
    pub async fn list_prompts(&self, name: &str) -> Result<Vec<rmcp::model::Prompt>, McpError> {
        self.connection(name)?.list_prompts().await
    }

    /// Prompt `prompt` of server `name`, filled with `arguments` (Mastra's `prompts.get`).
    pub async fn get_prompt(
        &self,
        name: &str,
        prompt: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<rmcp::model::GetPromptResult, McpError> {
        self.connection(name)?.get_prompt(prompt, arguments).await
    }

    /// Where each server's connection stands, sorted by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.values().map(|c| c.status()).collect()
    }

    /// Drops server `name`'s connection and connects again now.
    pub async fn reconnect_server(&self, name: &str) -> Result<(), McpError> {
        let connection = self.connection(name)?;
        connection.reset().await;
        connection.peer().await.map(drop)
    }

    /// Closes every connection (a stdio server's process is stopped); the client's tools
    /// fail from now on.
    pub async fn disconnect(&self) {
        futures::future::join_all(self.servers.values().map(|c| c.close())).await;
    }
}

fn shared(tools: Vec<McpTool>) -> Vec<SharedTool> {
    tools
        .into_iter()
        .map(|tool| Arc::new(tool) as SharedTool)
        .collect()
}

/// A server's usable tools and the errors of the server or of its unusable tools.
async fn server_tools(connection: Arc<Connection>) -> (Vec<McpTool>, Vec<McpError>) {
    let listed = match connection.list_tools().await {
        Ok(listed) => listed,
        Err(error) => return (Vec::new(), vec![error]),
    };
    let mut tools = Vec::with_capacity(listed.len());
    let mut errors = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for tool in listed {
        match McpTool::new(Arc::clone(&connection), tool) {
            Ok(tool) if ids.insert(tool.id().to_owned()) => tools.push(tool),
            Ok(tool) => errors.push(McpError::InvalidTool {
                server: connection.name.clone(),
                tool: tool.remote_name().to_owned(),
                reason: format!("its name {:?} is another tool's too", tool.id()),
            }),
            Err(error) => errors.push(error),
        }
    }
    (tools, errors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn build(name: &str, config: McpServerConfig) -> Result<McpClient, McpConfigError> {
        McpClient::builder().server(name, config).build()
    }

    #[test]
    fn configurations_that_cannot_work_are_refused_when_built() {
        let http = || McpServerConfig::http("http://127.0.0.1:3001/mcp");
        for name in ["", "has space", "under_score", &"x".repeat(33)] {
            assert!(
                matches!(
                    build(name, http()),
                    Err(McpConfigError::InvalidServerName { .. })
                ),
                "{name:?}"
            );
        }
        let twice = McpClient::builder()
            .server("a", http())
            .server("a", http())
            .build();
        assert!(matches!(twice, Err(McpConfigError::DuplicateServer { .. })));
        assert!(matches!(
            build("a", McpServerConfig::stdio(" ")),
            Err(McpConfigError::EmptyCommand { .. })
        ));
        assert!(matches!(
            build("a", McpServerConfig::http("not a url")),
            Err(McpConfigError::InvalidUrl { .. })
        ));
        assert!(matches!(
            build("a", McpServerConfig::http("ftp://127.0.0.1/mcp")),
            Err(McpConfigError::UnsupportedScheme { .. })
        ));
        let elsewhere =
            McpServerConfig::http("http://example.com/mcp").allowed_hosts(["127.0.0.1"]);
        let error = build("a", elsewhere).unwrap_err();
        assert_eq!(
            error.to_string(),
            "MCP server \"a\": host \"example.com\" is not among its allowed hosts (127.0.0.1)"
        );
        assert!(matches!(
            build("a", http().header("bad header", "x")),
            Err(McpConfigError::InvalidHeader { .. })
        ));
        assert!(matches!(
            build("a", http().header("mcp-session-id", "forged")),
            Err(McpConfigError::InvalidHeader { .. })
        ));
        assert!(matches!(
            build("a", http().header("x-token", "line\nbreak")),
            Err(McpConfigError::InvalidHeader { .. })
        ));
        let error = build("a", http().protocol(Protocol::Pinned("2099-01-01".into()))).unwrap_err();
        assert!(error.to_string().contains("2025-11-25"), "{error}");
        assert!(build("a-1", http().bearer_token("t")).is_ok());
    }

    #[test]
    fn tool_names_are_prefixed_and_written_as_models_take_them() {
        assert_eq!(tool::tool_id("fs", "read_file"), "fs_read_file");
        assert_eq!(tool::tool_id("fs", "files.read/all"), "fs_files_read_all");
    }
}
