//! The hook through which an agent remembers.
//!
//! An agent with an [`AgentMemory`] and a run with a thread and resource
//! ([`RunOptions::memory`](crate::agent::RunOptions::memory)) works like this:
//!
//! 1. before the first step, [`AgentMemory::recall`] loads the thread's context (earlier
//!    messages, working memory, observations...) and the input messages are stored;
//! 2. when each step ends, its complete messages (the assistant message with its tool calls, the
//!    tool results) are stored — never stream fragments;
//! 3. after the run, [`AgentMemory::run_finished`] may do background work (titles...) without
//!    delaying the response.
//!
//! Stored message ids equal the ids streamed in events. `persist` must be idempotent by message
//! id: a continued or retried run may hand the same message again.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::context::RequestContext;
use crate::error::BoxError;
use crate::lease::Fence;
use crate::message::Message;
use crate::run::GenerateResult;
use crate::tool::SharedTool;

pub use crate::scope::MemoryScope;

/// What memory contributes to a run's context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecalledContext {
    /// Extra system text (working memory, observations, recalled snippets), in order.
    pub system: Vec<String>,
    /// Earlier messages of the thread, oldest first; they precede the input.
    pub history: Vec<Message>,
    /// Whether `recall` stored the run's input itself (a memory that writes it with the same
    /// round trip that reads the history). The agent then never hands the input to
    /// [`AgentMemory::persist`]; when `false` the input is persisted with the run's first
    /// messages, like any other.
    pub input_stored: bool,
}

/// A memory failure.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct MemoryError {
    message: String,
    #[source]
    source: Option<BoxError>,
    fenced: bool,
    unavailable: bool,
}

impl MemoryError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
            fenced: false,
            unavailable: false,
        }
    }

    /// An error with this message caused by `source`.
    pub fn with_source(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
            fenced: false,
            unavailable: false,
        }
    }

    /// A write refused because the run has a newer owner (its [`Fence`] token is below one
    /// the store has seen): see [`Persist::fenced`].
    pub fn fenced(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            fenced: true,
            ..Self::with_source(message, source)
        }
    }

    /// The store failed during the call (unreachable, timed out, its answer lost): a write
    /// may or may not have been made, and the same call may succeed later. A run whose
    /// messages could not be stored so stops, and keeps its last stored boundary, from which
    /// it can be resumed.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self {
            unavailable: true,
            ..Self::with_source(message, source)
        }
    }

    /// Whether the store failed during the call ([`MemoryError::unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }

    /// Whether the write was refused for a stale lease token ([`MemoryError::fenced`]).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// How [`AgentMemory::persist`] stores messages: `Persist::default()` for complete messages
/// outside a cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Persist<'a> {
    /// The messages are the partial answer of a step stopped by an abort (its text so far, no
    /// unfinished tool calls): stored so what the user saw is not lost, marked aborted.
    pub aborted: bool,
    /// A write of run `fence.run_id` under lease token `fence.token`: refused once the memory
    /// has seen a greater token for the run. Runs shared between instances write this way.
    pub fence: Option<Fence<'a>>,
}

impl<'a> Persist<'a> {
    /// Complete messages, not fenced.
    pub fn complete() -> Self {
        Self::default()
    }

    /// The partial answer of an aborted step.
    pub fn aborted(mut self) -> Self {
        self.aborted = true;
        self
    }

    /// A write under `fence` (none: not fenced).
    pub fn fenced(mut self, fence: Option<Fence<'a>>) -> Self {
        self.fence = fence;
        self
    }
}

/// Why a thread could not be forked ([`AgentMemory::fork_thread`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// There is no thread to fork.
    #[error("thread {thread_id:?} does not exist, so it cannot be forked")]
    ThreadNotFound {
        /// The thread.
        thread_id: String,
    },
    /// The thread belongs to another resource than the one the fork acts for.
    #[error("thread {thread_id:?} belongs to another resource than {resource_id:?}")]
    ThreadOfOtherResource {
        /// The thread.
        thread_id: String,
        /// The resource the fork acts for.
        resource_id: String,
    },
    /// The new thread's id is taken.
    #[error("thread {thread_id:?} already exists; a fork needs a new thread id")]
    ThreadExists {
        /// The id asked for.
        thread_id: String,
    },
    /// The memory cannot copy threads.
    #[error("this memory cannot fork thread {thread_id:?}")]
    Unsupported {
        /// The thread.
        thread_id: String,
    },
    /// The memory failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Loads a run's context and stores its messages. Implemented by `kestrel-memory` on top of a
/// storage backend; implement it yourself to plug in another store.
#[async_trait::async_trait]
pub trait AgentMemory: Send + Sync {
    /// Loads the context of `scope` for a run whose input is `input` (already the newest
    /// messages; do not return them in `history`). It may also store the input, and then says
    /// so with [`RecalledContext::input_stored`].
    async fn recall(
        &self,
        scope: &MemoryScope,
        input: &[Message],
        request_context: &RequestContext,
    ) -> Result<RecalledContext, MemoryError>;

    /// Stores messages in `scope`, in order, as `how` says: complete (the default), or the
    /// partial answer of a step stopped by an abort ([`Persist::aborted`]), and in a cluster
    /// as a write of one run under its lease's token ([`Persist::fenced`]). Idempotent by
    /// message id: a continued or retried run may hand the same message again.
    ///
    /// A memory that keeps a message's status marks aborted ones so; one that supports
    /// fencing refuses a write whose token is below one it has seen for the run (with
    /// [`MemoryError::fenced`]), so an instance that lost a run to another cannot add
    /// messages behind its successor's. A memory that does neither stores them as complete.
    async fn persist(
        &self,
        scope: &MemoryScope,
        messages: &[Message],
        how: Persist<'_>,
    ) -> Result<(), MemoryError>;

    /// Makes sure the thread exists, with `metadata` merged into its metadata (a delegation's
    /// thread gets the parent's ids and the start hook's metadata this way). The default does
    /// nothing: `recall` creates threads as needed.
    async fn prepare_thread(
        &self,
        _scope: &MemoryScope,
        _metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Copies thread `source` (its messages so far, in order) into a new thread of the same
    /// resource, `new_thread_id` or a fresh id, titled `title` or like the source, and returns
    /// the new thread's id. The source is left as it was. A thread of another resource is
    /// refused ([`ForkError::ThreadOfOtherResource`]). The default cannot fork.
    async fn fork_thread(
        &self,
        source: &MemoryScope,
        new_thread_id: Option<&str>,
        title: Option<&str>,
    ) -> Result<String, ForkError> {
        let _ = (new_thread_id, title);
        Err(ForkError::Unsupported {
            thread_id: source.thread_id.clone(),
        })
    }

    /// Called when an agent with this memory joins an instance
    /// ([`KestrelBuilder::build`](crate::kestrel::KestrelBuilder::build)), or is built with
    /// stores of its own ([`AgentBuilder::storage`](crate::agent::AgentBuilder::storage)): a
    /// memory without a store of its own takes the one these stores were made from here (see
    /// [`Stores::backend`](crate::store::Stores::backend)). An error (the memory already
    /// took another instance's store) stops the build. The default does nothing.
    fn attach(&self, _stores: &crate::store::Stores) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Called once the run finished successfully, in a background task, when
    /// [`AgentMemory::wants_finished_runs`] says so.
    async fn run_finished(&self, _scope: &MemoryScope, _result: &GenerateResult) {}

    /// Whether [`AgentMemory::run_finished`] has work to do. When it has none, a finished run
    /// neither copies its result nor spawns the task that would call it. The default: `true`.
    fn wants_finished_runs(&self) -> bool {
        true
    }

    /// Tools this memory gives the agent (e.g. updating working memory, recall). They are
    /// offered to the model only in runs with a thread and a resource.
    fn tools(&self) -> Vec<SharedTool> {
        Vec::new()
    }
}

/// What [`crate::agent::AgentBuilder::memory`] takes: a memory itself (any [`AgentMemory`],
/// such as `kestrel-memory`'s `Memory`), or one already shared in an `Arc`.
pub trait IntoAgentMemory {
    /// The memory, shared.
    fn into_agent_memory(self) -> Arc<dyn AgentMemory>;
}

impl<T: AgentMemory + 'static> IntoAgentMemory for T {
    fn into_agent_memory(self) -> Arc<dyn AgentMemory> {
        Arc::new(self)
    }
}

impl<T: AgentMemory + 'static> IntoAgentMemory for Arc<T> {
    fn into_agent_memory(self) -> Arc<dyn AgentMemory> {
        self
    }
}

impl IntoAgentMemory for Arc<dyn AgentMemory> {
    fn into_agent_memory(self) -> Arc<dyn AgentMemory> {
        self
    }
}
