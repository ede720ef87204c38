//! `kestrel.toml`: what `kestrel dev` reads from a file beside the flags. Today, the MCP
//! servers whose tools the `assistant` demo agent gets, one table each:
//!
//! ```toml
//! [mcp.servers.everything]          # a child process, spoken to over stdio
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything"]
//! env = { LOG_LEVEL = "info" }      # also: cwd, inherit_env (default true)
//!
//! [mcp.servers.weather]             # a Streamable HTTP endpoint
//! url = "http://127.0.0.1:8080/mcp"
//! bearer_token_env = "WEATHER_TOKEN" # the token, read from this environment variable
//! headers = { "X-Team" = "kitchen" } # also: allowed_hosts
//! protocol = "auto"                 # "stateless", "legacy" or a version ("2025-06-18")
//! timeout_ms = 60000                # also: connect_timeout_ms
//! require_approval = ["delete_station"] # or true, for every tool
//! ```
//!
//! Every key is checked: an unknown one, a server with both `command` and `url` (or neither),
//! a token variable that is not set, are errors naming the file, the server and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kestrel::mcp::{McpClient, McpServerConfig, Protocol};
use serde::Deserialize;

/// The file `kestrel dev` reads when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG: &str = "kestrel.toml";

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not the TOML `kestrel dev` reads.
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
    /// A server's table cannot work.
    #[error("{}: [mcp.servers.{server}]: {reason}", path.display())]
    Server {
        /// The file.
        path: PathBuf,
        /// The server.
        server: String,
        /// What is wrong.
        reason: String,
    },
}

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevConfig {
    /// `[mcp]`.
    #[serde(default)]
    pub mcp: McpSection,
    #[serde(skip)]
    path: PathBuf,
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// `[mcp.servers.<name>]`, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerEntry>,
}

/// `[mcp.servers.<name>]`: `command` (stdio) or `url` (Streamable HTTP), and their settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    inherit_env: Option<bool>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    protocol: Option<String>,
    timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    require_approval: Option<Approval>,
}

/// `require_approval`: every tool, or the named ones.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Approval {
    All(bool),
    Tools(Vec<String>),
}

impl DevConfig {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Reads `--config`, else [`DEFAULT_CONFIG`] when it exists, else nothing.
    pub fn find(given: Option<&Path>) -> Result<Self, ConfigError> {
        match given {
            Some(path) => Self::load(path),
            None if Path::new(DEFAULT_CONFIG).is_file() => Self::load(Path::new(DEFAULT_CONFIG)),
            None => Ok(Self::default()),
        }
    }

    /// `text`, the contents of `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Self = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        config.path = path.to_owned();
        Ok(config)
    }

    /// The client of the configured MCP servers (`None` without any), checked whole; it
    /// connects to none yet. `env` reads environment variables (the bearer tokens).
    pub fn mcp_client(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<McpClient>, ConfigError> {
        if self.mcp.servers.is_empty() {
            return Ok(None);
        }
        let mut builder = McpClient::builder();
        for (name, entry) in &self.mcp.servers {
            let server = |reason: String| ConfigError::Server {
                path: self.path.clone(),
                server: name.clone(),
                reason,
            };
            builder = builder.server(name.clone(), entry.config(&env).map_err(server)?);
        }
        builder.build().map(Some).map_err(|e| ConfigError::Invalid {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }
}

impl McpServerEntry {
    fn config(&self, env: &impl Fn(&str) -> Option<String>) -> Result<McpServerConfig, String> {
        let stdio_only = !self.args.is_empty()
            || !self.env.is_empty()
            || self.cwd.is_some()
            || self.inherit_env.is_some();
        let http_only = !self.headers.is_empty()
            || self.bearer_token_env.is_some()
            || !self.allowed_hosts.is_empty();
        let mut config = match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(
                    "give `command` (a process over stdio) or `url` (HTTP), not both".into(),
                );
            }
            (None, None) => {
                return Err("give `command` (a process over stdio) or `url` (HTTP)".into());
            }
            (Some(command), None) => {
                if http_only {
                    return Err(
                        "`headers`, `bearer_token_env` and `allowed_hosts` are for `url` servers"
                            .into(),
                    );
                }
                let mut config = McpServerConfig::stdio(command).args(self.args.clone());
                for (key, value) in &self.env {
                    config = config.env(key, value);
                }
                if let Some(cwd) = &self.cwd {
                    config = config.cwd(cwd);
                }
                if let Some(inherit) = self.inherit_env {
                    config = config.inherit_env(inherit);
                }
                config
            }
            (None, Some(url)) => {
                if stdio_only {
                    return Err(
                        "`args`, `env`, `cwd` and `inherit_env` are for `command` servers".into(),
                    );
                }
                let mut config = McpServerConfig::http(url);
                for (name, value) in &self.headers {
                    config = config.header(name, value);
                }
                if let Some(variable) = &self.bearer_token_env {
                    let token =
                        env(variable)
                            .filter(|t| !t.trim().is_empty())
                            .ok_or_else(|| {
                                format!("bearer_token_env names {variable}, which is not set")
                            })?;
                    config = config.bearer_token(token);
                }
                if !self.allowed_hosts.is_empty() {
                    config = config.allowed_hosts(self.allowed_hosts.clone());
                }
                config
            }
        };
        if let Some(protocol) = &self.protocol {
            config = config.protocol(match protocol.as_str() {
                "auto" => Protocol::Auto,
                "stateless" => Protocol::Stateless,
                "legacy" => Protocol::Legacy,
                version => Protocol::Pinned(version.to_owned()),
            });
        }
        if let Some(ms) = self.timeout_ms {
            config = config.timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = self.connect_timeout_ms {
            config = config.connect_timeout(Duration::from_millis(ms));
        }
        match &self.require_approval {
            Some(Approval::All(all)) => config = config.require_approval(*all),
            Some(Approval::Tools(tools)) => {
                for tool in tools {
                    config = config.require_approval_for(tool);
                }
            }
            None => {}
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn parse(text: &str) -> Result<Option<McpClient>, ConfigError> {
        DevConfig::parse(text, Path::new("kestrel.toml"))?
            .mcp_client(|name| (name == "TOKEN").then(|| "secret".to_owned()))
    }

    #[test]
    fn servers_of_both_transports_are_read() {
        let client = parse(
            r#"
            [mcp.servers.local]
            command = "kestrel"
            args = ["mcp", "serve"]
            env = { A = "1" }
            require_approval = ["send_email"]

            [mcp.servers.remote]
            url = "http://127.0.0.1:9/mcp"
            bearer_token_env = "TOKEN"
            protocol = "2025-06-18"
            timeout_ms = 5000
            require_approval = true
            "#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(client.server_names(), ["local", "remote"]);
        assert!(parse("").unwrap().is_none());
    }

    #[test]
    fn what_cannot_work_is_named() {
        let error = |text: &str| parse(text).unwrap_err().to_string();
        let both = error("[mcp.servers.x]\ncommand = \"a\"\nurl = \"http://127.0.0.1/\"");
        assert!(
            both.contains("[mcp.servers.x]") && both.contains("not both"),
            "{both}"
        );
        let neither = error("[mcp.servers.x]\nargs = [\"a\"]");
        assert!(neither.contains("give `command`"), "{neither}");
        let unknown = error("[mcp.servers.x]\ncommand = \"a\"\ncomand = \"b\"");
        assert!(unknown.contains("comand"), "{unknown}");
        let unset =
            error("[mcp.servers.x]\nurl = \"http://127.0.0.1/\"\nbearer_token_env = \"NOPE\"");
        assert!(
            unset.contains("NOPE") && unset.contains("not set"),
            "{unset}"
        );
        let mixed = error("[mcp.servers.x]\nurl = \"http://127.0.0.1/\"\nargs = [\"a\"]");
        assert!(mixed.contains("`command` servers"), "{mixed}");
        let name = error("[mcp.servers.\"bad name\"]\ncommand = \"a\"");
        assert!(name.contains("bad name"), "{name}");
        let scheme = error("[mcp.servers.x]\nurl = \"ftp://127.0.0.1/\"");
        assert!(scheme.contains("ftp"), "{scheme}");
    }
}
