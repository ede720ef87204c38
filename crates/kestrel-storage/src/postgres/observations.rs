//! The observations of [`PostgresStorage`] (observational memory), per thread or per resource,
//! and the per-thread "observed up to" marker.

use crate::storage::ObservationStore;
use async_trait::async_trait;

use sqlx::postgres::PgConnection;

use super::rows::ObservationRow;
use super::{PostgresStorage, err, owned, sql};
use crate::codec;
use crate::error::Result;
use crate::types::{NewObservation, Observation, Scope};

async fn insert_observations(
    conn: &mut PgConnection,
    scope: &Scope,
    observations: Vec<NewObservation>,
) -> Result<Vec<Observation>> {
    let now = codec::now();
    let thread_id = match scope {
        Scope::Thread { thread_id, .. } => Some(thread_id.as_str()),
        Scope::Resource { .. } => None,
    };
    let mut added = Vec::with_capacity(observations.len());
    for o in observations {
        let observation = Observation {
            id: o.id.unwrap_or_else(codec::new_id),
            scope: scope.clone(),
            text: o.text,
            created_at: o.created_at.map_or(now, codec::truncate),
            observed_up_to_seq: o.observed_up_to_seq,
            source_thread_id: o.source_thread_id,
        };
        sqlx::query(sql::INSERT_OBSERVATION)
            .bind(&observation.id)
            .bind(thread_id)
            .bind(scope.resource_id())
            .bind(&observation.text)
            .bind(observation.created_at)
            .bind(observation.observed_up_to_seq)
            .bind(&observation.source_thread_id)
            .execute(&mut *conn)
            .await
            .map_err(err("add_observations"))?;
        added.push(observation);
    }
    Ok(added)
}

async fn check_scope(
    conn: &mut PgConnection,
    scope: &Scope,
    lock: bool,
    operation: &'static str,
) -> Result<()> {
    if let Scope::Thread {
        thread_id,
        resource_id,
    } = scope
    {
        owned(conn, thread_id, Some(resource_id), lock, operation).await?;
    }
    Ok(())
}

#[async_trait]
impl ObservationStore for PostgresStorage {
    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        self.bounded("add_observations", async move {
            const OP: &str = "add_observations";
            let mut tx = self.begin(OP).await?;
            check_scope(&mut tx, scope, true, OP).await?;
            let added = insert_observations(&mut tx, scope, observations).await?;
            tx.commit().await.map_err(err(OP))?;
            Ok(added)
        })
        .await
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        self.bounded("list_observations", async move {
            const OP: &str = "list_observations";
            let mut conn = self.conn(OP).await?;
            check_scope(&mut conn, scope, false, OP).await?;
            let query = match scope {
                Scope::Thread { thread_id, .. } => {
                    sqlx::query_as(sql::LIST_THREAD_OBSERVATIONS).bind(thread_id)
                }
                Scope::Resource { resource_id } => {
                    sqlx::query_as(sql::LIST_RESOURCE_OBSERVATIONS).bind(resource_id)
                }
            };
            let rows: Vec<ObservationRow> = query.fetch_all(&mut *conn).await.map_err(err(OP))?;
            Ok(rows
                .into_iter()
                .map(ObservationRow::into_observation)
                .collect())
        })
        .await
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        self.bounded("replace_observations", async move {
            const OP: &str = "replace_observations";
            let mut tx = self.begin(OP).await?;
            check_scope(&mut tx, scope, true, OP).await?;
            let delete = match scope {
                Scope::Thread { thread_id, .. } => {
                    sqlx::query(sql::DELETE_THREAD_OBSERVATIONS).bind(thread_id)
                }
                Scope::Resource { resource_id } => {
                    sqlx::query(sql::DELETE_RESOURCE_OBSERVATIONS).bind(resource_id)
                }
            };
            delete.execute(&mut *tx).await.map_err(err(OP))?;
            let added = insert_observations(&mut tx, scope, observations).await?;
            tx.commit().await.map_err(err(OP))?;
            Ok(added)
        })
        .await
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        self.bounded("get_observed_seq", async move {
            const OP: &str = "get_observed_seq";
            let mut conn = self.conn(OP).await?;
            owned(&mut conn, thread_id, Some(resource_id), false, OP).await?;
            let seq: Option<Option<i64>> = sqlx::query_scalar(sql::GET_OBSERVED_SEQ)
                .bind(thread_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(err(OP))?;
            Ok(seq.flatten())
        })
        .await
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        self.bounded("set_observed_seq", async move {
            const OP: &str = "set_observed_seq";
            let mut tx = self.begin(OP).await?;
            owned(&mut tx, thread_id, Some(resource_id), true, OP).await?;
            sqlx::query(sql::SET_OBSERVED_SEQ)
                .bind(thread_id)
                .bind(seq)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
            tx.commit().await.map_err(err(OP))
        })
        .await
    }
}
