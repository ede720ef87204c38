//! The observations of [`SqliteStorage`] (observational memory), per thread or per resource, and
//! the per-thread "observed up to" marker.

use crate::storage::ObservationStore;
use async_trait::async_trait;

use rusqlite::{Connection, params};

use super::conn::Cost;
use super::rows::ObservationRow;
use super::{SqliteStorage, begin, err, optional_row, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::{NewObservation, Observation, Scope};

fn insert_observations(
    conn: &Connection,
    scope: &Scope,
    observations: &[NewObservation],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Observation>> {
    let thread_id = match scope {
        Scope::Thread { thread_id, .. } => Some(thread_id.as_str()),
        Scope::Resource { .. } => None,
    };
    let mut added = Vec::with_capacity(observations.len());
    for o in observations {
        let observation = Observation {
            id: o.id.clone().unwrap_or_else(codec::new_id),
            scope: scope.clone(),
            text: o.text.clone(),
            created_at: o.created_at.map_or(now, codec::truncate),
            observed_up_to_seq: o.observed_up_to_seq,
            source_thread_id: o.source_thread_id.clone(),
        };
        conn.prepare_cached(sql::INSERT_OBSERVATION)
            .and_then(|mut s| {
                s.execute(params![
                    observation.id,
                    thread_id,
                    scope.resource_id(),
                    observation.text,
                    codec::to_micros(observation.created_at),
                    observation.observed_up_to_seq,
                    observation.source_thread_id,
                ])
            })
            .map_err(err("add_observations"))?;
        added.push(observation);
    }
    Ok(added)
}

fn check_scope(conn: &Connection, scope: &Scope, operation: &'static str) -> Result<()> {
    if let Scope::Thread {
        thread_id,
        resource_id,
    } = scope
    {
        owned(conn, thread_id, Some(resource_id), operation)?;
    }
    Ok(())
}

#[async_trait]
impl ObservationStore for SqliteStorage {
    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "add_observations";
        let scope = scope.clone();
        let now = codec::now();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                check_scope(&tx, &scope, OP)?;
                let added = insert_observations(&tx, &scope, &observations, now)?;
                tx.commit().map_err(err(OP))?;
                Ok(added)
            })
            .await
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        const OP: &str = "list_observations";
        let scope = scope.clone();
        let rows = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                check_scope(&tx, &scope, OP)?;
                let (statement, key) = match &scope {
                    Scope::Thread { thread_id, .. } => (sql::LIST_THREAD_OBSERVATIONS, thread_id),
                    Scope::Resource { resource_id } => {
                        (sql::LIST_RESOURCE_OBSERVATIONS, resource_id)
                    }
                };
                let rows: Vec<ObservationRow> = tx
                    .prepare_cached(statement)
                    .and_then(|mut s| s.query_map([key], ObservationRow::from_row)?.collect())
                    .map_err(err(OP))?;
                tx.finish().map_err(err(OP))?;
                Ok(rows)
            })
            .await?;
        rows.into_iter()
            .map(ObservationRow::into_observation)
            .collect()
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        const OP: &str = "replace_observations";
        let scope = scope.clone();
        let now = codec::now();
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                check_scope(&tx, &scope, OP)?;
                match &scope {
                    Scope::Thread { thread_id, .. } => {
                        tx.execute(sql::DELETE_THREAD_OBSERVATIONS, [thread_id])
                    }
                    Scope::Resource { resource_id } => {
                        tx.execute(sql::DELETE_RESOURCE_OBSERVATIONS, [resource_id])
                    }
                }
                .map_err(err(OP))?;
                let added = insert_observations(&tx, &scope, &observations, now)?;
                tx.commit().map_err(err(OP))?;
                Ok(added)
            })
            .await
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        const OP: &str = "get_observed_seq";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .read(OP, Cost::Short, move |conn| {
                owned(conn, &thread_id, Some(&resource_id), OP)?;
                let seq: Option<Option<i64>> =
                    optional_row(conn, sql::GET_OBSERVED_SEQ, [&thread_id], |r| r.get(0), OP)?;
                Ok(seq.flatten())
            })
            .await
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        const OP: &str = "set_observed_seq";
        let (thread_id, resource_id) = (thread_id.to_owned(), resource_id.to_owned());
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = begin(conn, OP)?;
                owned(&tx, &thread_id, Some(&resource_id), OP)?;
                tx.execute(sql::SET_OBSERVED_SEQ, params![thread_id, seq])
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
    }
}
