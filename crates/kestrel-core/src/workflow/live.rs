//! The runs of a workflow going on in this process, by id: another handle on one of them
//! ([`super::Workflow::create_run_with_id`], as the server makes for a cancel) reaches its
//! abort signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abort::AbortSignal;

/// The abort signals of the runs going on, by run id.
#[derive(Debug, Default)]
pub(crate) struct LiveRuns(Mutex<HashMap<Arc<str>, AbortSignal>>);

impl LiveRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, AbortSignal>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The signal of run `run_id`, if it is going on here.
    pub(crate) fn signal(&self, run_id: &str) -> Option<AbortSignal> {
        self.lock().get(run_id).cloned()
    }

    /// Whether run `run_id` is going on here.
    pub(crate) fn contains(&self, run_id: &str) -> bool {
        self.lock().contains_key(run_id)
    }

    /// How many runs are going on here.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Records run `run_id` as going on until the guard is dropped; `None` when it is going
    /// on already (two drivers of one run in one process).
    pub(crate) fn register(
        self: &Arc<Self>,
        run_id: Arc<str>,
        signal: AbortSignal,
    ) -> Option<LiveGuard> {
        let mut runs = self.lock();
        if runs.contains_key(&run_id) {
            return None;
        }
        runs.insert(Arc::clone(&run_id), signal);
        Some(LiveGuard {
            runs: Arc::clone(self),
            run_id,
        })
    }
}

/// Keeps a run listed in [`LiveRuns`]; held by the run's shared state, so the run is listed
/// until its engine and every step context of it are gone.
#[derive(Debug)]
pub(crate) struct LiveGuard {
    runs: Arc<LiveRuns>,
    run_id: Arc<str>,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.run_id);
    }
}

impl crate::cluster::member::LiveSignals for LiveRuns {
    fn signal(&self, run_id: &str) -> Option<AbortSignal> {
        LiveRuns::signal(self, run_id)
    }
}
