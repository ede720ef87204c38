//! The instance most tests build: a `Kestrel` on the test's store, with one `Memory` that takes
//! the instance's storage (storage is given once) and that its agents remember with.
//!
//! ```ignore
//! let kestrel = Instance::on(&store)
//!     .last_messages(20)
//!     .agent(Agent::builder("assistant").model(model).tool(tool))
//!     .cluster(cluster.clone().instance_id("a"))
//!     .build();
//! ```
//!
//! stands for
//!
//! ```ignore
//! let memory = Memory::builder().last_messages(20).build().unwrap();
//! let agent = Agent::builder("assistant").model(model).tool(tool).memory(memory.clone());
//! let kestrel = Kestrel::builder()
//!     .storage(Arc::clone(&store))
//!     .memory(memory)
//!     .agent(agent.build().unwrap())
//!     .cluster(cluster.clone().instance_id("a"))
//!     .build()
//!     .unwrap();
//! ```

use std::sync::Arc;

use kestrel_core::agent::{Agent, AgentBuilder};
use kestrel_core::cluster::Cluster;
use kestrel_core::kestrel::{Kestrel, KestrelBuilder};
use kestrel_core::version::Versions;
use kestrel_core::workflow::Workflow;
use kestrel_memory::Memory;
use kestrel_storage::testing::Store;

/// Builds a [`Kestrel`] instance on a store: the store is the instance's storage, and one
/// [`Memory`] (the defaults, or [`Instance::last_messages`]) is the instance's memory and the
/// memory of each agent given to [`Instance::agent`]. The memory has no store of its own: it
/// takes the instance's when [`Instance::build`] builds it.
///
/// Anything else a test needs of `Kestrel::builder()` goes through [`Instance::configure`];
/// a test whose setup is its point (an instance without memory, two stores, a build that must
/// fail) keeps its own.
#[must_use]
pub struct Instance {
    store: Store,
    memory: Memory,
    kestrel: KestrelBuilder,
}

// Test support: a failed set-up panics, as an assertion does.
#[allow(clippy::unwrap_used)]
impl Instance {
    /// An instance on `store`, with `Memory::default()` (the last 10 messages of a thread).
    pub fn on(store: &Store) -> Self {
        Self {
            store: Arc::clone(store),
            memory: Memory::default(),
            kestrel: Kestrel::builder(),
        }
    }

    /// The memory shows a run the last `n` messages of its thread. Call it before
    /// [`Instance::memory`] and [`Instance::agent`], which hand the memory out.
    pub fn last_messages(mut self, n: u32) -> Self {
        self.memory = Memory::builder().last_messages(n).build().unwrap();
        self
    }

    /// The instance's memory, for an agent the test builds itself (a sub-agent, say).
    pub fn memory(&self) -> Memory {
        self.memory.clone()
    }

    /// Registers the agent `agent` builds, given the instance's memory.
    pub fn agent(self, agent: AgentBuilder) -> Self {
        let agent = agent.memory(self.memory.clone()).build().unwrap();
        self.agent_as_is(agent)
    }

    /// Registers `agent` as it was built: with its own memory, or none.
    pub fn agent_as_is(mut self, agent: Agent) -> Self {
        self.kestrel = self.kestrel.agent(agent);
        self
    }

    /// Registers a workflow (its runs are kept in the store).
    pub fn workflow(mut self, workflow: Workflow) -> Self {
        self.kestrel = self.kestrel.workflow(workflow);
        self
    }

    /// Makes the instance one of `cluster`'s.
    pub fn cluster(mut self, cluster: Cluster) -> Self {
        self.kestrel = self.kestrel.cluster(cluster);
        self
    }

    /// The versions the instance's runs use unless a run chooses.
    pub fn versions(mut self, versions: Versions) -> Self {
        self.kestrel = self.kestrel.versions(versions);
        self
    }

    /// Anything else of `Kestrel::builder()`: models, tools, pub/sub...
    pub fn configure(mut self, configure: impl FnOnce(KestrelBuilder) -> KestrelBuilder) -> Self {
        self.kestrel = configure(self.kestrel);
        self
    }

    /// Builds the instance: the store its storage, the memory its memory (which takes the store).
    pub fn build(self) -> Kestrel {
        self.kestrel
            .storage(self.store)
            .memory(self.memory)
            .build()
            .unwrap()
    }
}
