//! The integration tests of kestrel-storage: the conformance suite on each backend and the
//! backends' own behaviour.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod conformance_memory;
#[cfg(feature = "postgres")]
mod conformance_postgres;
#[cfg(feature = "sqlite")]
mod conformance_sqlite;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod cross_backend;
#[cfg(feature = "sqlite")]
mod live_scoring_restart;
mod ports;
#[cfg(feature = "postgres")]
mod postgres_faults;
#[cfg(feature = "postgres")]
mod postgres_open;
#[cfg(feature = "sqlite")]
mod sqlite_open;
