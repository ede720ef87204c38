//! Workflows: typed steps composed into a graph that runs, streams and returns a result
//! (Mastra's `createWorkflow` / `createStep`).
//!
//! - A [`Step`] takes JSON and gives JSON, with a schema for each; [`create_step`] builds one
//!   from a closure over serde types, as [`crate::tool::create_tool`] builds a tool.
//! - [`Workflow::builder`] composes steps: [`WorkflowBuilder::then`] (in sequence),
//!   [`WorkflowBuilder::parallel`] (at once; the output keyed by step id) and
//!   [`WorkflowBuilder::branch`] (every arm whose condition holds runs, at once, as Mastra's
//!   code does: its docs say only the first). [`WorkflowBuilder::commit`] checks the graph.
//! - [`Workflow::create_run`] makes a run; [`WorkflowRun::start`] runs it to its end and
//!   returns a [`WorkflowResult`]; [`WorkflowRun::stream`] also streams its events: the same
//!   [`crate::event::Event`] as agents, `from: "WORKFLOW"`, with Mastra's `workflow-*` types
//!   and fields (`workflow-start`, `workflow-step-start`, `workflow-step-result`,
//!   `workflow-step-suspended`, `workflow-step-output` from a step's writer, `workflow-finish`).
//! - An agent is a step too ([`crate::agent::AgentStep`]: `{prompt}` in, `{text}` out, its
//!   events in the workflow's stream as `workflow-step-output`), and so is a tool
//!   ([`ToolStep`]), and a processor ([`ProcessorStep`]: a guardrail over messages or an
//!   answer); a workflow is an agent's tool through [`WorkflowTool`].
//! - A step stops early through [`StepError`]: a failure, [`StepContext::suspend`] (the run
//!   stops `suspended`), [`StepContext::bail`] (the run ends `success` with that value), or a
//!   processor's tripwire (the run ends `tripwire`: a processor step's, or an agent step's
//!   agent's).
//!
//! ```
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kestrel_core::workflow::{Workflow, create_step};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//!
//! #[derive(Deserialize, Serialize, JsonSchema)]
//! struct N { v: i64 }
//!
//! let double = create_step("double").execute(|n: N, _ctx| async move { Ok(N { v: n.v * 2 }) });
//! let inc = create_step("inc").execute(|n: N, _ctx| async move { Ok(N { v: n.v + 1 }) });
//! let workflow = Workflow::builder("math").then(double).then(inc).commit()?;
//! let result = workflow.create_run().start(json!({"v": 20})).await?;
//! assert_eq!(result.result, Some(json!({"v": 41})));
//! # Ok(()) }
//! ```

mod builder;
mod condition;
mod definition;
mod engine;
mod entry;
mod error;
mod events;
mod graph;
mod lease;
mod live;
pub(crate) use live::LiveRuns;
mod cancel;
mod nested;
mod path;
mod persist;
mod primitives;
mod processor_step;
mod recovery;
mod restart;
mod result;
mod run;
mod spans;
mod step;
mod stream;
mod travel;

pub use crate::store::{
    InMemoryWorkflowStore, SharedWorkflowStore, StepResult, StepResults, WorkflowFenced,
    WorkflowRunList, WorkflowRunsQuery, WorkflowSnapshot, WorkflowStore, WorkflowStoreError,
};
pub use builder::{WorkflowBuildError, WorkflowBuilder};
pub use condition::{Condition, ConditionContext, when};
pub use definition::Workflow;
pub use error::WorkflowRunError;
pub use persist::SnapshotCheck;
pub use primitives::{ToolStep, WorkflowTool};
pub use processor_step::ProcessorStep;
pub use result::WorkflowResult;
pub use run::WorkflowRun;
pub use step::{FnStep, IntoStep, Step, StepBuilder, StepContext, StepError, create_step};
pub use stream::WorkflowStream;
pub use travel::TimeTravel;

pub use crate::event::{StepStatus, WorkflowStatus};
