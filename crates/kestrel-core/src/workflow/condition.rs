//! Conditions of a workflow's branches and loops: [`when`] makes one from an async function
//! of what it sees ([`ConditionContext`]).

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::step::StepError;

/// What a condition sees: for a branch, its input (the previous entry's output); for a loop,
/// the output of the iteration that just ran, and how many have; and the run's input and
/// state. The values are shared with the run, not copied (they read as `&Value`: `&c.input`,
/// `c.input["field"]`).
#[derive(Debug, Clone)]
pub struct ConditionContext {
    /// The branch's input, or the loop step's last output.
    pub input: Arc<Value>,
    /// The run's input.
    pub init: Arc<Value>,
    /// The workflow state.
    pub state: Arc<Value>,
    /// A loop's iterations so far (1 after the first); 0 for a branch.
    pub iteration_count: u32,
}

type ConditionFn =
    dyn Fn(ConditionContext) -> BoxFuture<'static, Result<bool, StepError>> + Send + Sync;

/// A branch arm's condition: whether its step runs.
#[derive(Clone)]
pub struct Condition(pub(crate) Arc<ConditionFn>);

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Condition")
    }
}

/// A condition from an async function of the [`ConditionContext`]; an error fails the run,
/// naming the branch.
pub fn when<F, Fut>(f: F) -> Condition
where
    F: Fn(ConditionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<bool, StepError>> + Send + 'static,
{
    Condition(Arc::new(move |ctx| f(ctx).boxed()))
}
