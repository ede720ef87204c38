//! The workflow runs of [`SqliteStorage`]: each run's latest snapshot, saved (created or
//! replaced), claimed with a compare-and-set on its status, listed and deleted.

use crate::storage::WorkflowRecordStore;
use async_trait::async_trait;

use rusqlite::{OptionalExtension, params};

use super::conn::Cost;
use super::{SqliteStorage, begin, count_and_page, err, optional_row, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, WorkflowRunFilter, WorkflowRunRecord, WorkflowStatus};

const COLUMNS: &str = "workflow_id, run_id, resource_id, status, snapshot, created_at, updated_at";

/// Creates the run, or replaces its snapshot (keeping its creation time).
const UPSERT: &str = "INSERT INTO workflow_runs \
     (workflow_id, run_id, resource_id, status, snapshot, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) \
     ON CONFLICT (workflow_id, run_id) DO UPDATE SET resource_id = excluded.resource_id, \
     status = excluded.status, snapshot = excluded.snapshot, updated_at = excluded.updated_at \
     RETURNING created_at";

/// A save of a running run: creates it, or replaces the snapshot of one stored running with the
/// same resource. It names no indexed column in its update (the full upsert does, so SQLite
/// rewrites their index entries too: three WAL frames a commit instead of one); a run whose
/// stored status or resource differs returns no row and goes through [`UPSERT`].
const SAVE_RUNNING: &str = "INSERT INTO workflow_runs \
     (workflow_id, run_id, resource_id, status, snapshot, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) \
     ON CONFLICT (workflow_id, run_id) DO UPDATE SET snapshot = excluded.snapshot, \
     updated_at = excluded.updated_at \
     WHERE workflow_runs.status = excluded.status \
     AND workflow_runs.resource_id IS excluded.resource_id \
     RETURNING created_at";

/// Raises a run's fence to ?3 unless it is above: returns the token when it was raised (or
/// equal), no row when the fence is above ?3.
const RAISE_FENCE: &str = "INSERT INTO workflow_fences (workflow_id, run_id, token) \
     VALUES (?1, ?2, ?3) ON CONFLICT (workflow_id, run_id) DO UPDATE SET token = excluded.token \
     WHERE excluded.token >= workflow_fences.token RETURNING token";

const FENCE_TOKEN: &str =
    "SELECT token FROM workflow_fences WHERE workflow_id = ?1 AND run_id = ?2";

const CLAIM: &str = "UPDATE workflow_runs SET status = ?4, updated_at = ?5 \
     WHERE workflow_id = ?1 AND run_id = ?2 AND status = ?3";

const DELETE: &str = "DELETE FROM workflow_runs WHERE workflow_id = ?1 AND run_id = ?2";

/// A stored row, before its JSON and times are decoded.
struct Row {
    workflow_id: String,
    run_id: String,
    resource_id: Option<String>,
    status: String,
    snapshot: String,
    created_at: i64,
    updated_at: i64,
}

impl Row {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            workflow_id: row.get(0)?,
            run_id: row.get(1)?,
            resource_id: row.get(2)?,
            status: row.get(3)?,
            snapshot: row.get(4)?,
            created_at: row.get(5)?,
            updated_at: row.get(6)?,
        })
    }

    fn into_record(self) -> Result<WorkflowRunRecord> {
        crate::sql_common::workflow_run_record(
            self.workflow_id,
            self.run_id,
            self.resource_id,
            &self.status,
            self.snapshot,
            codec::from_micros(self.created_at)?,
            codec::from_micros(self.updated_at)?,
        )
    }
}

/// Raises the fence of a run to `token` on `conn` (in the caller's transaction), or refuses.
fn raise_fence(
    conn: &rusqlite::Connection,
    workflow_id: &str,
    run_id: &str,
    token: i64,
) -> Result<()> {
    const OP: &str = "fence_workflow_run";
    let raised: Option<i64> = conn
        .prepare_cached(RAISE_FENCE)
        .and_then(|mut s| {
            s.query_row(params![workflow_id, run_id, token], |r| r.get(0))
                .optional()
        })
        .map_err(err(OP))?;
    if raised.is_some() {
        return Ok(());
    }
    let current: i64 = conn
        .prepare_cached(FENCE_TOKEN)
        .and_then(|mut s| {
            s.query_row(params![workflow_id, run_id], |r| r.get(0))
                .optional()
        })
        .map_err(err(OP))?
        .unwrap_or(0);
    Err(StorageError::WorkflowRunFenced {
        workflow_id: workflow_id.to_owned(),
        run_id: run_id.to_owned(),
        token,
        current,
    })
}

/// Writes a run's row (`params` as [`UPSERT`] takes them), its creation time back.
fn upsert(
    conn: &rusqlite::Connection,
    params: &[&dyn rusqlite::ToSql],
    running: bool,
) -> Result<i64> {
    const OP: &str = "save_workflow_run";
    // A running run's save is most often a step boundary (the status and resource
    // unchanged) or its first; any other status is most often new for the run (it stops or
    // ends), so it goes straight to the full upsert: one statement, one transaction, in the
    // common cases.
    let saved = if running {
        conn.prepare_cached(SAVE_RUNNING)
            .and_then(|mut s| s.query_row(params, |r| r.get(0)).optional())
            .map_err(err(OP))?
    } else {
        None
    };
    match saved {
        Some(created) => Ok(created),
        None => conn
            .prepare_cached(UPSERT)
            .and_then(|mut s| s.query_row(params, |r| r.get(0)))
            .map_err(err(OP)),
    }
}

fn push_filter(query: &mut sql::Dynamic, filter: &WorkflowRunFilter) {
    query.push(" WHERE 1 = 1");
    if let Some(workflow_id) = &filter.workflow_id {
        query.push(" AND workflow_id = ").bind(workflow_id.clone());
    }
    if let Some(resource_id) = &filter.resource_id {
        query.push(" AND resource_id = ").bind(resource_id.clone());
    }
    if let Some(status) = filter.status {
        query
            .push(" AND status = ")
            .bind(status.as_str().to_owned());
    }
}

#[async_trait]
impl WorkflowRecordStore for SqliteStorage {
    async fn save_workflow_run(&self, record: WorkflowRunRecord) -> Result<WorkflowRunRecord> {
        const OP: &str = "save_workflow_run";
        codec::check_id("workflow_id", &record.workflow_id)?;
        codec::check_id("run_id", &record.run_id)?;
        let snapshot = record.snapshot.get().to_owned();
        let now = codec::now();
        let at = codec::to_micros(now);
        let (workflow_id, run_id) = (record.workflow_id.clone(), record.run_id.clone());
        let (resource_id, status) = (record.resource_id.clone(), record.status.as_str());
        let running = record.status == WorkflowStatus::Running;
        let token = record.lease_token.map(codec::fence_token).transpose()?;
        let created: i64 = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                let params = params![workflow_id, run_id, resource_id, status, snapshot, at];
                match token {
                    // A fenced save checks the fence and writes in one transaction.
                    Some(token) => {
                        let tx = begin(conn, OP)?;
                        raise_fence(&tx, &workflow_id, &run_id, token)?;
                        let created = upsert(&tx, params, running)?;
                        tx.commit().map_err(err(OP))?;
                        Ok(created)
                    }
                    None => upsert(conn, params, running),
                }
            })
            .await?;
        Ok(WorkflowRunRecord {
            created_at: codec::from_micros(created)?,
            updated_at: now,
            ..record
        })
    }

    async fn fence_workflow_run(&self, workflow_id: &str, run_id: &str, token: u64) -> Result<()> {
        const OP: &str = "fence_workflow_run";
        codec::check_id("workflow_id", workflow_id)?;
        codec::check_id("run_id", run_id)?;
        let token = codec::fence_token(token)?;
        let (workflow_id, run_id) = (workflow_id.to_owned(), run_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                raise_fence(conn, &workflow_id, &run_id, token)
            })
            .await
    }

    async fn get_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<Option<WorkflowRunRecord>> {
        const OP: &str = "get_workflow_run";
        let (workflow_id, run_id) = (workflow_id.to_owned(), run_id.to_owned());
        let statement =
            format!("SELECT {COLUMNS} FROM workflow_runs WHERE workflow_id = ?1 AND run_id = ?2");
        let row = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                optional_row(conn, &statement, [&workflow_id, &run_id], Row::from_row, OP)
            })
            .await?;
        row.map(Row::into_record).transpose()
    }

    async fn claim_workflow_run(
        &self,
        workflow_id: &str,
        run_id: &str,
        from: WorkflowStatus,
        to: WorkflowStatus,
    ) -> Result<bool> {
        const OP: &str = "claim_workflow_run";
        let (workflow_id, run_id) = (workflow_id.to_owned(), run_id.to_owned());
        let at = codec::to_micros(codec::now());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let changed = conn
                    .prepare_cached(CLAIM)
                    .and_then(|mut s| {
                        s.execute(params![workflow_id, run_id, from.as_str(), to.as_str(), at])
                    })
                    .map_err(err(OP))?;
                Ok(changed == 1)
            })
            .await
    }

    async fn list_workflow_runs(
        &self,
        filter: WorkflowRunFilter,
    ) -> Result<Page<WorkflowRunRecord>> {
        const OP: &str = "list_workflow_runs";
        codec::check_page(filter.page)?;
        let mut count = sql::Dynamic::new("SELECT COUNT(*) FROM workflow_runs");
        push_filter(&mut count, &filter);
        let mut select = sql::Dynamic::new(&format!("SELECT {COLUMNS} FROM workflow_runs"));
        push_filter(&mut select, &filter);
        select
            .push(" ORDER BY created_at DESC, run_id DESC LIMIT ")
            .bind(i64::from(filter.page.per_page))
            .push(" OFFSET ")
            .bind(filter.page.offset() as i64);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                count_and_page(conn, &count, &select, Row::from_row, OP)
            })
            .await?;
        let items = rows
            .into_iter()
            .map(Row::into_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, filter.page, total as u64))
    }

    async fn delete_workflow_run(&self, workflow_id: &str, run_id: &str) -> Result<bool> {
        const OP: &str = "delete_workflow_run";
        let (workflow_id, run_id) = (workflow_id.to_owned(), run_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let done = conn
                    .prepare_cached(DELETE)
                    .and_then(|mut s| s.execute([&workflow_id, &run_id]))
                    .map_err(err(OP))?;
                Ok(done > 0)
            })
            .await
    }
}
