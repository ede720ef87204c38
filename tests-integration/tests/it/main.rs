//! The framework's features on every store (in memory, SQLite, PostgreSQL), with memory: runs,
//! threads, queues, delegations, networks, workflows, clusters, stored agents and versions.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod cluster;
mod delegation_memory;
mod durable_runs;
mod fixture;
mod live_scores;
mod live_threads;
mod networks;
mod proxied_postgres;
mod queued_messages;
mod store_faults;
mod stored_agents;
mod versions;
mod workflow_fencing;
mod workflow_restart;
mod workflows;
