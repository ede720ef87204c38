//! Observational memory's log: dated observations per thread or resource, and how far each thread was observed.

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{NewObservation, Observation, Scope};

/// Observational memory's log: dated observations per thread or resource, and how far each thread was observed.
///
/// Part of [`Storage`](super::Storage), which every backend is.
#[async_trait]
pub trait ObservationStore: Send + Sync {
    /// Adds observations to a scope, after the existing ones.
    async fn add_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>>;

    /// A scope's observations, in the order they were added.
    async fn list_observations(&self, scope: &Scope) -> Result<Vec<Observation>>;

    /// Replaces all observations of a scope at once (the reflector's condensed log).
    async fn replace_observations(
        &self,
        scope: &Scope,
        observations: Vec<NewObservation>,
    ) -> Result<Vec<Observation>>;

    /// The last seq of this thread that observational memory has condensed.
    async fn get_observed_seq(&self, thread_id: &str, resource_id: &str) -> Result<Option<i64>>;

    /// Records the last seq of this thread that observational memory has condensed.
    async fn set_observed_seq(&self, thread_id: &str, resource_id: &str, seq: i64) -> Result<()>;
}
