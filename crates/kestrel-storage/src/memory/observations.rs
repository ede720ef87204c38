//! The observations of [`InMemoryStorage`](super::InMemoryStorage).

use super::{InMemoryStorage, new_observations};
use crate::error::Result;
use crate::storage::ObservationStore;
use crate::types::{NewObservation, Observation, Scope};
use async_trait::async_trait;

#[async_trait]
impl ObservationStore for InMemoryStorage {
    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        let mut state = self.state();
        let key = state.observation_key(scope)?;
        let added = new_observations(scope, observations);
        state
            .observations
            .entry(key)
            .or_default()
            .extend(added.iter().cloned());
        Ok(added)
    }

    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>> {
        let state = self.state();
        let key = state.observation_key(scope)?;
        Ok(state.observations.get(&key).cloned().unwrap_or_default())
    }

    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>> {
        let mut state = self.state();
        let key = state.observation_key(scope)?;
        let added = new_observations(scope, observations);
        state.observations.insert(key, added.clone());
        Ok(added)
    }

    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>> {
        Ok(self
            .state()
            .owned_thread(thread_id, Some(resource_id))?
            .observed_seq)
    }

    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()> {
        self.state()
            .owned_thread_mut(thread_id, resource_id)?
            .observed_seq = Some(seq);
        Ok(())
    }
}
