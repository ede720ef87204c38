//! The `recall` tool: the exact earlier messages, for a model whose context holds observations.
//!
//! Observational memory condenses old messages, but never deletes them. With this tool the model
//! reads them again:
//!
//! - `{"mode": "messages"}` pages through a thread's messages, oldest first (`page`, `limit`), or
//!   around a point (`after_seq` / `before_seq`); `seq` reads one message in full (`offset`
//!   continues a long one);
//! - `{"mode": "search", "query": "..."}` finds messages containing a text (case-insensitive),
//!   newest first;
//! - `{"mode": "threads"}` (resource scope only) lists the resource's threads, newest first.
//!
//! In thread scope only the run's thread can be read. In resource scope `thread_id` names any
//! thread of the run's resource; a thread of another resource is answered as not found, exactly
//! like a missing one, and nothing of it is read.

use std::sync::Arc;

use async_trait::async_trait;
use kestrel_core::message::Role;
use kestrel_core::tool::{Tool, ToolContext, ToolError};
use kestrel_storage::{
    Direction, MessageSearch, PageRequest, Scope, Selection, SeqRange, Storage, StorageError,
    StoredMessage, ThreadOrder, ThreadOrderField, ThreadQuery,
};
use serde_json::{Value, json};

use crate::observational::{ObservationScope, cut, message_content};
use crate::slot::StoreSlot;

/// The name of the tool that reads earlier messages.
pub const RECALL_TOOL: &str = "recall";

/// Messages per page unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 20;

/// The largest `limit`.
const MAX_LIMIT: u32 = 50;

/// A listed message's content is cut to this many characters (read it whole with `seq`).
const LISTED_CHARS: usize = 2000;

/// A message read with `seq` is returned in slices of this many characters.
const READ_CHARS: usize = 12_000;

/// Tool calls and results inside one message read whole are cut to this many characters.
const READ_TOOL_CHARS: usize = 100_000;

/// A search hit shows this many characters around the match.
const SNIPPET_CHARS: usize = 400;

/// The `recall` tool.
pub(crate) struct RecallTool {
    storage: StoreSlot,
    scope: ObservationScope,
    description: String,
    input_schema: Value,
}

impl RecallTool {
    /// The memory's store, or why there is none.
    fn store(&self) -> Result<&Arc<dyn Storage>, ToolError> {
        self.storage
            .require()
            .map_err(|error| ToolError::new(error.to_string()))
    }

    pub(crate) fn new(storage: StoreSlot, scope: ObservationScope) -> Self {
        let limit = json!({
            "type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
            "description": format!("How many messages (or threads) to return; default {DEFAULT_LIMIT}.")
        });
        let mut properties = json!({
            "mode": {
                "type": "string",
                "enum": ["messages", "search"],
                "description": "`messages`: read messages in order; `search`: find messages containing `query`."
            },
            "query": {
                "type": "string",
                "description": "search: the text to find (case-insensitive)."
            },
            "page": {
                "type": "integer", "minimum": 0,
                "description": "messages: the page, from 0 (oldest messages first)."
            },
            "after_seq": {
                "type": "integer", "minimum": 0,
                "description": "messages: the messages just after this seq, oldest first."
            },
            "before_seq": {
                "type": "integer", "minimum": 1,
                "description": "messages: the messages just before this seq."
            },
            "seq": {
                "type": "integer", "minimum": 1,
                "description": "messages: read this one message in full."
            },
            "offset": {
                "type": "integer", "minimum": 0,
                "description": "messages with `seq`: continue a long message from this character."
            },
            "limit": limit
        });
        let description = match scope {
            ObservationScope::Thread => {
                "Reads the exact earlier messages of this conversation, which your observations \
                 only summarise: page through them (`messages`, oldest first; `seq` reads one in \
                 full) or search them by text (`search`). Each message has a `seq`, its place in \
                 the conversation."
            }
            ObservationScope::Resource => {
                "Reads the exact earlier messages of this conversation or of the user's other \
                 conversations, which your observations only summarise: list the conversations \
                 (`threads`), page through one's messages (`messages`, oldest first, this \
                 conversation unless `thread_id` is given; `seq` reads one in full) or search \
                 them by text (`search`, all conversations unless `thread_id` is given). Each \
                 message has a `seq`, its place in its conversation."
            }
        };
        if scope == ObservationScope::Resource
            && let Some(props) = properties.as_object_mut()
        {
            props.insert(
                "mode".into(),
                json!({
                    "type": "string",
                    "enum": ["messages", "search", "threads"],
                    "description": "`threads`: list the user's conversations; `messages`: read a conversation's messages in order; `search`: find messages containing `query`."
                }),
            );
            props.insert(
                "thread_id".into(),
                json!({
                    "type": "string",
                    "description": "messages or search: another conversation of this user, as listed by `threads` (default: this one for messages, all for search)."
                }),
            );
        }
        Self {
            storage,
            scope,
            description: description.to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": ["mode"],
                "additionalProperties": false
            }),
        }
    }

    /// The thread to read: the run's own, or (resource scope) another of its resource.
    fn thread<'a>(&self, input: &'a Value, current: &'a str) -> Result<&'a str, ToolError> {
        match input.get("thread_id").and_then(Value::as_str) {
            None => Ok(current),
            Some(id) if id == current => Ok(current),
            Some(_) if self.scope == ObservationScope::Thread => Err(ToolError::new(
                "`thread_id` is not available: only this conversation can be read",
            )),
            Some(id) => Ok(id),
        }
    }

    async fn messages(
        &self,
        input: &Value,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Value, ToolError> {
        let limit = limit(input);
        let int = |key| input.get(key).and_then(Value::as_i64);
        if let Some(seq) = int("seq") {
            return self.read_one(input, thread_id, resource_id, seq).await;
        }
        let (selection, what) = match (int("after_seq"), int("before_seq")) {
            (Some(after), _) => (Selection::after(after, Some(limit)), "newer"),
            (None, Some(before)) => (Selection::before(before, limit), "older"),
            (None, None) => {
                let page = input
                    .get("page")
                    .and_then(Value::as_u64)
                    .and_then(|p| u32::try_from(p).ok())
                    .unwrap_or(0);
                (Selection::page(page, limit), "page")
            }
        };
        let list = self
            .store()?
            .list_messages(thread_id, Some(resource_id), selection)
            .await
            .map_err(|e| not_found_or(e, thread_id))?;
        let messages: Vec<Value> = list.messages.iter().map(listed).collect();
        let mut out = json!({
            "threadId": thread_id,
            "messages": messages,
        });
        if let Some(map) = out.as_object_mut() {
            match what {
                "page" => {
                    map.insert("page".into(), json!(page_of(&selection)));
                    map.insert("total".into(), json!(list.total));
                    map.insert("hasNextPage".into(), json!(list.has_more));
                }
                "newer" => {
                    map.insert("hasNewer".into(), json!(list.has_more));
                }
                _ => {
                    map.insert("hasOlder".into(), json!(list.has_more));
                }
            }
        }
        Ok(out)
    }

    async fn read_one(
        &self,
        input: &Value,
        thread_id: &str,
        resource_id: &str,
        seq: i64,
    ) -> Result<Value, ToolError> {
        let selection = Selection::Range(SeqRange {
            after: Some(seq.saturating_sub(1)),
            before: Some(seq.saturating_add(1)),
            ..SeqRange::default()
        });
        let list = self
            .store()?
            .list_messages(thread_id, Some(resource_id), selection)
            .await
            .map_err(|e| not_found_or(e, thread_id))?;
        let Some(message) = list.messages.first() else {
            return Err(ToolError::new(format!(
                "conversation `{thread_id}` has no message with seq {seq}"
            )));
        };
        let content = message_content(&message.parts, READ_TOOL_CHARS);
        let total = content.chars().count();
        let offset = input
            .get("offset")
            .and_then(Value::as_u64)
            .map_or(0, |o| usize::try_from(o).unwrap_or(usize::MAX));
        let text: String = content.chars().skip(offset).take(READ_CHARS).collect();
        let end = offset.saturating_add(READ_CHARS);
        let mut out = json!({
            "threadId": thread_id,
            "seq": message.seq,
            "id": message.id,
            "role": role(message.role),
            "createdAt": message.created_at.to_rfc3339(),
            "text": text,
            "totalChars": total,
        });
        if end < total
            && let Some(map) = out.as_object_mut()
        {
            map.insert("nextOffset".into(), json!(end));
        }
        Ok(out)
    }

    async fn search(
        &self,
        input: &Value,
        current: &str,
        resource_id: &str,
    ) -> Result<Value, ToolError> {
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ToolError::new("search needs a non-empty `query`"))?;
        let scope = match (self.scope, input.get("thread_id").and_then(Value::as_str)) {
            (ObservationScope::Resource, None) => Scope::resource(resource_id),
            _ => Scope::thread(self.thread(input, current)?, resource_id),
        };
        let search = MessageSearch {
            scope: scope.clone(),
            query: query.to_owned(),
            limit: limit(input),
        };
        let hits = self.store()?.search_messages(search).await.map_err(|e| {
            let thread = match &scope {
                Scope::Thread { thread_id, .. } => thread_id.as_str(),
                Scope::Resource { .. } => current,
            };
            not_found_or(e, thread)
        })?;
        let matches: Vec<Value> = hits
            .iter()
            .map(|m| {
                json!({
                    "threadId": m.thread_id,
                    "seq": m.seq,
                    "role": role(m.role),
                    "createdAt": m.created_at.to_rfc3339(),
                    "snippet": snippet(&message_content(&m.parts, LISTED_CHARS), query),
                })
            })
            .collect();
        Ok(json!({ "query": query, "matches": matches }))
    }

    async fn threads(
        &self,
        input: &Value,
        current: &str,
        resource_id: &str,
    ) -> Result<Value, ToolError> {
        if self.scope == ObservationScope::Thread {
            return Err(ToolError::new(
                "`threads` is not available: only this conversation can be read",
            ));
        }
        let page = input
            .get("page")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0);
        let query = ThreadQuery {
            resource_id: Some(resource_id.to_owned()),
            page: PageRequest::new(page, limit(input)),
            order: ThreadOrder {
                field: ThreadOrderField::UpdatedAt,
                direction: Direction::Desc,
            },
            ..ThreadQuery::default()
        };
        let listed = self
            .store()?
            .list_threads(query)
            .await
            .map_err(|e| ToolError::new(format!("listing conversations failed: {e}")))?;
        let threads: Vec<Value> = listed
            .items
            .iter()
            .map(|t| {
                json!({
                    "threadId": t.id,
                    "title": t.title,
                    "createdAt": t.created_at.to_rfc3339(),
                    "updatedAt": t.updated_at.to_rfc3339(),
                    "current": t.id == current,
                })
            })
            .collect();
        Ok(json!({
            "threads": threads,
            "page": listed.page,
            "total": listed.total,
            "hasNextPage": listed.has_more,
        }))
    }
}

#[async_trait]
impl Tool for RecallTool {
    fn id(&self) -> &str {
        RECALL_TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    async fn execute(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let (Some(current), Some(resource_id)) = (ctx.thread_id(), ctx.resource_id()) else {
            return Err(ToolError::new(format!(
                "{RECALL_TOOL} needs a run with memory (a thread and a resource)"
            )));
        };
        match input.get("mode").and_then(Value::as_str) {
            Some("messages") => {
                let thread_id = self.thread(&input, current)?;
                self.messages(&input, thread_id, resource_id).await
            }
            Some("search") => self.search(&input, current, resource_id).await,
            Some("threads") => self.threads(&input, current, resource_id).await,
            _ => Err(ToolError::new(
                "`mode` must be `messages`, `search` or `threads`",
            )),
        }
    }
}

fn limit(input: &Value) -> u32 {
    input
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LIMIT, |l| {
            u32::try_from(l.clamp(1, u64::from(MAX_LIMIT))).unwrap_or(MAX_LIMIT)
        })
}

fn page_of(selection: &Selection) -> u32 {
    match selection {
        Selection::Page(request) => request.page,
        _ => 0,
    }
}

/// A store error as the model should see it: another resource's thread is "not found", like a
/// missing one, so nothing tells it the thread exists.
fn not_found_or(error: StorageError, thread_id: &str) -> ToolError {
    match error {
        StorageError::ThreadNotFound { .. } | StorageError::ThreadOwnedByOtherResource { .. } => {
            ToolError::new(format!("no conversation `{thread_id}` was found"))
        }
        other => ToolError::new(format!("reading messages failed: {other}")),
    }
}

fn role(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// A message in a listing, its content cut to [`LISTED_CHARS`].
fn listed(message: &StoredMessage) -> Value {
    let content = message_content(&message.parts, LISTED_CHARS);
    let truncated = content.chars().count() > LISTED_CHARS;
    let mut out = json!({
        "seq": message.seq,
        "id": message.id,
        "role": role(message.role),
        "createdAt": message.created_at.to_rfc3339(),
        "text": cut(&content, LISTED_CHARS),
    });
    if truncated && let Some(map) = out.as_object_mut() {
        map.insert("truncated".into(), json!(true));
    }
    out
}

/// About [`SNIPPET_CHARS`] characters of `text` around the first match of `query`.
fn snippet(text: &str, query: &str) -> String {
    let total = text.chars().count();
    if total <= SNIPPET_CHARS {
        return text.to_owned();
    }
    let lower = text.to_lowercase();
    let needle = query.to_lowercase();
    // Lowercasing may change byte lengths outside ASCII; then show the start.
    let at = lower
        .find(&needle)
        .filter(|_| lower.len() == text.len())
        .filter(|&i| text.is_char_boundary(i))
        .map_or(0, |i| text[..i].chars().count());
    let start = at.saturating_sub(SNIPPET_CHARS / 3);
    let body: String = text.chars().skip(start).take(SNIPPET_CHARS).collect();
    let before = if start > 0 { "…" } else { "" };
    let after = if start + SNIPPET_CHARS < total {
        "…"
    } else {
        ""
    };
    format!("{before}{body}{after}")
}

#[cfg(test)]
mod tests {
    use super::snippet;

    #[test]
    fn snippets_centre_on_the_match() {
        let text = format!("{} Lisbon {}", "a".repeat(1000), "b".repeat(1000));
        let s = snippet(&text, "lisbon");
        assert!(s.contains("Lisbon"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert_eq!(snippet("short Lisbon", "lisbon"), "short Lisbon");
    }
}
