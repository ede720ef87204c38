//! The working memory of [`PostgresStorage`], per thread or per resource.

use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::Scope;

pub(super) async fn get_working_memory(
    store: &PostgresStorage,
    scope: &Scope,
) -> Result<Option<String>> {
    const OP: &str = "get_working_memory";
    let mut conn = store.conn(OP).await?;
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
}

pub(super) async fn set_working_memory(
    store: &PostgresStorage,
    scope: &Scope,
    content: &str,
) -> Result<()> {
    const OP: &str = "set_working_memory";
    let mut tx = store.begin(OP).await?;
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
}
