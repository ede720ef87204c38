//! Scenarios on every backend: the harness the tests of the crates above the storage share
//! (`kestrel-memory`'s and `tests-integration`'s). A scenario is an `async fn(Store)`;
//! [`on_every_backend!`](crate::on_every_backend) runs it once per store (in memory, SQLite,
//! PostgreSQL), each time on a fresh fixture that is torn down afterwards.

use std::future::Future;
use std::sync::Arc;

use super::Fixture;
use crate::storage::Storage;

/// The store a scenario runs on.
pub type Store = Arc<dyn Storage>;

/// Runs `scenario` on a fresh store from `setup` (one of [`memory`](super::memory),
/// [`sqlite`](super::sqlite), [`postgres`](super::postgres)), then tears the store down; does
/// nothing when `setup` says the backend is unavailable.
pub async fn run<S, SF, F, FF>(setup: S, scenario: F)
where
    S: FnOnce() -> SF,
    SF: Future<Output = Option<Fixture>>,
    F: FnOnce(Store) -> FF,
    FF: Future<Output = ()>,
{
    let Some(fixture) = setup().await else {
        return;
    };
    scenario(fixture.store()).await;
    fixture.teardown().await;
}

/// One `#[tokio::test]` per scenario and backend: for scenarios `a, b` (each an
/// `async fn(Store)` of the calling module) it writes the modules `memory_store`,
/// `sqlite_store` and `postgres_store`, each with a test `a` and a test `b` that
/// [`run`](crate::testing::run) the scenario on a fresh store of that backend.
///
/// ```ignore
/// kestrel_storage::on_every_backend!(a_thread_keeps_its_messages, a_fork_copies_the_thread);
/// ```
///
/// `@backend <module>, <fixture>; <scenarios>` writes the tests of one backend only (for
/// scenarios that need a durable store: `@backend sqlite_store, sqlite; ...`).
///
/// The calling crate needs `tokio` (with its `macros` and multi-thread runtime) and this
/// crate's `testing`, `sqlite` and `postgres` features.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        $crate::on_every_backend!(@backend memory_store, memory; $($name),*);
        $crate::on_every_backend!(@backend sqlite_store, sqlite; $($name),*);
        $crate::on_every_backend!(@backend postgres_store, postgres; $($name),*);
    };
    (@backend $module:ident, $fixture:ident; $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $crate::testing::run($crate::testing::$fixture, super::$name).await;
                }
            )*
        }
    };
}
