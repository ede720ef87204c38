//! [`Memory`]: an agent's memory over a [`Storage`].

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::agent::GenerateResult;
use kestrel_core::context::RequestContext;
use kestrel_core::lease::Fence;
use kestrel_core::memory::{
    AgentMemory, ForkError, MemoryError, MemoryScope, Persist, RecalledContext,
};
use kestrel_core::message::Message;
use kestrel_core::tool::SharedTool;
use kestrel_storage::{
    Metadata, MetadataUpdate, NewMessage, NewThread, Selection, Storage, StorageError,
    StoredMessage, ThreadPatch,
};
use serde_json::Value;

use crate::builder::MemoryBuilder;
use crate::error::Error;
use crate::history::{pair_tool_messages, window};
use crate::observational::ObservationScope;
use crate::processor::{RecallContext, SharedProcessor, StoreContext};
use crate::slot::StoreSlot;
use crate::title::TitleGenerator;
use crate::working::WorkingMemory;

/// How many recent messages a run sees unless [`MemoryBuilder::last_messages`] says otherwise.
pub const DEFAULT_LAST_MESSAGES: u32 = 10;

/// An agent's memory: conversations kept as threads in a [`Storage`].
///
/// Give it to an agent (`Agent::builder(..).memory(memory)`) and name a thread and a
/// resource on each run (`RunOptions::new().memory(thread, resource)`). Its store is the
/// instance's (`Kestrel::builder().storage(..)`), taken when the agent joins it, unless the
/// memory was given one of its own ([`MemoryBuilder::storage`], [`Memory::new`]); a memory
/// with neither answers each run with [`Error::NoStorage`]. Then, for each run:
///
/// - **before the first step** the thread is created for the resource if it does not exist (a
///   thread of another resource is refused with [`Error::ForeignThread`]); the run's input is
///   stored and the [`last_messages`](MemoryBuilder::last_messages) messages before it are read,
///   in one call
///   ([`append_with_history`](kestrel_storage::MessageStore::append_with_history), one
///   round trip on SQLite); they become the run's history, and the
///   [processors](crate::processor) add their context (working memory...);
/// - **as each step ends** its assistant message and tool results are appended, with the ids the
///   events streamed (appends are idempotent by id);
/// - **after the run**, in the background, the thread gets a title if it has none
///   ([`MemoryBuilder::generate_title`]).
///
/// Cheap to clone; clones share everything. One `Memory` serves any number of agents and runs.
#[derive(Clone)]
pub struct Memory {
    inner: Arc<Inner>,
}

struct Inner {
    storage: StoreSlot,
    last_messages: u32,
    read_only: bool,
    title: Option<TitleGenerator>,
    processors: Vec<SharedProcessor>,
    /// The working memory options, for readers of the store (the server's routes).
    working_memory: Option<WorkingMemory>,
    /// Where observations are kept, when observational memory is on.
    observation_scope: Option<ObservationScope>,
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let processors: Vec<&str> = self.inner.processors.iter().map(|p| p.name()).collect();
        f.debug_struct("Memory")
            .field("backend", &self.inner.storage.get().map(|s| s.backend()))
            .field("last_messages", &self.inner.last_messages)
            .field("read_only", &self.inner.read_only)
            .field("generate_title", &self.inner.title.is_some())
            .field("processors", &processors)
            .finish()
    }
}

impl Memory {
    /// Starts building a memory, on its instance's store unless
    /// [`MemoryBuilder::storage`] gives it one of its own.
    pub fn builder() -> MemoryBuilder {
        MemoryBuilder::new()
    }

    /// A memory over `storage` with the defaults: the last 10 messages, no title, no working
    /// memory.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self::with_defaults(StoreSlot::own(storage))
    }

    /// A memory with the defaults on `storage`.
    fn with_defaults(storage: StoreSlot) -> Self {
        Self::from_parts(Parts {
            storage,
            last_messages: DEFAULT_LAST_MESSAGES,
            read_only: false,
            title: None,
            processors: Vec::new(),
            working_memory: None,
            observation_scope: None,
        })
    }

    pub(crate) fn from_parts(parts: Parts) -> Self {
        Self {
            inner: Arc::new(Inner {
                storage: parts.storage,
                last_messages: parts.last_messages,
                read_only: parts.read_only,
                title: parts.title,
                processors: parts.processors,
                working_memory: parts.working_memory,
                observation_scope: parts.observation_scope,
            }),
        }
    }

    /// The store: the memory's own, or the instance's once its agent joined one; `None`
    /// before that.
    pub fn storage(&self) -> Option<&Arc<dyn Storage>> {
        self.inner.storage.get()
    }

    /// How many recent messages a run sees.
    pub fn last_messages(&self) -> u32 {
        self.inner.last_messages
    }

    /// Whether this memory only reads.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The working memory options, when working memory is on.
    pub fn working_memory(&self) -> Option<&WorkingMemory> {
        self.inner.working_memory.as_ref()
    }

    /// Where observations are kept, when observational memory is on.
    pub fn observation_scope(&self) -> Option<ObservationScope> {
        self.inner.observation_scope
    }

    /// This memory as the agent's memory hook.
    pub fn shared(self) -> Arc<dyn AgentMemory> {
        Arc::new(self)
    }

    /// The recent window of the thread (one message more than asked, see `window`), whether
    /// older messages exist, and whether the thread exists. Creates the thread unless read-only.
    async fn load_window(
        &self,
        scope: &MemoryScope,
    ) -> Result<(Vec<StoredMessage>, bool, bool), Error> {
        let (thread_id, resource_id) = (scope.thread_id.as_str(), scope.resource_id.as_str());
        let storage = self.inner.storage.require()?;
        let n = self.inner.last_messages;
        let loaded = if n == 0 {
            // No history, but the thread's owner must still be checked.
            match storage.get_thread(thread_id).await {
                Ok(Some(thread)) if thread.resource_id == resource_id => Ok((Vec::new(), true)),
                Ok(Some(_)) => {
                    return Err(Error::ForeignThread {
                        thread_id: thread_id.to_owned(),
                        resource_id: resource_id.to_owned(),
                    });
                }
                Ok(None) => Err(StorageError::thread_not_found(thread_id)),
                Err(e) => Err(e),
            }
        } else {
            storage
                .list_messages(thread_id, Some(resource_id), Selection::last(n + 1))
                .await
                .map(|list| (list.messages, list.has_more))
        };
        match loaded {
            Ok((messages, older)) => Ok((messages, older, true)),
            Err(StorageError::ThreadNotFound { .. }) if self.inner.read_only => {
                Ok((Vec::new(), false, false))
            }
            Err(StorageError::ThreadNotFound { .. }) => {
                self.create_thread(scope, Metadata::new()).await?;
                Ok((Vec::new(), false, true))
            }
            Err(e) => Err(Error::storage("load the thread", thread_id, resource_id, e)),
        }
    }

    /// Creates the run's thread; another run creating it at the same moment is fine if it is the
    /// same resource's.
    async fn create_thread(&self, scope: &MemoryScope, metadata: Metadata) -> Result<(), Error> {
        let (thread_id, resource_id) = (scope.thread_id.as_str(), scope.resource_id.as_str());
        let storage = self.inner.storage.require()?;
        let new = NewThread::new(resource_id)
            .id(thread_id)
            .metadata(metadata.clone());
        match storage.create_thread(new).await {
            Ok(_) => Ok(()),
            Err(StorageError::ThreadExists { .. }) => match storage.get_thread(thread_id).await {
                Ok(Some(thread)) if thread.resource_id == resource_id && metadata.is_empty() => {
                    Ok(())
                }
                Ok(Some(thread)) if thread.resource_id == resource_id => {
                    let patch = ThreadPatch {
                        metadata: Some(MetadataUpdate::Merge(metadata)),
                        ..ThreadPatch::default()
                    };
                    storage
                        .update_thread(thread_id, patch)
                        .await
                        .map(|_| ())
                        .map_err(|e| Error::storage("update the thread", thread_id, resource_id, e))
                }
                Ok(Some(_)) => Err(Error::ForeignThread {
                    thread_id: thread_id.to_owned(),
                    resource_id: resource_id.to_owned(),
                }),
                Ok(None) => Err(Error::ThreadGone {
                    thread_id: thread_id.to_owned(),
                }),
                Err(e) => Err(Error::storage(
                    "create the thread",
                    thread_id,
                    resource_id,
                    e,
                )),
            },
            Err(e) => Err(Error::storage(
                "create the thread",
                thread_id,
                resource_id,
                e,
            )),
        }
    }

    /// Stores the run's input and loads the window before it, in one call (one round trip on
    /// SQLite); creates the thread when missing. `recall` then reports the input stored, so
    /// the agent does not persist it again.
    async fn store_input(
        &self,
        scope: &MemoryScope,
        input: &[Message],
    ) -> Result<(Vec<StoredMessage>, bool), MemoryError> {
        let (thread_id, resource_id) = (scope.thread_id.as_str(), scope.resource_id.as_str());
        let storage = self.inner.storage.require().map_err(MemoryError::from)?;
        let batch: Vec<NewMessage> = input.iter().cloned().map(NewMessage::from).collect();
        let last = self.inner.last_messages.saturating_add(1);
        let appended = match storage
            .append_with_history(thread_id, resource_id, batch.clone(), last)
            .await
        {
            Err(StorageError::ThreadNotFound { .. }) => {
                self.create_thread(scope, Metadata::new()).await?;
                storage
                    .append_with_history(thread_id, resource_id, batch, last)
                    .await
            }
            other => other,
        };
        let (stored, history) =
            appended.map_err(|e| Error::storage("store the input", thread_id, resource_id, e))?;
        self.stored(scope, &stored).await?;
        Ok((history.messages, history.has_more))
    }

    /// Appends a batch to the scope's thread, then lets the processors see it.
    async fn append(
        &self,
        scope: &MemoryScope,
        batch: Vec<NewMessage>,
        what: &'static str,
        fence: Option<Fence<'_>>,
    ) -> Result<(), MemoryError> {
        let (thread_id, resource_id) = (scope.thread_id.as_str(), scope.resource_id.as_str());
        let storage = self.inner.storage.require().map_err(MemoryError::from)?;
        let stored = match fence {
            Some(fence) => {
                storage
                    .append_messages_fenced(thread_id, resource_id, batch, fence)
                    .await
            }
            None => storage.append_messages(thread_id, resource_id, batch).await,
        }
        .map_err(|e| Error::storage(what, thread_id, resource_id, e))?;
        self.stored(scope, &stored).await
    }

    /// Runs the processors' after-store hooks.
    async fn stored(
        &self,
        scope: &MemoryScope,
        stored: &[StoredMessage],
    ) -> Result<(), MemoryError> {
        if self.inner.processors.is_empty() {
            return Ok(());
        }
        let storage = self.inner.storage.require().map_err(MemoryError::from)?;
        let cx = StoreContext { storage, scope };
        for processor in &self.inner.processors {
            processor.stored(&cx, stored).await?;
        }
        Ok(())
    }
}

/// A memory with the defaults (the last 10 messages, no title, no working memory) on its
/// instance's store: Mastra's `new Memory()`.
impl Default for Memory {
    fn default() -> Self {
        Self::with_defaults(StoreSlot::default())
    }
}

impl From<Memory> for Arc<dyn AgentMemory> {
    fn from(memory: Memory) -> Self {
        Arc::new(memory)
    }
}

impl Memory {
    /// The rest of `recall`, once the window is loaded: the processors, then pairing.
    async fn recall_from(
        &self,
        scope: &MemoryScope,
        input: &[Message],
        request_context: &RequestContext,
        fetched: Vec<StoredMessage>,
        older: bool,
        thread_exists: bool,
    ) -> Result<RecalledContext, MemoryError> {
        let (history, has_older) = window(fetched, self.inner.last_messages as usize, older);
        let storage = self.inner.storage.require().map_err(MemoryError::from)?;
        let mut cx = RecallContext {
            storage,
            scope,
            input,
            request_context,
            read_only: self.inner.read_only,
            thread_exists,
            history,
            has_older,
            system: Vec::new(),
        };
        for processor in &self.inner.processors {
            processor.recall(&mut cx).await?;
        }
        let RecallContext {
            mut history,
            system,
            ..
        } = cx;
        // A retried input already stored must not also appear as history, nor the messages
        // the caller hides (the answer a regenerate replaces, still stored until the new one
        // is).
        if !history.is_empty() {
            let hidden = request_context.get(kestrel_core::context::HIDDEN_MESSAGES_KEY);
            let hidden: HashSet<&str> = hidden
                .as_ref()
                .and_then(Value::as_array)
                .map(|ids| ids.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let input_ids: HashSet<&str> = input.iter().map(|m| m.id.as_str()).collect();
            history
                .retain(|m| !input_ids.contains(m.id.as_str()) && !hidden.contains(m.id.as_str()));
        }
        pair_tool_messages(&mut history);
        let history = history
            .into_iter()
            .map(|m| Message {
                id: m.id,
                role: m.role,
                parts: m.parts,
            })
            .collect();
        Ok(RecalledContext {
            system,
            history,
            input_stored: false,
        })
    }
}

#[async_trait]
impl AgentMemory for Memory {
    async fn recall(
        &self,
        scope: &MemoryScope,
        input: &[Message],
        request_context: &RequestContext,
    ) -> Result<RecalledContext, MemoryError> {
        // The input is stored here, with the window read in the same call: one round trip
        // instead of two on SQLite. A read-only memory only reads.
        let stores_input = !self.inner.read_only && !input.is_empty();
        let (fetched, older, thread_exists) = if stores_input {
            let (fetched, older) = self.store_input(scope, input).await?;
            (fetched, older, true)
        } else {
            self.load_window(scope).await?
        };
        let mut recalled = self
            .recall_from(scope, input, request_context, fetched, older, thread_exists)
            .await?;
        // A read-only memory stores nothing; the agent's persist of the input is a no-op then.
        recalled.input_stored = stores_input;
        Ok(recalled)
    }

    async fn persist(
        &self,
        scope: &MemoryScope,
        messages: &[Message],
        how: Persist<'_>,
    ) -> Result<(), MemoryError> {
        if self.inner.read_only || messages.is_empty() {
            return Ok(());
        }
        let new = |m: &Message| {
            let message = NewMessage::from(m.clone());
            if how.aborted {
                message.aborted()
            } else {
                message
            }
        };
        let batch = messages.iter().map(new).collect();
        let what = if how.aborted {
            "store the aborted step"
        } else {
            "store messages"
        };
        self.append(scope, batch, what, how.fence).await
    }

    async fn prepare_thread(
        &self,
        scope: &MemoryScope,
        metadata: serde_json::Map<String, Value>,
    ) -> Result<(), MemoryError> {
        if self.inner.read_only {
            return Ok(());
        }
        Ok(self.create_thread(scope, metadata).await?)
    }

    /// Only when the memory writes titles or has processors.
    fn wants_finished_runs(&self) -> bool {
        !self.inner.read_only && (self.inner.title.is_some() || !self.inner.processors.is_empty())
    }

    async fn run_finished(&self, scope: &MemoryScope, result: &GenerateResult) {
        if self.inner.read_only {
            return;
        }
        // A run with this memory had its store: recall needed it.
        let Some(storage) = self.inner.storage.get() else {
            return;
        };
        if let Some(title) = &self.inner.title {
            title.run(storage, scope).await;
        }
        let cx = StoreContext { storage, scope };
        for processor in &self.inner.processors {
            processor.run_finished(&cx, result).await;
        }
    }

    /// Clones the thread in the storage (messages in order, new ids; the clone's metadata names
    /// its source). Working memory, observations and vectors stay with the source.
    async fn fork_thread(
        &self,
        source: &MemoryScope,
        new_thread_id: Option<&str>,
        title: Option<&str>,
    ) -> Result<String, ForkError> {
        let options = kestrel_storage::CloneThread {
            resource_id: source.resource_id.clone(),
            new_thread_id: new_thread_id.map(str::to_owned),
            title: title.map(str::to_owned),
        };
        let storage = self.inner.storage.require().map_err(MemoryError::from)?;
        match storage.clone_thread(&source.thread_id, options).await {
            Ok(thread) => Ok(thread.id),
            Err(StorageError::ThreadNotFound { thread_id }) => {
                Err(ForkError::ThreadNotFound { thread_id })
            }
            Err(StorageError::ThreadOwnedByOtherResource {
                thread_id,
                requested,
                ..
            }) => Err(ForkError::ThreadOfOtherResource {
                thread_id,
                resource_id: requested,
            }),
            Err(StorageError::ThreadExists { thread_id }) => {
                Err(ForkError::ThreadExists { thread_id })
            }
            Err(e) => Err(MemoryError::with_source("forking the thread failed", e).into()),
        }
    }

    fn attach(&self, stores: &kestrel_core::store::Stores) -> Result<(), MemoryError> {
        self.inner.storage.attach(stores)
    }

    fn tools(&self) -> Vec<SharedTool> {
        if self.inner.read_only {
            return Vec::new();
        }
        self.inner
            .processors
            .iter()
            .flat_map(|p| p.tools())
            .collect()
    }
}

/// What a [`Memory`] is made of.
pub(crate) struct Parts {
    pub(crate) storage: StoreSlot,
    pub(crate) last_messages: u32,
    pub(crate) read_only: bool,
    pub(crate) title: Option<TitleGenerator>,
    pub(crate) processors: Vec<SharedProcessor>,
    pub(crate) working_memory: Option<WorkingMemory>,
    pub(crate) observation_scope: Option<ObservationScope>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use kestrel_core::memory::AgentMemory;
    use kestrel_core::model::{ScriptedModel, ScriptedResponse};
    use kestrel_storage::InMemoryStorage;

    use super::Memory;
    use crate::GenerateTitle;

    /// A finished run is handed to the memory only when it has work for it: titles to write or
    /// processors to tell, and never when it is read-only.
    #[test]
    fn finished_runs_are_wanted_only_for_titles_or_processors() {
        let storage = Arc::new(InMemoryStorage::new());
        let plain = Memory::builder().storage(storage.clone()).build().unwrap();
        assert!(!plain.wants_finished_runs());
        let titles = || {
            let model = ScriptedModel::new().respond(ScriptedResponse::text("A title"));
            GenerateTitle::new(Arc::new(model))
        };
        let titled = Memory::builder()
            .storage(storage.clone())
            .generate_title(titles())
            .build()
            .unwrap();
        assert!(titled.wants_finished_runs());
        let read_only = Memory::builder()
            .storage(storage)
            .generate_title(titles())
            .read_only(true)
            .build()
            .unwrap();
        assert!(!read_only.wants_finished_runs());
    }
}
