//! The message queues of [`PostgresStorage`]: messages held for a thread's next runs, in order.

use crate::storage::QueueStore;
use async_trait::async_trait;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgConnection;

use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{NewQueuedMessage, QueuedMessage, QueuedThread};

type Row = (
    String,
    String,
    String,
    String,
    String,
    Value,
    i64,
    DateTime<Utc>,
);

fn decode(
    (id, run_id, agent_id, thread_id, resource_id, message, seq, created_at): Row,
) -> Result<QueuedMessage> {
    Ok(QueuedMessage {
        message: serde_json::from_value(message)
            .map_err(|e| StorageError::corrupt("queued message", e))?,
        id,
        run_id,
        agent_id,
        thread_id,
        resource_id,
        seq,
        created_at,
    })
}

async fn list(
    conn: &mut PgConnection,
    thread_id: &str,
    op: &'static str,
) -> Result<Vec<QueuedMessage>> {
    let rows: Vec<Row> = sqlx::query_as(sql::LIST_QUEUED)
        .bind(thread_id)
        .fetch_all(conn)
        .await
        .map_err(err(op))?;
    rows.into_iter().map(decode).collect()
}

#[async_trait]
impl QueueStore for PostgresStorage {
    async fn enqueue_message(&self, message: NewQueuedMessage) -> Result<QueuedMessage> {
        self.bounded("enqueue_message", async move {
            const OP: &str = "enqueue_message";
            codec::check_queued(&message)?;
            let json = serde_json::to_value(&message.message)
                .map_err(|e| StorageError::corrupt("queued message", e))?;
            let now = codec::now();
            let mut tx = self.begin(OP).await?;
            owned(
                &mut tx,
                &message.thread_id,
                Some(&message.resource_id),
                true,
                OP,
            )
            .await?;
            let seq: Option<i64> = sqlx::query_scalar(sql::INSERT_QUEUED)
                .bind(&message.id)
                .bind(&message.run_id)
                .bind(&message.agent_id)
                .bind(&message.thread_id)
                .bind(&message.resource_id)
                .bind(json)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err(OP))?;
            let Some(seq) = seq else {
                return Err(codec::queued_exists(&message.id));
            };
            tx.commit().await.map_err(err(OP))?;
            Ok(QueuedMessage {
                id: message.id,
                run_id: message.run_id,
                agent_id: message.agent_id,
                thread_id: message.thread_id,
                resource_id: message.resource_id,
                message: message.message,
                seq,
                created_at: now,
            })
        })
        .await
    }

    async fn queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
    ) -> Result<Vec<QueuedMessage>> {
        self.bounded("queued_messages", async move {
            const OP: &str = "queued_messages";
            let mut conn = self.conn(OP).await?;
            owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
            list(&mut conn, thread_id, OP).await
        })
        .await
    }

    async fn remove_queued_message(&self, id: &str) -> Result<bool> {
        self.bounded("remove_queued_message", async move {
            const OP: &str = "remove_queued_message";
            let removed = sqlx::query(sql::DELETE_QUEUED)
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(err(OP))?;
            Ok(removed.rows_affected() > 0)
        })
        .await
    }

    async fn cancel_queued_messages(
        &self,
        thread_id: &str,
        resource_id: &str,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<QueuedMessage>> {
        self.bounded("cancel_queued_messages", async move {
            const OP: &str = "cancel_queued_messages";
            let mut tx = self.begin(OP).await?;
            owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
            let queued = list(&mut tx, thread_id, OP).await?;
            let mut removed = Vec::new();
            for message in queued {
                if ids.as_ref().is_none_or(|ids| ids.contains(&message.id)) {
                    sqlx::query(sql::DELETE_QUEUED)
                        .bind(&message.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(err(OP))?;
                    removed.push(message);
                }
            }
            tx.commit().await.map_err(err(OP))?;
            Ok(removed)
        })
        .await
    }

    async fn queued_threads(&self) -> Result<Vec<QueuedThread>> {
        self.bounded("queued_threads", async move {
            const OP: &str = "queued_threads";
            let rows: Vec<(String, String, String)> = sqlx::query_as(sql::QUEUED_THREADS)
                .fetch_all(&self.pool)
                .await
                .map_err(err(OP))?;
            Ok(rows
                .into_iter()
                .map(|(agent_id, thread_id, resource_id)| QueuedThread {
                    agent_id,
                    thread_id,
                    resource_id,
                })
                .collect())
        })
        .await
    }
}
