//! What a delegation call learns from the run that makes it, through its tool context's
//! extensions: the sub-agent's run it continues or starts ([`SubRunContext`]), and the run's
//! delegation state ([`DelegationRuntime`]): options, what hooks asked of the parent's loop,
//! and result references.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::abort::AbortSignal;
use crate::definition::DelegationOptions;
use crate::run::{DelegatedBy, SubRun};
use crate::store::SharedRunStore;

/// What a delegation call knows of its sub-agent's run: its id (chosen by the parent's driver
/// before it starts), the store it is saved in (the parent's), the parent's pause signal, and
/// the parent's ids.
#[derive(Debug, Clone)]
pub(crate) struct SubRunContext {
    pub sub_run: SubRun,
    /// The id was chosen for this call just now: there is no stored run to look for.
    pub is_new: bool,
    pub store: SharedRunStore,
    pub pause: AbortSignal,
    pub delegated_by: DelegatedBy,
}

/// What a run's delegations share with the driver: the options, and what hooks asked of the
/// parent's loop (stop after this step; feedback for the next turn).
#[derive(Debug, Default)]
pub(crate) struct DelegationRuntime {
    pub options: DelegationOptions,
    pub bail: AtomicBool,
    pub feedback: Mutex<Vec<String>>,
    /// Result references of this run: the next number per agent, and each id's text.
    refs: Mutex<(HashMap<String, u32>, HashMap<String, String>)>,
}

impl DelegationRuntime {
    pub(crate) fn new(options: DelegationOptions) -> Self {
        Self {
            options,
            bail: AtomicBool::new(false),
            feedback: Mutex::new(Vec::new()),
            refs: Mutex::new(Default::default()),
        }
    }

    /// Keeps `text` as the next result of `agent`; returns its id.
    pub(crate) fn add_reference(&self, agent: &str, text: &str) -> String {
        let mut refs = self.refs.lock().unwrap_or_else(|e| e.into_inner());
        let n = refs.0.entry(agent.to_owned()).or_insert(0);
        *n += 1;
        let id = format!("{agent}-{n}");
        refs.1.insert(id.clone(), text.to_owned());
        id
    }

    pub(crate) fn reference(&self, id: &str) -> Option<String> {
        let refs = self.refs.lock().unwrap_or_else(|e| e.into_inner());
        refs.1.get(id).cloned()
    }

    pub(crate) fn bailed(&self) -> bool {
        self.bail.load(Ordering::Acquire)
    }

    pub(crate) fn take_feedback(&self) -> Vec<String> {
        std::mem::take(&mut *self.feedback.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
