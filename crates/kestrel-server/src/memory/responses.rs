//! What the memory routes answer: each body a type, so the OpenAPI document gives its schema
//! (and the fuzzer checks every answer against it). The storage's records are mirrored here,
//! field for field, in the JSON they had.

use chrono::{DateTime, Utc};
use kestrel_memory::{Memory, ObservationScope, WorkingMemoryScope};
use kestrel_storage::{Metadata, Observation, Page, Thread};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// `thread` or `resource`: where working memory or observations are kept.
fn working_scope_name(scope: WorkingMemoryScope) -> &'static str {
    match scope {
        WorkingMemoryScope::Thread => "thread",
        WorkingMemoryScope::Resource => "resource",
    }
}

/// `thread` or `resource`, for observations.
pub(super) fn observation_scope_name(scope: ObservationScope) -> &'static str {
    match scope {
        ObservationScope::Thread => "thread",
        ObservationScope::Resource => "resource",
    }
}

/// `GET /memory/status`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct MemoryStatus {
    /// Whether there is memory: the agent's own when `agentId` is given, else the server's.
    pub(super) result: bool,
    /// How the server's memory is configured (null without one).
    pub(super) config: Option<MemoryConfig>,
}

/// How the server's memory is configured.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MemoryConfig {
    /// How many recent messages a run recalls.
    last_messages: u32,
    /// Whether runs only read it (nothing they say is stored).
    read_only: bool,
    /// Its working memory (null when it keeps none).
    working_memory: Option<WorkingMemoryConfig>,
    /// Its observational memory (null when it keeps none).
    observational_memory: Option<ObservationalMemoryConfig>,
}

/// A working memory's configuration.
#[derive(Debug, Serialize, JsonSchema)]
struct WorkingMemoryConfig {
    /// `thread` or `resource`: what one working memory is kept for.
    #[schemars(extend("enum" = ["thread", "resource"]))]
    scope: &'static str,
    /// The Markdown template it starts from (null without one).
    template: Option<String>,
    /// The JSON schema its content follows (null without one).
    schema: Option<Value>,
}

/// An observational memory's configuration.
#[derive(Debug, Serialize, JsonSchema)]
struct ObservationalMemoryConfig {
    /// `thread` or `resource`: what observations are kept for.
    #[schemars(extend("enum" = ["thread", "resource"]))]
    scope: &'static str,
}

impl MemoryConfig {
    /// How `memory` is configured.
    pub(super) fn of(memory: &Memory) -> Self {
        Self {
            last_messages: memory.last_messages(),
            read_only: memory.is_read_only(),
            working_memory: memory.working_memory().map(|w| WorkingMemoryConfig {
                scope: working_scope_name(w.scope_kind()),
                template: w.template_text().map(str::to_owned),
                schema: w.schema_value().cloned(),
            }),
            observational_memory: memory.observation_scope().map(|scope| {
                ObservationalMemoryConfig {
                    scope: observation_scope_name(scope),
                }
            }),
        }
    }
}

/// A thread (Mastra's `StorageThreadType`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StorageThread {
    /// Its id.
    id: String,
    /// The resource that owns it.
    resource_id: String,
    /// Its title (null without one).
    title: Option<String>,
    /// Its metadata.
    metadata: Metadata,
    /// When it was created.
    #[schemars(with = "String", extend("format" = "date-time"))]
    created_at: DateTime<Utc>,
    /// When it, or its messages, last changed.
    #[schemars(with = "String", extend("format" = "date-time"))]
    updated_at: DateTime<Utc>,
}

impl From<Thread> for StorageThread {
    fn from(thread: Thread) -> Self {
        let Thread {
            id,
            resource_id,
            title,
            metadata,
            created_at,
            updated_at,
        } = thread;
        Self {
            id,
            resource_id,
            title,
            metadata,
            created_at,
            updated_at,
        }
    }
}

/// A page of threads.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThreadsPage {
    /// The page's threads.
    threads: Vec<StorageThread>,
    /// The page, from 0.
    page: u32,
    /// Threads per page.
    per_page: u32,
    /// How many threads the listing has.
    total: u64,
    /// Whether a later page has more.
    has_more: bool,
}

impl From<Page<Thread>> for ThreadsPage {
    fn from(page: Page<Thread>) -> Self {
        Self {
            threads: page.items.into_iter().map(StorageThread::from).collect(),
            page: page.page,
            per_page: page.per_page,
            total: page.total,
            has_more: page.has_more,
        }
    }
}

/// `DELETE /memory/threads/{threadId}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ThreadDeleted {
    /// `Thread deleted`.
    #[schemars(extend("const" = "Thread deleted"))]
    pub(super) result: &'static str,
}

/// `GET /memory/threads/{threadId}/working-memory`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThreadWorkingMemory {
    /// Whether the memory keeps working memory.
    pub(super) enabled: bool,
    /// Its content (null when none was written).
    pub(super) working_memory: Option<String>,
    /// `thread` or `resource`: what the content is kept for.
    #[schemars(extend("enum" = ["thread", "resource"]))]
    pub(super) source: &'static str,
    /// The Markdown template it starts from (null without one).
    pub(super) working_memory_template: Option<String>,
    /// The JSON schema its content follows (null without one).
    pub(super) working_memory_schema: Option<Value>,
    /// Always true: the thread exists (else 404).
    pub(super) thread_exists: bool,
}

impl ThreadWorkingMemory {
    /// The working memory of `memory` (kept for `scope`), holding `content`.
    pub(super) fn new(memory: &Memory, scope: WorkingMemoryScope, content: Option<String>) -> Self {
        let options = memory.working_memory();
        Self {
            enabled: options.is_some(),
            working_memory: content,
            source: working_scope_name(scope),
            working_memory_template: options.and_then(|w| w.template_text()).map(str::to_owned),
            working_memory_schema: options.and_then(|w| w.schema_value()).cloned(),
            thread_exists: true,
        }
    }
}

/// A write that went through.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct WorkingMemoryUpdated {
    /// Always true.
    pub(super) success: bool,
}

/// `GET /memory/observational-memory`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Observations {
    /// Whether the memory keeps observations.
    pub(super) enabled: bool,
    /// `thread` or `resource`: what the observations are kept for (left out when disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["thread", "resource"]))]
    pub(super) scope: Option<&'static str>,
    /// The observations the thread sees, oldest first.
    pub(super) observations: Vec<StoredObservation>,
}

/// One observation.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredObservation {
    /// Its id.
    id: String,
    /// The note.
    text: String,
    /// When it was observed.
    #[schemars(with = "String", extend("format" = "date-time"))]
    created_at: DateTime<Utc>,
    /// The last message seq (of `sourceThreadId`) it covers (null when unknown).
    observed_up_to_seq: Option<i64>,
    /// The thread its messages came from (null when unknown).
    source_thread_id: Option<String>,
}

impl From<Observation> for StoredObservation {
    fn from(observation: Observation) -> Self {
        Self {
            id: observation.id,
            text: observation.text,
            created_at: observation.created_at,
            observed_up_to_seq: observation.observed_up_to_seq,
            source_thread_id: observation.source_thread_id,
        }
    }
}
