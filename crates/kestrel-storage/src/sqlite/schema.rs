//! The schema of SQLite files: the migrations, and opening the writer, which applies them.

use std::sync::LazyLock;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

use super::conn::Settings;
use crate::error::Result;
use crate::sql_common::{migrate_err, open_err};

/// The schema migrations of SQLite files, in order; a file's `user_version` is how many of them
/// it has applied.
pub static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(vec![
        M::up(include_str!(
            "../../migrations/sqlite/0001_threads_messages.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0002_runs_observations_vectors.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0003_append_trigger_search_index.sql"
        )),
        M::up(include_str!("../../migrations/sqlite/0004_run_fences.sql")),
        M::up(include_str!(
            "../../migrations/sqlite/0005_workflow_runs.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0006_queued_messages.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0007_stored_agents.sql"
        )),
        M::up(include_str!(
            "../../migrations/sqlite/0008_workflow_fences.sql"
        )),
        M::up(include_str!("../../migrations/sqlite/0009_spans.sql")),
        M::up(include_str!("../../migrations/sqlite/0010_scores.sql")),
        M::up(include_str!("../../migrations/sqlite/0011_datasets.sql")),
        M::up(include_str!(
            "../../migrations/sqlite/0012_pending_scores.sql"
        )),
    ])
});

/// How many migrations this build knows.
pub const SCHEMA_VERSION: usize = 12;

/// Opens the writer and migrates the file (on the blocking pool: it may wait for another
/// process's lock and run migrations).
pub(super) fn open_writer(settings: &Settings, target: &str) -> Result<Connection> {
    let mut writer = settings
        .open(true)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    writer
        .busy_timeout(settings.busy_timeout)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    adopt_sqlx_versions(&writer)
        .map_err(|e| open_err(target, "cannot read the schema version", e))?;
    MIGRATIONS
        .to_latest(&mut writer)
        .map_err(|e| migrate_err(target, e))?;
    writer
        .busy_timeout(Duration::ZERO)
        .map_err(|e| open_err(target, "cannot open the file", e))?;
    Ok(writer)
}

/// Files written by builds that migrated with `sqlx` record their versions in
/// `_sqlx_migrations`, not in `user_version`: carry the count over once.
fn adopt_sqlx_versions(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version != 0 {
        return Ok(());
    }
    let has_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
         AND name = '_sqlx_migrations')",
        [],
        |r| r.get(0),
    )?;
    if !has_table {
        return Ok(());
    }
    let applied: i64 = conn.query_row(
        "SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success",
        [],
        |r| r.get(0),
    )?;
    conn.pragma_update(None, "user_version", applied)
}
