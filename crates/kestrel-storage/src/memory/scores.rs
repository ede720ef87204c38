//! The scores of [`InMemoryStorage`]: an [`InMemoryScoreStore`](kestrel_core::store::InMemoryScoreStore)
//! (bounded: past its limit the oldest go), given records checked as the database backends
//! check them (see `crate::scores`).

use async_trait::async_trait;
use kestrel_core::store::{
    PendingScore, ScorePage, ScoreQuery, ScoreRecord, ScoreStore, ScoreStoreError,
};

use super::InMemoryStorage;
use crate::scores::{EncodedPending, EncodedScore, score_err};

#[async_trait]
impl ScoreStore for InMemoryStorage {
    async fn save_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        EncodedScore::new(score).map_err(score_err)?;
        self.scores.save_score(score).await
    }

    async fn get_score(&self, id: &str) -> Result<Option<ScoreRecord>, ScoreStoreError> {
        self.scores.get_score(id).await
    }

    async fn list_scores(&self, query: &ScoreQuery) -> Result<ScorePage, ScoreStoreError> {
        self.scores.list_scores(query).await
    }

    async fn save_pending_scores(&self, pending: &[PendingScore]) -> Result<(), ScoreStoreError> {
        for p in pending {
            EncodedPending::new(p).map_err(score_err)?;
        }
        self.scores.save_pending_scores(pending).await
    }

    async fn complete_pending_score(&self, score: &ScoreRecord) -> Result<(), ScoreStoreError> {
        EncodedScore::new(score).map_err(score_err)?;
        self.scores.complete_pending_score(score).await
    }

    async fn pending_scores(
        &self,
        before: u64,
        limit: usize,
    ) -> Result<Vec<PendingScore>, ScoreStoreError> {
        self.scores.pending_scores(before, limit).await
    }
}
