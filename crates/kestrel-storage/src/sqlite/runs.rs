//! The runs of [`SqliteStorage`]: saves with their version compare-and-sets (synced to the disk
//! with [`Synchronous::Runs`]), gets, listings and deletes.

use crate::storage::RunRecordStore;
use async_trait::async_trait;

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::Cost;
use super::rows::RunRow;
use super::{SqliteStorage, Synchronous, begin, count_and_page, err, optional_row, sql};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{Page, RunFilter, RunRecord};

/// Raises the fence of `run_id` to `token`, inside the caller's transaction: refused with
/// [`StorageError::Fenced`] when a write carried a greater token before.
pub(super) fn check_fence(conn: &Connection, run_id: &str, token: i64) -> Result<()> {
    const OP: &str = "fence";
    let raised: Option<i64> = conn
        .prepare_cached(sql::RAISE_FENCE)
        .and_then(|mut s| s.query_row(params![run_id, token], |r| r.get(0)).optional())
        .map_err(err(OP))?;
    if raised.is_some() {
        return Ok(());
    }
    let current = optional_row(conn, sql::FENCE_TOKEN, [run_id], |r| r.get(0), OP)?.unwrap_or(0);
    Err(StorageError::Fenced {
        run_id: run_id.to_owned(),
        token,
        current,
    })
}

/// Saves `rows` with their compare-and-sets (and fences) in one transaction: the new versions
/// and creation times, or (nothing written) the index of the first run whose version differed
/// and the version it has. A fenced save is its error, nothing written.
#[allow(clippy::type_complexity)]
fn save_runs_in(
    conn: &mut Connection,
    rows: &[RunWrite],
    at: i64,
) -> Result<std::result::Result<Vec<(i64, i64)>, (usize, Option<i64>)>> {
    const OP: &str = "save_runs";
    let tx = begin(conn, OP)?;
    let mut written = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        if let Some(token) = row.lease_token {
            check_fence(&tx, &row.run_id, token)?;
        }
        match write_run(&tx, row, at)? {
            Ok(saved) => written.push(saved),
            Err(actual) => return Ok(Err((index, actual))),
        }
    }
    tx.commit().map_err(err(OP))?;
    Ok(Ok(written))
}

/// One run to write with its compare-and-set.
struct RunWrite {
    run_id: String,
    agent_id: String,
    thread_id: Option<String>,
    resource_id: Option<String>,
    status: &'static str,
    snapshot: String,
    parent: Option<String>,
    expected: Option<i64>,
    lease_token: Option<i64>,
}

/// Writes one run if its version is the expected one: its new version and creation time, or
/// the version it has (`None`: no such run).
fn write_run(
    conn: &Connection,
    row: &RunWrite,
    at: i64,
) -> Result<std::result::Result<(i64, i64), Option<i64>>> {
    const OP: &str = "save_run";
    let saved: Option<(i64, i64)> = match row.expected {
        None => {
            let inserted = conn
                .prepare_cached(sql::INSERT_RUN)
                .and_then(|mut s| {
                    s.execute(params![
                        row.run_id,
                        row.agent_id,
                        row.thread_id,
                        row.resource_id,
                        row.status,
                        row.snapshot,
                        row.parent,
                        at,
                        row.lease_token
                    ])
                })
                .map_err(err(OP))?;
            (inserted == 1).then_some((1, at))
        }
        Some(expected) => {
            let Some(stored) = stored_run(conn, &row.run_id)? else {
                return Ok(Err(None));
            };
            if stored.version != expected {
                return Ok(Err(Some(stored.version)));
            }
            conn.prepare_cached(stored.update_for(row))
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            row.run_id,
                            row.agent_id,
                            row.thread_id,
                            row.resource_id,
                            row.status,
                            row.snapshot,
                            row.parent,
                            at,
                            expected,
                            row.lease_token
                        ],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                })
                .map_err(err(OP))?
        }
    };
    match saved {
        Some(saved) => Ok(Ok(saved)),
        None => Ok(Err(run_version(conn, &row.run_id)?)),
    }
}

/// What a save finds stored before it writes: the version its compare-and-set checks, and the
/// columns that pick the statement.
struct StoredRun {
    version: i64,
    agent_id: String,
    thread_id: Option<String>,
    resource_id: Option<String>,
    status: String,
    parent: Option<String>,
}

impl StoredRun {
    /// The narrowest update that writes `row`: every indexed column a statement sets is
    /// rewritten in its index, so a save sets only the ones that changed. A run's owner never
    /// changes in practice; the full update keeps the store correct if a caller changes it.
    fn update_for(&self, row: &RunWrite) -> &'static str {
        let same_owner = self.agent_id == row.agent_id
            && self.thread_id == row.thread_id
            && self.resource_id == row.resource_id
            && self.parent == row.parent;
        match (same_owner, self.status == row.status) {
            (true, true) => sql::UPDATE_RUN_SNAPSHOT,
            (true, false) => sql::UPDATE_RUN_STATUS,
            (false, _) => sql::UPDATE_RUN,
        }
    }
}

fn stored_run(conn: &Connection, run_id: &str) -> Result<Option<StoredRun>> {
    optional_row(
        conn,
        sql::RUN_STORED,
        [run_id],
        |r| {
            Ok(StoredRun {
                version: r.get(0)?,
                agent_id: r.get(1)?,
                thread_id: r.get(2)?,
                resource_id: r.get(3)?,
                status: r.get(4)?,
                parent: r.get(5)?,
            })
        },
        "save_run",
    )
}

fn run_version(conn: &Connection, run_id: &str) -> Result<Option<i64>> {
    optional_row(conn, sql::RUN_VERSION, [run_id], |r| r.get(0), "save_run")
}

#[async_trait]
impl RunRecordStore for SqliteStorage {
    async fn save_run(
        &self,
        record: RunRecord,
        expected_version: Option<i64>,
    ) -> Result<RunRecord> {
        let mut saved = self.save_runs(vec![(record, expected_version)]).await?;
        saved
            .pop()
            .ok_or_else(|| StorageError::corrupt("save_run", "no run was saved"))
    }

    async fn save_runs(&self, saves: Vec<(RunRecord, Option<i64>)>) -> Result<Vec<RunRecord>> {
        const OP: &str = "save_runs";
        let now = codec::now();
        let at = codec::to_micros(now);
        let mut rows = Vec::with_capacity(saves.len());
        for (record, expected_version) in &saves {
            codec::check_id("run_id", &record.run_id)?;
            let snapshot = record.snapshot.get().to_owned();
            rows.push(RunWrite {
                run_id: record.run_id.clone(),
                agent_id: record.agent_id.clone(),
                thread_id: record.thread_id.clone(),
                resource_id: record.resource_id.clone(),
                status: record.status.as_str(),
                snapshot,
                parent: record.parent_run_id.clone(),
                expected: *expected_version,
                lease_token: record.lease_token,
            });
        }
        // One transaction: a conflict on any run rolls back the ones before it.
        let sync = self.synchronous == Synchronous::Runs;
        let outcome = self
            .conns
            .write(OP, Cost::Short, move |conn| {
                // The commit of a run (a decision above all) is on the disk before it is
                // reported saved; the setting cannot change inside a transaction.
                if sync {
                    conn.pragma_update(None, "synchronous", "full")
                        .map_err(err(OP))?;
                }
                let saved = save_runs_in(conn, &rows, at);
                if sync {
                    conn.pragma_update(None, "synchronous", "normal")
                        .map_err(err(OP))?;
                }
                saved
            })
            .await?;
        match outcome {
            Ok(written) => saves
                .into_iter()
                .zip(written)
                .map(|((record, _), (version, created))| {
                    Ok(RunRecord {
                        version,
                        created_at: codec::from_micros(created)?,
                        updated_at: now,
                        ..record
                    })
                })
                .collect(),
            Err((index, actual)) => {
                let Some((record, expected)) = saves.into_iter().nth(index) else {
                    return Err(StorageError::corrupt("save_runs", "a conflict on no run"));
                };
                Err(codec::run_conflict(record.run_id, expected, actual))
            }
        }
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        const OP: &str = "get_run";
        let run_id = run_id.to_owned();
        let row = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                optional_row(conn, sql::GET_RUN, [&run_id], RunRow::from_row, OP)
            })
            .await?;
        row.map(RunRow::into_record).transpose()
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Page<RunRecord>> {
        const OP: &str = "list_runs";
        codec::check_page(filter.page)?;
        let mut count = sql::Dynamic::new(sql::COUNT_RUNS);
        sql::push_run_filter(&mut count, &filter);
        let mut select = sql::Dynamic::new(sql::SELECT_RUNS);
        sql::push_run_filter(&mut select, &filter);
        select
            .push(sql::RUN_ORDER)
            .push(" LIMIT ")
            .bind(i64::from(filter.page.per_page))
            .push(" OFFSET ")
            .bind(filter.page.offset() as i64);
        let (total, rows) = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                count_and_page(conn, &count, &select, RunRow::from_row, OP)
            })
            .await?;
        let items = rows
            .into_iter()
            .map(RunRow::into_record)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, filter.page, total as u64))
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool> {
        const OP: &str = "delete_run";
        let run_id = run_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let done = conn
                    .prepare_cached(sql::DELETE_RUN)
                    .and_then(|mut s| s.execute([&run_id]))
                    .map_err(err(OP))?;
                Ok(done > 0)
            })
            .await
    }
}
