//! Kestrel's durable ports ([`kestrel_core::store`]) on every backend.
//!
//! Each backend implements [`Storage`](crate::Storage), whose supertrait
//! [`DurableStore`](kestrel_core::store::DurableStore) is every port at once: stopped runs,
//! workflow runs, the message queue and agents' versions live in the same database as threads
//! and messages (and so do traces: [`Stores::spans`](kestrel_core::store::Stores::spans) is
//! the storage, whose [`SpanStore`](kestrel_core::trace::SpanStore) each backend implements in
//! its `spans.rs`). The functions here turn the ports' calls into the storage's rows, once for
//! every backend; [`implement_ports!`] implements the ports on a backend with them. So an
//! instance is given its storage once:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kestrel_core::kestrel::Kestrel;
//! use kestrel_storage::SqliteStorage;
//!
//! let storage = SqliteStorage::open("kestrel.db").await?;
//! let kestrel = Kestrel::builder().storage(storage).build()?;
//! # Ok(()) }
//! ```

pub mod queue;
pub mod runs;
pub mod versions;
pub mod workflows;

/// Implements every port of [`kestrel_core::store`] (and `DurableStore`, `IntoStores`) on a
/// backend type through [`crate::ports`]'s functions over its [`Storage`](crate::Storage)
/// rows.
macro_rules! implement_ports {
    ($backend:ty) => {
        #[async_trait::async_trait]
        impl kestrel_core::store::RunStore for $backend {
            async fn save(
                &self,
                state: &kestrel_core::agent::RunState,
                phase: kestrel_core::store::RunPhase,
                expected_version: Option<i64>,
            ) -> Result<i64, kestrel_core::store::RunStoreError> {
                $crate::ports::runs::save(self, state, phase, expected_version).await
            }

            async fn save_all(
                &self,
                saves: &[(
                    &kestrel_core::agent::RunState,
                    kestrel_core::store::RunPhase,
                    Option<i64>,
                )],
            ) -> Result<Vec<i64>, kestrel_core::store::RunStoreError> {
                $crate::ports::runs::save_all(self, saves).await
            }

            async fn load(
                &self,
                run_id: &str,
            ) -> Result<Option<kestrel_core::store::StoredRun>, kestrel_core::store::RunStoreError>
            {
                $crate::ports::runs::load(self, run_id).await
            }

            async fn list_in_phases(
                &self,
                phases: &[kestrel_core::store::RunPhase],
                query: &kestrel_core::store::SuspendedRunsQuery,
            ) -> Result<kestrel_core::store::SuspendedRunsPage, kestrel_core::store::RunStoreError>
            {
                $crate::ports::runs::list_in_phases(self, phases, query).await
            }
        }

        #[async_trait::async_trait]
        impl kestrel_core::store::WorkflowStore for $backend {
            async fn save(
                &self,
                snapshot: &kestrel_core::store::WorkflowSnapshot,
            ) -> Result<(), kestrel_core::store::WorkflowStoreError> {
                $crate::ports::workflows::save(self, snapshot).await
            }

            async fn fence(
                &self,
                workflow_id: &str,
                run_id: &str,
                token: u64,
            ) -> Result<(), kestrel_core::store::WorkflowStoreError> {
                $crate::ports::workflows::fence(self, workflow_id, run_id, token).await
            }

            async fn load(
                &self,
                workflow_id: &str,
                run_id: &str,
            ) -> Result<
                Option<kestrel_core::store::WorkflowSnapshot>,
                kestrel_core::store::WorkflowStoreError,
            > {
                $crate::ports::workflows::load(self, workflow_id, run_id).await
            }

            async fn claim(
                &self,
                workflow_id: &str,
                run_id: &str,
                from: kestrel_core::workflow::WorkflowStatus,
                to: kestrel_core::workflow::WorkflowStatus,
            ) -> Result<bool, kestrel_core::store::WorkflowStoreError> {
                $crate::ports::workflows::claim(self, workflow_id, run_id, from, to).await
            }

            async fn list(
                &self,
                query: &kestrel_core::store::WorkflowRunsQuery,
            ) -> Result<kestrel_core::store::WorkflowRunList, kestrel_core::store::WorkflowStoreError>
            {
                $crate::ports::workflows::list(self, query).await
            }

            async fn delete(
                &self,
                workflow_id: &str,
                run_id: &str,
            ) -> Result<bool, kestrel_core::store::WorkflowStoreError> {
                $crate::ports::workflows::delete(self, workflow_id, run_id).await
            }

            fn is_durable(&self) -> bool {
                $crate::ports::workflows::is_durable(self)
            }
        }

        #[async_trait::async_trait]
        impl kestrel_core::store::MessageQueue for $backend {
            async fn push(
                &self,
                message: kestrel_core::store::QueuedMessage,
            ) -> Result<(), kestrel_core::store::QueueError> {
                $crate::ports::queue::push(self, message).await
            }

            async fn list(
                &self,
                scope: &kestrel_core::memory::MemoryScope,
            ) -> Result<Vec<kestrel_core::store::QueuedMessage>, kestrel_core::store::QueueError>
            {
                $crate::ports::queue::list(self, scope).await
            }

            async fn remove(&self, id: &str) -> Result<bool, kestrel_core::store::QueueError> {
                $crate::ports::queue::remove(self, id).await
            }

            async fn cancel(
                &self,
                scope: &kestrel_core::memory::MemoryScope,
                ids: Option<Vec<String>>,
            ) -> Result<Vec<kestrel_core::store::QueuedMessage>, kestrel_core::store::QueueError>
            {
                $crate::ports::queue::cancel(self, scope, ids).await
            }

            async fn threads(
                &self,
            ) -> Result<Vec<kestrel_core::store::QueuedThread>, kestrel_core::store::QueueError>
            {
                $crate::ports::queue::threads(self).await
            }
        }

        #[async_trait::async_trait]
        impl kestrel_core::store::AgentVersionStore for $backend {
            async fn resolve(
                &self,
                agent_id: &str,
                choice: &kestrel_core::version::VersionChoice,
            ) -> Result<
                Option<kestrel_core::version::ResolvedVersion>,
                kestrel_core::version::VersionError,
            > {
                $crate::ports::versions::resolve(self, agent_id, choice).await
            }

            async fn agent_ids(&self) -> Result<Vec<String>, kestrel_core::version::VersionError> {
                $crate::ports::versions::agent_ids(self).await
            }
        }

        impl kestrel_core::store::DurableStore for $backend {
            fn stores(self: std::sync::Arc<Self>) -> kestrel_core::store::Stores {
                // The store itself rides along, for a memory without one of its own.
                kestrel_core::store::Stores::on(std::sync::Arc::clone(&self))
                    .with_spans(
                        std::sync::Arc::clone(&self) as kestrel_core::trace::SharedSpanStore
                    )
                    .with_scores(
                        std::sync::Arc::clone(&self) as kestrel_core::store::SharedScoreStore
                    )
                    .with_datasets(
                        std::sync::Arc::clone(&self) as kestrel_core::store::SharedDatasetStore
                    )
                    .with_backend(self as std::sync::Arc<dyn $crate::Storage>)
            }
        }

        impl kestrel_core::store::IntoStores for $backend {
            fn into_stores(self) -> kestrel_core::store::Stores {
                kestrel_core::store::DurableStore::stores(std::sync::Arc::new(self))
            }
        }
    };
}

pub(crate) use implement_ports;
