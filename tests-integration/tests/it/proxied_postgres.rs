//! PostgreSQL behind a fault proxy, for the tests of what a run does when its store stops
//! answering (`store_faults.rs`, `workflow_fencing.rs`).

use std::sync::Arc;

use kestrel_storage::testing::Store;

/// PostgreSQL on a fresh schema, reached two ways: through a [`kestrel_chaos::FaultProxy`]
/// the test controls (each operation bounded by `operation_timeout`), and directly.
pub struct ProxiedPostgres {
    /// The database's URL (for [`kestrel_storage::testing::drop_schema`]).
    pub url: String,
    /// The schema both stores use.
    pub schema: String,
    /// The proxy between `through` and the database.
    pub proxy: Arc<kestrel_chaos::FaultProxy>,
    /// The store behind the proxy.
    pub through: Store,
    /// The store on a direct connection.
    pub direct: Store,
}

// Test support: a failed set-up panics, as an assertion does.
#[allow(clippy::unwrap_used)]
impl ProxiedPostgres {
    /// `None` (and says so) when `KESTREL_TEST_POSTGRES_URL` is not set.
    pub async fn start(operation_timeout: std::time::Duration) -> Option<Self> {
        use kestrel_storage::testing::{postgres_url, test_schema};
        use kestrel_storage::{PgOptions, PostgresStorage};
        let Some(url) = postgres_url() else {
            eprintln!("skipping: KESTREL_TEST_POSTGRES_URL is not set");
            return None;
        };
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split(['/', '?']).next())
            .map(|a| a.rsplit('@').next().unwrap_or(a))
            .unwrap();
        let upstream = kestrel_chaos::resolve(authority).await.unwrap();
        let proxy = Arc::new(kestrel_chaos::FaultProxy::start(upstream).await.unwrap());
        let schema = test_schema();
        let options = PgOptions {
            operation_timeout,
            ..PgOptions::schema(&schema)
        };
        let through: Store = Arc::new(
            PostgresStorage::connect(&proxy.url_for(&url).unwrap(), options)
                .await
                .unwrap(),
        );
        let direct: Store = Arc::new(
            PostgresStorage::connect(&url, PgOptions::schema(&schema))
                .await
                .unwrap(),
        );
        Some(Self {
            url,
            schema,
            proxy,
            through,
            direct,
        })
    }

    /// Drops the schema.
    pub async fn teardown(self) {
        kestrel_storage::testing::drop_schema(&self.url, &self.schema).await;
    }
}
