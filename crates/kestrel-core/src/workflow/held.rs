//! Workflows an agent holds (Mastra's `new Agent({ workflows })`): each is a tool of the agent
//! ([`super::WorkflowTool`], `workflow-<id>`) and a primitive its network can route to.

use std::sync::Arc;

use super::{Workflow, WorkflowTool};
use crate::agent::{Agent, AgentBuilder};

impl AgentBuilder {
    /// Gives the agent a workflow: the model may call it as the tool `workflow-<id>`, and
    /// the agent's network ([`Agent::network`]) may route a task to it. Two workflows with
    /// one id fail [`AgentBuilder::build`] (their tools share a name).
    pub fn workflow(self, workflow: Workflow) -> Self {
        let tool = Arc::new(WorkflowTool::new(workflow.clone()));
        self.with_workflow(workflow.id().to_owned(), Arc::new(workflow), tool)
    }

    /// Gives the agent several workflows ([`AgentBuilder::workflow`] for each).
    pub fn workflows(self, workflows: impl IntoIterator<Item = Workflow>) -> Self {
        workflows.into_iter().fold(self, AgentBuilder::workflow)
    }
}

impl Agent {
    /// The workflows given to [`AgentBuilder::workflow`], sorted by id.
    pub fn workflows(&self) -> Vec<Workflow> {
        self.inner
            .workflows
            .values()
            .filter_map(|held| held.downcast_ref::<Workflow>().cloned())
            .collect()
    }

    /// The workflow with this id, among those given to [`AgentBuilder::workflow`].
    pub fn workflow(&self, id: &str) -> Option<Workflow> {
        self.inner
            .workflows
            .get(id)
            .and_then(|held| held.downcast_ref::<Workflow>().cloned())
    }
}
