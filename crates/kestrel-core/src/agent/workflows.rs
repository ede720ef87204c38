//! The workflows an agent holds (Mastra's `new Agent({ workflows })`), as
//! [`AgentBuilder::workflow`](super::AgentBuilder::workflow) gave them: each is a tool of the
//! agent ([`crate::workflow::WorkflowTool`], `workflow-<id>`) and a primitive its network can
//! route to.

use super::Agent;
use crate::workflow::Workflow;

impl Agent {
    /// The workflows given to [`AgentBuilder::workflow`](super::AgentBuilder::workflow),
    /// sorted by id.
    pub fn workflows(&self) -> Vec<Workflow> {
        self.inner.workflows.values().cloned().collect()
    }

    /// The workflow with this id, among those given to
    /// [`AgentBuilder::workflow`](super::AgentBuilder::workflow).
    pub fn workflow(&self, id: &str) -> Option<Workflow> {
        self.inner.workflows.get(id).cloned()
    }
}
