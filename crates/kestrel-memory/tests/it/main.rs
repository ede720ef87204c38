//! The integration tests of kestrel-memory: every scenario runs on each store (in memory,
//! SQLite, PostgreSQL). The tests of the framework's features that merely need a store and
//! memory (runs, workflows, networks, clusters, queues, versions) are in `tests-integration`.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod agent_memory;
mod forked_threads;
mod instance_storage;
mod observational_memory;
mod semantic_recall;
