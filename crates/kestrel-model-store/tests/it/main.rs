//! The integration tests of kestrel-model-store: downloads from local fake servers.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod multi_file;
mod resume;
mod split_wheels;
mod store;
