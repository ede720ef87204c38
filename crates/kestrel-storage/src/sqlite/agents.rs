//! The stored agents of [`SqliteStorage`] and their versions.

use crate::storage::AgentStore;
use async_trait::async_trait;

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::Cost;
use super::{SqliteStorage, begin, err};
use crate::codec;
use crate::error::{Result, StorageError};
use crate::types::{AgentVersion, NewAgentVersion, NewStoredAgent, StoredAgent};

const AGENT_COLS: &str = "id, active_version_id, metadata, created_at, updated_at";
const VERSION_COLS: &str =
    "id, agent_id, version_number, config, changed_fields, change_message, created_at";

type AgentRow = (String, Option<String>, String, i64, i64);
type VersionRow = (String, String, i64, String, String, Option<String>, i64);

fn agent_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn version_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn decode_agent(
    (id, active_version_id, metadata, created, updated): AgentRow,
) -> Result<StoredAgent> {
    Ok(StoredAgent {
        metadata: codec::parse_map("agent metadata", &metadata)?,
        created_at: codec::from_micros(created)?,
        updated_at: codec::from_micros(updated)?,
        id,
        active_version_id,
    })
}

fn decode_version(
    (id, agent_id, version_number, config, changed, change_message, created): VersionRow,
) -> Result<AgentVersion> {
    Ok(AgentVersion {
        config: serde_json::from_str(&config)
            .map_err(|e| StorageError::corrupt("agent version", e))?,
        changed_fields: serde_json::from_str(&changed)
            .map_err(|e| StorageError::corrupt("agent version", e))?,
        created_at: codec::from_micros(created)?,
        id,
        agent_id,
        version_number,
        change_message,
    })
}

fn load_agent(conn: &Connection, agent_id: &str, op: &'static str) -> Result<StoredAgent> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {AGENT_COLS} FROM stored_agents WHERE id = ?1"
        ))
        .and_then(|mut s| s.query_row([agent_id], agent_row).optional())
        .map_err(err(op))?;
    match row {
        Some(row) => decode_agent(row),
        None => Err(StorageError::AgentNotFound {
            agent_id: agent_id.to_owned(),
        }),
    }
}

fn load_version(
    conn: &Connection,
    agent_id: &str,
    version_id: &str,
    op: &'static str,
) -> Result<AgentVersion> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {VERSION_COLS} FROM agent_versions WHERE id = ?1 AND agent_id = ?2"
        ))
        .and_then(|mut s| s.query_row([version_id, agent_id], version_row).optional())
        .map_err(err(op))?;
    match row {
        Some(row) => decode_version(row),
        None => Err(StorageError::VersionNotFound {
            agent_id: agent_id.to_owned(),
            version_id: version_id.to_owned(),
        }),
    }
}

fn insert_version(
    conn: &Connection,
    agent_id: &str,
    version: &NewAgentVersion,
    op: &'static str,
) -> Result<AgentVersion> {
    load_agent(conn, agent_id, op)?;
    let now = codec::now();
    let number: i64 = conn
        .query_row(
            "SELECT coalesce(max(version_number), 0) + 1 FROM agent_versions WHERE agent_id = ?1",
            [agent_id],
            |r| r.get(0),
        )
        .map_err(err(op))?;
    let added = AgentVersion {
        id: codec::new_id(),
        agent_id: agent_id.to_owned(),
        version_number: number,
        config: version.config.clone(),
        changed_fields: version.changed_fields.clone(),
        change_message: version.change_message.clone(),
        created_at: now,
    };
    conn.execute(
        &format!("INSERT INTO agent_versions ({VERSION_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
        params![
            added.id,
            agent_id,
            number,
            added.config.to_string(),
            serde_json::Value::from(added.changed_fields.clone()).to_string(),
            added.change_message,
            codec::to_micros(now),
        ],
    )
    .map_err(err(op))?;
    conn.execute(
        "UPDATE stored_agents SET updated_at = ?2 WHERE id = ?1",
        params![agent_id, codec::to_micros(now)],
    )
    .map_err(err(op))?;
    Ok(added)
}

fn set_active(
    conn: &Connection,
    agent_id: &str,
    version_id: Option<&str>,
    op: &'static str,
) -> Result<StoredAgent> {
    load_agent(conn, agent_id, op)?;
    if let Some(version_id) = version_id {
        load_version(conn, agent_id, version_id, op)?;
    }
    conn.execute(
        "UPDATE stored_agents SET active_version_id = ?2, updated_at = ?3 WHERE id = ?1",
        params![agent_id, version_id, codec::to_micros(codec::now())],
    )
    .map_err(err(op))?;
    load_agent(conn, agent_id, op)
}

#[async_trait]
impl AgentStore for SqliteStorage {
    async fn create_stored_agent(
        &self,
        agent: NewStoredAgent,
    ) -> Result<(StoredAgent, AgentVersion)> {
        const OP: &str = "create_stored_agent";
        codec::check_id("id", &agent.id)?;
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let now = codec::to_micros(codec::now());
                let inserted = tx
                .execute(
                    &format!(
                        "INSERT INTO stored_agents ({AGENT_COLS}) VALUES (?1, NULL, ?2, ?3, ?3) \
                         ON CONFLICT (id) DO NOTHING"
                    ),
                    params![agent.id, codec::canonical_map_text(&agent.metadata), now],
                )
                .map_err(err(OP))?;
                if inserted == 0 {
                    return Err(StorageError::AgentExists {
                        agent_id: agent.id.clone(),
                    });
                }
                let version = insert_version(&tx, &agent.id, &agent.version, OP)?;
                let stored = if agent.publish {
                    set_active(&tx, &agent.id, Some(&version.id), OP)?
                } else {
                    load_agent(&tx, &agent.id, OP)?
                };
                tx.commit().map_err(err(OP))?;
                Ok((stored, version))
            })
            .await
    }

    async fn get_stored_agent(&self, agent_id: &str) -> Result<Option<StoredAgent>> {
        const OP: &str = "get_stored_agent";
        let agent_id = agent_id.to_owned();
        self.conns
            .read(OP, Cost::Short, move |conn| {
                match load_agent(conn, &agent_id, OP) {
                    Ok(agent) => Ok(Some(agent)),
                    Err(StorageError::AgentNotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
    }

    async fn list_stored_agents(&self) -> Result<Vec<StoredAgent>> {
        const OP: &str = "list_stored_agents";
        self.conns
            .read(OP, Cost::Short, move |conn| {
                let rows: Vec<AgentRow> = conn
                    .prepare_cached(&format!(
                        "SELECT {AGENT_COLS} FROM stored_agents ORDER BY id"
                    ))
                    .and_then(|mut s| s.query_map([], agent_row)?.collect())
                    .map_err(err(OP))?;
                rows.into_iter().map(decode_agent).collect()
            })
            .await
    }

    async fn delete_stored_agent(&self, agent_id: &str) -> Result<bool> {
        const OP: &str = "delete_stored_agent";
        let agent_id = agent_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let deleted = conn
                    .execute("DELETE FROM stored_agents WHERE id = ?1", [&agent_id])
                    .map_err(err(OP))?;
                Ok(deleted > 0)
            })
            .await
    }

    async fn add_agent_version(
        &self,
        agent_id: &str,
        version: NewAgentVersion,
    ) -> Result<AgentVersion> {
        const OP: &str = "add_agent_version";
        let agent_id = agent_id.to_owned();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let added = insert_version(&tx, &agent_id, &version, OP)?;
                tx.commit().map_err(err(OP))?;
                Ok(added)
            })
            .await
    }

    async fn get_agent_version(&self, agent_id: &str, version_id: &str) -> Result<AgentVersion> {
        const OP: &str = "get_agent_version";
        let (agent_id, version_id) = (agent_id.to_owned(), version_id.to_owned());
        self.conns
            .read(OP, Cost::Short, move |conn| {
                load_version(conn, &agent_id, &version_id, OP)
            })
            .await
    }

    async fn list_agent_versions(&self, agent_id: &str) -> Result<Vec<AgentVersion>> {
        const OP: &str = "list_agent_versions";
        let agent_id = agent_id.to_owned();
        self.conns
            .read(OP, Cost::Short, move |conn| {
                load_agent(conn, &agent_id, OP)?;
                let rows: Vec<VersionRow> = conn
                    .prepare_cached(&format!(
                        "SELECT {VERSION_COLS} FROM agent_versions WHERE agent_id = ?1 \
                     ORDER BY version_number DESC"
                    ))
                    .and_then(|mut s| s.query_map([&agent_id], version_row)?.collect())
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
        const OP: &str = "activate_agent_version";
        let (agent_id, version_id) = (agent_id.to_owned(), version_id.map(str::to_owned));
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let agent = set_active(&tx, &agent_id, version_id.as_deref(), OP)?;
                tx.commit().map_err(err(OP))?;
                Ok(agent)
            })
            .await
    }

    async fn delete_agent_version(&self, agent_id: &str, version_id: &str) -> Result<()> {
        const OP: &str = "delete_agent_version";
        let (agent_id, version_id) = (agent_id.to_owned(), version_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                let agent = load_agent(&tx, &agent_id, OP)?;
                load_version(&tx, &agent_id, &version_id, OP)?;
                if agent.active_version_id.as_deref() == Some(version_id.as_str()) {
                    return Err(StorageError::VersionPublished {
                        agent_id: agent_id.clone(),
                        version_id: version_id.clone(),
                    });
                }
                tx.execute("DELETE FROM agent_versions WHERE id = ?1", [&version_id])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
    }
}
