//! The messages of [`SqliteStorage`]: appends (the one-statement path and the transactional
//! one), listings by selection, gets and deletes.

use crate::storage::MessageStore;
use async_trait::async_trait;

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::Cost;
use super::rows::{MessageRow, parse_messages};
use super::{SHORT_BATCH, SqliteStorage, begin, err, json_ids, owned, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::sql_common::{EncodedMessage, ExistingMessage, check_homes};
use crate::types::{
    Anchor, MessageList, MessageSearch, NewMessage, Selection, SeqRange, StoredMessage,
};
use kestrel_core::lease::Fence;

/// The one JSON column of the one row a message query returns, decoded.
fn fetch_messages(
    conn: &Connection,
    statement: &str,
    params: impl rusqlite::Params,
    operation: &'static str,
) -> Result<Vec<StoredMessage>> {
    let json: String = conn
        .prepare_cached(statement)
        .and_then(|mut s| s.query_row(params, |r| r.get(0)))
        .map_err(err(operation))?;
    parse_messages(&json)
}

/// The `last` + 1 messages of `thread_id` before `seq`, oldest first.
fn history_before(
    conn: &Connection,
    thread_id: &str,
    seq: i64,
    last: u32,
) -> Result<Vec<StoredMessage>> {
    const OP: &str = "append_with_history";
    let rows: Vec<MessageRow> = conn
        .prepare_cached(sql::HISTORY_BEFORE)
        .and_then(|mut s| {
            s.query_map(
                params![thread_id, seq, i64::from(last)],
                MessageRow::from_row,
            )?
            .collect()
        })
        .map_err(err(OP))?;
    rows.into_iter()
        .rev()
        .map(MessageRow::into_message)
        .collect()
}

/// A range of a thread's messages, checking the owner in the same statement.
fn select_range(
    conn: &Connection,
    thread_id: &str,
    resource_id: Option<&str>,
    range: SeqRange,
) -> Result<MessageList> {
    const OP: &str = "list_messages";
    let statement = match range.anchor {
        Anchor::Start => sql::OWNED_RANGE_ASC,
        Anchor::End => sql::OWNED_RANGE_DESC,
    };
    let row: Option<(String, String)> = conn
        .prepare_cached(statement)
        .and_then(|mut s| {
            s.query_row(
                params![
                    thread_id,
                    range.after.unwrap_or(i64::MIN),
                    range.before.unwrap_or(i64::MAX),
                    range.limit.map_or(-1, |l| i64::from(l) + 1),
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(err(OP))?;
    let (owner, json) = row.ok_or_else(|| StorageError::thread_not_found(thread_id))?;
    codec::check_owner(thread_id, &owner, resource_id)?;
    let messages = parse_messages(&json)?;
    Ok(trim_to_limit(messages, range.limit, range.anchor))
}

/// Keeps the `limit` messages (of `limit + 1` read, in seq order) nearest the anchor.
fn trim_to_limit(
    mut messages: Vec<StoredMessage>,
    limit: Option<u32>,
    anchor: Anchor,
) -> MessageList {
    let has_more = limit.is_some_and(|l| messages.len() > l as usize);
    if let Some(l) = limit.map(|l| l as usize).filter(|&l| messages.len() > l) {
        match anchor {
            Anchor::Start => messages.truncate(l),
            Anchor::End => {
                messages.drain(..messages.len() - l);
            }
        }
    }
    MessageList {
        messages,
        has_more,
        total: None,
    }
}

/// Reserves the batch's seqs on an owned thread; returns the first reserved seq and where the
/// batch's already-stored ids live.
fn reserve_seqs(
    conn: &Connection,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(i64, HashMap<String, ExistingMessage>)> {
    const OP: &str = "append_messages";
    let ids: Vec<&str> = batch.iter().map(|m| m.id.as_str()).collect();
    let reserved: Option<(i64, String)> = conn
        .prepare_cached(sql::RESERVE_SEQS)
        .and_then(|mut s| {
            s.query_row(
                params![
                    thread_id,
                    resource_id,
                    json_ids(&ids),
                    codec::to_micros(now)
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(err(OP))?;
    let Some((next_seq, stored)) = reserved else {
        owned(conn, thread_id, Some(resource_id), OP)?;
        return Err(StorageError::thread_not_found(thread_id));
    };
    let stored: Vec<(String, String, i64, i64)> =
        serde_json::from_str(&stored).map_err(|e| StorageError::corrupt("message ids", e))?;
    let existing = stored
        .into_iter()
        .map(|(id, thread_id, seq, created)| {
            let created_at = codec::from_micros(created)?;
            let home = ExistingMessage {
                thread_id,
                seq,
                created_at,
            };
            Ok((id, home))
        })
        .collect::<Result<HashMap<_, _>>>()?;
    let new_count = (batch.len() - existing.len()) as i64;
    Ok((next_seq - new_count, existing))
}

/// The batch as the JSON array the one-statement append reads.
fn batch_json(batch: &[EncodedMessage]) -> String {
    let encoded: Vec<serde_json::Value> = batch
        .iter()
        .map(|m| {
            serde_json::json!([
                m.id,
                codec::role_str(m.role),
                m.parts_text,
                m.status.as_str(),
                m.metadata_text,
                m.search_text,
            ])
        })
        .collect();
    serde_json::Value::from(encoded).to_string()
}

/// The one-statement append of a batch of new messages ([`sql::APPEND_NEW`], or
/// [`sql::APPEND_ONE`] for one): their seqs, in batch order, or `None` when the statement
/// inserted nothing (a missing or foreign thread, or an id already stored), which the
/// transactional path then sorts out.
fn append_new(
    writer: &Connection,
    thread_id: &str,
    resource_id: &str,
    batch_json: &str,
    count: usize,
    now: i64,
) -> Result<Option<Vec<i64>>> {
    // One message (most appends: an input, an answer) needs neither the batch's table nor its
    // sort, which SQLite would build and drop for every statement.
    let statement = if count == 1 {
        sql::APPEND_ONE
    } else {
        sql::APPEND_NEW
    };
    let mut seqs: Vec<i64> = writer
        .prepare_cached(statement)
        .and_then(|mut s| {
            s.query_map(params![thread_id, resource_id, batch_json, now], |r| {
                r.get(0)
            })?
            .collect()
        })
        .map_err(err("append_messages"))?;
    if seqs.len() != count {
        // Nothing was inserted (the statement is all or nothing).
        return Ok(None);
    }
    seqs.sort_unstable();
    Ok(Some(seqs))
}

/// Inserts new messages with one statement.
fn insert_messages(
    conn: &Connection,
    thread_id: &str,
    resource_id: &str,
    rows: &[(&EncodedMessage, i64, chrono::DateTime<chrono::Utc>)],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let encoded: Vec<serde_json::Value> = rows
        .iter()
        .map(|(m, seq, created_at)| {
            serde_json::json!([
                m.id,
                seq,
                codec::role_str(m.role),
                m.parts_text,
                m.status.as_str(),
                m.metadata_text,
                m.search_text,
                codec::to_micros(*created_at),
            ])
        })
        .collect();
    conn.prepare_cached(sql::INSERT_MESSAGES)
        .and_then(|mut s| {
            s.execute(params![
                thread_id,
                resource_id,
                serde_json::Value::from(encoded).to_string()
            ])
        })
        .map_err(err("append_messages"))?;
    Ok(())
}

fn replace_message(conn: &Connection, message: &EncodedMessage) -> Result<()> {
    conn.prepare_cached(sql::REPLACE_MESSAGE)
        .and_then(|mut s| {
            s.execute(params![
                message.id,
                codec::role_str(message.role),
                message.parts_text,
                message.status.as_str(),
                message.metadata_text,
                message.search_text,
            ])
        })
        .map_err(err("append_messages"))?;
    Ok(())
}

/// Where an appended message landed: its seq and creation time.
type Slot = (i64, chrono::DateTime<chrono::Utc>);

/// The transactional append: imports (explicit creation times), retries of stored ids, and
/// the errors of the one-statement path. Returns each message's seq and creation time, and how
/// many were inserted.
fn append_in_transaction(
    conn: &mut Connection,
    thread_id: &str,
    resource_id: &str,
    messages: &[EncodedMessage],
    now: chrono::DateTime<chrono::Utc>,
    fence: Option<&(String, i64)>,
) -> Result<(Vec<Slot>, usize)> {
    const OP: &str = "append_messages";
    let tx = begin(conn, OP)?;
    if let Some((run_id, token)) = fence {
        super::runs::check_fence(&tx, run_id, *token)?;
    }
    let (mut next_seq, existing) = reserve_seqs(&tx, thread_id, resource_id, messages, now)?;
    check_homes(thread_id, &existing)?;
    let mut slots = Vec::with_capacity(messages.len());
    let mut inserts = Vec::new();
    for message in messages {
        match existing.get(&message.id) {
            Some(e) => {
                replace_message(&tx, message)?;
                slots.push((e.seq, e.created_at));
            }
            None => {
                let created = message.created_at.unwrap_or(now);
                inserts.push((message, next_seq, created));
                slots.push((next_seq, created));
                next_seq += 1;
            }
        }
    }
    insert_messages(&tx, thread_id, resource_id, &inserts)?;
    tx.commit().map_err(err(OP))?;
    Ok((slots, inserts.len()))
}

pub(super) async fn append_messages(
    store: &SqliteStorage,
    thread_id: &str,
    resource_id: &str,
    messages: Vec<NewMessage>,
    fence: Option<(String, i64)>,
) -> Result<Vec<StoredMessage>> {
    const OP: &str = "append_messages";
    let messages = EncodedMessage::batch(messages)?;
    let now = codec::now();
    let cost = if messages.len() > SHORT_BATCH {
        Cost::Long
    } else {
        Cost::Short
    };
    // The common case, new messages appended now, is one statement. Imports (explicit
    // creation times), retries of stored ids, fenced writes and errors take the
    // transactional path.
    if fence.is_none() && !messages.is_empty() && messages.iter().all(|m| m.created_at.is_none()) {
        let args = (
            thread_id.to_owned(),
            resource_id.to_owned(),
            batch_json(&messages),
            messages.len(),
            codec::to_micros(now),
        );
        let appended = store
            .conns
            .write(OP, cost, move |conn| {
                let (thread, resource, batch, count, at) = &args;
                append_new(conn, thread, resource, batch, *count, *at)
            })
            .await?;
        if let Some(seqs) = appended {
            store.appended(messages.len());
            return Ok(messages
                .into_iter()
                .zip(seqs)
                .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                .collect());
        }
    }
    let messages = Arc::new(messages);
    let (slots, inserted) = {
        let messages = Arc::clone(&messages);
        let (thread, resource) = (thread_id.to_owned(), resource_id.to_owned());
        store
            .conns
            .write(OP, cost, move |conn| {
                append_in_transaction(conn, &thread, &resource, &messages, now, fence.as_ref())
            })
            .await?
    };
    store.appended(inserted);
    Ok(messages
        .iter()
        .zip(slots)
        .map(|(m, (seq, at))| m.to_stored(thread_id, resource_id, seq, at))
        .collect())
}

#[async_trait]
impl MessageStore for SqliteStorage {
    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        append_messages(self, thread_id, resource_id, messages, None).await
    }

    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>> {
        let fence = (fence.run_id.to_owned(), codec::fence_token(fence.token)?);
        append_messages(self, thread_id, resource_id, messages, Some(fence)).await
    }

    async fn append_with_history(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        last: u32,
    ) -> Result<(Vec<StoredMessage>, MessageList)> {
        const OP: &str = "append_with_history";
        if !messages.is_empty()
            && last > 0
            && messages.len() <= SHORT_BATCH
            && messages.iter().all(|m| m.created_at.is_none())
        {
            let batch = EncodedMessage::batch(messages.clone())?;
            let now = codec::now();
            let args = (
                thread_id.to_owned(),
                resource_id.to_owned(),
                batch_json(&batch),
                batch.len(),
                codec::to_micros(now),
            );
            // The append and the history before it on the writer, one hand-over.
            let appended = self
                .conns
                .write(OP, Cost::Short, move |conn| {
                    let (thread, resource, json, count, at) = &args;
                    let Some(seqs) = append_new(conn, thread, resource, json, *count, *at)? else {
                        return Ok(None);
                    };
                    let first = seqs.first().copied().unwrap_or(i64::MAX);
                    let history = history_before(conn, thread, first, last)?;
                    Ok(Some((
                        seqs,
                        trim_to_limit(history, Some(last), Anchor::End),
                    )))
                })
                .await?;
            if let Some((seqs, history)) = appended {
                self.appended(batch.len());
                let stored = batch
                    .into_iter()
                    .zip(seqs)
                    .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                    .collect();
                return Ok((stored, history));
            }
        }
        // Retries, imports, big batches and errors: the two calls.
        let stored = self
            .append_messages(thread_id, resource_id, messages)
            .await?;
        let first = stored.iter().map(|m| m.seq).min().unwrap_or(i64::MAX);
        let history = self
            .list_messages(thread_id, Some(resource_id), Selection::before(first, last))
            .await?;
        Ok((stored, history))
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        const OP: &str = "list_messages";
        if let Selection::Page(page) = selection {
            codec::check_page(page)?;
        }
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.map(str::to_owned));
        // A bounded read is short; a whole history may be long.
        let cost = match selection {
            Selection::Last(_) | Selection::Page(_) => Cost::Short,
            Selection::Range(range) if range.limit.is_some() => Cost::Short,
            Selection::Range(_) => Cost::Long,
        };
        self.conns
            .read(OP, cost, move |conn| {
                let resource_id = resource_id.as_deref();
                match selection {
                    Selection::Last(n) => {
                        let range = SeqRange {
                            limit: Some(n),
                            anchor: Anchor::End,
                            ..SeqRange::default()
                        };
                        select_range(conn, &thread_id, resource_id, range)
                    }
                    Selection::Range(range) => select_range(conn, &thread_id, resource_id, range),
                    Selection::Page(page) => {
                        let tx = conn.transaction().map_err(err(OP))?;
                        owned(&tx, &thread_id, resource_id, OP)?;
                        let messages = fetch_messages(
                            &tx,
                            sql::PAGE_MESSAGES,
                            params![thread_id, i64::from(page.per_page), page.offset() as i64],
                            OP,
                        )?;
                        let total: i64 = tx
                            .prepare_cached(sql::COUNT_MESSAGES)
                            .and_then(|mut s| s.query_row([&thread_id], |r| r.get(0)))
                            .map_err(err(OP))?;
                        tx.finish().map_err(err(OP))?;
                        let total = total as u64;
                        Ok(MessageList {
                            has_more: page.offset() + (messages.len() as u64) < total,
                            messages,
                            total: Some(total),
                        })
                    }
                }
            })
            .await
    }

    async fn get_messages(
        &self,
        ids: &[String],
        resource_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>> {
        const OP: &str = "get_messages";
        let ids = json_ids(ids);
        let messages = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                fetch_messages(conn, sql::GET_MESSAGES, [&ids], OP)
            })
            .await?;
        for m in &messages {
            codec::check_owner(&m.thread_id, &m.resource_id, resource_id)?;
        }
        Ok(messages)
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        const OP: &str = "delete_messages";
        let (thread_id, resource_id, ids) =
            (thread_id.to_owned(), resource_id.to_owned(), json_ids(ids));
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &thread_id, Some(&resource_id), OP)?;
                let deleted: Vec<String> = tx
                    .prepare_cached(sql::DELETE_MESSAGES)
                    .and_then(|mut s| s.query_map([&thread_id, &ids], |r| r.get(0))?.collect())
                    .map_err(err(OP))?;
                if !deleted.is_empty() {
                    tx.execute(sql::DELETE_MESSAGE_VECTORS, [json_ids(&deleted)])
                        .map_err(err(OP))?;
                    tx.execute(
                        sql::TOUCH_THREAD,
                        params![thread_id, codec::to_micros(codec::now())],
                    )
                    .map_err(err(OP))?;
                }
                tx.commit().map_err(err(OP))?;
                Ok(deleted.len() as u64)
            })
            .await
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        super::search::search_messages(self, search).await
    }
}
