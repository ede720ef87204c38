//! The runs of [`PostgresStorage`]: saves with their version compare-and-sets, gets, listings and
//! deletes.

use crate::storage::RunRecordStore;
use async_trait::async_trait;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnection;
use sqlx::{Postgres, QueryBuilder};

use super::rows::RunRow;
use super::{PostgresStorage, err, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, RunFilter, RunRecord};

/// Raises the fence of `run_id` to `token`, inside the caller's transaction: refused with
/// [`StorageError::Fenced`] when a write carried a greater token before.
pub(super) async fn check_fence(conn: &mut PgConnection, run_id: &str, token: i64) -> Result<()> {
    const OP: &str = "fence";
    let raised: Option<i64> = sqlx::query_scalar(sql::RAISE_FENCE)
        .bind(run_id)
        .bind(token)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err(OP))?;
    if raised.is_some() {
        return Ok(());
    }
    let current: Option<i64> = sqlx::query_scalar(sql::FENCE_TOKEN)
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err(OP))?;
    Err(StorageError::Fenced {
        run_id: run_id.to_owned(),
        token,
        current: current.unwrap_or(0),
    })
}

/// Writes one run if its version is the expected one: its new version and creation time, or
/// the version it has (`None`: no such run).
async fn write_run(
    conn: &mut PgConnection,
    record: &RunRecord,
    snapshot: &str,
    expected_version: Option<i64>,
    now: DateTime<Utc>,
) -> Result<std::result::Result<(i64, DateTime<Utc>), Option<i64>>> {
    const OP: &str = "save_run";
    let saved: Option<(i64, DateTime<Utc>)> = match expected_version {
        None => {
            let inserted = sqlx::query(sql::INSERT_RUN)
                .bind(&record.run_id)
                .bind(&record.agent_id)
                .bind(&record.thread_id)
                .bind(&record.resource_id)
                .bind(record.status.as_str())
                .bind(snapshot)
                .bind(&record.parent_run_id)
                .bind(now)
                .bind(record.lease_token)
                .execute(&mut *conn)
                .await
                .map_err(err(OP))?;
            (inserted.rows_affected() == 1).then_some((1, now))
        }
        Some(expected) => sqlx::query_as(sql::UPDATE_RUN)
            .bind(&record.run_id)
            .bind(&record.agent_id)
            .bind(&record.thread_id)
            .bind(&record.resource_id)
            .bind(record.status.as_str())
            .bind(snapshot)
            .bind(&record.parent_run_id)
            .bind(now)
            .bind(expected)
            .bind(record.lease_token)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err(OP))?,
    };
    match saved {
        Some(saved) => Ok(Ok(saved)),
        None => {
            let actual: Option<i64> = sqlx::query_scalar(sql::RUN_VERSION)
                .bind(&record.run_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(err(OP))?;
            Ok(Err(actual))
        }
    }
}

#[async_trait]
impl RunRecordStore for PostgresStorage {
    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        self.bounded("save_run", async move {
            let mut saved = self.save_runs(vec![(record, expected_version)]).await?;
            saved
                .pop()
                .ok_or_else(|| StorageError::corrupt("save_run", "no run was saved"))
        })
        .await
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        self.bounded("save_runs", async move {
            const OP: &str = "save_runs";
            let mut snapshots = Vec::with_capacity(saves.len());
            for (record, _) in &saves {
                codec::check_id("run_id", &record.run_id)?;
                snapshots.push(record.snapshot.get().to_owned());
            }
            let now = codec::now();
            // One transaction: a conflict on any run rolls back the ones before it (dropping the
            // transaction without commit rolls it back).
            let mut tx = self.begin(OP).await?;
            let mut written = Vec::with_capacity(saves.len());
            for ((record, expected_version), snapshot) in saves.iter().zip(&snapshots) {
                if let Some(token) = record.lease_token {
                    check_fence(&mut tx, &record.run_id, token).await?;
                }
                match write_run(&mut tx, record, snapshot, *expected_version, now).await? {
                    Ok(saved) => written.push(saved),
                    Err(actual) => {
                        return Err(codec::run_conflict(
                            record.run_id.clone(),
                            *expected_version,
                            actual,
                        ));
                    }
                }
            }
            tx.commit().await.map_err(err(OP))?;
            Ok(saves
                .into_iter()
                .zip(written)
                .map(|((record, _), (version, created_at))| RunRecord {
                    version,
                    created_at,
                    updated_at: now,
                    ..record
                })
                .collect())
        })
        .await
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        self.bounded("get_run", async move {
            let row: Option<RunRow> = sqlx::query_as(sql::GET_RUN)
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(err("get_run"))?;
            row.map(RunRow::into_record).transpose()
        })
        .await
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        self.bounded("list_runs", async move {
            const OP: &str = "list_runs";
            codec::check_page(filter.page)?;
            let mut count = QueryBuilder::<Postgres>::new(sql::COUNT_RUNS);
            sql::push_run_filter(&mut count, &filter);
            let mut select = QueryBuilder::<Postgres>::new(sql::SELECT_RUNS);
            sql::push_run_filter(&mut select, &filter);
            select.push(sql::RUN_ORDER);
            let (total, rows): (u64, Vec<RunRow>) =
                self.count_and_page(OP, count, select, filter.page).await?;
            let items = rows
                .into_iter()
                .map(RunRow::into_record)
                .collect::<Result<Vec<_>>>()?;
            Ok(Page::new(items, filter.page, total))
        })
        .await
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        self.bounded("delete_run", async move {
            let done = sqlx::query(sql::DELETE_RUN)
                .bind(run_id)
                .execute(&self.pool)
                .await
                .map_err(err("delete_run"))?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
