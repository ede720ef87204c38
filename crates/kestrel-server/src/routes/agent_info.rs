//! An agent as the agents routes describe it (`GET /agents`, `GET /agents/{agent_id}`), and
//! its tools as the tools routes do (`GET /agents/{agent_id}/tools`, `…/tools/{tool_id}`).

use std::collections::BTreeMap;

use kestrel_core::agent::Agent;
use kestrel_core::tool::Tool;
use kestrel_core::version::Editable;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::skills::SkillSummary;

/// The agents by id, as `GET /agents` answers: those written in code (through their
/// published version) and those defined in the storage alone.
#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct AgentList(pub(crate) BTreeMap<String, AgentInfo>);

/// An agent, as the agents routes describe it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentInfo {
    /// The agent's id.
    id: String,
    /// Its display name (its id unless set).
    name: String,
    /// What it does (what an agent that delegates to it reads).
    description: String,
    /// Its instructions; `null` when they are computed per request.
    instructions: Option<String>,
    /// Its model's provider (`openai`, `local`...); `null` when the model is chosen per
    /// request.
    provider: Option<String>,
    /// Its model's id at that provider (Mastra's `modelId`: `gpt-5-mini`, `smollm2`); `null`
    /// when the model is chosen per request.
    model_id: Option<String>,
    /// Its tools, by name.
    tools: BTreeMap<String, ToolInfo>,
    /// Its sub-agents, by id (Mastra's shape).
    agents: BTreeMap<String, SubAgentInfo>,
    /// The workflows it may run, by id.
    workflows: BTreeMap<String, WorkflowInfo>,
    /// What its runs take when a request does not say.
    default_options: DefaultOptions,
    /// Whether it has memory (threads, and what needs them).
    has_memory: bool,
    /// Processors its input passes through (Mastra's shape; Kestrel has none yet).
    input_processors: Vec<ProcessorInfo>,
    /// Processors its output passes through (Mastra's shape; Kestrel has none yet).
    output_processors: Vec<ProcessorInfo>,
    /// Tools of a workspace (Mastra's shape; Kestrel agents have no workspace).
    workspace_tools: Vec<String>,
    /// Tools of a browser (Mastra's shape; Kestrel agents have no browser).
    browser_tools: Vec<String>,
    /// Whether it drives a browser: never, for a Kestrel agent.
    has_browser: bool,
    /// Its skills (those a skills function gives an empty request context), sorted by name.
    skills: Vec<SkillSummary>,
    /// `code` for an agent written in code, `stored` for one defined in the storage.
    #[schemars(extend("enum" = ["code", "stored"]))]
    source: &'static str,
    /// Which of a code agent's fields its stored versions may change; `null` when none.
    editable: Option<EditableFields>,
    /// The stored version this description is of; `null` for a code agent seen as written.
    resolved_version_id: Option<String>,
}

/// A processor of an agent's input or output, as Mastra lists them.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProcessorInfo {
    /// The processor's id.
    id: String,
    /// Its display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

/// A sub-agent, as an agent's `agents` lists it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SubAgentInfo {
    /// The sub-agent's id.
    id: String,
    /// Its display name.
    name: String,
}

/// A workflow, as an agent's `workflows` lists it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorkflowInfo {
    /// The workflow's id.
    name: String,
    /// What it does.
    description: String,
}

/// An agent's default run options.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DefaultOptions {
    /// The most model steps a run takes (a request may lower it, not raise it).
    max_steps: u32,
}

/// Which fields of a code agent its stored versions may change.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EditableFields {
    /// The instructions.
    instructions: bool,
    /// The descriptions of its tools (not which tools it has).
    tool_descriptions: bool,
    /// Which of its tools and sub-agents it keeps.
    tools: bool,
    /// The model.
    model: bool,
    /// The default options.
    default_options: bool,
    /// The name and description.
    profile: bool,
    /// Whether it remembers.
    memory: bool,
}

impl From<Editable> for EditableFields {
    fn from(editable: Editable) -> Self {
        let Editable {
            instructions,
            tool_descriptions,
            tools,
            model,
            default_options,
            profile,
            memory,
        } = editable;
        Self {
            instructions,
            tool_descriptions,
            tools,
            model,
            default_options,
            profile,
            memory,
        }
    }
}

impl AgentInfo {
    /// `agent` described.
    pub(crate) async fn of(agent: &Agent) -> Self {
        let editable = agent.editable();
        // `provider/model`, or a model named without a provider (all of it is the id).
        let model = agent.model_name().map(|name| match name.split_once('/') {
            Some((provider, id)) => (provider.to_owned(), id.to_owned()),
            None => (String::new(), name),
        });
        Self {
            id: agent.id().to_owned(),
            name: agent.name().to_owned(),
            description: agent.description().to_owned(),
            instructions: agent.static_instructions().map(str::to_owned),
            provider: model.as_ref().map(|(provider, _)| provider.clone()),
            model_id: model.map(|(_, id)| id),
            tools: tools_of(agent),
            agents: agent
                .sub_agent_ids()
                .into_iter()
                .filter_map(|id| {
                    let sub = agent.sub_agent(id)?;
                    let info = SubAgentInfo {
                        id: id.to_owned(),
                        name: sub.name().to_owned(),
                    };
                    Some((id.to_owned(), info))
                })
                .collect(),
            workflows: agent
                .workflows()
                .iter()
                .map(|w| {
                    let info = WorkflowInfo {
                        name: w.id().to_owned(),
                        description: w.description().to_owned(),
                    };
                    (w.id().to_owned(), info)
                })
                .collect(),
            default_options: DefaultOptions {
                max_steps: agent.max_steps(),
            },
            has_memory: agent.memory().is_some(),
            input_processors: Vec::new(),
            output_processors: Vec::new(),
            workspace_tools: Vec::new(),
            browser_tools: Vec::new(),
            has_browser: false,
            skills: crate::skills::skill_summaries(agent).await,
            source: if agent.is_stored() { "stored" } else { "code" },
            editable: (!editable.is_none()).then(|| editable.into()),
            resolved_version_id: agent.version_id().map(str::to_owned),
        }
    }
}

/// An agent's tools by name, as `GET /agents/{agent_id}/tools` answers.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct ToolList(pub(crate) BTreeMap<String, ToolInfo>);

/// A tool, as the agent and tools routes describe it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolInfo {
    /// The tool's id.
    id: String,
    /// What it does (the model reads it).
    description: String,
    /// The JSON schema of its input, as JSON text (Mastra's shape: clients parse it).
    input_schema: String,
    /// The JSON schema of its output, as JSON text; `null` when it states none.
    output_schema: Option<String>,
    /// The JSON schema of what it passes when it suspends, as JSON text; `null` when it
    /// states none.
    suspend_schema: Option<String>,
    /// The JSON schema of the data it is resumed with, as JSON text; `null` when it states
    /// none.
    resume_schema: Option<String>,
    /// Whether the caller runs it (a client tool has no `execute` on the server).
    client_tool: bool,
}

impl ToolInfo {
    /// `tool` described.
    pub(crate) fn of(tool: &dyn Tool) -> Self {
        Self {
            id: tool.id().to_owned(),
            description: tool.description().to_owned(),
            input_schema: tool.input_schema().to_string(),
            output_schema: tool.output_schema().map(Value::to_string),
            suspend_schema: tool.suspend_schema().map(Value::to_string),
            resume_schema: tool.resume_schema().map(Value::to_string),
            client_tool: tool.is_client_tool(),
        }
    }
}

/// The agent's tools by name.
pub(crate) fn tools_of(agent: &Agent) -> BTreeMap<String, ToolInfo> {
    agent
        .tools()
        .names()
        .into_iter()
        .filter_map(|name| {
            let tool = agent.tools().get(&name)?;
            Some((name, ToolInfo::of(tool.as_ref())))
        })
        .collect()
}
