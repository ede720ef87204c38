//! [`MemoryBuilder`]: a [`Memory`]'s options, checked when it is built.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use kestrel_core::model::{ModelRegistry, ModelSpec};
use kestrel_storage::Storage;

use crate::error::MemoryBuildError;
use crate::memory::{DEFAULT_LAST_MESSAGES, Memory, Parts};
use crate::observational::{ObservationalMemory, ObservationalProcessor};
use crate::processor::SharedProcessor;
use crate::semantic::{SemanticRecall, SemanticRecallProcessor};
use crate::slot::StoreSlot;
use crate::title::{GenerateTitle, TitleGenerator};
use crate::working::{WorkingMemory, WorkingMemoryProcessor};

/// Builds a [`Memory`]. See [`Memory::builder`].
pub struct MemoryBuilder {
    storage: Option<Arc<dyn Storage>>,
    last_messages: u32,
    read_only: bool,
    generate_title: Option<GenerateTitle>,
    working_memory: Option<WorkingMemory>,
    semantic_recall: Option<SemanticRecall>,
    observational_memory: Option<ObservationalMemory>,
    processors: Vec<SharedProcessor>,
    registry: Option<ModelRegistry>,
}

impl fmt::Debug for MemoryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBuilder")
            .field("backend", &self.storage.as_ref().map(|s| s.backend()))
            .field("last_messages", &self.last_messages)
            .field("read_only", &self.read_only)
            .field("generate_title", &self.generate_title)
            .field("working_memory", &self.working_memory)
            .field("semantic_recall", &self.semantic_recall)
            .field("observational_memory", &self.observational_memory)
            .field("processors", &self.processors.len())
            .finish()
    }
}

impl MemoryBuilder {
    /// The defaults: the last 10 messages, the instance's store, nothing else.
    pub(crate) fn new() -> Self {
        Self {
            storage: None,
            last_messages: DEFAULT_LAST_MESSAGES,
            read_only: false,
            generate_title: None,
            working_memory: None,
            semantic_recall: None,
            observational_memory: None,
            processors: Vec::new(),
            registry: None,
        }
    }

    /// A store of the memory's own, over the instance's: usually not needed, the instance's
    /// storage (`Kestrel::builder().storage(..)`) is the memory's too.
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// How many of the thread's most recent messages (every stored message counts: user,
    /// assistant, tool results) a run sees; default 10, 0 for none.
    ///
    /// Tool calls and their results are never split, since providers refuse either alone: a
    /// window that would start with tool results also includes the assistant message that made
    /// those calls (it is then one message longer), and whatever is still unpaired after every
    /// processor ran (results whose call was deleted, calls without results) is left out.
    pub fn last_messages(mut self, last_messages: u32) -> Self {
        self.last_messages = last_messages;
        self
    }

    /// Reads (history, working memory) but never writes: no thread is created, nothing is
    /// stored, no title is generated, and no memory tools are offered.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Titles untitled threads after a run (see [`GenerateTitle`]).
    pub fn generate_title(mut self, options: GenerateTitle) -> Self {
        self.generate_title = Some(options);
        self
    }

    /// Keeps a working memory and gives the agent the `update_working_memory` tool (see
    /// [`WorkingMemory`]), offered in runs with a thread and a resource.
    pub fn working_memory(mut self, options: WorkingMemory) -> Self {
        self.working_memory = Some(options);
        self
    }

    /// Recalls older messages related to each run's input, found by meaning: from this thread
    /// into the history, and from the resource's other threads into the system text (see
    /// [`SemanticRecall`] and [`crate::semantic`]). Every stored user and assistant message with
    /// text is embedded into a vector index of the store.
    pub fn semantic_recall(mut self, options: SemanticRecall) -> Self {
        self.semantic_recall = Some(options);
        self
    }

    /// Condenses long threads into dated observations that replace the old messages in the
    /// context, and gives the agent the `recall` tool to read them exactly (see
    /// [`ObservationalMemory`] and [`crate::observational`]). Unobserved messages, and at least
    /// the [`last_messages`](Self::last_messages) window, stay in the context in full.
    pub fn observational_memory(mut self, options: ObservationalMemory) -> Self {
        self.observational_memory = Some(options);
        self
    }

    /// Adds a processor to the recall pipeline, after the built-in ones (see
    /// [`crate::processor`]).
    pub fn processor(mut self, processor: SharedProcessor) -> Self {
        self.processors.push(processor);
        self
    }

    /// Adds an agent [`Processor`](kestrel_core::processor::Processor) as a stage of the
    /// recall (see [`RecallWith`](crate::RecallWith)): e.g. `ToolCallFilter` or `TokenLimiter`
    /// from `kestrel-processors`, shaping the history every agent using this memory recalls.
    pub fn recall_with(self, processor: impl kestrel_core::processor::IntoProcessor) -> Self {
        self.processor(std::sync::Arc::new(crate::RecallWith(
            processor.into_processor(),
        )))
    }

    /// Resolves model strings (title, observational memory) through this registry instead of
    /// [`ModelRegistry::from_env`].
    pub fn registry(mut self, registry: ModelRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Checks the options and builds the memory.
    pub fn build(self) -> Result<Memory, MemoryBuildError> {
        let title = match &self.generate_title {
            Some(options) => {
                let model = match &options.model {
                    ModelSpec::Model(model) => model.clone(),
                    spec @ ModelSpec::Id(_) => spec
                        .resolve(
                            &self
                                .registry
                                .clone()
                                .unwrap_or_else(ModelRegistry::from_env),
                        )
                        .map_err(|source| MemoryBuildError::TitleModel { source })?,
                };
                Some(TitleGenerator::new(model, options))
            }
            None => None,
        };
        // One slot for the memory and what it makes: a store taken later reaches them all.
        let storage = self.storage.map(StoreSlot::own).unwrap_or_default();
        let mut processors: Vec<SharedProcessor> = Vec::new();
        let working_memory = self.working_memory.clone();
        if let Some(options) = self.working_memory {
            let storage = storage.clone();
            processors.push(Arc::new(WorkingMemoryProcessor::new(storage, options)?));
        }
        let observation_scope = self.observational_memory.as_ref().map(|o| o.scope);
        if let Some(options) = self.observational_memory {
            let storage = storage.clone();
            let registry = self.registry.as_ref();
            processors.push(Arc::new(ObservationalProcessor::new(
                storage, options, registry,
            )?));
        }
        // After observational memory, which reshapes the history from the recent window: the
        // matches then join the final history, and what it already holds is not recalled again.
        if let Some(options) = self.semantic_recall {
            processors.push(Arc::new(SemanticRecallProcessor::new(options)));
        }
        processors.extend(self.processors);
        let mut names = HashSet::new();
        for processor in &processors {
            if !names.insert(processor.name().to_owned()) {
                return Err(MemoryBuildError::DuplicateProcessor {
                    name: processor.name().to_owned(),
                });
            }
        }
        Ok(Memory::from_parts(Parts {
            storage,
            last_messages: self.last_messages,
            read_only: self.read_only,
            title,
            processors,
            working_memory,
            observation_scope,
        }))
    }
}
