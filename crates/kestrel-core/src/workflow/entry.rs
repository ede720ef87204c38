//! The entries of a workflow's graph, in the order they run: a step, a parallel, a branch,
//! a loop, a foreach, a sleep.

use std::sync::Arc;

use super::condition::Condition;
use super::step::Step;

/// One entry of a workflow's graph.
#[derive(Clone)]
pub(crate) enum Entry {
    /// A step.
    Step(Arc<dyn Step>),
    /// Steps that run at once on the same input; the output is keyed by step id.
    Parallel(Vec<Arc<dyn Step>>),
    /// Every arm whose condition holds runs, at once; the output is keyed by step id.
    Branch(Vec<(Condition, Arc<dyn Step>)>),
    /// A step run again on its own output while (`until: false`) or until (`until: true`)
    /// the condition holds on that output.
    Loop {
        step: Arc<dyn Step>,
        condition: Condition,
        until: bool,
    },
    /// A step run on each item of an array input, `concurrency` at a time; the output is
    /// the array of their outputs, in the input's order.
    Foreach {
        step: Arc<dyn Step>,
        concurrency: usize,
    },
    /// A pause that hands its input on.
    Sleep { id: String, wait: Wait },
}

/// How long a sleep lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// This long.
    For(std::time::Duration),
    /// Until this time.
    Until(std::time::SystemTime),
}

impl Entry {
    /// The entry's id in the execution path: its step's, or its steps' ids joined.
    pub(crate) fn path_id(&self) -> String {
        match self {
            Entry::Step(step) | Entry::Loop { step, .. } | Entry::Foreach { step, .. } => {
                step.id().to_owned()
            }
            Entry::Parallel(steps) => ids(steps.iter()),
            Entry::Branch(arms) => ids(arms.iter().map(|(_, s)| s)),
            Entry::Sleep { id, .. } => id.clone(),
        }
    }

    pub(crate) fn steps(&self) -> Vec<&Arc<dyn Step>> {
        match self {
            Entry::Step(step) | Entry::Loop { step, .. } | Entry::Foreach { step, .. } => {
                vec![step]
            }
            Entry::Parallel(steps) => steps.iter().collect(),
            Entry::Branch(arms) => arms.iter().map(|(_, s)| s).collect(),
            Entry::Sleep { .. } => Vec::new(),
        }
    }
}

fn ids<'a>(steps: impl Iterator<Item = &'a Arc<dyn Step>>) -> String {
    steps.map(|s| s.id()).collect::<Vec<_>>().join(",")
}
