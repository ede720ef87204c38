//! The stored agents of [`PostgresStorage`] and their versions. Adding a version locks the
//! agent's row, so concurrent versions get consecutive numbers.

use crate::storage::AgentStore;
use async_trait::async_trait;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgConnection;

use super::{PostgresStorage, err};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{AgentVersion, NewAgentVersion, NewStoredAgent, StoredAgent};

const AGENT_COLS: &str = "id, active_version_id, metadata, created_at, updated_at";
const VERSION_COLS: &str =
    "id, agent_id, version_number, config, changed_fields, change_message, created_at";

type AgentRow = (String, Option<String>, Value, DateTime<Utc>, DateTime<Utc>);
type VersionRow = (
    String,
    String,
    i64,
    Value,
    Value,
    Option<String>,
    DateTime<Utc>,
);

fn decode_agent(
    (id, active_version_id, metadata, created_at, updated_at): AgentRow,
) -> Result<StoredAgent> {
    Ok(StoredAgent {
        metadata: codec::value_to_map("agent metadata", metadata)?,
        id,
        active_version_id,
        created_at,
        updated_at,
    })
}

fn decode_version(
    (id, agent_id, version_number, config, changed, change_message, created_at): VersionRow,
) -> Result<AgentVersion> {
    Ok(AgentVersion {
        changed_fields: serde_json::from_value(changed)
            .map_err(|e| StorageError::corrupt("agent version", e))?,
        id,
        agent_id,
        version_number,
        config,
        change_message,
        created_at,
    })
}

async fn load_agent(
    conn: &mut PgConnection,
    agent_id: &str,
    lock: bool,
    op: &'static str,
) -> Result<StoredAgent> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    let row: Option<AgentRow> = sqlx::query_as(&format!(
        "SELECT {AGENT_COLS} FROM stored_agents WHERE id = $1{lock}"
    ))
    .bind(agent_id)
    .fetch_optional(conn)
    .await
    .map_err(err(op))?;
    match row {
        Some(row) => decode_agent(row),
        None => Err(StorageError::AgentNotFound {
            agent_id: agent_id.to_owned(),
        }),
    }
}

async fn load_version(
    conn: &mut PgConnection,
    agent_id: &str,
    version_id: &str,
    op: &'static str,
) -> Result<AgentVersion> {
    let row: Option<VersionRow> = sqlx::query_as(&format!(
        "SELECT {VERSION_COLS} FROM agent_versions WHERE id = $1 AND agent_id = $2"
    ))
    .bind(version_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await
    .map_err(err(op))?;
    match row {
        Some(row) => decode_version(row),
        None => Err(StorageError::VersionNotFound {
            agent_id: agent_id.to_owned(),
            version_id: version_id.to_owned(),
        }),
    }
}

async fn insert_version(
    conn: &mut PgConnection,
    agent_id: &str,
    version: NewAgentVersion,
    op: &'static str,
) -> Result<AgentVersion> {
    load_agent(conn, agent_id, true, op).await?;
    let now = codec::now();
    let number: i64 = sqlx::query_scalar(
        "SELECT coalesce(max(version_number), 0) + 1 FROM agent_versions WHERE agent_id = $1",
    )
    .bind(agent_id)
    .fetch_one(&mut *conn)
    .await
    .map_err(err(op))?;
    let added = AgentVersion {
        id: codec::new_id(),
        agent_id: agent_id.to_owned(),
        version_number: number,
        config: version.config,
        changed_fields: version.changed_fields,
        change_message: version.change_message,
        created_at: now,
    };
    sqlx::query(&format!(
        "INSERT INTO agent_versions ({VERSION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
    ))
    .bind(&added.id)
    .bind(agent_id)
    .bind(number)
    .bind(&added.config)
    .bind(Value::from(added.changed_fields.clone()))
    .bind(&added.change_message)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(err(op))?;
    sqlx::query("UPDATE stored_agents SET updated_at = $2 WHERE id = $1")
        .bind(agent_id)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(err(op))?;
    Ok(added)
}

async fn set_active(
    conn: &mut PgConnection,
    agent_id: &str,
    version_id: Option<&str>,
    op: &'static str,
) -> Result<StoredAgent> {
    load_agent(conn, agent_id, true, op).await?;
    if let Some(version_id) = version_id {
        load_version(conn, agent_id, version_id, op).await?;
    }
    sqlx::query("UPDATE stored_agents SET active_version_id = $2, updated_at = $3 WHERE id = $1")
        .bind(agent_id)
        .bind(version_id)
        .bind(codec::now())
        .execute(&mut *conn)
        .await
        .map_err(err(op))?;
    load_agent(conn, agent_id, false, op).await
}

#[async_trait]
impl AgentStore for PostgresStorage {
    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)> {
        self.bounded("create_stored_agent", async move {
            const OP: &str = "create_stored_agent";
            codec::check_id("id", &agent.id)?;
            let mut tx = self.begin(OP).await?;
            let now = codec::now();
            let inserted = sqlx::query(&format!(
                "INSERT INTO stored_agents ({AGENT_COLS}) VALUES ($1, NULL, $2, $3, $3) \
         ON CONFLICT (id) DO NOTHING"
            ))
            .bind(&agent.id)
            .bind(Value::Object(agent.metadata.clone()))
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
            if inserted.rows_affected() == 0 {
                return Err(StorageError::AgentExists { agent_id: agent.id });
            }
            let version = insert_version(&mut tx, &agent.id, agent.version, OP).await?;
            let stored = if agent.publish {
                set_active(&mut tx, &agent.id, Some(&version.id), OP).await?
            } else {
                load_agent(&mut tx, &agent.id, false, OP).await?
            };
            tx.commit().await.map_err(err(OP))?;
            Ok((stored, version))
        })
        .await
    }

    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>> {
        self.bounded("get_stored_agent", async move {
            const OP: &str = "get_stored_agent";
            let mut conn = self.conn(OP).await?;
            match load_agent(&mut conn, agent_id, false, OP).await {
                Ok(agent) => Ok(Some(agent)),
                Err(StorageError::AgentNotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
    }

    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>> {
        self.bounded("list_stored_agents", async move {
            const OP: &str = "list_stored_agents";
            let mut conn = self.conn(OP).await?;
            let rows: Vec<AgentRow> = sqlx::query_as(&format!(
                "SELECT {AGENT_COLS} FROM stored_agents ORDER BY id"
            ))
            .fetch_all(&mut *conn)
            .await
            .map_err(err(OP))?;
            rows.into_iter().map(decode_agent).collect()
        })
        .await
    }

    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool> {
        self.bounded("delete_stored_agent", async move {
            const OP: &str = "delete_stored_agent";
            let mut conn = self.conn(OP).await?;
            let deleted = sqlx::query("DELETE FROM stored_agents WHERE id = $1")
                .bind(agent_id)
                .execute(&mut *conn)
                .await
                .map_err(err(OP))?;
            Ok(deleted.rows_affected() > 0)
        })
        .await
    }

    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion> {
        self.bounded("add_agent_version", async move {
            const OP: &str = "add_agent_version";
            let mut tx = self.begin(OP).await?;
            let added = insert_version(&mut tx, agent_id, version, OP).await?;
            tx.commit().await.map_err(err(OP))?;
            Ok(added)
        })
        .await
    }

    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
        self.bounded("get_agent_version", async move {
            const OP: &str = "get_agent_version";
            let mut conn = self.conn(OP).await?;
            load_version(&mut conn, agent_id, version_id, OP).await
        })
        .await
    }

    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>> {
        self.bounded("list_agent_versions", async move {
            const OP: &str = "list_agent_versions";
            let mut conn = self.conn(OP).await?;
            load_agent(&mut conn, agent_id, false, OP).await?;
            let rows: Vec<VersionRow> = sqlx::query_as(&format!(
        "SELECT {VERSION_COLS} FROM agent_versions WHERE agent_id = $1 ORDER BY version_number DESC"
    ))
    .bind(agent_id)
    .fetch_all(&mut *conn)
    .await
    .map_err(err(OP))?;
            rows.into_iter().map(decode_version).collect()
        })
        .await
    }

    async fn activate_agent_version(
        &self,
        agent_id: &str,
        version_id: Option<&str>,
    ) -> Result<StoredAgent> {
        self.bounded("activate_agent_version", async move {
            const OP: &str = "activate_agent_version";
            let mut tx = self.begin(OP).await?;
            let agent = set_active(&mut tx, agent_id, version_id, OP).await?;
            tx.commit().await.map_err(err(OP))?;
            Ok(agent)
        })
        .await
    }

    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()> {
        self.bounded("delete_agent_version", async move {
            const OP: &str = "delete_agent_version";
            let mut tx = self.begin(OP).await?;
            let agent = load_agent(&mut tx, agent_id, true, OP).await?;
            load_version(&mut tx, agent_id, version_id, OP).await?;
            if agent.active_version_id.as_deref() == Some(version_id) {
                return Err(StorageError::VersionPublished {
                    agent_id: agent_id.to_owned(),
                    version_id: version_id.to_owned(),
                });
            }
            sqlx::query("DELETE FROM agent_versions WHERE id = $1")
                .bind(version_id)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            tx.commit().await.map_err(err(OP))
        })
        .await
    }
}
