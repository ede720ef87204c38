//! Run control: deciding for runs that stopped for a person, and pausing, resuming and aborting
//! runs by id, also runs no process drives any more.
//!
//! - [`handle`]: [`RunHandle`] ([`crate::agent::Agent::run`]), one run by id and everything
//!   that can be done to it, with a guide to which call answers which situation;
//! - [`decisions`]: approve or decline a tool call, resume a suspended tool, submit a client
//!   tool's result ([`Continue`]), and find the runs that wait;
//! - [`lifecycle`]: pause, resume and abort by id ([`RunRef`]), reaching sub-agents' runs;
//! - `recovery`: in a cluster, continuing the runs of an instance that died.
//!
//! Both are methods of [`crate::agent::Agent`], defined here over the runtime's stored runs.

pub mod decisions;
pub mod handle;
pub mod lifecycle;
pub(crate) mod recovery;

pub use decisions::{
    Continue, DEFAULT_DECLINE_REASON, RunControlError, SuspendedRun, SuspendedRuns, ToolCallRef,
};
pub use handle::{Proceed, RunHandle};
pub use lifecycle::RunRef;
