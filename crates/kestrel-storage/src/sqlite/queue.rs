//! The message queues of [`SqliteStorage`]: messages held for a thread's next runs, in order.

use crate::storage::QueueStore;
use async_trait::async_trait;

use rusqlite::{Connection, params};

use super::conn::Cost;
use super::{SqliteStorage, begin, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::{NewQueuedMessage, QueuedMessage, QueuedThread};

type Row = (String, String, String, String, String, String, i64, i64);

/// Reads the columns of `sql::LIST_QUEUED`, in order.
fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

fn decode(
    (id, run_id, agent_id, thread_id, resource_id, message, seq, created_at): Row,
) -> Result<QueuedMessage> {
    Ok(QueuedMessage {
        message: codec::parse_message(&message)?,
        created_at: codec::from_micros(created_at)?,
        id,
        run_id,
        agent_id,
        thread_id,
        resource_id,
        seq,
    })
}

fn list(conn: &Connection, thread_id: &str, op: &'static str) -> Result<Vec<QueuedMessage>> {
    let rows: Vec<Row> = conn
        .prepare_cached(sql::LIST_QUEUED)
        .and_then(|mut s| s.query_map([thread_id], row)?.collect())
        .map_err(err(op))?;
    rows.into_iter().map(decode).collect()
}

#[async_trait]
impl QueueStore for SqliteStorage {
    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage> {
        const OP: &str = "enqueue_message";
        codec::check_queued(&message)?;
        let text = codec::message_text(&message.message)?;
        let now = codec::now();
        let row = message.clone();
        let seq = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &row.thread_id, Some(&row.resource_id), OP)?;
                let inserted = tx
                    .execute(
                        sql::INSERT_QUEUED,
                        params![
                            row.id,
                            row.run_id,
                            row.agent_id,
                            row.thread_id,
                            row.resource_id,
                            text,
                            codec::to_micros(now)
                        ],
                    )
                    .map_err(err(OP))?;
                if inserted == 0 {
                    return Err(codec::queued_exists(&row.id));
                }
                let seq = tx.last_insert_rowid();
                tx.commit().map_err(err(OP))?;
                Ok(seq)
            })
            .await?;
        Ok(QueuedMessage {
            id: message.id,
            run_id: message.run_id,
            agent_id: message.agent_id,
            thread_id: message.thread_id,
            resource_id: message.resource_id,
            message: message.message,
            seq,
            created_at: codec::truncate(now),
        })
    }

    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>> {
        const OP: &str = "queued_messages";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .read(OP, Cost::Short, move |conn| {
                owned(conn, &thread_id, Some(&resource_id), OP)?;
                list(conn, &thread_id, OP)
            })
            .await
    }

    async fn remove_queued_message(&self, id: &str) -> Result<bool> {
        const OP: &str = "remove_queued_message";
        let id = id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let removed = conn.execute(sql::DELETE_QUEUED, [&id]).map_err(err(OP))?;
                Ok(removed > 0)
            })
            .await
    }

    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>> {
        const OP: &str = "cancel_queued_messages";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &thread_id, Some(&resource_id), OP)?;
                let queued = list(&tx, &thread_id, OP)?;
                let mut removed = Vec::new();
                for message in queued {
                    if ids.as_ref().is_none_or(|ids| ids.contains(&message.id)) {
                        tx.execute(sql::DELETE_QUEUED, [&message.id])
                            .map_err(err(OP))?;
                        removed.push(message);
                    }
                }
                tx.commit().map_err(err(OP))?;
                Ok(removed)
            })
            .await
    }

    async fn queued_threads(&self) -> Result<Vec<QueuedThread>> {
        const OP: &str = "queued_threads";
        self.conns
            .read(OP, Cost::Short, move |conn| {
                conn.prepare_cached(sql::QUEUED_THREADS)
                    .and_then(|mut s| {
                        s.query_map([], |r| {
                            Ok(QueuedThread {
                                agent_id: r.get(0)?,
                                thread_id: r.get(1)?,
                                resource_id: r.get(2)?,
                            })
                        })?
                        .collect()
                    })
                    .map_err(err(OP))
            })
            .await
    }
}
