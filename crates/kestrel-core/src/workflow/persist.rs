//! Which snapshots of a run the store keeps (Mastra's `shouldPersistSnapshot`).
//!
//! By default every snapshot is kept: a run can be read back, listed, resumed and, on a
//! durable store, continued after a crash. A workflow on a hot path whose runs nobody reads
//! back can keep fewer ([`super::WorkflowBuilder::should_persist_snapshot`]): asked before each
//! save, a policy that says no leaves the snapshot unwritten, and a snapshot of the run stored
//! earlier is deleted, so the store never shows a run as running or suspended after it moved
//! on.

use std::sync::Arc;

use crate::event::WorkflowStatus;
use crate::store::StepResults;

/// What a snapshot policy is asked about: the run's status in the snapshot about to be saved,
/// and its step results so far.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SnapshotCheck<'a> {
    /// The status the snapshot would store: `running` at a step boundary, `waiting` in a
    /// sleep, then how the run stopped or ended.
    pub status: WorkflowStatus,
    /// Each step's result so far, by step id.
    pub steps: &'a StepResults,
}

/// A snapshot policy, as the workflow keeps it.
pub(crate) type PersistFn = dyn Fn(&SnapshotCheck<'_>) -> bool + Send + Sync;

/// Whether `policy` (none: keep all) keeps the snapshot of a run in `status` with `steps`. A
/// policy that panics keeps it: losing a run is worse than keeping one too many.
pub(crate) fn keeps(
    policy: Option<&Arc<PersistFn>>,
    status: WorkflowStatus,
    steps: &StepResults,
) -> bool {
    policy.is_none_or(|policy| {
        let check = SnapshotCheck { status, steps };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy(&check))).unwrap_or_else(
            |_| {
                tracing::warn!(
                    ?status,
                    "a workflow's snapshot policy panicked; the snapshot is kept"
                );
                true
            },
        )
    })
}
