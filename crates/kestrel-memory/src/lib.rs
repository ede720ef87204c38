//! Kestrel's memory: agents that remember, on SQLite, PostgreSQL or in memory.
//!
//! A [`Memory`] keeps each conversation as a **thread** owned by a **resource** (a user, an
//! organisation...) in a [`kestrel_storage::Storage`]: the storage of the instance its agent
//! joins (`Kestrel::builder().storage(..)`), or of the agent itself
//! (`Agent::builder(..).storage(..)`), so one store is given once; [`MemoryBuilder::storage`]
//! gives a memory a store of its own instead. Give it to an agent and name the thread
//! and the resource on each run; the agent then sees the thread's recent messages, and every
//! complete message of the run is stored, with the ids streamed in events:
//!
//! - the input is stored **before the first step**, so a failing model or an abort never loses
//!   what the user said;
//! - each step's assistant message and its tool results are stored **when the step ends**, never
//!   stream fragments; appends are idempotent by message id, so retries never duplicate;
//! - runs on one thread at once (two browser tabs) lose nothing: each append is one atomic batch
//!   with its own contiguous seqs, so every step's messages stay together and in order.
//!
//! Options (on [`MemoryBuilder`]): [`last_messages`](MemoryBuilder::last_messages) (default 10,
//! tool calls never split from their results), [`read_only`](MemoryBuilder::read_only),
//! [`generate_title`](MemoryBuilder::generate_title) (in the background, after the response),
//! [`working_memory`](MemoryBuilder::working_memory) (Markdown template or JSON schema, thread or
//! resource scope, updated by the `update_working_memory` tool) and
//! [`semantic_recall`](MemoryBuilder::semantic_recall) (older messages of the thread, or of the
//! resource's other threads, found by meaning through an embedder and a vector index of the store;
//! see [`semantic`]). With [`observational_memory`](MemoryBuilder::observational_memory), an
//! observer model condenses long threads into dated observations that replace the old messages
//! in the context, and the `recall` tool reads the exact messages again (see [`observational`];
//! tokens are counted by [`tokens`]). Further recall strategies plug in as
//! [`processor::MemoryProcessor`]s.
//!
//! ```
//! use std::sync::Arc;
//!
//! use kestrel_core::agent::{Agent, RunOptions};
//! use kestrel_core::model::{ScriptedModel, ScriptedResponse};
//! use kestrel_memory::{Memory, WorkingMemory};
//! use kestrel_storage::{InMemoryStorage, Selection, Storage};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // `SqliteStorage::open("kestrel.db")` or `PostgresStorage::connect(..)` in real programs.
//! let store: Arc<dyn Storage> = Arc::new(InMemoryStorage::new());
//! let memory = Memory::builder()
//!     .last_messages(20)
//!     .working_memory(WorkingMemory::template("# User\n- Name:\n- City:"))
//!     .build()?;
//! let model = ScriptedModel::new()
//!     .respond(ScriptedResponse::text("Hello Ada!"))
//!     .respond(ScriptedResponse::text("You are Ada."));
//! let agent = Agent::builder("assistant")
//!     .instructions("You are a helpful assistant.")
//!     .model(Arc::new(model))
//!     .memory(memory)
//!     .storage(store.clone()) // the agent's storage, and so its memory's
//!     .build()?;
//!
//! agent.generate("I am Ada.").memory("thread-1", "user-1").await?;
//! let answer = agent.generate("Who am I?").memory("thread-1", "user-1").await?;
//! assert_eq!(answer.text, "You are Ada.");
//!
//! let stored = store.list_messages("thread-1", Some("user-1"), Selection::all()).await?;
//! assert_eq!(stored.messages.len(), 4); // two user messages, two answers
//! # Ok(()) }
//! ```

mod builder;
mod error;
mod history;
mod memory;
pub mod observational;
pub mod processor;
mod recall_tool;
pub mod semantic;
mod slot;
mod title;
pub mod tokens;
mod working;

pub use builder::MemoryBuilder;
pub use error::{Error, MemoryBuildError};
pub use kestrel_storage;
pub use memory::{DEFAULT_LAST_MESSAGES, Memory};
pub use observational::{
    DEFAULT_MESSAGE_TOKENS, DEFAULT_OBSERVATION_TOKENS, ObservationProgress, ObservationScope,
    ObservationalMemory,
};
pub use processor::{MemoryProcessor, RecallContext, RecallWith, SharedProcessor, StoreContext};
pub use recall_tool::RECALL_TOOL;
pub use semantic::{
    DEFAULT_TOP_K, MessageRange, SemanticRecall, SemanticRecallScope, default_index_name,
};
pub use title::{DEFAULT_TITLE_INSTRUCTIONS, GenerateTitle};
pub use tokens::{count_tokens, message_tokens};
pub use working::{UPDATE_WORKING_MEMORY, WorkingMemory, WorkingMemoryScope};
