//! A committed workflow's graph as data: [`Workflow::serialized_step_graph`] (Mastra's
//! `serializedStepGraph`, which its Studio and clients draw), and [`Workflow::steps`].

use std::sync::Arc;

use serde_json::{Value, json};

use super::definition::Workflow;
use super::entry::{Entry, Wait};
use super::step::Step;

impl Workflow {
    /// Every step of the graph, in the order the entries come (a parallel's or a branch's
    /// arms in their order).
    pub fn steps(&self) -> Vec<&Arc<dyn Step>> {
        self.inner.entries.iter().flat_map(Entry::steps).collect()
    }

    /// How many of its runs are going on in this process.
    pub fn runs_in_progress(&self) -> usize {
        self.inner.live.len()
    }

    /// Whether run `run_id` is going on in this process.
    pub fn is_run_in_progress(&self, run_id: &str) -> bool {
        self.inner.live.contains(run_id)
    }

    /// The graph in Mastra's `serializedStepGraph` form: one JSON object per entry, of
    /// `type` `step`, `parallel`, `conditional`, `loop` (with `loopType` `dowhile` or
    /// `dountil`), `foreach` (with `opts.concurrency`), `sleep` (with `duration` in
    /// milliseconds) or `sleepUntil` (with `date`, milliseconds since the Unix epoch).
    /// Conditions are closures: they appear by id only. A nested workflow's step has
    /// `component: "WORKFLOW"` and its own graph as `serializedStepFlow`.
    pub fn serialized_step_graph(&self) -> Value {
        Value::Array(self.inner.entries.iter().map(entry_json).collect())
    }
}

fn step_json(step: &Arc<dyn Step>) -> Value {
    json!({"type": "step", "step": step_object(step)})
}

fn step_object(step: &Arc<dyn Step>) -> Value {
    let mut object = json!({
        "id": step.id(),
        "description": step.description(),
        "canSuspend": step.resume_schema().is_some() || step.suspend_schema().is_some(),
    });
    // A nested workflow carries its own graph, as Mastra's does.
    if let Some(inner) = step.nested_workflow() {
        object["component"] = json!("WORKFLOW");
        object["serializedStepFlow"] = inner.serialized_step_graph();
    }
    object
}

fn condition_id(step: &Arc<dyn Step>) -> Value {
    json!({"id": format!("{}-condition", step.id())})
}

fn entry_json(entry: &Entry) -> Value {
    match entry {
        Entry::Step(step) => step_json(step),
        Entry::Parallel(steps) => json!({
            "type": "parallel",
            "steps": steps.iter().map(step_json).collect::<Vec<_>>(),
        }),
        Entry::Branch(arms) => json!({
            "type": "conditional",
            "steps": arms.iter().map(|(_, step)| step_json(step)).collect::<Vec<_>>(),
            "serializedConditions":
                arms.iter().map(|(_, step)| condition_id(step)).collect::<Vec<_>>(),
        }),
        Entry::Loop { step, until, .. } => json!({
            "type": "loop",
            "step": step_object(step),
            "serializedCondition": condition_id(step),
            "loopType": if *until { "dountil" } else { "dowhile" },
        }),
        Entry::Foreach { step, concurrency } => json!({
            "type": "foreach",
            "step": step_object(step),
            "opts": {"concurrency": concurrency},
        }),
        Entry::Sleep { id, wait } => match wait {
            Wait::For(duration) => json!({
                "type": "sleep",
                "id": id,
                "duration": u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            }),
            Wait::Until(time) => json!({
                "type": "sleepUntil",
                "id": id,
                "date": time
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            }),
        },
    }
}
