//! An MCP server's tool as a Kestrel tool ([`McpTool`]), named `<server>_<tool>`.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::tool::{ApprovalContext, Tool, ToolContext, ToolError};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ElicitRequestParams};
use serde_json::Value;

use super::connection::Connection;
use super::elicitation::{MAX_QUESTIONS, PresetAnswers, Rounds, answer_schema};
use crate::error::McpError;

/// The longest tool name a model provider takes (OpenAI's limit).
const MAX_TOOL_NAME_LEN: usize = 64;

/// A tool of an MCP server, as an agent uses it: its input checked against the server's
/// schema, its call a `tools/call` to the server (cancelled there when the run is aborted or
/// the call times out), its result mapped as the [crate docs](crate) say. The server's
/// progress notifications are `tool-output` events of the run (`{"type": "mcp-progress",
/// "progress", "total", "message"}`), and its questions suspend the call (see
/// [`McpElicitation`](super::McpElicitation)).
#[derive(Clone)]
pub struct McpTool {
    /// `<server>_<tool>`.
    id: String,
    /// The tool's name on the server.
    remote: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    resume_schema: Value,
    requires_approval: bool,
    connection: Arc<Connection>,
}

/// How one `tools/call` ended.
enum Called {
    /// The server answered.
    Answered(Result<CallToolResponse, McpError>),
    /// The server asked a question (`initialize` era) no earlier answer answers.
    Asked(ElicitRequestParams),
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("id", &self.id)
            .field("server", &self.connection.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The Kestrel tool of the server's tool `tool`, or why it cannot be one.
    pub(crate) fn new(
        connection: Arc<Connection>,
        tool: rmcp::model::Tool,
    ) -> Result<Self, McpError> {
        let server = connection.name.clone();
        let invalid = |reason: String| McpError::InvalidTool {
            server: server.clone(),
            tool: tool.name.to_string(),
            reason,
        };
        let id = tool_id(&server, &tool.name);
        if id.len() > MAX_TOOL_NAME_LEN {
            return Err(invalid(format!(
                "its name {id:?} is longer than the {MAX_TOOL_NAME_LEN} characters a model takes"
            )));
        }
        let input_schema = Value::Object((*tool.input_schema).clone());
        let approval = &connection.config.approval;
        let requires_approval = approval.all
            || approval
                .tools
                .iter()
                .any(|t| t.as_str() == tool.name.as_ref());
        let this = Self {
            id,
            remote: tool.name.to_string(),
            description: tool
                .description
                .map(|d| d.to_string())
                .or(tool.title)
                .unwrap_or_default(),
            input_schema,
            output_schema: tool.output_schema.map(|s| Value::Object((*s).clone())),
            resume_schema: answer_schema(),
            requires_approval,
            connection,
        };
        // Checked as an agent checks its tools: an object schema that compiles.
        kestrel_core::tool::ToolSet::new()
            .insert(Arc::new(this.clone()))
            .map_err(|e| invalid(e.to_string()))?;
        Ok(this)
    }

    /// The Kestrel name of server `server`'s tool `tool`: `<server>_<tool>`, with what a model
    /// provider does not take in a tool name (`.`, `/`, ...) written as `_`.
    pub fn id_for(server: &str, tool: &str) -> String {
        tool_id(server, tool)
    }

    /// The name of the server it belongs to.
    pub fn server(&self) -> &str {
        &self.connection.name
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }

    /// Suspends the call on `question`.
    fn ask(&self, ctx: &ToolContext, rounds: Rounds, question: ElicitRequestParams) -> ToolError {
        match rounds.ask(&self.connection.name, &self.remote, question) {
            Ok(suspended) => ctx.suspend(suspended),
            Err(reason) => ToolError::new(reason),
        }
    }

    /// Makes one `tools/call`, its progress going to the run's stream and its questions
    /// answered with `rounds`' answers, in order.
    async fn call(
        &self,
        connection: &Connection,
        ctx: &ToolContext,
        params: CallToolRequestParams,
        rounds: &mut Rounds,
        preset: &mut VecDeque<Value>,
    ) -> Called {
        let writer = ctx.writer();
        let progress = writer.is_observed().then(|| writer.clone());
        let given = rounds.answers.len();
        let replay = rounds
            .answers
            .iter()
            .chain(preset.iter())
            .cloned()
            .collect();
        let registered = connection.calls.register(progress, replay);
        let call = connection.call_tool(params, ctx.abort_signal(), |token| {
            registered.call.sent(token)
        });
        let called = tokio::select! {
            biased;
            question = registered.call.asked() => Called::Asked(question),
            outcome = call => match registered.call.take_question() {
                // It asked just before the answer came: the question decides.
                Some(question) => Called::Asked(question),
                None => Called::Answered(outcome),
            },
        };
        // The preset answers the server was given are replayed on the next call too.
        for _ in given..registered.call.replayed() {
            if let Some(answer) = preset.pop_front() {
                rounds.answers.push(answer);
            }
        }
        called
    }
}

/// `<server>_<tool>`, with what a model provider does not take in a tool name (`.`, `/`, ...)
/// written as `_`.
pub(crate) fn tool_id(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{server}_{tool}")
}

#[async_trait]
impl Tool for McpTool {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    fn span_type(&self) -> kestrel_core::trace::SpanType {
        kestrel_core::trace::SpanType::McpToolCall
    }

    fn resume_schema(&self) -> Option<&Value> {
        Some(&self.resume_schema)
    }

    fn requires_approval(&self, _input: &Value, _ctx: &ApprovalContext<'_>) -> bool {
        self.requires_approval
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let arguments = match input {
            Value::Object(arguments) => arguments,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::new(format!(
                    "the input of {} must be a JSON object, found {other}",
                    self.id
                )));
            }
        };
        let server = &self.connection.name;
        // A server whose headers come from the run's request context has a connection per
        // header set.
        let connection = self
            .connection
            .for_request(ctx.request_context())
            .map_err(|e| ToolError::new(e.to_string()))?;
        let mut preset: VecDeque<Value> = ctx
            .extension::<PresetAnswers>()
            .map(|preset| preset.0.iter().cloned().collect())
            .unwrap_or_default();
        let mut rounds = match (ctx.suspend_payload(), ctx.resume_data()) {
            (Some(payload), Some(answer)) => match Rounds::resumed(payload, answer) {
                Ok(rounds) => rounds.unwrap_or_default(),
                // The answer does not fit the question: it is asked again.
                Err(again) => return Err(ctx.suspend(*again)),
            },
            _ => Rounds::default(),
        };
        // Each pass is a `tools/call`; a server answering `input_required` with questions
        // Kestrel answers itself (roots) gets called again, a bounded number of times.
        for _ in 0..=MAX_QUESTIONS {
            if rounds.stateless() {
                rounds.answer_from(&mut preset);
            }
            if rounds.stateless()
                && let Some(question) = rounds.next_question()
            {
                return Err(self.ask(&ctx, rounds, question));
            }
            let mut params =
                CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments.clone());
            if rounds.stateless() {
                params = params.with_input_responses(std::mem::take(&mut rounds.responses));
                if let Some(state) = rounds.request_state.take() {
                    params = params.with_request_state(state);
                }
                rounds.requests.clear();
            }
            match self
                .call(&connection, &ctx, params, &mut rounds, &mut preset)
                .await
            {
                Called::Asked(question) => return Err(self.ask(&ctx, rounds, question)),
                Called::Answered(Err(error)) => return Err(ToolError::new(error.to_string())),
                Called::Answered(Ok(CallToolResponse::Complete(result))) => {
                    return crate::convert::tool_output(result).map_err(ToolError::new);
                }
                Called::Answered(Ok(CallToolResponse::InputRequired(result))) => {
                    rounds.input_required(result).map_err(|reason| {
                        ToolError::new(format!(
                            "MCP server {server:?}, tool {}: {reason}",
                            self.remote
                        ))
                    })?;
                }
                Called::Answered(Ok(_)) => {
                    return Err(ToolError::new(format!(
                        "MCP server {server:?} answered {} with a task to poll, which this client \
                         does not do",
                        self.remote
                    )));
                }
            }
        }
        Err(ToolError::new(format!(
            "MCP server {server:?} kept answering {} with `input_required` ({} rounds)",
            self.remote,
            MAX_QUESTIONS + 1
        )))
    }
}
