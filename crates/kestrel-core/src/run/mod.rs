//! The run machine: a run's state and every decision of its loop, as plain data and plain
//! functions.
//!
//! Nothing here performs I/O or needs an async runtime. A [`RunState`] is everything needed
//! to continue a run anywhere (it serialises; a stored snapshot is one); the decisions are
//! functions over it:
//!
//! - [`RunState::next_action`]: call the model, run the tools, wait for decisions, finish;
//! - [`calls`](plan_calls): which of a step's tool calls run now, which wait for an approval,
//!   resume data or a client's result, and what the decisions recorded on a stopped run do;
//! - the step limit ([`RunState::record_tool_results`]) and when an ended run may be reopened
//!   ([`RunState::may_reopen`]) to answer delivered messages, background results or feedback;
//! - steering ([`steer_iteration`], [`steer_completion`]): what the hooks' decisions do;
//! - structured output ([`structured_outcome`]): the object, or what its error strategy says;
//! - [`RunPhase`]: where the run stands, in the one vocabulary stores and servers use.
//!
//! The async driver ([`crate::agent::AgentRun`]) asks, performs, and records the outcome back.

mod calls;
mod machine;
mod phase;
mod result;
mod state;
mod steer;
mod structured;
mod tripwire;

pub use calls::{CallPlan, Resumption, calls_outcome, parse_call, plan_calls, prepare_calls};
pub use machine::Action;
pub use phase::RunPhase;
pub use result::GenerateResult;
pub use state::{
    BackgroundOrigin, CallDecision, CallProgress, DelegatedBy, DelegationHop,
    MIN_RUN_STATE_VERSION, RUN_STATE_VERSION, RunSettings, RunState, RunStatus, SavedApproval,
    StepResult, SubRun, ToolCallRecord, ToolResultRecord, Waiting, WaitingCall, fingerprint,
};
pub use steer::{
    IterationContext, IterationDecision, Score, Steer, TaskContext, feedback_text,
    steer_completion, steer_iteration,
};
pub use structured::{ErrorStrategy, StructuredOutcome, StructuredOutput, structured_outcome};
pub use tripwire::Tripwire;
