//! The schema holding the tables: its name checked, created when missing, and migrated.

use sqlx::Executor;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPool;

use crate::error::{Result, StorageError};

/// The schema migrations this build applies to PostgreSQL schemas.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

pub(super) fn check_schema(schema: &str) -> Result<()> {
    let mut chars = schema.chars();
    let valid_start = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let valid_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_start || !valid_rest || schema.len() > 63 {
        return Err(StorageError::invalid(
            "schema",
            format!("`{schema}` is not a plain identifier (letters, digits, `_`; at most 63)"),
        ));
    }
    Ok(())
}

pub(super) async fn create_schema(
    pool: &PgPool,
    schema: &str,
) -> std::result::Result<(), sqlx::Error> {
    let statement = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    match pool.execute(statement.as_str()).await {
        Ok(_) => Ok(()),
        // Two instances creating the schema at once: the loser sees a unique violation.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(()),
        Err(e) => Err(e),
    }
}
