//! The [`Storage`] trait every backend implements: the sum of one trait per domain, each
//! implemented by a backend in the file of that domain (`sqlite/threads.rs`, ...).
//!
//! Calling a domain's methods on a storage needs its trait in scope:
//! `use kestrel_storage::prelude::*;` brings them all.

mod agents;
mod messages;
mod observations;
mod queue;
mod runs;
mod threads;
mod vectors;
mod workflows;
mod working_memory;

pub use agents::AgentStore;
pub use messages::MessageStore;
pub use observations::ObservationStore;
pub use queue::QueueStore;
pub use runs::RunRecordStore;
pub use threads::ThreadStore;
pub use vectors::VectorStore;
pub use workflows::WorkflowRecordStore;
pub use working_memory::WorkingMemoryStore;

/// Durable state of agents: threads and their messages, working memory, run snapshots,
/// observations, vectors and traces, one trait per domain ([`ThreadStore`], [`MessageStore`],
/// ..., core's [`SpanStore`](kestrel_core::trace::SpanStore) for traces and
/// [`ScoreStore`](kestrel_core::store::ScoreStore) for scores).
///
/// Object-safe and shared as `Arc<dyn Storage>`. Every backend passes the same conformance suite
/// (`kestrel_storage::testing`, feature `testing`), so behaviour, ordering and errors are the same
/// on each.
///
/// **Ownership.** Operations on a thread's content take the resource the caller acts for; a
/// thread of another resource is refused with
/// [`StorageError::ThreadOwnedByOtherResource`](crate::StorageError::ThreadOwnedByOtherResource)
/// and nothing is read or written.
///
/// **Ports.** A storage is also every port of [`kestrel_core::store`] (stopped runs, workflow
/// runs, the message queue, agents' versions: see [`crate::ports`]), so an instance is given
/// it once (`Kestrel::builder().storage(storage)`) and keeps everything in the same database,
/// the traces of an instance that traces included.
///
/// **Concurrency.** Appends to one thread are serialised by the store (a row lock on Postgres,
/// the single writer on SQLite, a mutex in memory): concurrent appenders never share a seq and
/// never interleave inside one batch. Runs use optimistic concurrency (a version compare-and-set),
/// so several server instances may share one database.
pub trait Storage:
    kestrel_core::store::DurableStore
    + kestrel_core::trace::SpanStore
    + kestrel_core::store::ScoreStore
    + kestrel_core::store::DatasetStore
    + ThreadStore
    + MessageStore
    + WorkingMemoryStore
    + ObservationStore
    + VectorStore
    + AgentStore
    + QueueStore
    + RunRecordStore
    + WorkflowRecordStore
    + Send
    + Sync
{
    /// The backend's name: `memory`, `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
}
