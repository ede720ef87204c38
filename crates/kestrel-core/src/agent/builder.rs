//! The agent builder.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;

use crate::context::RequestContext;
use crate::definition::tools::ToolDefinitions;
use crate::definition::{
    AgentBuildError, AgentDefinition, BackgroundTasks, BoxError, DEFAULT_MAX_STEPS, Instructions,
    ModelSource, RunOptions,
};
use crate::delegation::DelegationTool;
use crate::memory::{AgentMemory, IntoAgentMemory};
use crate::model::{ModelRegistry, ModelSpec};
use crate::runtime::{Agent, Runtime};
use crate::skill::tools::skill_tools;
use crate::skill::{DynSkills, Skill, SkillSet, SkillsSource};
use crate::store::SharedRunStore;
use crate::tool::{SharedTool, Tool, ToolSet};
use crate::workflow::{Workflow, WorkflowTool};

/// Builds an [`Agent`]. Only the id and a model are required.
///
/// ```
/// use std::sync::Arc;
/// use kestrel_core::agent::Agent;
/// use kestrel_core::model::{ScriptedModel, ScriptedResponse};
///
/// let model = Arc::new(ScriptedModel::new().respond(ScriptedResponse::text("hi")));
/// let agent = Agent::builder("greeter")
///     .instructions("You greet people.")
///     .model(model)
///     .build()
///     .unwrap();
/// assert_eq!(agent.id(), "greeter");
/// ```
pub struct AgentBuilder {
    id: String,
    name: Option<String>,
    description: String,
    instructions: Instructions,
    model: Option<ModelChoice>,
    tools: Vec<SharedTool>,
    max_steps: u32,
    defaults: RunOptions,
    registry: Option<ModelRegistry>,
    memory: Option<Arc<dyn AgentMemory>>,
    scorers: Vec<crate::eval::LiveScorer>,
    input_processors: Vec<crate::processor::SharedProcessor>,
    output_processors: Vec<crate::processor::SharedProcessor>,
    max_processor_retries: u32,
    run_store: Option<SharedRunStore>,
    storage: Option<crate::store::Stores>,
    sub_agents: Vec<Agent>,
    /// The workflows of `workflow(..)`, in the order given.
    workflows: Vec<Workflow>,
    /// The names of the tools that stand for a sub-agent or a workflow.
    primitive_tools: Vec<String>,
    background: BackgroundTasks,
    skills: SkillChoice,
    editable: crate::version::Editable,
    /// Defined in the storage alone ([`crate::kestrel::Kestrel::find_agent`]).
    stored: bool,
}

/// The skills given to the builder.
enum SkillChoice {
    Fixed(Vec<Skill>),
    Dynamic(Arc<DynSkills>),
}

enum ModelChoice {
    Spec(ModelSpec),
    Dynamic(ModelSource),
}

impl AgentBuilder {
    /// A builder for an agent with this id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: None,
            description: String::new(),
            instructions: Instructions::Static("".into()),
            model: None,
            tools: Vec::new(),
            max_steps: DEFAULT_MAX_STEPS,
            defaults: RunOptions::default(),
            registry: None,
            memory: None,
            scorers: Vec::new(),
            input_processors: Vec::new(),
            output_processors: Vec::new(),
            max_processor_retries: 0,
            run_store: None,
            storage: None,
            sub_agents: Vec::new(),
            workflows: Vec::new(),
            primitive_tools: Vec::new(),
            background: BackgroundTasks::new(),
            skills: SkillChoice::Fixed(Vec::new()),
            editable: crate::version::Editable::default(),
            stored: false,
        }
    }

    /// Marks the agent as defined in the storage alone: its versions name every tool and
    /// sub-agent it has.
    pub(crate) fn stored_definition(mut self) -> Self {
        self.stored = true;
        self.editable = crate::version::Editable::all();
        self
    }

    /// Gives the agent a workflow: the model may call it as the tool `workflow-<id>`, and
    /// the agent's network ([`Agent::network`]) may route a task to it. Two workflows with
    /// one id fail [`AgentBuilder::build`] (their tools share a name).
    pub fn workflow(mut self, workflow: Workflow) -> Self {
        let tool: SharedTool = Arc::new(WorkflowTool::new(workflow.clone()));
        self.primitive_tools.push(tool.id().to_owned());
        self.tools.push(tool);
        self.workflows.push(workflow);
        self
    }

    /// Gives the agent several workflows ([`AgentBuilder::workflow`] for each).
    pub fn workflows(self, workflows: impl IntoIterator<Item = Workflow>) -> Self {
        workflows.into_iter().fold(self, AgentBuilder::workflow)
    }

    /// Where runs that stop for a person (approvals, suspended tools, client tools) are
    /// saved, over the stores the agent runs with (its instance's, or
    /// [`AgentBuilder::storage`]): an override for this agent alone. Usually not needed.
    pub fn run_store(mut self, store: SharedRunStore) -> Self {
        self.run_store = Some(store);
        self
    }

    /// The stores of the agent when it runs on its own, not registered in a
    /// [`crate::kestrel::Kestrel`] instance: where its stopped runs, network runs, queued
    /// messages and versions are kept (default: [`crate::store::Stores::in_memory`]). Give it
    /// a SQLite or PostgreSQL storage and they survive restarts. An instance gives its agents
    /// its own storage instead ([`crate::kestrel::KestrelBuilder::storage`]).
    pub fn storage(mut self, storage: impl crate::store::IntoStores) -> Self {
        self.storage = Some(storage.into_stores());
        self
    }

    /// A display name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// What the agent does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// A fixed system prompt.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Instructions::Static(instructions.into().into());
        self
    }

    /// A system prompt computed from the request context at the start of each run.
    pub fn instructions_fn<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, BoxError>> + Send + 'static,
    {
        self.instructions = Instructions::Dynamic(Arc::new(move |ctx| f(ctx).boxed()));
        self
    }

    /// The model: a `provider/model` string or a model object.
    pub fn model(mut self, model: impl Into<ModelSpec>) -> Self {
        self.model = Some(ModelChoice::Spec(model.into()));
        self
    }

    /// A model chosen from the request context at the start of each run.
    pub fn model_fn<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ModelSpec, BoxError>> + Send + 'static,
    {
        self.model = Some(ModelChoice::Dynamic(ModelSource::Dynamic(Arc::new(
            move |ctx| f(ctx).boxed(),
        ))));
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Runs these delegation tools in the background: the call returns at once and the
    /// sub-agent runs on (see [`crate::agent::background`]).
    pub fn background_tasks(mut self, tasks: BackgroundTasks) -> Self {
        self.background = tasks;
        self
    }

    /// Adds sub-agents: each becomes a delegation tool `agent-<id>` the model may call (see
    /// [`crate::agent::delegation`]). The sub-agents are shared, never changed.
    pub fn agents(mut self, agents: impl IntoIterator<Item = Agent>) -> Self {
        for agent in agents {
            let tool = DelegationTool::new(agent.clone());
            self.primitive_tools.push(tool.id().to_owned());
            self.tools.push(Arc::new(tool));
            self.sub_agents.push(agent);
        }
        self
    }

    /// Adds skills (see [`crate::skill`]): the model sees a catalog of their names and
    /// descriptions and gets the tools `skill`, `skill_read` and `skill_search`. Two skills with
    /// one name fail [`AgentBuilder::build`]. Replaces a [`AgentBuilder::skills_fn`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kestrel_core::agent::Agent;
    /// use kestrel_core::model::ScriptedModel;
    /// use kestrel_core::skill::create_skill;
    ///
    /// let agent = Agent::builder("writer")
    ///     .model(Arc::new(ScriptedModel::new()))
    ///     .skills([create_skill("haiku", "Writes haiku.", "Five, seven, five syllables.").build()?])
    ///     .build()?;
    /// assert!(agent.tools().get("skill_read").is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn skills(mut self, skills: impl IntoIterator<Item = Skill>) -> Self {
        match &mut self.skills {
            SkillChoice::Fixed(list) => list.extend(skills),
            SkillChoice::Dynamic(_) => {
                self.skills = SkillChoice::Fixed(skills.into_iter().collect())
            }
        }
        self
    }

    /// Skills chosen from the request context for each run (and each skill tool call): per
    /// user, per plan, per workspace. Two skills with one name fail the run. Replaces
    /// [`AgentBuilder::skills`].
    pub fn skills_fn<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<Skill>, BoxError>> + Send + 'static,
    {
        self.skills = SkillChoice::Dynamic(Arc::new(move |ctx| f(ctx).boxed()));
        self
    }

    /// Which fields of this agent its stored versions may change (see [`crate::version`]):
    /// none unless opted in, e.g. `Editable::instructions().and_tool_descriptions()`. A run
    /// that would use a version setting other fields fails with a typed error.
    pub fn editable(mut self, editable: crate::version::Editable) -> Self {
        self.editable = editable;
        self
    }

    /// Adds a shared tool.
    pub fn shared_tool(mut self, tool: SharedTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds several shared tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The default bound on steps (5 unless set).
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Defaults for every call; per-call options override them field by field.
    pub fn default_options(mut self, options: RunOptions) -> Self {
        self.defaults = options;
        self
    }

    /// Gives the agent a memory: runs with a thread and resource load its context and store
    /// their messages. The memory's tools are added to the agent's.
    pub fn memory(mut self, memory: impl IntoAgentMemory) -> Self {
        self.memory = Some(memory.into_agent_memory());
        self
    }

    /// Scores the agent's finished runs with `scorer`, those `sampling` chooses, after each
    /// run and off its path; the scores go to the instance's score store (see
    /// [`crate::eval::live`]).
    pub fn scorer(
        mut self,
        scorer: impl crate::eval::IntoScorer,
        sampling: crate::eval::ScoreSampling,
    ) -> Self {
        self.scorers
            .push(crate::eval::LiveScorer::new(scorer, sampling));
        self
    }

    /// Adds `processor` to the input pipeline: its input and input step hooks run, in the
    /// order processors were added, before the model sees the run's messages (see
    /// [`crate::processor`]).
    pub fn input_processor(mut self, processor: impl crate::processor::IntoProcessor) -> Self {
        self.input_processors.push(processor.into_processor());
        self
    }

    /// Adds `processor` to the output pipeline: its output stream, output step, output
    /// result, tool result and API error hooks run, in the order processors were added. While
    /// the agent has output processors, a step's streamed parts are held until they accepted
    /// them (see [`crate::processor`]).
    pub fn output_processor(mut self, processor: impl crate::processor::IntoProcessor) -> Self {
        self.output_processors.push(processor.into_processor());
        self
    }

    /// How many times in one run the output processors may send an answer back for another
    /// try ([`crate::processor::ProcessorError::retry`]); past it, a retry is a tripwire.
    /// Default 0: every retry is a tripwire (Mastra's `maxProcessorRetries`).
    pub fn max_processor_retries(mut self, retries: u32) -> Self {
        self.max_processor_retries = retries;
        self
    }

    /// Resolves model strings through this registry instead of [`ModelRegistry::from_env`].
    pub fn registry(mut self, registry: ModelRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Checks everything and builds the agent.
    ///
    /// Without a model, [`crate::model::default_model`] chooses one: `KESTREL_MODEL`, a hosted
    /// model if an API key is set, else the embedded `local/smollm2` (feature `local`).
    pub fn build(self) -> Result<Agent, AgentBuildError> {
        if self.id.trim().is_empty() {
            return Err(AgentBuildError::EmptyId);
        }
        let agent = self.id.clone();
        if self.max_steps == 0 {
            return Err(AgentBuildError::ZeroMaxSteps { agent });
        }
        let registry = self
            .registry
            .clone()
            .unwrap_or_else(ModelRegistry::from_env);
        let choice = match self.model {
            Some(choice) => choice,
            None => match crate::model::default_model(crate::model::process_env) {
                Some(spec) => ModelChoice::Spec(ModelSpec::Id(spec)),
                None => return Err(AgentBuildError::MissingModel { agent }),
            },
        };
        let model = match choice {
            ModelChoice::Spec(spec) => {
                ModelSource::Fixed(spec.resolve(&registry).map_err(|source| {
                    AgentBuildError::Model {
                        agent: agent.clone(),
                        source,
                    }
                })?)
            }
            ModelChoice::Dynamic(source) => source,
        };
        let skills = match self.skills {
            SkillChoice::Fixed(list) if list.is_empty() => None,
            SkillChoice::Fixed(list) => match SkillSet::unique(list) {
                Ok(set) => Some(SkillsSource::Fixed(Arc::new(set))),
                Err(duplicate) => {
                    return Err(AgentBuildError::DuplicateSkill {
                        agent,
                        name: duplicate.name,
                        first: duplicate.first,
                        second: duplicate.second,
                    });
                }
            },
            SkillChoice::Dynamic(f) => Some(SkillsSource::Dynamic(f)),
        };
        let own_tools: Vec<String> = self
            .tools
            .iter()
            .map(|tool| tool.id().to_owned())
            .filter(|id| !self.primitive_tools.contains(id))
            .collect();
        let mut tools = ToolSet::new();
        let skill_tools = skills.as_ref().map(skill_tools).unwrap_or_default();
        let memory_tools: Vec<_> = self.memory.iter().flat_map(|m| m.tools()).collect();
        let memory_tool_names: Vec<String> =
            memory_tools.iter().map(|t| t.id().to_owned()).collect();
        for tool in self
            .tools
            .into_iter()
            .chain(skill_tools)
            .chain(memory_tools)
        {
            tools.insert(tool).map_err(|source| AgentBuildError::Tool {
                agent: agent.clone(),
                source,
            })?;
        }
        let sub_agents: std::collections::HashMap<String, Arc<AgentDefinition>> = self
            .sub_agents
            .into_iter()
            .map(|a| (a.id().to_owned(), a.inner))
            .collect();
        let tool_definitions = ToolDefinitions::new(&tools, &sub_agents, &memory_tool_names);
        let inner = AgentDefinition {
            name: self.name.unwrap_or_else(|| self.id.clone()),
            id: self.id,
            description: self.description,
            instructions: self.instructions,
            model,
            tools,
            max_steps: self.max_steps,
            defaults: self.defaults,
            own_registry: self.registry,
            memory: self.memory,
            scorers: self.scorers,
            processors: crate::definition::Processors {
                input: crate::processor::Pipeline::new(self.input_processors),
                output: crate::processor::Pipeline::new(self.output_processors),
                max_retries: self.max_processor_retries,
            },
            own_run_store: self.run_store,
            sub_agents,
            workflows: self
                .workflows
                .into_iter()
                .map(|workflow| (workflow.id().to_owned(), workflow))
                .collect(),
            own_tools,
            background: self.background,
            tool_definitions,
            skills,
            editable: self.editable,
            versioning: crate::definition::Versioning {
                stored: self.stored,
                ..Default::default()
            },
        };
        let unknown = inner.background.unknown(&inner);
        if !unknown.is_empty() {
            let mut known: Vec<String> = inner.sub_agents.keys().cloned().collect();
            known.sort();
            return Err(AgentBuildError::UnknownBackgroundTool {
                agent: inner.id,
                unknown,
                known,
            });
        }
        // Stores given to the agent itself are its memory's too, when it has none of its own.
        if let Some(stores) = &self.storage {
            inner
                .attach_memories(stores)
                .map_err(|(agent, error)| AgentBuildError::Memory {
                    agent,
                    message: error.to_string(),
                })?;
        }
        Ok(Agent {
            inner: Arc::new(inner),
            runtime: Arc::new(Runtime::standalone(
                registry,
                self.storage.unwrap_or_else(crate::store::Stores::in_memory),
            )),
        })
    }
}
