//! Kestrel's storage: the durable state of agents.
//!
//! One object-safe trait, [`Storage`], shared as `Arc<dyn Storage>`, is the sum of one trait
//! per domain ([`ThreadStore`], [`MessageStore`], [`WorkingMemoryStore`], [`RunRecordStore`],
//! [`ObservationStore`], [`VectorStore`], ...; `use kestrel_storage::prelude::*` brings them
//! into scope; traces' trait is core's `kestrel_core::trace::SpanStore`). Together they cover
//!
//! - **threads** owned by resources, listed by resource and metadata filter, paginated;
//! - **messages** with a per-thread sequence assigned by the store (concurrent appends never
//!   share or interleave seqs), idempotent on message id, marked complete or aborted;
//! - **working memory** per thread or resource;
//! - **runs**: snapshots of suspended or running agent runs, saved with a version
//!   compare-and-set so several instances can share one database;
//! - **observations** for observational memory, and the per-thread "observed up to" marker;
//! - **vectors** in named, fixed-dimension indexes, queried by exact cosine scan;
//! - **traces**: the spans of traced runs (core's
//!   [`SpanStore`](kestrel_core::trace::SpanStore), a supertrait of [`Storage`]), upserted by
//!   trace and span id, listed by their root span's filters and status, read back by trace,
//!   deleted and pruned; times up to [`MAX_SPAN_TIME_NS`]. An instance given a storage keeps its
//!   traces there.
//!
//! Backends: [`InMemoryStorage`] (always), [`SqliteStorage`] (feature `sqlite`, the embedded
//! default: one file, WAL, migrated on open) and [`PostgresStorage`] (feature `postgres`: a
//! pool, migrations, a schema option). All pass the conformance suite in the `testing` module (feature
//! `testing`), which is how a new backend proves it behaves the same.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kestrel_storage::StorageError> {
//! use std::sync::Arc;
//! use kestrel_core::message::Message;
//! use kestrel_storage::prelude::*;
//! use kestrel_storage::{NewThread, Selection, SqliteStorage};
//!
//! let store: Arc<dyn Storage> = Arc::new(SqliteStorage::open("kestrel.db").await?);
//! let thread = store.create_thread(NewThread::new("user-1").title("Lisbon trip")).await?;
//! store
//!     .append_messages(&thread.id, "user-1", vec![Message::user("Weather in Lisbon?").into()])
//!     .await?;
//! let history = store.list_messages(&thread.id, Some("user-1"), Selection::last(10)).await?;
//! assert_eq!(history.messages[0].seq, 1);
//! # Ok(()) }
//! ```

pub mod codec;
mod datasets;
pub mod error;
pub mod memory;
pub mod ports;
#[cfg(feature = "postgres")]
pub mod postgres;
mod scores;
mod spans;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql_common;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod storage;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;

pub use datasets::MAX_DATASET_ID_BYTES;
pub use error::{Result, StorageError};
pub use memory::InMemoryStorage;
#[cfg(feature = "postgres")]
pub use postgres::{PgOptions, PostgresStorage};
pub use scores::MAX_SCORE_ID_BYTES;
pub use spans::MAX_SPAN_TIME_NS;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sql_common::redact_url;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStorage, Synchronous};
pub use storage::{
    AgentStore, MessageStore, ObservationStore, QueueStore, RunRecordStore, Storage, ThreadStore,
    VectorStore, WorkflowRecordStore, WorkingMemoryStore,
};

/// The storage traits, to call any domain's methods on a storage: `use kestrel_storage::prelude::*;`.
pub mod prelude {
    pub use crate::storage::{
        AgentStore, MessageStore, ObservationStore, QueueStore, RunRecordStore, Storage,
        ThreadStore, VectorStore, WorkflowRecordStore, WorkingMemoryStore,
    };
}
pub use types::*;
