//! The integration tests of kestrel-memory: every scenario runs on each store (in memory,
//! SQLite, PostgreSQL).
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod agent_memory;
mod cluster;
mod common;
mod delegation_memory;
mod durable_runs;
mod forked_threads;
mod instance_storage;
mod live_threads;
mod networks;
mod observational_memory;
mod queued_messages;
mod semantic_recall;
mod store_faults;
mod stored_agents;
mod versions;
mod workflow_fencing;
mod workflow_restart;
mod workflows;
