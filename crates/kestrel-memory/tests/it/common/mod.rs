//! The harness the memory tests share: each scenario runs once per store (in memory, SQLite,
//! PostgreSQL), on a fresh fixture that is torn down afterwards.

use std::future::Future;
use std::sync::Arc;

use kestrel_storage::Storage;
use kestrel_storage::testing::Fixture;

/// The store a scenario runs on.
pub type Store = Arc<dyn Storage>;

/// Runs `scenario` on a fresh store from `setup`, unless the backend is unavailable.
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

/// One `#[tokio::test]` per scenario and backend.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        on_every_backend!(@backend memory_store, memory; $($name),*);
        on_every_backend!(@backend sqlite_store, sqlite; $($name),*);
        on_every_backend!(@backend postgres_store, postgres; $($name),*);
    };
    (@backend $module:ident, $fixture:ident; $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::run(kestrel_storage::testing::$fixture, super::$name).await;
                }
            )*
        }
    };
}
