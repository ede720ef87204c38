//! The working memory of [`PostgresStorage`], per thread or per resource.

use crate::storage::WorkingMemoryStore;
use async_trait::async_trait;

use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::Scope;

#[async_trait]
impl WorkingMemoryStore for PostgresStorage {
    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        self.bounded("get_working_memory", async move {
            const OP: &str = "get_working_memory";
            let mut conn = self.conn(OP).await?;
            let (statement, key) = match scope {
                Scope::Thread {
                    thread_id,
                    resource_id,
                } => {
                    owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
                    (sql::GET_THREAD_MEMORY, thread_id)
                }
                Scope::Resource { resource_id } => (sql::GET_RESOURCE_MEMORY, resource_id),
            };
            let content: Option<Option<String>> = sqlx::query_scalar(statement)
                .bind(key)
                .fetch_optional(&mut *conn)
                .await
                .map_err(err(OP))?;
            Ok(content.flatten())
        })
        .await
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        self.bounded("set_working_memory", async move {
            const OP: &str = "set_working_memory";
            let mut tx = self.begin(OP).await?;
            let query = match scope {
                Scope::Thread {
                    thread_id,
                    resource_id,
                } => {
                    owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
                    sqlx::query(sql::SET_THREAD_MEMORY)
                        .bind(thread_id)
                        .bind(content)
                }
                Scope::Resource { resource_id } => sqlx::query(sql::SET_RESOURCE_MEMORY)
                    .bind(resource_id)
                    .bind(content)
                    .bind(codec::now()),
            };
            query.execute(&mut *tx).await.map_err(err(OP))?;
            tx.commit().await.map_err(err(OP))
        })
        .await
    }
}
