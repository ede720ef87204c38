//! Kestrel's cross-crate feature tests, in `tests/it/` (one test binary, a module per file).
//!
//! Each crate tests its own features; the features of the framework that take several crates
//! to exercise are tested here: agent runs that survive a restart, live threads, queued
//! messages, delegations, networks, workflows, clusters and their fencing, stored agents and
//! versions, each on every store (`kestrel_storage::testing`'s in-memory, SQLite and
//! PostgreSQL fixtures) with `kestrel-memory`'s `Memory`. This library is empty: the crate
//! exists for its tests (as tokio's `tests-integration` does).
