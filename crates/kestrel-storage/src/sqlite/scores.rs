//! The scores of [`SqliteStorage`]: one row per score (the record's JSON beside the columns
//! listings filter by), upserted by id.

use async_trait::async_trait;
use kestrel_core::store::{
    PendingScore, ScorePage, ScoreQuery, ScoreRecord, ScoreStore, ScoreStoreError,
};
use rusqlite::params;

use super::conn::Cost;
use super::{SqliteStorage, err, query_dynamic, sql};
use crate::scores::{EncodedPending, EncodedScore, decode, decode_pending, score_err, source_name};

const UPSERT: &str = "INSERT INTO scores (id, scorer_id, run_id, entity_type, entity_id, \
     source, experiment_id, created_at, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
     ON CONFLICT (id) DO UPDATE SET scorer_id = excluded.scorer_id, run_id = excluded.run_id, \
     entity_type = excluded.entity_type, entity_id = excluded.entity_id, \
     source = excluded.source, experiment_id = excluded.experiment_id, \
     created_at = excluded.created_at, record = excluded.record";

const UPSERT_PENDING: &str = "INSERT INTO pending_scores (id, created_at, record) \
     VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, \
     record = excluded.record";

/// Stores `row` on `conn` (inside the caller's transaction, if any).
fn upsert(conn: &rusqlite::Connection, row: &EncodedScore) -> rusqlite::Result<()> {
    conn.prepare_cached(UPSERT)?
        .execute(params![
            row.id,
            row.scorer_id,
            row.run_id,
            row.entity_type,
            row.entity_id,
            row.source,
            row.experiment_id,
            row.created_at,
            row.record
        ])
        .map(|_| ())
}

/// The filters of `query` after `WHERE 1`.
fn push_filters(statement: &mut sql::Dynamic, query: &ScoreQuery) {
    for (column, value) in [
        ("run_id", &query.run_id),
        ("scorer_id", &query.scorer_id),
        ("entity_type", &query.entity_type),
        ("entity_id", &query.entity_id),
        ("experiment_id", &query.experiment_id),
    ] {
        if let Some(value) = value {
            statement
                .push(&format!(" AND {column} = "))
                .bind(value.clone());
        }
    }
    if let Some(source) = query.source {
        statement
            .push(" AND source = ")
            .bind(source_name(source).to_owned());
    }
}

#[async_trait]
impl ScoreStore for SqliteStorage {
    async fn save_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        const OP: &str = "save_score";
        let row = EncodedScore::new(score).map_err(score_err)?;
        self.conns
            .write(OP, Cost::Short, move |conn| {
                upsert(conn, &row).map_err(err(OP))
            })
            .await
            .map_err(score_err)
    }

    async fn get_score(&self, id: &str) -> Result<Option<ScoreRecord>, ScoreStoreError> {
        const OP: &str = "get_score";
        let id = id.to_owned();
        let json: Option<String> = self
            .conns
            .read(OP, Cost::Short, move |conn| {
                conn.prepare_cached("SELECT record FROM scores WHERE id = ?1")
                    .and_then(|mut s| {
                        s.query_map([&id], |r| r.get::<_, String>(0))?
                            .next()
                            .transpose()
                    })
                    .map_err(err(OP))
            })
            .await
            .map_err(score_err)?;
        json.as_deref().map(decode).transpose().map_err(score_err)
    }

    async fn list_scores(&self, query: &ScoreQuery) -> Result<ScorePage, ScoreStoreError> {
        const OP: &str = "list_scores";
        let mut count = sql::Dynamic::new("SELECT COUNT(*) FROM scores WHERE 1");
        push_filters(&mut count, query);
        let mut select = sql::Dynamic::new("SELECT record FROM scores WHERE 1");
        push_filters(&mut select, query);
        let size = i64::from(query.page_size());
        select
            .push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .bind(size)
            .push(" OFFSET ")
            .bind(i64::from(query.page).saturating_mul(size));
        let (total, rows) = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                let total = query_dynamic(&tx, &count, |r| r.get::<_, i64>(0), OP)?;
                let rows = query_dynamic(&tx, &select, |r| r.get::<_, String>(0), OP)?;
                tx.finish().map_err(err(OP))?;
                Ok((total.into_iter().next().unwrap_or(0), rows))
            })
            .await
            .map_err(score_err)?;
        let scores = rows
            .iter()
            .map(|json| decode(json))
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(score_err)?;
        Ok(ScorePage::new(scores, usize::try_from(total).unwrap_or(0)))
    }

    async fn save_pending_scores(&self, pending: &[PendingScore]) -> Result<(), ScoreStoreError> {
        const OP: &str = "save_pending_scores";
        let rows = pending
            .iter()
            .map(EncodedPending::new)
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(score_err)?;
        if rows.is_empty() {
            return Ok(());
        }
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                for row in &rows {
                    tx.prepare_cached(UPSERT_PENDING)
                        .and_then(|mut s| s.execute(params![row.id, row.created_at, row.record]))
                        .map_err(err(OP))?;
                }
                tx.commit().map_err(err(OP))
            })
            .await
            .map_err(score_err)
    }

    async fn complete_pending_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        const OP: &str = "complete_pending_score";
        let row = EncodedScore::new(score).map_err(score_err)?;
        self.conns
            .write(OP, Cost::Short, move |conn| {
                let tx = conn.transaction().map_err(err(OP))?;
                upsert(&tx, &row).map_err(err(OP))?;
                tx.prepare_cached("DELETE FROM pending_scores WHERE id = ?1")
                    .and_then(|mut s| s.execute([&row.id]))
                    .map_err(err(OP))?;
                tx.commit().map_err(err(OP))
            })
            .await
            .map_err(score_err)
    }

    async fn pending_scores(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PendingScore>, ScoreStoreError> {
        const OP: &str = "pending_scores";
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<String> = self
            .conns
            .read(OP, Cost::Long, move |conn| {
                conn.prepare_cached(
                    "SELECT record FROM pending_scores WHERE created_at < ?1 \
                     ORDER BY created_at, id LIMIT ?2",
                )
                .and_then(|mut s| {
                    s.query_map(params![before, limit], |r| r.get::<_, String>(0))?
                        .collect()
                })
                .map_err(err(OP))
            })
            .await
            .map_err(score_err)?;
        rows.iter()
            .map(|json| decode_pending(json))
            .collect::<crate::error::Result<Vec<_>>>()
            .map_err(score_err)
    }
}
