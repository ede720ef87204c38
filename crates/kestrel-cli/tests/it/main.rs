//! The integration tests of the `kestrel` binary: its commands, `kestrel dev` and the Studio
//! in a real browser.
//!
//! One test binary per crate (each file a module): the workspace links far fewer binaries.

mod chaos;
mod chaos_faults;
mod cli;
mod cluster;
mod dev;
mod local_default;
mod models;
mod studio_browser;
mod takeover;
mod workflow_takeover;
