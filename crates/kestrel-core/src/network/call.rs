//! One network call: its agent and settings ([`Network`]), and the input its run starts
//! with ([`NetworkInit`]). Below the loop (`step`), the primitives it runs and the run's
//! surface (`run`), which all read it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{NetworkOptions, records};
use crate::agent::Agent;
use crate::memory::{AgentMemory, MemoryScope};
use crate::message::Message;
use crate::workflow::StepError;

/// The result of an aborted iteration (Mastra's).
pub(crate) const ABORTED: &str = "Aborted";

/// What a network run starts with: its input as a workflow run, kept with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NetworkInit {
    pub task: String,
    pub thread_id: String,
    pub resource_id: String,
    pub max_steps: u32,
    pub verbose_introspection: bool,
}

/// One network call's settings and agent.
pub(crate) struct Network {
    pub agent: Agent,
    pub options: NetworkOptions,
}

impl Network {
    pub(crate) fn new(agent: Agent, options: NetworkOptions) -> Self {
        Self { agent, options }
    }

    pub(super) fn memory(&self) -> Result<Arc<dyn AgentMemory>, StepError> {
        self.agent
            .memory()
            .cloned()
            .ok_or_else(|| StepError::new(format!("agent {:?} has no memory", self.agent.id())))
    }

    /// Stores the task in the network's thread (creating it).
    pub(crate) async fn save_task(&self, init: &NetworkInit, messages: &[Message]) {
        let Some(memory) = self.agent.memory() else {
            return;
        };
        let scope = MemoryScope {
            thread_id: init.thread_id.clone(),
            resource_id: init.resource_id.clone(),
        };
        if let Err(error) = memory.prepare_thread(&scope, serde_json::Map::new()).await {
            tracing::warn!(thread = %scope.thread_id, %error, "a network could not create its thread");
        }
        records::save(memory.as_ref(), &scope, messages).await;
    }
}
