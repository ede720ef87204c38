//! The loop's decisions over a [`RunState`]: what the driver does next, when the run ends,
//! when an ended run may be taken back to answer more.
//!
//! The driver asks [`RunState::next_action`] at every turn and performs what it names (a
//! model call, the tools, a wrap-up), recording each outcome back into the state; it decides
//! nothing itself.

use super::phase::RunPhase;
use super::state::{RunState, RunStatus};
use super::steer::{
    IterationDecision, Score, Steer, feedback_text, steer_completion, steer_iteration,
};
use crate::message::Message;
use crate::model::FinishReason;

/// What the driver does next for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Call the model (then record its answer with `record_model_answer`).
    CallModel,
    /// Run the pending step's tool calls that can run (decisions first).
    RunTools,
    /// Stop: tool calls wait for decisions; the run continues once they have them.
    AwaitDecisions,
    /// The loop is over: wrap up (structured output, the `finish` event, the snapshot).
    Finish,
}

impl RunState {
    /// What the driver does next.
    pub fn next_action(&self) -> Action {
        match &self.status {
            RunStatus::Ready => Action::CallModel,
            RunStatus::ToolsPending { .. } => Action::RunTools,
            RunStatus::Suspended { .. } => Action::AwaitDecisions,
            RunStatus::Finished { .. } => Action::Finish,
        }
    }

    /// Whether the run ended with the model's final answer (not the step limit, an error, an
    /// abort or a filter).
    pub fn ended_with_answer(&self) -> bool {
        matches!(
            self.status,
            RunStatus::Finished {
                reason: FinishReason::Stop,
                ..
            }
        )
    }

    /// Whether another step fits under `max_steps`.
    pub fn has_room(&self) -> bool {
        self.steps.len() < self.max_steps as usize
    }

    /// Whether the ended run may be taken back for another step: it ended with an answer and
    /// steps remain. Messages delivered meanwhile, a background task's result and a hook's
    /// feedback reopen a run only then.
    pub fn may_reopen(&self) -> bool {
        self.ended_with_answer() && self.has_room()
    }

    /// Ends the run now, for `reason` (an error, an abort, a hook's stop), keeping what it has.
    pub fn end(&mut self, reason: FinishReason) {
        self.status = RunStatus::Finished {
            reason,
            object: None,
        };
    }

    /// The phase a run stopped at a step boundary is saved in: waiting for its sub-agents when
    /// a delegation of the pending step has not finished, else paused.
    pub fn pause_phase(&self) -> RunPhase {
        if self.active_sub_runs().is_empty() {
            RunPhase::Paused
        } else {
            RunPhase::WaitingForSubtask
        }
    }

    /// The phase the run's snapshot is saved in now, outside a pause: how it ended, waiting
    /// for decisions, or running.
    pub fn phase(&self) -> RunPhase {
        match RunPhase::ended(self) {
            Some(phase) => phase,
            None if self.is_suspended() => RunPhase::Suspended,
            None => RunPhase::Running,
        }
    }

    /// The index of the iteration that just ended (0 for the first).
    pub fn iteration(&self) -> u32 {
        self.steps.len().saturating_sub(1) as u32
    }

    /// What `on_iteration_complete`'s decision does to this run (see [`steer_iteration`]).
    /// A run that ended on the step limit is past steering.
    pub fn steer_iteration(&self, decision: IterationDecision) -> Steer {
        let is_final = self.ended_with_answer();
        if !is_final && self.is_finished() {
            return Steer::Proceed;
        }
        steer_iteration(decision, is_final, self.has_room())
    }

    /// What `is_task_complete`'s verdict does to this run's final answer.
    pub fn steer_completion(&self, complete: bool, scores: &[Score]) -> Steer {
        steer_completion(complete, scores, self.has_room())
    }

    /// Adds a hook's feedback to the conversation, as the user message the model reads.
    pub fn add_feedback(&mut self, feedback: &str) {
        self.messages.push(Message::user(feedback_text(feedback)));
    }

    /// Adds `text` to the conversation as it is, as a user message (a processor's retry
    /// feedback, already worded).
    pub fn add_feedback_text(&mut self, text: String) {
        self.messages.push(Message::user(text));
    }

    /// The last user message's text: the task a scorer judges.
    pub fn task_text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == crate::message::Role::User)
            .map(Message::text)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::model::Usage;
    use crate::run::{RunSettings, ToolCallRecord, ToolResultRecord};

    fn state(max_steps: u32) -> RunState {
        RunState::new(
            "run".into(),
            "agent".into(),
            vec![Message::user("hi")],
            max_steps,
            RunSettings::default(),
        )
    }

    fn call(id: &str) -> ToolCallRecord {
        ToolCallRecord {
            tool_call_id: id.into(),
            tool_name: "add".into(),
            args: serde_json::json!({"a": 1}),
            parse_error: None,
        }
    }

    fn result(id: &str) -> ToolResultRecord {
        ToolResultRecord {
            tool_call_id: id.into(),
            tool_name: "add".into(),
            args: serde_json::json!({"a": 1}),
            result: serde_json::json!(2),
            is_error: false,
            denied: false,
        }
    }

    fn answer(state: &mut RunState, calls: Vec<ToolCallRecord>) -> bool {
        state.record_model_answer(
            "text".into(),
            String::new(),
            calls,
            FinishReason::Stop,
            Usage::default(),
        )
    }

    #[test]
    fn a_run_calls_the_model_then_its_tools_then_the_model_again() {
        let mut s = state(5);
        assert_eq!(s.next_action(), Action::CallModel);
        assert!(answer(&mut s, vec![call("c1")]));
        assert_eq!(s.next_action(), Action::RunTools);
        assert!(s.record_tool_results(vec![result("c1")]));
        assert_eq!(s.next_action(), Action::CallModel);
        assert!(!answer(&mut s, vec![]));
        assert_eq!(s.next_action(), Action::Finish);
        assert!(s.ended_with_answer());
        assert_eq!(s.phase(), RunPhase::Completed);
        // The assistant message, the tool results, the answer.
        assert_eq!(s.response_messages().len(), 3);
    }

    #[test]
    fn the_step_limit_ends_the_run_after_its_tools() {
        let mut s = state(1);
        answer(&mut s, vec![call("c1")]);
        assert!(!s.record_tool_results(vec![result("c1")]));
        assert!(matches!(
            s.status,
            RunStatus::Finished {
                reason: FinishReason::MaxSteps,
                ..
            }
        ));
        assert!(!s.may_reopen(), "the step limit is not an answer");
        assert_eq!(
            s.steer_iteration(IterationDecision::stop()),
            Steer::Proceed,
            "a run past its limit is past steering"
        );
    }

    #[test]
    fn only_an_answer_with_steps_left_reopens() {
        let mut s = state(2);
        answer(&mut s, vec![]);
        assert!(s.may_reopen());
        s.reopen();
        assert_eq!(s.next_action(), Action::CallModel);
        answer(&mut s, vec![]);
        assert!(!s.has_room());
        assert!(!s.may_reopen());
        let mut failed = state(5);
        failed.end(FinishReason::Error);
        assert!(!failed.may_reopen());
        assert_eq!(failed.phase(), RunPhase::Failed);
    }

    #[test]
    fn a_stop_after_tool_calls_ends_the_run_with_its_answer() {
        let mut s = state(5);
        answer(&mut s, vec![call("c1")]);
        s.record_tool_results(vec![result("c1")]);
        assert_eq!(s.steer_iteration(IterationDecision::stop()), Steer::Stop);
        assert_eq!(s.iteration(), 0);
        assert_eq!(
            s.steer_iteration(IterationDecision::stop().feedback("sum up")),
            Steer::LastTurn("sum up".into())
        );
    }

    #[test]
    fn feedback_is_a_user_message_the_scorer_reads_as_the_task() {
        let mut s = state(5);
        assert_eq!(s.task_text(), "hi");
        s.add_feedback("shorter");
        assert_eq!(s.task_text(), "[feedback] shorter");
    }

    #[test]
    fn a_pause_waits_for_sub_agents_when_a_delegation_is_out() {
        let mut s = state(5);
        assert_eq!(s.pause_phase(), RunPhase::Paused);
        answer(&mut s, vec![call("c1")]);
        let RunStatus::ToolsPending { calls, step } = &mut s.status else {
            panic!("tools pending");
        };
        let mut progress = crate::run::CallProgress::new(step.tool_calls[0].clone(), false, 0);
        progress.sub_run = Some(crate::run::SubRun {
            agent_id: "helper".into(),
            run_id: "sub".into(),
        });
        calls.push(progress);
        assert_eq!(s.pause_phase(), RunPhase::WaitingForSubtask);
        assert_eq!(s.phase(), RunPhase::Running);
    }
}
