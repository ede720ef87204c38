//! The integration tests of kestrel-core: agents, tools, runs, approvals, delegation and the
//! providers, driven through the public API with the scripted model and local fake servers.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod agent_events;
mod agent_memory;
mod agent_runs;
mod agent_tools;
mod approval;
mod approval_fenced;
mod background;
mod delegation;
mod delegation_control;
mod environment;
mod eval;
mod eval_pending;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod fake_server;
mod iteration;
mod local_model;
mod processors;
#[cfg(feature = "anthropic")]
mod provider_anthropic;
#[cfg(feature = "openai")]
mod provider_openai;
mod provider_openai_embeddings;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod recovery_helpers;
mod registry;
mod run_handles;
mod skill_search_bounds;
mod skills;
mod tracing;
mod tracing_workflows;
mod workflow;
mod workflow_agents;
mod workflow_foreach;
mod workflow_nested;
mod workflow_persist;
mod workflow_travel;
