//! The workflow runs of [`PostgresStorage`]: each run's latest snapshot, saved (created or
//! replaced), claimed with a compare-and-set on its status, listed and deleted.

use crate::storage::WorkflowRecordStore;
use async_trait::async_trait;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnection;
use sqlx::{Postgres, QueryBuilder};

use super::{PostgresStorage, err};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus};

const COLUMNS: &str =
    "workflow_id, run_id, resource_id, status, snapshot::text, created_at, updated_at";

/// Creates the run, or replaces its snapshot (keeping its creation time).
const UPSERT: &str = "INSERT INTO workflow_runs \
     (workflow_id, run_id, resource_id, status, snapshot, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6) \
     ON CONFLICT (workflow_id, run_id) DO UPDATE SET resource_id = excluded.resource_id, \
     status = excluded.status, snapshot = excluded.snapshot, updated_at = excluded.updated_at \
     RETURNING created_at";

/// Raises a run's fence to $3 unless it is above: returns the token when it was raised (or
/// equal), no row when the fence is above $3.
const RAISE_FENCE: &str = "INSERT INTO workflow_fences (workflow_id, run_id, token) \
     VALUES ($1, $2, $3) ON CONFLICT (workflow_id, run_id) DO UPDATE SET token = excluded.token \
     WHERE excluded.token >= workflow_fences.token RETURNING token";

const FENCE_TOKEN: &str =
    "SELECT token FROM workflow_fences WHERE workflow_id = $1 AND run_id = $2";

const CLAIM: &str = "UPDATE workflow_runs SET status = $4, updated_at = $5 \
     WHERE workflow_id = $1 AND run_id = $2 AND status = $3";

const DELETE: &str = "DELETE FROM workflow_runs WHERE workflow_id = $1 AND run_id = $2";

/// A stored row, before its JSON is decoded.
#[derive(sqlx::FromRow)]
struct Row {
    workflow_id: String,
    run_id: String,
    resource_id: Option<String>,
    status: String,
    snapshot: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl Row {
    fn into_record(self) -> Result<WorkflowRunRecord> {
        crate::sql_common::workflow_run_record(
            self.workflow_id,
            self.run_id,
            self.resource_id,
            &self.status,
            self.snapshot,
            self.created_at,
            self.updated_at,
        )
    }
}

/// Raises the fence of a run to `token` on `conn` (in the caller's transaction), or refuses.
async fn raise_fence(
    conn: &mut PgConnection,
    workflow_id: &str,
    run_id: &str,
    token: i64,
) -> Result<()> {
    const OP: &str = "fence_workflow_run";
    let raised: Option<i64> = sqlx::query_scalar(RAISE_FENCE)
        .bind(workflow_id)
        .bind(run_id)
        .bind(token)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err(OP))?;
    if raised.is_some() {
        return Ok(());
    }
    let current: Option<i64> = sqlx::query_scalar(FENCE_TOKEN)
        .bind(workflow_id)
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err(OP))?;
    Err(StorageError::WorkflowRunFenced {
        workflow_id: workflow_id.to_owned(),
        run_id: run_id.to_owned(),
        token,
        current: current.unwrap_or(0),
    })
}

fn push_filter<'a>(query: &mut QueryBuilder<'a, Postgres>, filter: &'a WorkflowRunFilter) {
    query.push(" WHERE TRUE");
    if let Some(workflow_id) = &filter.workflow_id {
        query.push(" AND workflow_id = ").push_bind(workflow_id);
    }
    if let Some(resource_id) = &filter.resource_id {
        query.push(" AND resource_id = ").push_bind(resource_id);
    }
    if let Some(status) = filter.status {
        query.push(" AND status = ").push_bind(status.as_str());
    }
}

#[async_trait]
impl WorkflowRecordStore for PostgresStorage {
    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
        self.bounded("save_workflow_run", async move {
            const OP: &str = "save_workflow_run";
            codec::check_id("workflow_id", &record.workflow_id)?;
            codec::check_id("run_id", &record.run_id)?;
            let snapshot = record.snapshot.get().to_owned();
            let now = codec::now();
            let upsert = sqlx::query_scalar(UPSERT)
                .bind(&record.workflow_id)
                .bind(&record.run_id)
                .bind(&record.resource_id)
                .bind(record.status.as_str())
                .bind(snapshot)
                .bind(now);
            let created_at: DateTime<Utc> = match record.lease_token {
                // A fenced save checks the fence and writes in one transaction.
                Some(token) => {
                    let token = codec::fence_token(token)?;
                    let mut tx = self.pool.begin().await.map_err(err(OP))?;
                    raise_fence(&mut tx, &record.workflow_id, &record.run_id, token).await?;
                    let created = upsert.fetch_one(&mut *tx).await.map_err(err(OP))?;
                    tx.commit().await.map_err(err(OP))?;
                    created
                }
                None => upsert.fetch_one(&self.pool).await.map_err(err(OP))?,
            };
            Ok(WorkflowRunRecord {
                created_at,
                updated_at: now,
                ..record
            })
        })
        .await
    }

    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
        self.bounded("fence_workflow_run", async move {
            const OP: &str = "fence_workflow_run";
            codec::check_id("workflow_id", workflow_id)?;
            codec::check_id("run_id", run_id)?;
            let token = codec::fence_token(token)?;
            let mut conn = self.pool.acquire().await.map_err(err(OP))?;
            raise_fence(&mut conn, workflow_id, run_id, token).await
        })
        .await
    }

    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>> {
        self.bounded("get_workflow_run", async move {
            let statement = format!(
                "SELECT {COLUMNS} FROM workflow_runs WHERE workflow_id = $1 AND run_id = $2"
            );
            let row: Option<Row> = sqlx::query_as(&statement)
                .bind(workflow_id)
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(err("get_workflow_run"))?;
            row.map(Row::into_record).transpose()
        })
        .await
    }

    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool> {
        self.bounded("claim_workflow_run", async move {
            let done = sqlx::query(CLAIM)
                .bind(workflow_id)
                .bind(run_id)
                .bind(from.as_str())
                .bind(to.as_str())
                .bind(codec::now())
                .execute(&self.pool)
                .await
                .map_err(err("claim_workflow_run"))?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>> {
        self.bounded("list_workflow_runs", async move {
            const OP: &str = "list_workflow_runs";
            codec::check_page(filter.page)?;
            let mut count = QueryBuilder::<Postgres>::new("SELECT COUNT(*) FROM workflow_runs");
            push_filter(&mut count, &filter);
            let mut select =
                QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM workflow_runs"));
            push_filter(&mut select, &filter);
            select.push(" ORDER BY created_at DESC, run_id DESC");
            let (total, rows): (u64, Vec<Row>) =
                self.count_and_page(OP, count, select, filter.page).await?;
            let items = rows
                .into_iter()
                .map(Row::into_record)
                .collect::<Result<Vec<_>>>()?;
            Ok(Page::new(items, filter.page, total))
        })
        .await
    }

    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool> {
        self.bounded("delete_workflow_run", async move {
            let done = sqlx::query(DELETE)
                .bind(workflow_id)
                .bind(run_id)
                .execute(&self.pool)
                .await
                .map_err(err("delete_workflow_run"))?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
