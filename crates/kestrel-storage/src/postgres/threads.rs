//! The threads of [`PostgresStorage`]: create, get, update, delete, clone and list.

use crate::storage::ThreadStore;
use async_trait::async_trait;

use sqlx::{Postgres, QueryBuilder};

use super::rows::ThreadRow;
use super::{PostgresStorage, err, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{
    CloneThread, MetadataUpdate, NewThread, Page, Thread, ThreadPatch, ThreadQuery,
};

#[async_trait]
impl ThreadStore for PostgresStorage {
    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        self.bounded("create_thread", async move {
            const OP: &str = "create_thread";
            let (id, thread, created) = codec::prepare_thread(thread)?;
            let inserted = sqlx::query(sql::INSERT_THREAD)
                .bind(&id)
                .bind(&thread.resource_id)
                .bind(&thread.title)
                .bind(codec::canonical_map_text(&thread.metadata))
                .bind(created)
                .bind(1i64)
                .execute(&self.pool)
                .await
                .map_err(err(OP))?;
            if inserted.rows_affected() == 0 {
                return Err(StorageError::ThreadExists { thread_id: id });
            }
            Ok(Thread {
                id,
                resource_id: thread.resource_id,
                title: thread.title,
                metadata: thread.metadata,
                created_at: created,
                updated_at: created,
            })
        })
        .await
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        self.bounded("get_thread", async move {
            let row: Option<ThreadRow> = sqlx::query_as(sql::GET_THREAD)
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(err("get_thread"))?;
            row.map(ThreadRow::into_thread).transpose()
        })
        .await
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        self.bounded("update_thread", async move {
            const OP: &str = "update_thread";
            let mut tx = self.begin(OP).await?;
            let row: Option<ThreadRow> = sqlx::query_as(sql::LOCK_THREAD)
                .bind(thread_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err(OP))?;
            let mut thread = row
                .ok_or_else(|| StorageError::thread_not_found(thread_id))?
                .into_thread()?;
            if let Some(title) = patch.title {
                thread.title = Some(title);
            }
            match patch.metadata {
                Some(MetadataUpdate::Merge(changes)) => {
                    thread.metadata.extend(codec::normalize_map(changes));
                }
                Some(MetadataUpdate::Replace(all)) => thread.metadata = codec::normalize_map(all),
                None => {}
            }
            thread.updated_at = codec::now();
            sqlx::query(sql::UPDATE_THREAD)
                .bind(thread_id)
                .bind(&thread.title)
                .bind(codec::canonical_map_text(&thread.metadata))
                .bind(thread.updated_at)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            tx.commit().await.map_err(err(OP))?;
            Ok(thread)
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        self.bounded("delete_thread", async move {
            const OP: &str = "delete_thread";
            let mut tx = self.begin(OP).await?;
            sqlx::query(sql::DELETE_THREAD_VECTORS)
                .bind(thread_id)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            let deleted = sqlx::query(sql::DELETE_THREAD)
                .bind(thread_id)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?
                .rows_affected();
            tx.commit().await.map_err(err(OP))?;
            Ok(deleted > 0)
        })
        .await
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        self.bounded("clone_thread", async move {
            const OP: &str = "clone_thread";
            let new_id = options.new_thread_id.unwrap_or_else(codec::new_id);
            codec::check_id("new_thread_id", &new_id)?;
            let mut tx = self.begin(OP).await?;
            let source: Option<ThreadRow> = sqlx::query_as(sql::LOCK_THREAD)
                .bind(source_thread_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err(OP))?;
            let source = source
                .ok_or_else(|| StorageError::thread_not_found(source_thread_id))?
                .into_thread()?;
            codec::check_owner(
                source_thread_id,
                &source.resource_id,
                Some(&options.resource_id),
            )?;
            let old_ids: Vec<String> = sqlx::query_scalar(sql::MESSAGE_IDS)
                .bind(source_thread_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(err(OP))?;
            let now = codec::now();
            let thread = Thread {
                id: new_id.clone(),
                resource_id: source.resource_id.clone(),
                title: options.title.or(source.title.clone()),
                metadata: codec::clone_metadata(&source.metadata, source_thread_id, now),
                created_at: now,
                updated_at: now,
            };
            let inserted = sqlx::query(sql::INSERT_THREAD)
                .bind(&thread.id)
                .bind(&thread.resource_id)
                .bind(&thread.title)
                .bind(codec::canonical_map_text(&thread.metadata))
                .bind(now)
                .bind(old_ids.len() as i64 + 1)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            if inserted.rows_affected() == 0 {
                return Err(StorageError::ThreadExists { thread_id: new_id });
            }
            let new_ids: Vec<String> = old_ids.iter().map(|_| codec::new_id()).collect();
            let seqs: Vec<i64> = (1..=old_ids.len() as i64).collect();
            sqlx::query(sql::COPY_MESSAGES)
                .bind(&new_id)
                .bind(&old_ids)
                .bind(&new_ids)
                .bind(&seqs)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            tx.commit().await.map_err(err(OP))?;
            Ok(thread)
        })
        .await
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        self.bounded("list_threads", async move {
            const OP: &str = "list_threads";
            codec::check_page(query.page)?;
            let filter = codec::parse_filter(query.metadata.as_ref())?
                .map(|f| codec::canonical_map_text(&f));
            let resource = query.resource_id.as_deref();
            let mut count = QueryBuilder::<Postgres>::new(sql::COUNT_THREADS);
            sql::push_thread_filter(&mut count, resource, filter.clone());
            let mut select = QueryBuilder::<Postgres>::new(sql::SELECT_THREADS);
            sql::push_thread_filter(&mut select, resource, filter);
            select.push(sql::thread_order(query.order));
            let (total, rows): (u64, Vec<ThreadRow>) =
                self.count_and_page(OP, count, select, query.page).await?;
            let items = rows
                .into_iter()
                .map(ThreadRow::into_thread)
                .collect::<Result<Vec<_>>>()?;
            Ok(Page::new(items, query.page, total))
        })
        .await
    }
}
