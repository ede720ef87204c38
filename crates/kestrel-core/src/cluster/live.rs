//! What the cluster's inbox asks of this instance's runs in progress, below both the registry
//! that keeps them and the cluster runtime that answers other instances: the registry
//! implements [`LiveRuns`], and the cluster runtime holds it as that, so neither names the
//! other back.

use crate::message::Message;

/// A thread, as the lease and the inbox know it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ThreadKey {
    pub resource_id: String,
    pub thread_id: String,
}

/// What aborting a run in progress by id did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiveAbort {
    /// The run was in progress and got its abort signal.
    Aborted,
    /// A run of that id is in progress, for another resource: left alone.
    OtherResource,
    /// No run of that id is in progress here.
    NotLive,
}

/// The runs in progress in this process, as another instance's requests reach them.
pub(crate) trait LiveRuns: Send + Sync {
    /// Aborts run `run_id` when it is in progress here (for `resource`, when given).
    fn abort_run_of(&self, run_id: &str, resource: Option<&str>) -> LiveAbort;

    /// Aborts every run on `thread`; how many.
    fn abort_thread(&self, thread: &ThreadKey) -> usize;

    /// Delivers `message` to the thread's active run: its id, or the message back.
    fn deliver(&self, thread: &ThreadKey, message: Message) -> Result<String, Message>;

    /// Asks run `run_id` to pause at its next step boundary; `false` when it is not here.
    fn pause_run(&self, run_id: &str) -> bool;
}
