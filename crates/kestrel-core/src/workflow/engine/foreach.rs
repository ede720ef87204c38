//! A foreach entry: the step on each item of an array, some at a time, each item's progress
//! streamed; items may suspend and are resumed one by one.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::super::spans::ITEM_SPAN;
use super::{
    Engine, Flow, Given, Resume, error_info, kind_of, now_ms, step_payload, tripwire_info,
};
use crate::event::{
    EventKind, EventSource, StepStatus, WorkflowStepPayload, WorkflowStepProgressPayload,
};
use crate::store::StepResult;
use crate::workflow::step::{Step, StepError};

impl Engine {
    /// A foreach: the step on each item, `concurrency` at a time, a progress event per item,
    /// the outputs in the items' order. An item may suspend: the others go on, and the step
    /// suspends once they are done, with the suspended items' indices and payloads under
    /// [`FOREACH_META`] and the outputs so far as its output. A resume runs the item it names
    /// (or the only one suspended) with the data, keeps the outputs of the items that had
    /// ended, and leaves the other suspended items suspended.
    pub(super) async fn each(
        &self,
        step: &Arc<dyn Step>,
        concurrency: usize,
        input: Arc<Value>,
        resume: Option<&Resume>,
    ) -> Flow {
        use futures::StreamExt;
        let id = step.id();
        let Value::Array(items) = &*input else {
            return Flow::failed(error_info(format!(
                "foreach step {id:?} needs an array input, not {}",
                kind_of(&input)
            )));
        };
        let total = items.len();
        // What an earlier pass left (a resume, or a restart): the items' outputs and the
        // suspended items' payloads.
        let prior = resume.and_then(|_| self.prior(id));
        let mut outputs: Vec<Option<Value>> = vec![None; total];
        let mut waiting: BTreeMap<usize, Value> = BTreeMap::new();
        if let Some(prior) = &prior {
            if let Some(Value::Array(done)) = prior.output.as_deref() {
                for (slot, output) in outputs.iter_mut().zip(done) {
                    if !output.is_null() {
                        *slot = Some(output.clone());
                    }
                }
            }
            waiting = foreach_suspended(prior.suspend_payload.as_ref());
        }
        let resumed = resume.filter(|r| r.is(id));
        let target = resumed.and_then(|r| r.item.or_else(|| single(&waiting)));
        let started_at = prior.as_ref().map_or_else(now_ms, |p| p.started_at);
        let observed = self.run.events.is_some();
        let mut event = observed.then(|| step_payload(id, None, Arc::clone(&input), started_at));
        if let Some(start) = &mut event {
            if let Some(r) = resumed {
                start.resume_payload = Some(r.data.clone());
                start.resumed_at = Some(now_ms());
            }
            self.run
                .emit(
                    EventSource::Workflow,
                    EventKind::WorkflowStepStart(start.clone()),
                )
                .await;
        }
        // The items to run: those with no output that are not left waiting.
        let to_run: Vec<(usize, Arc<Value>, Option<Box<Given>>)> = items
            .iter()
            .cloned()
            .map(Arc::new)
            .enumerate()
            .filter(|(index, _)| outputs[*index].is_none())
            .filter_map(|(index, item)| {
                if Some(index) == target {
                    let given = resumed.map(|r| {
                        Box::new(Given {
                            data: r.data.clone(),
                            path: Vec::new(),
                            suspended: waiting.get(&index).cloned(),
                        })
                    });
                    return Some((index, item, given));
                }
                (!waiting.contains_key(&index)).then_some((index, item, None))
            })
            .collect();
        if let Some(index) = target {
            waiting.remove(&index);
        }
        let mut failure = None;
        let mut completed = total - to_run.len();
        let mut runs = futures::stream::iter(to_run)
            .map(|(index, item, given)| async move {
                // A traced item is a span; what it starts hangs under it.
                let outcome = match self.item_span(step.id(), &item) {
                    Some((span, parent)) => {
                        let attempt = self.attempt(step, item, given);
                        let outcome = ITEM_SPAN.scope(parent, attempt).await;
                        super::traced::end_attempt(Some(span), &outcome.as_ref());
                        outcome
                    }
                    None => self.attempt(step, item, given).await,
                };
                (index, outcome)
            })
            .buffer_unordered(concurrency);
        while let Some((index, outcome)) = runs.next().await {
            completed += 1;
            let (status, output) = match outcome {
                Ok(output) | Err(StepError::Bail { value: output }) => {
                    outputs[index] = Some(output.clone());
                    (StepStatus::Success, Some(output))
                }
                Err(StepError::Suspend { payload }) => {
                    waiting.insert(index, payload);
                    (StepStatus::Suspended, None)
                }
                Err(StepError::Failed { message }) => {
                    failure.get_or_insert((index, Err(message)));
                    (StepStatus::Failed, None)
                }
                Err(StepError::Tripwire { tripwire }) => {
                    failure.get_or_insert((index, Ok(tripwire)));
                    (StepStatus::Failed, None)
                }
            };
            if observed {
                let progress = WorkflowStepProgressPayload {
                    step_name: id.to_owned(),
                    id: id.to_owned(),
                    completed_count: completed,
                    total_count: total,
                    current_index: index,
                    iteration_status: status,
                    iteration_output: output,
                };
                self.run
                    .emit(
                        EventSource::Workflow,
                        EventKind::WorkflowStepProgress(progress),
                    )
                    .await;
            }
        }
        drop(runs);
        let now = now_ms();
        let mut result = StepResult {
            resume_payload: resumed.map(|r| r.data.clone()),
            resumed_at: resumed.map(|_| now),
            ..StepResult::begun(input, started_at)
        };
        let flow = if let Some((index, failed)) = failure {
            let info = match failed {
                Err(message) => {
                    error_info(format!("item {index} of foreach step {id:?}: {message}"))
                }
                Ok(tripwire) => tripwire_info(*tripwire),
            };
            result.status = StepStatus::Failed;
            result.error = Some(info.clone());
            result.ended_at = Some(now);
            Flow::failed(info)
        } else if !waiting.is_empty() {
            result.status = StepStatus::Suspended;
            result.output = Some(Arc::new(Value::Array(
                outputs.into_iter().map(Option::unwrap_or_default).collect(),
            )));
            result.suspend_payload = Some(foreach_suspension(&waiting));
            result.suspended_at = Some(now);
            Flow::Suspended
        } else {
            let output = Arc::new(Value::Array(
                outputs.into_iter().map(Option::unwrap_or_default).collect(),
            ));
            result.output = Some(Arc::clone(&output));
            result.ended_at = Some(now);
            Flow::Next(output)
        };
        let kind: fn(WorkflowStepPayload) -> EventKind = if result.status == StepStatus::Suspended {
            EventKind::WorkflowStepSuspended
        } else {
            EventKind::WorkflowStepResult
        };
        if let Some(event) = &mut event {
            event.status = result.status;
            event.output.clone_from(&result.output);
            event.error.clone_from(&result.error);
            event.ended_at = result.ended_at;
            event.suspend_payload.clone_from(&result.suspend_payload);
            event.suspended_at = result.suspended_at;
        }
        self.record(id, result);
        if let Some(event) = event {
            self.run.emit(EventSource::Workflow, kind(event)).await;
        }
        flow
    }
}

/// The key under which a suspended foreach step's payload lists its suspended items.
pub(crate) const FOREACH_META: &str = "__foreach_meta";

/// The suspended items a foreach step's suspend payload lists, by index.
pub(crate) fn foreach_suspended(payload: Option<&Value>) -> BTreeMap<usize, Value> {
    payload
        .and_then(|p| p.get(FOREACH_META))
        .and_then(|meta| meta.get("items"))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    let index = usize::try_from(item.get("index")?.as_u64()?).ok()?;
                    Some((index, item.get("payload").cloned().unwrap_or(Value::Null)))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The one suspended item, if only one is.
fn single(waiting: &BTreeMap<usize, Value>) -> Option<usize> {
    match waiting.keys().collect::<Vec<_>>().as_slice() {
        [one] => Some(**one),
        _ => None,
    }
}

/// A foreach step's suspend payload: the first suspended item's payload, with every
/// suspended item's index and payload under [`FOREACH_META`].
fn foreach_suspension(waiting: &BTreeMap<usize, Value>) -> Value {
    let items: Vec<Value> = waiting
        .iter()
        .map(|(index, payload)| json!({"index": index, "payload": payload}))
        .collect();
    let meta = json!({"items": items});
    match waiting.values().next().cloned() {
        Some(Value::Object(mut first)) => {
            first.insert(FOREACH_META.to_owned(), meta);
            Value::Object(first)
        }
        _ => json!({ FOREACH_META: meta }),
    }
}
