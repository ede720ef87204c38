//! The threads of [`SqliteStorage`]: create, get, update, delete, clone and list.

use crate::storage::ThreadStore;
use async_trait::async_trait;

use rusqlite::params;

use super::conn::Cost;
use super::rows::ThreadRow;
use super::{SqliteStorage, begin, count_and_page, err, optional_row, owned, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{
    CloneThread, MetadataUpdate, NewThread, Page, Thread, ThreadPatch, ThreadQuery,
};

#[async_trait]
impl ThreadStore for SqliteStorage {
    async fn create_thread(&self, thread: NewThread) -> Result<Thread> {
        const OP: &str = "create_thread";
        let (id, thread, created) = codec::prepare_thread(thread)?;
        let row = (
            id.clone(),
            thread.resource_id.clone(),
            thread.title.clone(),
            codec::canonical_map_text(&thread.metadata),
            codec::to_micros(created),
        );
        let inserted = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let (id, resource, title, metadata, at) = &row;
                conn.prepare_cached(sql::INSERT_THREAD)
                    .and_then(|mut s| {
                        s.execute(params![id, resource, title, metadata, at, at, 1i64])
                    })
                    .map_err(err(OP))
            })
            .await?;
        if inserted == 0 {
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
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<Thread>> {
        const OP: &str = "get_thread";
        let thread_id = thread_id.to_owned();
        let row = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                optional_row(conn, sql::GET_THREAD, [&thread_id], ThreadRow::from_row, OP)
            })
            .await?;
        row.map(ThreadRow::into_thread).transpose()
    }

    async fn update_thread(&self, thread_id: &str, patch: ThreadPatch) -> Result<Thread> {
        const OP: &str = "update_thread";
        let thread_id = thread_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let row =
                    optional_row(&tx, sql::GET_THREAD, [&thread_id], ThreadRow::from_row, OP)?;
                let mut thread = row
                    .ok_or_else(|| StorageError::thread_not_found(&thread_id))?
                    .into_thread()?;
                if let Some(title) = &patch.title {
                    thread.title = Some(title.clone());
                }
                match &patch.metadata {
                    Some(MetadataUpdate::Merge(changes)) => {
                        thread
                            .metadata
                            .extend(codec::normalize_map(changes.clone()));
                    }
                    Some(MetadataUpdate::Replace(all)) => {
                        thread.metadata = codec::normalize_map(all.clone());
                    }
                    None => {}
                }
                thread.updated_at = codec::now();
                tx.prepare_cached(sql::UPDATE_THREAD)
                    .and_then(|mut s| {
                        s.execute(params![
                            thread_id,
                            thread.title,
                            codec::canonical_map_text(&thread.metadata),
                            codec::to_micros(thread.updated_at),
                        ])
                    })
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(thread)
            })
            .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool> {
        const OP: &str = "delete_thread";
        let thread_id = thread_id.to_owned();
        // The cascade may remove a whole history: off the async workers.
        self.conns
            .write(OP, Cost::Long, move |conn| {
                let tx = begin(conn, OP)?;
                tx.execute(sql::DELETE_THREAD_VECTORS, [&thread_id])
                    .map_err(err(OP))?;
                let deleted = tx
                    .execute(sql::DELETE_THREAD, [&thread_id])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(deleted > 0)
            })
            .await
    }

    async fn clone_thread(&self, source_thread_id: &str, options: CloneThread) -> Result<Thread> {
        const OP: &str = "clone_thread";
        let new_id = options.new_thread_id.clone().unwrap_or_else(codec::new_id);
        codec::check_id("new_thread_id", &new_id)?;
        let source_thread_id = source_thread_id.to_owned();
        self.conns
            .write(OP, Cost::Long, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &source_thread_id, Some(&options.resource_id), OP)?;
                let source = tx
                    .query_row(sql::GET_THREAD, [&source_thread_id], ThreadRow::from_row)
                    .map_err(err(OP))?
                    .into_thread()?;
                let old_ids: Vec<String> = tx
                    .prepare(sql::MESSAGE_IDS)
                    .and_then(|mut s| s.query_map([&source_thread_id], |r| r.get(0))?.collect())
                    .map_err(err(OP))?;
                let now = codec::now();
                let thread = Thread {
                    id: new_id.clone(),
                    resource_id: source.resource_id.clone(),
                    title: options.title.clone().or(source.title.clone()),
                    metadata: codec::clone_metadata(&source.metadata, &source_thread_id, now),
                    created_at: now,
                    updated_at: now,
                };
                let inserted = tx
                    .execute(
                        sql::INSERT_THREAD,
                        params![
                            thread.id,
                            thread.resource_id,
                            thread.title,
                            codec::canonical_map_text(&thread.metadata),
                            codec::to_micros(now),
                            codec::to_micros(now),
                            old_ids.len() as i64 + 1,
                        ],
                    )
                    .map_err(err(OP))?;
                if inserted == 0 {
                    return Err(StorageError::ThreadExists {
                        thread_id: new_id.clone(),
                    });
                }
                let copies: Vec<serde_json::Value> = old_ids
                    .iter()
                    .zip(1i64..)
                    .map(|(old, seq)| serde_json::json!([old, codec::new_id(), seq]))
                    .collect();
                tx.execute(
                    sql::COPY_MESSAGES,
                    params![new_id, serde_json::Value::from(copies).to_string()],
                )
                .map_err(err(OP))?;
                tx.commit().map_err(err(OP))?;
                Ok(thread)
            })
            .await
    }

    async fn list_threads(&self, query: ThreadQuery) -> Result<Page<Thread>> {
        const OP: &str = "list_threads";
        codec::check_page(query.page)?;
        let filter =
            codec::parse_filter(query.metadata.as_ref())?.map(|f| codec::canonical_map_text(&f));
        let resource = query.resource_id.as_deref();
        let mut count = sql::Dynamic::new(sql::COUNT_THREADS);
        sql::push_thread_filter(&mut count, resource, filter.clone());
        let mut select = sql::Dynamic::new(sql::SELECT_THREADS);
        sql::push_thread_filter(&mut select, resource, filter);
        select
            .push(sql::thread_order(query.order))
            .push(" LIMIT ")
            .bind(i64::from(query.page.per_page))
            .push(" OFFSET ")
            .bind(query.page.offset() as i64);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                count_and_page(conn, &count, &select, ThreadRow::from_row, OP)
            })
            .await?;
        let items = rows
            .into_iter()
            .map(ThreadRow::into_thread)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, query.page, total as u64))
    }
}
