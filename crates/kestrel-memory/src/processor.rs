//! The extension point: memory processors.
//!
//! [`Memory`](crate::Memory) builds a run's context as a pipeline. It first stores the run's input
//! and loads the thread's recent window before it (`last_messages`) into a [`RecallContext`];
//! then every [`MemoryProcessor`], in
//! order, may read the store and add to the context: system text (working memory does this),
//! earlier messages of the thread ([`RecallContext::add_history`]), or a different window
//! altogether. Finally memory makes the history safe to send (tool calls and their results stay
//! together) and hands it to the agent.
//!
//! After each append a processor sees the stored messages ([`MemoryProcessor::stored`], e.g. to
//! embed them), after a run it may do background work ([`MemoryProcessor::run_finished`]), and it
//! may give the agent tools ([`MemoryProcessor::tools`]).
//!
//! This is how semantic recall and observational memory plug in:
//!
//! - **semantic recall** (`embedder`, `top_k`, `message_range`, `scope`): `stored` embeds the new
//!   messages with text into a vector index (`VectorStore::upsert_vectors`, metadata `thread_id`,
//!   `resource_id`, `message_id`); `recall` embeds the input's text, queries the index
//!   (thread or resource filter), loads each match with `message_range` neighbours
//!   (`MessageStore::list_messages` with a seq range), merges this thread's matches into the history
//!   with [`RecallContext::add_history`] and describes other threads' matches in
//!   [`RecallContext::system`];
//! - **observational memory** ([`crate::observational`]): `recall` adds the messages after the
//!   thread's observed seq to [`RecallContext::history`] (the `last_messages` window stays) and
//!   the observations to `system`; `run_finished` runs the observer and reflector past their
//!   thresholds; `tools` gives the `recall` tool.

use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::agent::GenerateResult;
use kestrel_core::context::RequestContext;
use kestrel_core::memory::{MemoryError, MemoryScope};
use kestrel_core::message::Message;
use kestrel_core::tool::SharedTool;
use kestrel_storage::{Storage, StoredMessage};

/// One stage of a [`Memory`](crate::Memory)'s recall pipeline, with hooks after storing and
/// after runs. Every method has a default that does nothing.
#[async_trait]
pub trait MemoryProcessor: Send + Sync {
    /// A short, unique name, for logs and errors (e.g. `semantic-recall`).
    fn name(&self) -> &str;

    /// Adds to (or reshapes) the context being recalled for a run. An error fails the run before
    /// its first step.
    async fn recall(&self, _cx: &mut RecallContext<'_>) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Called after messages were appended to the thread (never in read-only mode), with their
    /// stored form: the run's input (before `recall`), then each step's messages. An error fails
    /// the run, so work that may fail without consequence (like embedding) should log and return
    /// `Ok`.
    async fn stored(
        &self,
        _cx: &StoreContext<'_>,
        _messages: &[StoredMessage],
    ) -> Result<(), MemoryError> {
        Ok(())
    }

    /// Called in a background task once a run finished successfully (never in read-only mode).
    /// It must not fail the run: log what goes wrong.
    async fn run_finished(&self, _cx: &StoreContext<'_>, _result: &GenerateResult) {}

    /// Tools this processor gives the agent (offered unless the memory is read-only).
    fn tools(&self) -> Vec<SharedTool> {
        Vec::new()
    }
}

/// A shared processor.
pub type SharedProcessor = Arc<dyn MemoryProcessor>;

/// The context of one run being recalled, passed through every processor in order.
pub struct RecallContext<'a> {
    /// The store.
    pub storage: &'a Arc<dyn Storage>,
    /// The run's thread and resource (the resource owns the thread; memory checked it).
    pub scope: &'a MemoryScope,
    /// The run's input, the newest messages of the conversation. Already stored (memory stores
    /// it with the window read), unless the memory is read-only.
    pub input: &'a [Message],
    /// The run's request context.
    pub request_context: &'a RequestContext,
    /// Whether the memory is read-only (processors must not write then).
    pub read_only: bool,
    /// Whether the thread exists in the store (a read-only memory does not create it).
    pub thread_exists: bool,
    /// Earlier messages of the thread, in seq order; they precede the input. Starts as the
    /// `last_messages` window.
    pub history: Vec<StoredMessage>,
    /// Whether the thread may have messages older than `history[0]` that are not in `history`
    /// (always `true` with `last_messages(0)`, which reads no messages).
    pub has_older: bool,
    /// System text for the run, in order, after the agent's instructions.
    pub system: Vec<String>,
}

impl RecallContext<'_> {
    /// Merges earlier messages of this thread into [`RecallContext::history`], keeping seq order
    /// and dropping ids already there. Messages of other threads are ignored (describe them in
    /// [`RecallContext::system`] instead).
    pub fn add_history(&mut self, messages: impl IntoIterator<Item = StoredMessage>) {
        let thread_id = self.scope.thread_id.as_str();
        let mut added = false;
        for message in messages {
            if message.thread_id != thread_id || self.history.iter().any(|m| m.id == message.id) {
                continue;
            }
            self.history.push(message);
            added = true;
        }
        if added {
            self.history.sort_by_key(|m| m.seq);
        }
    }
}

/// What a processor's after-store and after-run hooks see.
pub struct StoreContext<'a> {
    /// The store.
    pub storage: &'a Arc<dyn Storage>,
    /// The run's thread and resource.
    pub scope: &'a MemoryScope,
}

/// A [`Processor`](kestrel_core::processor::Processor) as a stage of memory's recall: its input
/// step hook runs over the history being recalled (every message of it remembered), and what
/// it leaves is what the thread's runs are given — messages it changed keep their changes,
/// messages it removed are not recalled. Mastra's memory processors (`ToolCallFilter`,
/// `TokenLimiter`) are processors like any other; given to a memory with
/// [`MemoryBuilder::recall_with`](crate::MemoryBuilder::recall_with), they shape the recall
/// of every agent that uses it.
///
/// A tripwire in the hook fails the recall (and with it the run) with the processor's reason:
/// a memory that cannot recall what it should does not recall something else.
pub struct RecallWith(pub kestrel_core::processor::SharedProcessor);

#[async_trait]
impl MemoryProcessor for RecallWith {
    fn name(&self) -> &str {
        self.0.id()
    }

    async fn recall(&self, cx: &mut RecallContext<'_>) -> Result<(), MemoryError> {
        use kestrel_core::processor::{Pipeline, ProcessorContext, ProcessorPhase, Stopped};
        if !self.0.phases().contains(ProcessorPhase::InputStep) || cx.history.is_empty() {
            return Ok(());
        }
        let mut messages: Vec<Message> = cx.history.iter().map(StoredMessage::to_message).collect();
        let remembered = messages.len();
        let mut system = cx.system.clone();
        let abort = kestrel_core::abort::AbortSignal::new();
        let scope = cx.scope;
        let processor_cx = ProcessorContext::new("memory-recall", "", cx.request_context, &abort)
            .scoped(Some(&scope.thread_id), Some(&scope.resource_id));
        let outcome = Pipeline::new(vec![std::sync::Arc::clone(&self.0)])
            .input_step(
                &processor_cx,
                None,
                0,
                &mut messages,
                remembered,
                &mut system,
                &mut Vec::new(),
                &mut Default::default(),
            )
            .await;
        match outcome {
            Ok(_) => {}
            Err(Stopped::Tripwire(tripwire)) => {
                return Err(MemoryError::new(format!(
                    "recall stopped by processor {:?}: {}",
                    self.0.id(),
                    tripwire.reason
                )));
            }
            Err(Stopped::Failed(failure)) => {
                return Err(MemoryError::new(format!("recall failed: {failure}")));
            }
        }
        let mut kept = Vec::with_capacity(messages.len());
        for message in messages {
            // Messages are matched back by id; one the processor made up is not a stored one.
            if let Some(stored) = cx.history.iter().find(|s| s.id == message.id) {
                let mut stored = stored.clone();
                stored.parts = message.parts;
                kept.push(stored);
            }
        }
        if kept.len() < cx.history.len() {
            cx.has_older = true;
        }
        cx.history = kept;
        cx.system = system;
        Ok(())
    }
}
