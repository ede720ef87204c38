//! A loop entry (`dowhile` / `dountil`): the step, then its condition on the step's output,
//! with the iteration count in the start event and the condition's context.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Engine, Flow, Resume, error_info, error_message};
use crate::workflow::condition::{Condition, ConditionContext};
use crate::workflow::step::Step;

impl Engine {
    /// A loop: the step, then its condition on the step's output, again and again.
    pub(super) async fn repeat(
        &self,
        step: &Arc<dyn Step>,
        condition: &Condition,
        until: bool,
        mut input: Arc<Value>,
        mut resume: Option<&Resume>,
    ) -> Flow {
        let mut iteration: u32 = 0;
        loop {
            if self.run.abort.is_aborted() {
                return Flow::Canceled;
            }
            iteration = iteration.saturating_add(1);
            let flow = match self.settled(step, resume) {
                Some(flow) => flow,
                None => {
                    let metadata = Some(json!({"iterationCount": iteration}));
                    let started = self.begin_with(step, input, resume.take(), metadata).await;
                    self.execute(step, started).await
                }
            };
            let Flow::Next(output) = flow else {
                return flow;
            };
            let context = ConditionContext {
                input: Arc::clone(&output),
                init: Arc::clone(&self.run.init),
                state: self.state(),
                iteration_count: iteration,
            };
            match (condition.0)(context).await {
                Ok(holds) if holds == until => return Flow::Next(output),
                Ok(_) => input = output,
                Err(error) => {
                    return Flow::failed(error_info(format!(
                        "the loop condition after step {:?} failed: {}",
                        step.id(),
                        error_message(error)
                    )));
                }
            }
        }
    }
}
