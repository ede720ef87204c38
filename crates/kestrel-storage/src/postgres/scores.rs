//! The scores of [`PostgresStorage`]: one row per score (the record's JSON beside the columns
//! listings filter by), upserted by id.

use async_trait::async_trait;
use kestrel_core::store::{
    PendingScore, ScorePage, ScoreQuery, ScoreRecord, ScoreStore, ScoreStoreError,
};
use sqlx::{Postgres, QueryBuilder, Row};

use super::{PostgresStorage, err};
use crate::error::Result;
use crate::scores::{EncodedPending, EncodedScore, decode, decode_pending, score_err, source_name};

const UPSERT: &str = "INSERT INTO scores (id, scorer_id, run_id, entity_type, entity_id, \
     source, experiment_id, created_at, record) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (id) DO UPDATE SET scorer_id = excluded.scorer_id, run_id = excluded.run_id, \
     entity_type = excluded.entity_type, entity_id = excluded.entity_id, \
     source = excluded.source, experiment_id = excluded.experiment_id, \
     created_at = excluded.created_at, record = excluded.record";

const UPSERT_PENDING: &str = "INSERT INTO pending_scores (id, created_at, record) \
     VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, \
     record = excluded.record";

/// Stores `row` through `executor` (a pool, or a transaction's connection).
async fn upsert<'e>(
    row: EncodedScore,
    executor: impl sqlx::PgExecutor<'e>,
) -> std::result::Result<(), sqlx::Error> {
    sqlx::query(UPSERT)
        .bind(row.id)
        .bind(row.scorer_id)
        .bind(row.run_id)
        .bind(row.entity_type)
        .bind(row.entity_id)
        .bind(row.source)
        .bind(row.experiment_id)
        .bind(row.created_at)
        .bind(row.record)
        .execute(executor)
        .await
        .map(|_| ())
}

/// The filters of `query` after `WHERE TRUE`.
fn push_filters<'a>(statement: &mut QueryBuilder<'a, Postgres>, query: &'a ScoreQuery) {
    for (column, value) in [
        ("run_id", &query.run_id),
        ("scorer_id", &query.scorer_id),
        ("entity_type", &query.entity_type),
        ("entity_id", &query.entity_id),
        ("experiment_id", &query.experiment_id),
    ] {
        if let Some(value) = value {
            statement
                .push(format!(" AND {column} = "))
                .push_bind(value.as_str());
        }
    }
    if let Some(source) = query.source {
        statement
            .push(" AND source = ")
            .push_bind(source_name(source));
    }
}

impl PostgresStorage {
    async fn upsert_score(&self, score: &ScoreRecord) -> Result<()> {
        const OP: &str = "save_score";
        let row = EncodedScore::new(score)?;
        upsert(row, &self.pool).await.map_err(err(OP))
    }

    async fn keep_pending(&self, pending: &[PendingScore]) -> Result<()> {
        const OP: &str = "save_pending_scores";
        let rows = pending
            .iter()
            .map(EncodedPending::new)
            .collect::<Result<Vec<_>>>()?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        for row in rows {
            sqlx::query(UPSERT_PENDING)
                .bind(row.id)
                .bind(row.created_at)
                .bind(row.record)
                .execute(&mut *tx)
                .await
                .map_err(err(OP))?;
        }
        tx.commit().await.map_err(err(OP))
    }

    async fn complete_pending(&self, score: &ScoreRecord) -> Result<()> {
        const OP: &str = "complete_pending_score";
        let row = EncodedScore::new(score)?;
        let id = row.id.clone();
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        upsert(row, &mut *tx).await.map_err(err(OP))?;
        sqlx::query("DELETE FROM pending_scores WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))
    }

    async fn read_pending(&self, before: u64, limit: usize) -> Result<Vec<PendingScore>> {
        const OP: &str = "pending_scores";
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT record FROM pending_scores WHERE created_at < $1 \
             ORDER BY created_at, id LIMIT $2",
        )
        .bind(i64::try_from(before).unwrap_or(i64::MAX))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(err(OP))?;
        rows.iter().map(|json| decode_pending(json)).collect()
    }

    async fn read_score(&self, id: &str) -> Result<Option<ScoreRecord>> {
        const OP: &str = "get_score";
        let json: Option<String> = sqlx::query_scalar("SELECT record FROM scores WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(err(OP))?;
        json.as_deref().map(decode).transpose()
    }

    async fn page_of_scores(&self, query: &ScoreQuery) -> Result<ScorePage> {
        const OP: &str = "list_scores";
        let mut tx = self.pool.begin().await.map_err(err(OP))?;
        let mut count = QueryBuilder::new("SELECT COUNT(*) FROM scores WHERE TRUE");
        push_filters(&mut count, query);
        let total: i64 = count
            .build()
            .fetch_one(&mut *tx)
            .await
            .map_err(err(OP))?
            .try_get(0)
            .map_err(err(OP))?;
        let size = i64::from(query.page_size());
        let mut select = QueryBuilder::new("SELECT record FROM scores WHERE TRUE");
        push_filters(&mut select, query);
        select
            .push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(size)
            .push(" OFFSET ")
            .push_bind(i64::from(query.page).saturating_mul(size));
        let rows = select.build().fetch_all(&mut *tx).await.map_err(err(OP))?;
        tx.commit().await.map_err(err(OP))?;
        let scores = rows
            .iter()
            .map(|row| {
                let json: String = row.try_get(0).map_err(err(OP))?;
                decode(&json)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ScorePage::new(scores, usize::try_from(total).unwrap_or(0)))
    }
}

#[async_trait]
impl ScoreStore for PostgresStorage {
    async fn save_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        self.bounded("save_score", self.upsert_score(score))
            .await
            .map_err(score_err)
    }

    async fn get_score(&self, id: &str) -> Result<Option<ScoreRecord>, ScoreStoreError> {
        self.bounded("get_score", self.read_score(id))
            .await
            .map_err(score_err)
    }

    async fn list_scores(&self, query: &ScoreQuery) -> Result<ScorePage, ScoreStoreError> {
        self.bounded("list_scores", self.page_of_scores(query))
            .await
            .map_err(score_err)
    }

    async fn save_pending_scores(&self, pending: &[PendingScore]) -> Result<(), ScoreStoreError> {
        self.bounded("save_pending_scores", self.keep_pending(pending))
            .await
            .map_err(score_err)
    }

    async fn complete_pending_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        self.bounded("complete_pending_score", self.complete_pending(score))
            .await
            .map_err(score_err)
    }

    async fn pending_scores(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PendingScore>, ScoreStoreError> {
        self.bounded("pending_scores", self.read_pending(before, limit))
            .await
            .map_err(score_err)
    }
}
