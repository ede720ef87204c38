//! What the client does with what a server sends unasked: its log messages are kept in the
//! server's status and logged; progress is logged.

use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
#[allow(deprecated)]
use rmcp::model::{
    ClientConfig, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RoleClient};

use super::connection::Status;

/// One log line of a server.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerLog {
    /// `stderr` for a stdio server's standard error, else the MCP level (`info`, `error`...).
    pub level: String,
    /// The logger's name, when the server gives one.
    pub logger: Option<String>,
    /// The message (a JSON value, as the server sent it; text for stderr).
    pub data: serde_json::Value,
}

impl ServerLog {
    pub(crate) fn stderr(line: String) -> Self {
        Self {
            level: "stderr".to_owned(),
            logger: None,
            data: serde_json::Value::String(line),
        }
    }
}

/// The client side of one connection.
pub(crate) struct Handler {
    server: String,
    status: Arc<Mutex<Status>>,
    config: ClientConfig,
}

impl Handler {
    pub(crate) fn new(server: String, status: Arc<Mutex<Status>>, config: ClientConfig) -> Self {
        Self {
            server,
            status,
            config,
        }
    }
}

// Server logs are deprecated from 2026-07-28 on (SEP-2577), and still sent by servers of the
// `initialize` era: they are kept while those servers exist.
#[allow(deprecated)]
impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "info".to_owned());
        match params.level {
            LoggingLevel::Error
            | LoggingLevel::Critical
            | LoggingLevel::Alert
            | LoggingLevel::Emergency => {
                tracing::warn!(server = %self.server, data = %params.data, "MCP server log")
            }
            _ => tracing::debug!(server = %self.server, data = %params.data, "MCP server log"),
        }
        let line = ServerLog {
            level,
            logger: params.logger,
            data: params.data,
        };
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .log(line);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(
            server = %self.server,
            progress = params.progress,
            total = ?params.total,
            "MCP progress"
        );
    }
}
