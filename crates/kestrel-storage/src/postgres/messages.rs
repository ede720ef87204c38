//! The messages of [`PostgresStorage`]: appends (the one-statement path and the transactional
//! one, on the thread's row lock), listings by selection, gets and deletes.

use crate::storage::MessageStore;
use async_trait::async_trait;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::Postgres;
use sqlx::postgres::{PgConnection, PgPool};

use super::rows::MessageRow;
use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::sql_common::{EncodedMessage, ExistingMessage, check_homes};
use crate::types::{
    Anchor, MessageList, MessageSearch, NewMessage, Selection, SeqRange, StoredMessage,
};
use kestrel_core::lease::Fence;

pub(super) async fn fetch_messages<'q>(
    conn: &mut PgConnection,
    query: sqlx::query::QueryAs<'q, Postgres, MessageRow, sqlx::postgres::PgArguments>,
    operation: &'static str,
) -> Result<Vec<StoredMessage>> {
    query
        .fetch_all(conn)
        .await
        .map_err(err(operation))?
        .into_iter()
        .map(MessageRow::into_message)
        .collect()
}

async fn select_range(
    conn: &mut PgConnection,
    thread_id: &str,
    range: SeqRange,
) -> Result<MessageList> {
    let statement = match range.anchor {
        Anchor::Start => sql::RANGE_ASC,
        Anchor::End => sql::RANGE_DESC,
    };
    let query = sqlx::query_as(statement)
        .bind(thread_id)
        .bind(range.after.unwrap_or(i64::MIN))
        .bind(range.before.unwrap_or(i64::MAX))
        .bind(range.limit.map(|l| i64::from(l) + 1));
    let mut messages = fetch_messages(conn, query, "list_messages").await?;
    let has_more = range.limit.is_some_and(|l| messages.len() > l as usize);
    if let Some(l) = range.limit {
        messages.truncate(l as usize);
    }
    if range.anchor == Anchor::End {
        messages.reverse();
    }
    Ok(MessageList {
        messages,
        has_more,
        total: None,
    })
}

async fn find_existing(
    conn: &mut PgConnection,
    ids: &[&str],
) -> Result<HashMap<String, ExistingMessage>> {
    let rows: Vec<(String, String, i64, DateTime<Utc>)> = sqlx::query_as(sql::FIND_MESSAGES)
        .bind(ids)
        .fetch_all(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(rows
        .into_iter()
        .map(|(id, thread_id, seq, created_at)| {
            (
                id,
                ExistingMessage {
                    thread_id,
                    seq,
                    created_at,
                },
            )
        })
        .collect())
}

/// The one-statement append of a batch of new messages ([`sql::APPEND_NEW`]): their seqs in batch
/// order, or `None` when nothing was inserted (a missing or foreign thread, an id already stored,
/// or a concurrent append of the same ids), which the transactional path then sorts out.
async fn append_new(
    pool: &PgPool,
    thread_id: &str,
    resource_id: &str,
    batch: &[EncodedMessage],
    now: DateTime<Utc>,
) -> Result<Option<Vec<i64>>> {
    let column = |f: fn(&EncodedMessage) -> &str| -> Vec<&str> { batch.iter().map(f).collect() };
    let inserted = sqlx::query_scalar(sql::APPEND_NEW)
        .bind(thread_id)
        .bind(resource_id)
        .bind(column(|m| &m.id))
        .bind(column(|m| codec::role_str(m.role)))
        .bind(column(|m| &m.parts_text))
        .bind(column(|m| m.status.as_str()))
        .bind(column(|m| &m.metadata_text))
        .bind(column(|m| &m.search_text))
        .bind(now)
        .fetch_all(pool)
        .await;
    let mut seqs: Vec<i64> = match inserted {
        Ok(seqs) => seqs,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => return Ok(None),
        Err(e) => return Err(err("append_messages")(e)),
    };
    if seqs.len() != batch.len() {
        return Ok(None);
    }
    seqs.sort_unstable();
    Ok(Some(seqs))
}

/// Inserts new messages with one statement (parallel arrays).
async fn insert_messages(
    conn: &mut PgConnection,
    thread_id: &str,
    resource_id: &str,
    rows: &[(&EncodedMessage, i64, DateTime<Utc>)],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&EncodedMessage) -> &str| -> Vec<&str> {
        rows.iter().map(|(m, _, _)| f(m)).collect()
    };
    let seqs: Vec<i64> = rows.iter().map(|(_, seq, _)| *seq).collect();
    let created: Vec<DateTime<Utc>> = rows.iter().map(|(_, _, at)| *at).collect();
    sqlx::query(sql::INSERT_MESSAGES)
        .bind(thread_id)
        .bind(resource_id)
        .bind(column(|m| &m.id))
        .bind(seqs)
        .bind(column(|m| codec::role_str(m.role)))
        .bind(column(|m| &m.parts_text))
        .bind(column(|m| m.status.as_str()))
        .bind(column(|m| &m.metadata_text))
        .bind(column(|m| &m.search_text))
        .bind(created)
        .execute(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(())
}

async fn replace_message(conn: &mut PgConnection, message: &EncodedMessage) -> Result<()> {
    sqlx::query(sql::REPLACE_MESSAGE)
        .bind(&message.id)
        .bind(codec::role_str(message.role))
        .bind(&message.parts_text)
        .bind(message.status.as_str())
        .bind(&message.metadata_text)
        .bind(&message.search_text)
        .execute(conn)
        .await
        .map_err(err("append_messages"))?;
    Ok(())
}

pub(super) async fn append_messages(
    store: &PostgresStorage,
    thread_id: &str,
    resource_id: &str,
    messages: Vec<NewMessage>,
    fence: Option<(&str, i64)>,
) -> Result<Vec<StoredMessage>> {
    const OP: &str = "append_messages";
    let messages = EncodedMessage::batch(messages)?;
    // The common case, new messages appended now, is one statement. Imports (explicit
    // creation times), retries of stored ids, fenced writes and errors take the
    // transactional path below.
    if fence.is_none() && !messages.is_empty() && messages.iter().all(|m| m.created_at.is_none()) {
        let now = codec::now();
        if let Some(seqs) = append_new(&store.pool, thread_id, resource_id, &messages, now).await? {
            return Ok(messages
                .into_iter()
                .zip(seqs)
                .map(|(m, seq)| m.into_stored(thread_id, resource_id, seq, now))
                .collect());
        }
    }
    let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
    let mut tx = store.begin(OP).await?;
    if let Some((run_id, token)) = fence {
        super::runs::check_fence(&mut tx, run_id, token).await?;
    }
    owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
    let existing = find_existing(&mut tx, &ids).await?;
    check_homes(thread_id, &existing)?;
    let now = codec::now();
    let new_count = (messages.len() - existing.len()) as i64;
    let mut next_seq: i64 = sqlx::query_scalar(sql::BUMP_NEXT_SEQ)
        .bind(thread_id)
        .bind(new_count)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(err(OP))?;
    let mut slots = Vec::with_capacity(messages.len());
    let mut inserts = Vec::new();
    for message in &messages {
        match existing.get(&message.id) {
            Some(e) => {
                replace_message(&mut tx, message).await?;
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
    insert_messages(&mut tx, thread_id, resource_id, &inserts).await?;
    tx.commit().await.map_err(err(OP))?;
    Ok(messages
        .into_iter()
        .zip(slots)
        .map(|(m, (seq, at))| m.into_stored(thread_id, resource_id, seq, at))
        .collect())
}

#[async_trait]
impl MessageStore for PostgresStorage {
    async fn append_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<StoredMessage>> {
        self.bounded(
            "append_messages",
            append_messages(self, thread_id, resource_id, messages, None),
        )
        .await
    }

    async fn append_messages_fenced(
        &self,
        thread_id: &str,
        resource_id: &str,
        messages: Vec<NewMessage>,
        fence: Fence<'_>,
    ) -> Result<Vec<StoredMessage>> {
        let token = codec::fence_token(fence.token)?;
        let fence = Some((fence.run_id, token));
        self.bounded(
            "append_messages_fenced",
            append_messages(self, thread_id, resource_id, messages, fence),
        )
        .await
    }

    async fn list_messages(
        &self,
        thread_id: &str,
        resource_id: Option<&str>,
        selection: Selection,
    ) -> Result<MessageList> {
        self.bounded("list_messages", async move {
            const OP: &str = "list_messages";
            if let Selection::Page(page) = selection {
                codec::check_page(page)?;
            }
            let mut conn = self.conn(OP).await?;
            owned(&mut conn, thread_id, resource_id, false, OP).await?;
            match selection {
                Selection::Last(n) => {
                    let range = SeqRange {
                        limit: Some(n),
                        anchor: Anchor::End,
                        ..SeqRange::default()
                    };
                    select_range(&mut conn, thread_id, range).await
                }
                Selection::Range(range) => select_range(&mut conn, thread_id, range).await,
                Selection::Page(page) => {
                    let query = sqlx::query_as(sql::PAGE_MESSAGES)
                        .bind(thread_id)
                        .bind(i64::from(page.per_page))
                        .bind(page.offset() as i64);
                    let messages = fetch_messages(&mut conn, query, OP).await?;
                    let total: i64 = sqlx::query_scalar(sql::COUNT_MESSAGES)
                        .bind(thread_id)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(err(OP))?;
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
        self.bounded("get_messages", async move {
            const OP: &str = "get_messages";
            let mut conn = self.conn(OP).await?;
            let query = sqlx::query_as(sql::GET_MESSAGES).bind(ids);
            let messages = fetch_messages(&mut conn, query, OP).await?;
            for m in &messages {
                codec::check_owner(&m.thread_id, &m.resource_id, resource_id)?;
            }
            Ok(messages)
        })
        .await
    }

    async fn delete_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: &[String],
    ) -> Result<u64> {
        self.bounded("delete_messages", async move {
            const OP: &str = "delete_messages";
            let mut tx = self.begin(OP).await?;
            owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
            let deleted: Vec<String> = sqlx::query_scalar(sql::DELETE_MESSAGES)
                .bind(thread_id)
                .bind(ids)
                .fetch_all(&mut *tx)
                .await
                .map_err(err(OP))?;
            if !deleted.is_empty() {
                sqlx::query(sql::DELETE_MESSAGE_VECTORS)
                    .bind(&deleted)
                    .execute(&mut *tx)
                    .await
                    .map_err(err(OP))?;
                sqlx::query(sql::TOUCH_THREAD)
                    .bind(thread_id)
                    .bind(codec::now())
                    .execute(&mut *tx)
                    .await
                    .map_err(err(OP))?;
            }
            tx.commit().await.map_err(err(OP))?;
            Ok(deleted.len() as u64)
        })
        .await
    }

    async fn search_messages(&self, search: MessageSearch) -> Result<Vec<StoredMessage>> {
        self.bounded(
            "search_messages",
            super::search::search_messages(self, search),
        )
        .await
    }
}
