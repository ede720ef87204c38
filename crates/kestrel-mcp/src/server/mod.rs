//! The server side: [`McpServer`] serves chosen Kestrel tools, agents and workflows to any MCP
//! client.
//!
//! Tools keep their names; an agent is the tool `ask_<agent>` (input `{message}`, the answer
//! its run's text); a workflow is `run_<workflow>` (its input schema, the answer its result).
//! Every call's input is checked against the tool's schema before anything runs. A tool that
//! needs a person's approval is never run unasked: the client's user is asked (see [`ask`]),
//! and where the client cannot be asked the call is refused, saying why. A tool that
//! suspends, and an agent's run that stops on an approval or a suspended tool, ask the same
//! way.
//!
//! Serve it over stdio ([`McpServer::serve_stdio`], what `kestrel mcp serve` runs) or
//! Streamable HTTP ([`McpServer::http_service`], a tower service to mount in axum). Both
//! protocol eras are answered: 2026-07-28 (`server/discover`, stateless) and the
//! `initialize` era (sessions), on the same endpoint.

pub mod ask;
mod primitives;

use std::sync::Arc;

use kestrel_core::agent::Agent;
use kestrel_core::tool::{
    ApprovalContext, SharedTool, Tool, ToolCallError, ToolContext, ToolDefinitionError, ToolSet,
};
use kestrel_core::workflow::Workflow;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitResult, Implementation,
    InputRequest, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::Value;

use crate::convert::{tool_error, tool_result};
use crate::error::McpError;
use ask::{Answered, MAX_ROUNDS, Pending, PendingCalls, Waits};
use primitives::{AgentRunWaits, AskAgent, RunWorkflow};

/// The key of the one question a stateless `input_required` answer carries.
const QUESTION_KEY: &str = "kestrel";

/// How far a call got.
enum Advanced {
    /// It ended.
    Done(Result<Value, ToolCallFailure>),
    /// It waits for the client's user.
    Waits(Box<Pending>),
}

/// Why an [`McpServer`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpServerBuildError {
    /// The server id is not one a route can carry.
    #[error("MCP server id {id:?} is not valid: use 1 to 64 ASCII letters, digits, '-' and '_'")]
    InvalidId {
        /// The id given.
        id: String,
    },
    /// An agent without a description: an MCP client decides from it when to ask the agent.
    #[error(
        "agent {agent:?} has no description; an MCP client reads it to decide when to ask the \
         agent (AgentBuilder::description)"
    )]
    AgentWithoutDescription {
        /// The agent.
        agent: String,
    },
    /// A tool (or an agent's or workflow's tool) that cannot be served.
    #[error(transparent)]
    Tool(#[from] ToolDefinitionError),
}

/// Builder of an [`McpServer`]; see [`McpServer::builder`].
#[derive(Debug)]
pub struct McpServerBuilder {
    id: String,
    name: Option<String>,
    version: String,
    instructions: Option<String>,
    tools: Vec<SharedTool>,
    agents: Vec<Agent>,
    workflows: Vec<Workflow>,
}

impl McpServerBuilder {
    /// The name clients see (default: the id).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The version clients see (default: Kestrel's).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// What the server is for, sent to clients as its instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Serves `tool` under its own name.
    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.shared_tool(Arc::new(tool))
    }

    /// Serves a shared tool under its own name.
    pub fn shared_tool(mut self, tool: SharedTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Serves several shared tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Serves `agent` as the tool `ask_<agent id>`. The agent needs a description.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }

    /// Serves `workflow` as the tool `run_<workflow id>`.
    pub fn workflow(mut self, workflow: Workflow) -> Self {
        self.workflows.push(workflow);
        self
    }

    /// Checks every tool's name and schema (two tools may not share a name).
    pub fn build(self) -> Result<McpServer, McpServerBuildError> {
        if !valid_id(&self.id) {
            return Err(McpServerBuildError::InvalidId { id: self.id });
        }
        let mut tools = ToolSet::new();
        for tool in self.tools {
            tools.insert(tool)?;
        }
        for agent in self.agents {
            if agent.description().trim().is_empty() {
                return Err(McpServerBuildError::AgentWithoutDescription {
                    agent: agent.id().to_owned(),
                });
            }
            tools.insert(Arc::new(AskAgent::new(agent)))?;
        }
        for workflow in self.workflows {
            tools.insert(Arc::new(RunWorkflow::new(workflow)))?;
        }
        let listed = tools
            .names()
            .iter()
            .filter_map(|name| tools.get(name))
            .map(|tool| listed_tool(tool.as_ref()))
            .collect();
        Ok(McpServer {
            inner: Arc::new(Inner {
                name: self.name.unwrap_or_else(|| self.id.clone()),
                id: self.id,
                version: self.version,
                instructions: self.instructions,
                tools,
                listed,
                pending: PendingCalls::default(),
            }),
        })
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A tool as `tools/list` gives it.
fn listed_tool(tool: &dyn Tool) -> rmcp::model::Tool {
    let schema = match tool.input_schema() {
        Value::Object(schema) => schema.clone(),
        // ToolSet admitted it as an object schema without a type: say it.
        _ => serde_json::Map::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let mut listed = rmcp::model::Tool::new(
        tool.id().to_owned(),
        tool.description().to_owned(),
        Arc::new(schema),
    );
    if let Some(Value::Object(output)) = tool.output_schema() {
        // MCP wants an object schema for structured output; others are not declared.
        if output.get("type").and_then(Value::as_str) == Some("object") {
            listed = listed.with_raw_output_schema(Arc::new(output.clone()));
        }
    }
    listed
}

/// Kestrel's tools, agents and workflows as an MCP server. Cheap to clone. See the
/// [module docs](self).
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    name: String,
    version: String,
    instructions: Option<String>,
    tools: ToolSet,
    listed: Vec<rmcp::model::Tool>,
    /// Stateless calls waiting for their answers.
    pending: PendingCalls,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("id", &self.inner.id)
            .field("tools", &self.inner.tools.names())
            .finish()
    }
}

impl McpServer {
    /// A builder of server `id` (the id routes carry: `/api/mcp/{id}/mcp`).
    pub fn builder(id: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder {
            id: id.into(),
            name: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            tools: Vec::new(),
            agents: Vec::new(),
            workflows: Vec::new(),
        }
    }

    /// The server's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The name clients see.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The version clients see.
    pub fn version(&self) -> &str {
        &self.inner.version
    }

    /// What it is for, as given to [`McpServerBuilder::instructions`].
    pub fn instructions(&self) -> Option<&str> {
        self.inner.instructions.as_deref()
    }

    /// The tools it serves, as `tools/list` gives them.
    pub fn tools(&self) -> &[rmcp::model::Tool] {
        &self.inner.listed
    }

    /// Runs tool `name` on `arguments` as a `tools/call` would, outside any MCP session (the
    /// REST route `POST /api/mcp/{id}/tools/{tool}/execute` does): the input checked; a tool
    /// that needs approval, or a call that stops for a person, refused (nobody can be asked).
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, ToolCallFailure> {
        let abort = kestrel_core::abort::AbortSignal::new();
        match self.advance(name, arguments, abort, None, 0, None).await {
            Advanced::Done(outcome) => outcome,
            Advanced::Waits(pending) => Err(unanswerable(&pending)),
        }
    }

    /// Runs tool `name` (again, when `resumed` says how the person answered) until it ends or
    /// waits for a person.
    async fn advance(
        &self,
        name: &str,
        arguments: Value,
        abort: kestrel_core::abort::AbortSignal,
        resumed: Option<Answered>,
        rounds: usize,
        outputs: Option<&OutputForward>,
    ) -> Advanced {
        let tool = match self.inner.tools.checked(name, &arguments) {
            Ok(tool) => tool,
            Err(error) => return Advanced::Done(Err(ToolCallFailure::Input(error))),
        };
        // Neither runs here: a client tool runs on the caller of an agent's run, and a tool
        // that reads the run's conversation has none outside one.
        if tool.is_client_tool() || tool.needs_conversation() {
            return Advanced::Done(Err(ToolCallFailure::NotExecutable {
                tool: name.to_owned(),
            }));
        }
        let mut ctx = ToolContext::standalone(name).with_abort_signal(abort);
        if let Some(forward) = outputs {
            let forward = Arc::clone(forward);
            ctx = ctx.with_output_listener(move |output| forward(output));
        }
        match resumed {
            None => {
                let context = kestrel_core::context::RequestContext::new();
                let approval = ApprovalContext {
                    tool_name: name,
                    request_context: &context,
                    thread_id: None,
                    resource_id: None,
                };
                if tool.requires_approval(&arguments, &approval) {
                    let pending = Pending::new(tool.as_ref(), arguments, Waits::Approval, rounds);
                    return Advanced::Waits(Box::new(pending));
                }
            }
            Some(Answered::Approved) => {}
            Some(Answered::Resume { data, payload }) => {
                ctx = ctx.with_resume_data(data).with_suspend_payload(payload);
            }
        }
        match tool.execute(arguments.clone(), ctx).await {
            Ok(output) => Advanced::Done(Ok(output)),
            Err(error) => match error.into_suspension() {
                Ok(payload) => Advanced::Waits(Box::new(Pending::new(
                    tool.as_ref(),
                    arguments,
                    Waits::Suspended(payload),
                    rounds,
                ))),
                Err(error) => Advanced::Done(Err(ToolCallFailure::Failed {
                    message: error.message().to_owned(),
                })),
            },
        }
    }

    /// A `tools/call`: run, asking the client's user when the call needs a person and the
    /// client can be asked (see [`ask`]).
    async fn call_asking(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        abort: kestrel_core::abort::AbortSignal,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let name = request.name.to_string();
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let can_ask = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        let stateless = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        // What the tool writes with a numeric `progress` goes to the client as progress, when
        // the request asked for it.
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| forward_progress(context.peer.clone(), token));
        let mut resumed = None;
        let mut rounds = 0;
        if let Some(state) = &request.request_state {
            let pending = self.inner.pending.take(state).ok_or_else(|| {
                rmcp::ErrorData::invalid_params(
                    "requestState names no waiting call (it was answered, or expired): call                      the tool again",
                    None,
                )
            })?;
            if pending.tool != name || pending.arguments != arguments {
                return Err(rmcp::ErrorData::invalid_params(
                    "requestState belongs to another call (its tool or arguments differ)",
                    None,
                ));
            }
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(QUESTION_KEY))
                .ok_or_else(|| {
                    rmcp::ErrorData::invalid_params(
                        format!("inputResponses has no answer to question {QUESTION_KEY:?}"),
                        None,
                    )
                })?;
            let answer: ElicitResult = serde_json::from_value(answer.clone()).map_err(|e| {
                rmcp::ErrorData::invalid_params(format!("the answer does not parse: {e}"), None)
            })?;
            match pending.answered(answer) {
                Ok(answered) => resumed = Some(answered),
                Err(text) => return Ok(CallToolResponse::Complete(tool_error(text))),
            }
            rounds = pending.rounds + 1;
        }
        let outcome = loop {
            let advanced = self
                .advance(
                    &name,
                    arguments.clone(),
                    abort.clone(),
                    resumed.take(),
                    rounds,
                    progress.as_ref().map(|(forward, _)| forward),
                )
                .await;
            let pending = match advanced {
                Advanced::Done(outcome) => break outcome,
                Advanced::Waits(pending) => pending,
            };
            if !can_ask {
                break Err(unanswerable(&pending));
            }
            if pending.rounds >= MAX_ROUNDS {
                break Err(ToolCallFailure::Failed {
                    message: format!("tool {name:?} asked more than {MAX_ROUNDS} questions"),
                });
            }
            if stateless {
                let question = InputRequest::Elicitation(ElicitRequest::new(pending.question()));
                let state = self.inner.pending.put(*pending);
                let requests =
                    std::collections::BTreeMap::from([(QUESTION_KEY.to_owned(), question)]);
                return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                )));
            }
            let asked = context
                .peer
                .create_elicitation_with_timeout(pending.question(), Some(ask::PENDING_TTL));
            let answer = tokio::select! {
                answer = asked => answer,
                () = abort.aborted() => break Err(ToolCallFailure::Failed {
                    message: "the call was cancelled while it waited for an answer".to_owned(),
                }),
            };
            match answer {
                Ok(answer) => match pending.answered(answer) {
                    Ok(answered) => resumed = Some(answered),
                    Err(text) => break Err(ToolCallFailure::Failed { message: text }),
                },
                Err(error) => {
                    break Err(ToolCallFailure::Failed {
                        message: format!(
                            "the client did not answer tool {name:?}'s question: {error}"
                        ),
                    });
                }
            }
            rounds = pending.rounds + 1;
        };
        if let Some((forward, forwarding)) = progress {
            // The notifications go out before the result does.
            drop(forward);
            // Bounded: a tool that kept its context alive past its end keeps the forward too.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), forwarding).await;
        }
        Ok(CallToolResponse::Complete(match outcome {
            Ok(output) => tool_result(output),
            Err(ToolCallFailure::Input(ToolCallError::UnknownTool { name, .. })) => {
                return Err(rmcp::ErrorData::invalid_params(
                    format!("unknown tool {name:?}"),
                    None,
                ));
            }
            Err(failure) => tool_error(failure.to_string()),
        }))
    }

    /// Serves this server on this process's stdin and stdout until the client goes.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        use rmcp::ServiceExt;
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpError::Serve {
                reason: e.to_string(),
            })?;
        running.waiting().await.map_err(|e| McpError::Serve {
            reason: e.to_string(),
        })?;
        Ok(())
    }

    /// This server as a Streamable HTTP endpoint: a tower service answering both protocol
    /// eras, to mount with `axum::Router::nest_service`. `config` sets the Host and Origin
    /// checks, the body limit and the cancellation token (its default accepts loopback hosts
    /// only).
    pub fn http_service(
        &self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpServer, LocalSessionManager> {
        let server = self.clone();
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config)
    }
}

/// Why a call of a served tool gave no output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallFailure {
    /// No such tool, or an input its schema refuses.
    #[error(transparent)]
    Input(ToolCallError),
    /// The tool needs a person's approval, and nobody can be asked through this call.
    #[error(
        "tool {tool:?} needs a person's approval before it runs, and this call cannot ask for \
         it (the client declared no elicitation); it was not run"
    )]
    NeedsApproval {
        /// The tool.
        tool: String,
    },
    /// The tool suspended itself to wait for a person, who cannot be asked through this call.
    #[error(
        "tool {tool:?} suspended to wait for a person's input, and this call cannot ask for it \
         (the client declared no elicitation)"
    )]
    Suspended {
        /// The tool.
        tool: String,
    },
    /// An agent's run (`ask_<agent>`) stopped on a call that waits for a person, who cannot be
    /// asked through this call: the run stays stored, to be decided elsewhere.
    #[error(
        "agent {agent:?} stopped for a person (its run {run_id} waits on {tool}); decide it \
         where the instance's runs are decided (the Studio or the HTTP API), or call it from an \
         MCP client that can be asked (elicitation)"
    )]
    AgentRunWaits {
        /// The agent.
        agent: String,
        /// Its run.
        run_id: String,
        /// The tool its call waits on.
        tool: String,
    },
    /// The tool runs only inside an agent's run (a client tool, or one that reads the run's
    /// conversation).
    #[error("tool {tool:?} runs only inside an agent's run")]
    NotExecutable {
        /// The tool.
        tool: String,
    },
    /// The tool failed.
    #[error("{message}")]
    Failed {
        /// The tool's message.
        message: String,
    },
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.inner.name.clone(),
                self.inner.version.clone(),
            ));
        if let Some(instructions) = &self.inner.instructions {
            config = config.with_instructions(instructions.clone());
        }
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.listed.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.inner.listed.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let abort = kestrel_core::abort::AbortSignal::new();
        // A client's cancel (or a closed session) aborts the call.
        let cancelled = context.ct.clone();
        let signal = abort.clone();
        let watcher = tokio::spawn(async move {
            cancelled.cancelled().await;
            signal.abort();
        });
        let answer = self.call_asking(request, &context, abort).await;
        watcher.abort();
        answer
    }
}

/// Where a served tool's outputs go.
type OutputForward = Arc<dyn Fn(&Value) + Send + Sync>;

/// How many progress notifications may wait to be sent; past it, new ones are dropped
/// (progress only informs).
const PROGRESS_BACKLOG: usize = 64;

/// A forward of a tool's outputs with a numeric `progress` (and `total`, `message`) as
/// progress notifications for `token`, and the task sending them, which ends once the forward
/// is dropped.
fn forward_progress(
    peer: rmcp::service::Peer<RoleServer>,
    token: ProgressToken,
) -> (OutputForward, tokio::task::JoinHandle<()>) {
    let (sender, mut outputs) = tokio::sync::mpsc::channel::<Value>(PROGRESS_BACKLOG);
    let forwarding = tokio::spawn(async move {
        while let Some(output) = outputs.recv().await {
            let Some(progress) = output.get("progress").and_then(Value::as_f64) else {
                continue;
            };
            let mut param = ProgressNotificationParam::new(token.clone(), progress);
            if let Some(total) = output.get("total").and_then(Value::as_f64) {
                param = param.with_total(total);
            }
            if let Some(message) = output.get("message").and_then(Value::as_str) {
                param = param.with_message(message);
            }
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    });
    let forward: OutputForward = Arc::new(move |output: &Value| {
        let _ = sender.try_send(output.clone());
    });
    (forward, forwarding)
}

/// Why a call that waits for a person ends where nobody can be asked.
fn unanswerable(pending: &Pending) -> ToolCallFailure {
    match &pending.waits {
        Waits::Approval => ToolCallFailure::NeedsApproval {
            tool: pending.tool.clone(),
        },
        Waits::Suspended(payload) => {
            match serde_json::from_value::<AgentRunWaits>(payload.clone()) {
                Ok(waits) if waits.kind == AgentRunWaits::TYPE => ToolCallFailure::AgentRunWaits {
                    agent: waits.agent,
                    run_id: waits.run_id,
                    tool: waits.tool_name,
                },
                _ => ToolCallFailure::Suspended {
                    tool: pending.tool.clone(),
                },
            }
        }
    }
}
