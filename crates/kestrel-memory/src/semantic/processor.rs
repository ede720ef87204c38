//! The semantic recall stage of a [`Memory`](crate::Memory): embeds stored messages into the
//! vector index, and before a run brings in the matches of the input and their neighbours.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use kestrel_core::memory::MemoryError;
use kestrel_core::message::{Message, Part, Role};
use kestrel_storage::{
    Metadata, Selection, SeqRange, Storage, StorageError, StoredMessage, VectorFilter, VectorQuery,
    VectorRecord,
};
use serde_json::{Value, json};

use super::{SemanticRecall, SemanticRecallScope};
use crate::error::Error;
use crate::processor::{MemoryProcessor, RecallContext, StoreContext};

/// Vectors of recently stored user messages kept for the search that follows (the run's input
/// is stored, and embedded, just before it is searched for).
const CACHED_VECTORS: usize = 32;

/// The semantic recall stage of a [`Memory`](crate::Memory).
pub(crate) struct SemanticRecallProcessor {
    options: SemanticRecall,
    /// The index known to exist with the embedder's dimension (created or checked once).
    ensured: Mutex<Option<String>>,
    /// Vectors of recently stored user messages, by text, newest last.
    recent: Mutex<VecDeque<(String, Vec<f32>)>>,
}

/// A search result worth loading: a message of the resource, by thread and seq.
struct Hit {
    thread_id: String,
    seq: i64,
}

impl SemanticRecallProcessor {
    pub(crate) fn new(options: SemanticRecall) -> Self {
        Self {
            options,
            ensured: Mutex::new(None),
            recent: Mutex::new(VecDeque::new()),
        }
    }

    fn embedder_name(&self) -> String {
        format!(
            "{}/{}",
            self.options.embedder.provider(),
            self.options.embedder.model_id()
        )
    }

    fn dimension_error(&self, index: &str, index_dimension: usize, got: usize) -> Error {
        Error::IndexDimension {
            index: index.to_owned(),
            embedder: self.embedder_name(),
            index_dimension,
            embedder_dimension: got,
        }
    }

    /// Creates the index on first use; an index of another dimension is a typed error.
    async fn ensure_index(
        &self,
        storage: &dyn Storage,
        index: &str,
        dimension: usize,
    ) -> Result<(), StorageErrorOr> {
        if self
            .ensured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
            == Some(index)
        {
            return Ok(());
        }
        match storage.create_index(index, dimension).await {
            Ok(()) => {
                *self.ensured.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(index.to_owned());
                Ok(())
            }
            Err(StorageError::IndexExists {
                existing,
                requested,
                ..
            }) => Err(StorageErrorOr::Fatal(
                self.dimension_error(index, existing, requested),
            )),
            Err(e) => Err(StorageErrorOr::Storage(e)),
        }
    }

    fn remember(&self, text: &str, vector: &[f32]) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.retain(|(t, _)| t != text);
        if recent.len() >= CACHED_VECTORS {
            recent.pop_front();
        }
        recent.push_back((text.to_owned(), vector.to_vec()));
    }

    fn recently_embedded(&self, text: &str) -> Option<Vec<f32>> {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let at = recent.iter().position(|(t, _)| t == text)?;
        recent.remove(at).map(|(_, vector)| vector)
    }

    /// The query vector for the run's input, or `None` (logged) when there is nothing to search
    /// with.
    async fn query_vector(&self, cx: &RecallContext<'_>) -> Option<Vec<f32>> {
        let text = query_text(cx.input)?;
        let vector = match self.recently_embedded(&text) {
            Some(vector) => vector,
            None => match self.options.embedder.embed_one(&text).await {
                Ok(vector) => vector,
                Err(error) => {
                    tracing::warn!(
                        thread_id = %cx.scope.thread_id,
                        resource_id = %cx.scope.resource_id,
                        embedder = %self.embedder_name(),
                        %error,
                        "semantic recall skipped: the input could not be embedded; the run \
                         continues with its recent messages only"
                    );
                    return None;
                }
            },
        };
        (!is_zero(&vector)).then_some(vector)
    }

    /// The matches worth loading, best first: not already in the run's context, at least
    /// `min_score`, at most `top_k`.
    async fn search(
        &self,
        cx: &RecallContext<'_>,
        vector: Vec<f32>,
    ) -> Result<Vec<Hit>, MemoryError> {
        let (thread_id, resource_id) = (&cx.scope.thread_id, &cx.scope.resource_id);
        let index = self.options.index_for(vector.len());
        let dimension = vector.len();
        // The run already sees these; asking for more keeps `top_k` for older context.
        let seen: HashSet<&str> = cx
            .input
            .iter()
            .map(|m| m.id.as_str())
            .chain(cx.history.iter().map(|m| m.id.as_str()))
            .collect();
        let filter = match self.options.scope {
            SemanticRecallScope::Thread => VectorFilter {
                thread_id: Some(thread_id.clone()),
                resource_id: Some(resource_id.clone()),
            },
            SemanticRecallScope::Resource => VectorFilter {
                thread_id: None,
                resource_id: Some(resource_id.clone()),
            },
        };
        let extra = u32::try_from(seen.len()).unwrap_or(u32::MAX);
        let query = VectorQuery {
            vector,
            top_k: self.options.top_k.saturating_add(extra),
            filter,
        };
        let matches = match cx.storage.query_vectors(&index, query).await {
            Ok(matches) => matches,
            // Nothing was ever stored with this embedder.
            Err(StorageError::IndexNotFound { .. }) => return Ok(Vec::new()),
            Err(StorageError::DimensionMismatch { expected, .. }) => {
                return Err(self.dimension_error(&index, expected, dimension).into());
            }
            Err(source) => {
                return Err(Error::Storage {
                    action: "search earlier messages",
                    source,
                }
                .into());
            }
        };
        let min_score = self.options.min_score.unwrap_or(f32::NEG_INFINITY);
        let hits = matches
            .into_iter()
            .filter(|m| m.score >= min_score)
            .filter(|m| !seen.contains(meta_str(&m.metadata, "message_id").unwrap_or(&m.id)))
            .filter_map(|m| {
                let hit = Hit {
                    thread_id: meta_str(&m.metadata, "thread_id")?.to_owned(),
                    seq: m.metadata.get("seq").and_then(Value::as_i64)?,
                };
                // The filter already did this; a vector written by something else must not
                // bring another resource's message in.
                (meta_str(&m.metadata, "resource_id") == Some(resource_id.as_str())).then_some(hit)
            })
            .take(self.options.top_k as usize)
            .collect();
        Ok(hits)
    }

    /// Loads the hits of one thread with their neighbours, in seq order, one read per run of
    /// overlapping ranges.
    async fn load(
        &self,
        cx: &RecallContext<'_>,
        thread_id: &str,
        mut seqs: Vec<i64>,
    ) -> Result<Vec<StoredMessage>, MemoryError> {
        let resource_id = cx.scope.resource_id.as_str();
        let range = self.options.message_range;
        seqs.sort_unstable();
        let mut spans: Vec<(i64, i64)> = Vec::new();
        for seq in seqs {
            let (from, to) = (
                seq.saturating_sub(i64::from(range.before)),
                seq.saturating_add(i64::from(range.after)),
            );
            match spans.last_mut() {
                Some(last) if from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
                _ => spans.push((from, to)),
            }
        }
        let mut loaded = Vec::new();
        for (from, to) in spans {
            let selection = Selection::Range(SeqRange {
                after: Some(from.saturating_sub(1)),
                before: Some(to.saturating_add(1)),
                ..SeqRange::default()
            });
            match cx
                .storage
                .list_messages(thread_id, Some(resource_id), selection)
                .await
            {
                Ok(list) => loaded.extend(list.messages),
                // Deleted since it was indexed.
                Err(StorageError::ThreadNotFound { .. }) => return Ok(Vec::new()),
                // Never happens with vectors this processor wrote; refuse to show it.
                Err(StorageError::ThreadOwnedByOtherResource { .. }) => {
                    tracing::warn!(
                        thread_id,
                        resource_id,
                        "semantic recall ignored a match in a thread of another resource"
                    );
                    return Ok(Vec::new());
                }
                Err(source) => {
                    return Err(Error::Storage {
                        action: "load recalled messages",
                        source,
                    }
                    .into());
                }
            }
        }
        Ok(loaded)
    }
}

/// A storage error to log, or an error that must fail the run.
enum StorageErrorOr {
    Storage(StorageError),
    Fatal(Error),
}

#[async_trait]
impl MemoryProcessor for SemanticRecallProcessor {
    fn name(&self) -> &str {
        "semantic-recall"
    }

    async fn recall(&self, cx: &mut RecallContext<'_>) -> Result<(), MemoryError> {
        if self.options.top_k == 0
            || (self.options.scope == SemanticRecallScope::Thread && !cx.thread_exists)
        {
            return Ok(());
        }
        let Some(vector) = self.query_vector(cx).await else {
            return Ok(());
        };
        let hits = self.search(cx, vector).await?;
        if hits.is_empty() {
            return Ok(());
        }
        // Threads in order of their best match.
        let mut order: Vec<String> = Vec::new();
        let mut by_thread: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for hit in hits {
            if !by_thread.contains_key(&hit.thread_id) {
                order.push(hit.thread_id.clone());
            }
            by_thread.entry(hit.thread_id).or_default().push(hit.seq);
        }
        let mut earlier: Vec<(String, Vec<StoredMessage>)> = Vec::new();
        for thread_id in order {
            let seqs = by_thread.remove(&thread_id).unwrap_or_default();
            let messages = self.load(cx, &thread_id, seqs).await?;
            if messages.is_empty() {
                continue;
            }
            if thread_id == cx.scope.thread_id {
                cx.add_history(messages);
            } else {
                earlier.push((thread_id, messages));
            }
        }
        if !earlier.is_empty() {
            // Oldest conversation first, like the history.
            earlier.sort_by_key(|(_, messages)| messages.first().map(|m| m.created_at));
            cx.system.push(earlier_conversations(&earlier));
        }
        Ok(())
    }

    async fn stored(
        &self,
        cx: &StoreContext<'_>,
        messages: &[StoredMessage],
    ) -> Result<(), MemoryError> {
        let (thread_id, resource_id) = (&cx.scope.thread_id, &cx.scope.resource_id);
        let items: Vec<(&StoredMessage, String)> = messages
            .iter()
            .filter(|m| matches!(m.role, Role::User | Role::Assistant))
            .filter_map(|m| {
                let text = text_of(&m.parts);
                (!text.trim().is_empty()).then_some((m, text))
            })
            .collect();
        if items.is_empty() {
            return Ok(());
        }
        let texts: Vec<String> = items.iter().map(|(_, text)| text.clone()).collect();
        let vectors = match self.options.embedder.embed(&texts).await {
            Ok(vectors) if vectors.len() == texts.len() => vectors,
            Ok(vectors) => {
                tracing::warn!(
                    %thread_id,
                    %resource_id,
                    embedder = %self.embedder_name(),
                    sent = texts.len(),
                    received = vectors.len(),
                    "messages stored but not indexed for semantic recall: the embedder returned \
                     the wrong number of vectors"
                );
                return Ok(());
            }
            Err(error) => {
                tracing::warn!(
                    %thread_id,
                    %resource_id,
                    embedder = %self.embedder_name(),
                    %error,
                    "messages stored but not indexed for semantic recall: embedding failed"
                );
                return Ok(());
            }
        };
        let Some(dimension) = vectors.first().map(Vec::len) else {
            return Ok(());
        };
        let index = self.options.index_for(dimension);
        let mut records = Vec::with_capacity(items.len());
        for ((message, text), vector) in items.iter().zip(vectors) {
            if is_zero(&vector) {
                continue;
            }
            if message.role == Role::User {
                self.remember(text, &vector);
            }
            let mut metadata = Metadata::new();
            metadata.insert("thread_id".into(), json!(message.thread_id));
            metadata.insert("resource_id".into(), json!(message.resource_id));
            metadata.insert("message_id".into(), json!(message.id));
            metadata.insert("seq".into(), json!(message.seq));
            records.push(VectorRecord {
                id: message.id.clone(),
                vector,
                metadata,
            });
        }
        if records.is_empty() {
            return Ok(());
        }
        let failure = match self
            .ensure_index(cx.storage.as_ref(), &index, dimension)
            .await
        {
            Ok(()) => match cx.storage.upsert_vectors(&index, records).await {
                Ok(()) => return Ok(()),
                Err(StorageError::DimensionMismatch { expected, got, .. }) => {
                    StorageErrorOr::Fatal(self.dimension_error(&index, expected, got))
                }
                Err(StorageError::IndexNotFound { .. }) => {
                    // Dropped behind our back: create it again next time.
                    *self.ensured.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    StorageErrorOr::Storage(StorageError::IndexNotFound { index })
                }
                Err(e) => StorageErrorOr::Storage(e),
            },
            Err(failure) => failure,
        };
        match failure {
            StorageErrorOr::Fatal(error) => Err(error.into()),
            StorageErrorOr::Storage(error) => {
                tracing::warn!(
                    %thread_id,
                    %resource_id,
                    %error,
                    "messages stored but not indexed for semantic recall: the vector index \
                     could not be written"
                );
                Ok(())
            }
        }
    }
}

/// The text semantic recall searches with: the input's last user message with text, else any
/// text of the input.
pub(super) fn query_text(input: &[Message]) -> Option<String> {
    let with_text = |m: &&Message| !text_of(&m.parts).trim().is_empty();
    input
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .find(with_text)
        .or_else(|| input.iter().rev().find(with_text))
        .map(|m| text_of(&m.parts))
}

/// The text parts of a message, one per line.
fn text_of(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

fn is_zero(vector: &[f32]) -> bool {
    vector.iter().all(|x| *x == 0.0)
}

fn meta_str<'a>(metadata: &'a Metadata, key: &str) -> Option<&'a str> {
    metadata.get(key).and_then(Value::as_str)
}

/// The system text presenting matches from the resource's other threads.
pub(super) fn earlier_conversations(threads: &[(String, Vec<StoredMessage>)]) -> String {
    const TIME: &str = "%Y-%m-%d %H:%M UTC";
    let mut text = String::from(
        "# Earlier conversations\n\nThese messages come from your earlier conversations with \
         this user (other threads than this one), recalled because they may relate to the \
         current message. They are background, not part of the current conversation.\n",
    );
    for (thread_id, messages) in threads {
        let (Some(first), Some(last)) = (messages.first(), messages.last()) else {
            continue;
        };
        text.push_str(&format!(
            "\n<earlier_conversation thread_id=\"{thread_id}\" from=\"{}\" to=\"{}\">\n",
            first.created_at.format(TIME),
            last.created_at.format(TIME)
        ));
        let mut previous_seq: Option<i64> = None;
        for message in messages {
            if previous_seq.is_some_and(|seq| message.seq > seq + 1) {
                text.push_str("…\n");
            }
            previous_seq = Some(message.seq);
            let Some(line) = render(message) else {
                continue;
            };
            text.push_str(&format!(
                "[{}] {}: {line}\n",
                message.created_at.format(TIME),
                role_name(message.role)
            ));
        }
        text.push_str("</earlier_conversation>\n");
    }
    text
}

/// One message as a line: its text, or what its tool calls and results were about.
fn render(message: &StoredMessage) -> Option<String> {
    let text = text_of(&message.parts);
    if !text.trim().is_empty() {
        return Some(text);
    }
    let tools: Vec<String> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolCall { tool_name, .. } => Some(format!("(called the tool `{tool_name}`)")),
            Part::ToolResult { tool_name, .. } => {
                Some(format!("(result of the tool `{tool_name}`)"))
            }
            _ => None,
        })
        .collect();
    (!tools.is_empty()).then(|| tools.join(" "))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}
