//! Run control: deciding for runs that stopped for a person, and pausing, proceeding with and
//! aborting runs by id, also runs no process drives any more.
//!
//! The way in is a run's handle, [`RunHandle`] ([`crate::agent::Agent::run`]): everything
//! that can be done to one run, named by id, with a guide to which call answers which
//! situation. Messages into a thread, and aborting what runs on it, are the thread's handle's
//! ([`crate::agent::ThreadHandle`]).
//!
//! - [`handle`]: [`RunHandle`] and [`Proceed`] (a stored run about to go on);
//! - [`decisions`]: what a decision is checked against and how it is recorded ([`Continue`],
//!   [`RunControlError`]), and the runs that wait ([`crate::agent::Agent::list_suspended_runs`]);
//! - [`lifecycle`]: pausing, proceeding and aborting by id, reaching sub-agents' runs;
//! - `recovery`: in a cluster, continuing the runs of an instance that died.
//!
//! The handles are defined here, over the runtime's stored runs.

pub mod decisions;
pub mod handle;
pub mod lifecycle;
pub(crate) mod recovery;

pub use decisions::{
    Continue, DEFAULT_DECLINE_REASON, RunControlError, SuspendedRun, SuspendedRuns,
};
pub use handle::{Proceed, RunHandle};
