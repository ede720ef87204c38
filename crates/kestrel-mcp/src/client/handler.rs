//! What the client does with what a server sends unasked: its log messages are kept in the
//! server's status and logged; progress goes to the stream of the run whose call it is about
//! (a `tool-output` event); a question (`elicitation/create`, in the `initialize` era) goes to
//! the call in flight, which stops its run until a person answers (see [`super::McpElicitation`]).

use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::ErrorData;
#[allow(deprecated)]
use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};

use super::calls::{Calls, Routed};
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
    calls: Arc<Calls>,
}

impl Handler {
    pub(crate) fn new(
        server: String,
        status: Arc<Mutex<Status>>,
        config: ClientConfig,
        calls: Arc<Calls>,
    ) -> Self {
        Self {
            server,
            status,
            config,
            calls,
        }
    }

    fn note(&self, level: &str, text: String) {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .log(ServerLog {
                level: level.to_owned(),
                logger: Some("kestrel".to_owned()),
                data: serde_json::Value::String(text),
            });
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
        let Some(writer) = self.calls.progress(&params.progress_token) else {
            return;
        };
        let mut output = serde_json::json!({
            "type": "mcp-progress",
            "server": self.server,
            "progress": params.progress,
        });
        if let Some(total) = params.total {
            output["total"] = total.into();
        }
        if let Some(message) = params.message {
            output["message"] = message.into();
        }
        // The stream may be gone (the run ended): progress is only ever informative.
        let _ = writer.write(output).await;
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let schema = super::elicitation::requested_schema(&request);
        match self.calls.route_question(request) {
            Ok(Routed::Answer(answer)) => {
                let answer = super::elicitation::with_defaults(schema.as_ref(), &answer);
                serde_json::from_value(answer).map_err(|e| {
                    ErrorData::internal_error(format!("a stored answer does not parse: {e}"), None)
                })
            }
            Ok(Routed::Asked(call)) => {
                // The call stops, and its run asks a person; this request is answered once the
                // call is cancelled (it is made again, with the answer, on the resume).
                call.ended().await;
                Err(ErrorData::internal_error(
                    "the question went to a person; the tool call is made again with the answer",
                    None,
                ))
            }
            Err(reason) => {
                tracing::warn!(server = %self.server, %reason, "an MCP server's question was not answered");
                self.note("error", reason.clone());
                Err(ErrorData::invalid_request(reason, None))
            }
        }
    }
}
