//! The working memory of [`SqliteStorage`], per thread or per resource.

use crate::storage::WorkingMemoryStore;
use async_trait::async_trait;

use rusqlite::params;

use super::conn::Cost;
use super::{SqliteStorage, begin, err, optional_row, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::Scope;

#[async_trait]
impl WorkingMemoryStore for SqliteStorage {
    async fn get_working_memory(&self, scope: &Scope) -> Result<Option<String>> {
        const OP: &str = "get_working_memory";
        let scope = scope.clone();
        self.conns
            .read(OP, Cost::Short, move |conn| {
                let (statement, key) = match &scope {
                    Scope::Thread {
                        thread_id,
                        resource_id,
                    } => {
                        owned(conn, thread_id, Some(resource_id), OP)?;
                        (sql::GET_THREAD_MEMORY, thread_id)
                    }
                    Scope::Resource { resource_id } => (sql::GET_RESOURCE_MEMORY, resource_id),
                };
                let content: Option<Option<String>> =
                    optional_row(conn, statement, [key], |r| r.get(0), OP)?;
                Ok(content.flatten())
            })
            .await
    }

    async fn set_working_memory(&self, scope: &Scope, content: &str) -> Result<()> {
        const OP: &str = "set_working_memory";
        let (scope, content) = (scope.clone(), content.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                match &scope {
                    Scope::Thread {
                        thread_id,
                        resource_id,
                    } => {
                        owned(&tx, thread_id, Some(resource_id), OP)?;
                        tx.execute(sql::SET_THREAD_MEMORY, params![thread_id, content])
                    }
                    Scope::Resource { resource_id } => tx.execute(
                        sql::SET_RESOURCE_MEMORY,
                        params![resource_id, content, codec::to_micros(codec::now())],
                    ),
                }
                .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
    }
}
