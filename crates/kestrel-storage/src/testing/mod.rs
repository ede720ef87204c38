//! The conformance suite: one set of checks every [`Storage`] backend must pass.
//!
//! Each check is an `async fn(Arc<dyn Storage>)` that panics (through `assert!`) when the
//! backend misbehaves. [`conformance_tests!`](crate::conformance_tests) turns them into one
//! `#[tokio::test]` per check for a fixture function:
//!
//! ```ignore
//! kestrel_storage::conformance_tests!(kestrel_storage::testing::sqlite);
//! ```
//!
//! Fixtures: [`memory`], [`sqlite`] (a temporary file per test) and [`postgres`] (a fresh schema
//! `kestrel_test_<random>` per test, dropped afterwards; skipped, with a message, when
//! `KESTREL_TEST_POSTGRES_URL` is unset).
//!
//! The crates above the storage test their own features the same way, on every backend:
//! [`on_every_backend!`](crate::on_every_backend) turns `async fn(Store)` scenarios into one
//! `#[tokio::test]` per scenario and fixture, each [`run`] on a fresh [`Store`].

// Test support: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod checks;
mod fixtures;
mod scenarios;

pub use checks::*;
pub use fixtures::*;
pub use scenarios::{Store, run};

/// Generates one `#[tokio::test]` per conformance check, each on a fresh store from `$setup`
/// (an `async fn() -> Option<Fixture>`; `None` skips the test).
#[macro_export]
macro_rules! conformance_tests {
    ($setup:path) => {
        $crate::conformance_tests!(@each $setup;
            threads_create_get_and_duplicate,
            threads_update_patch,
            threads_delete_cascades,
            threads_clone,
            threads_list_pagination_and_order,
            threads_metadata_filter,
            threads_malformed_filter,
            messages_append_and_list,
            messages_append_with_history,
            messages_selection_edges,
            messages_idempotent_reappend,
            messages_id_in_other_thread,
            messages_cross_resource_refused,
            messages_get_and_delete,
            messages_search,
            messages_search_at_scale,
            messages_concurrent_appends,
            messages_concurrent_idempotent_retries,
            working_memory_scopes,
            runs_save_compare_and_set,
            runs_refuse_stale_lease_tokens,
            runs_save_together,
            runs_concurrent_compare_and_set,
            runs_list_filters,
            workflow_runs_save_claim_and_delete,
            workflow_runs_concurrent_claims,
            workflow_runs_list_filters,
            workflow_runs_resume_from_the_store,
            workflow_runs_snapshot_policy,
            workflow_runs_refuse_stale_lease_tokens,
            workflow_runs_fenced_through_the_workflow_store,
            observations_scopes_and_replace,
            queue_order_and_removal,
            stored_agents_versions_lifecycle,
            stored_agents_concurrent_versions,
            queue_ownership_cancel_and_delete,
            vectors_index_lifecycle,
            vectors_dimension_mismatch,
            vectors_query_exact,
            vectors_filters_and_delete,
            spans_round_trip_exact,
            spans_upsert_replaces,
            spans_list_order_filters_and_paging,
            spans_list_page_sizes,
            spans_joined_trace_root,
            spans_unknown_trace_is_empty,
            spans_delete_counts,
            spans_prune_by_age,
            spans_prune_by_count,
            spans_concurrent_saves,
            scores_round_trip_and_upsert,
            scores_list_filters_order_and_paging,
            scores_refuse_bad_records,
            pending_scores_kept_until_completed,
            datasets_create_get_and_list,
            dataset_items_change_in_versions,
            dataset_items_concurrent_changes,
            experiments_and_results_round_trip,
        );
    };
    (@each $setup:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(fixture) = $setup().await {
                    $crate::testing::$name(fixture.store()).await;
                    fixture.teardown().await;
                }
            }
        )*
    };
}
