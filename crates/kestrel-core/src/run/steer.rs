//! Steering between iterations: what the hooks see and decide, and what their decisions do to
//! the loop.
//!
//! The hooks themselves (`on_iteration_complete`, `is_task_complete`) are async and live with
//! the agent; here is only their data and the rules that turn a decision into the loop's next
//! move, so they can be checked without a runtime.

use serde::{Deserialize, Serialize};

use crate::model::FinishReason;

/// What `on_iteration_complete` sees.
#[derive(Debug, Clone)]
pub struct IterationContext {
    /// The iteration that just ended (0 for the first).
    pub iteration: u32,
    /// The run's step limit.
    pub max_iterations: u32,
    /// Why the model stopped in this iteration (`tool-calls` when it called tools).
    pub finish_reason: FinishReason,
    /// The iteration's text.
    pub text: String,
    /// Whether the model gave a final answer (no tool calls).
    pub is_final: bool,
}

/// What `on_iteration_complete` decides.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationDecision {
    /// Go on (`true`, default) or stop. After a final answer, `true` with feedback asks the
    /// model again; after tool calls, `false` with feedback gives the model one last turn to
    /// answer with the feedback in mind.
    pub continue_: bool,
    /// Guidance the model reads next.
    pub feedback: Option<String>,
}

impl IterationDecision {
    /// Go on as the model decides.
    pub fn proceed() -> Self {
        Self {
            continue_: true,
            feedback: None,
        }
    }

    /// Stop the loop.
    pub fn stop() -> Self {
        Self {
            continue_: false,
            feedback: None,
        }
    }

    /// With this feedback for the model.
    pub fn feedback(mut self, feedback: impl Into<String>) -> Self {
        self.feedback = Some(feedback.into());
        self
    }
}

impl Default for IterationDecision {
    fn default() -> Self {
        Self::proceed()
    }
}

/// What a scorer judges: the task (the run's input) and the answer.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The user's request (the run's last user message before the answer).
    pub task: String,
    /// The answer being judged.
    pub answer: String,
    /// The iteration that produced it.
    pub iteration: u32,
}

/// A scorer's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The scorer's name.
    #[serde(default)]
    pub scorer: String,
    /// Whether the answer passes.
    pub passed: bool,
    /// A score from 0 to 1.
    #[serde(default)]
    pub score: f64,
    /// Why; on failure, this is the feedback the model reads.
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a hook's decision does to the loop after an iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Steer {
    /// The loop goes its own way.
    Proceed,
    /// The feedback enters the conversation and the loop goes on as it would.
    Feedback(String),
    /// The run, which had ended with a final answer, is reopened with this feedback.
    Reopen(String),
    /// One last turn, without tools, to answer with the feedback in mind.
    LastTurn(String),
    /// The run ends now, with the iteration's answer.
    Stop,
}

/// What `on_iteration_complete`'s decision does: after a final answer (`is_final`) only a
/// decision to go on with feedback reopens the run, and only with steps left (`room`); after
/// tool calls, stopping with feedback gives the model a last turn, stopping without ends the
/// run.
pub fn steer_iteration(decision: IterationDecision, is_final: bool, room: bool) -> Steer {
    match (is_final, decision.continue_, decision.feedback) {
        (true, true, Some(feedback)) if room => Steer::Reopen(feedback),
        (true, ..) => Steer::Proceed,
        (false, true, Some(feedback)) => Steer::Feedback(feedback),
        (false, true, None) => Steer::Proceed,
        (false, false, Some(feedback)) => Steer::LastTurn(feedback),
        (false, false, None) => Steer::Stop,
    }
}

/// What `is_task_complete`'s scores do to a final answer: an incomplete task reopens the run
/// (with steps left) with the failing scorers' reasons as feedback.
pub fn steer_completion(complete: bool, scores: &[Score], room: bool) -> Steer {
    if complete || !room {
        return Steer::Proceed;
    }
    let feedback: Vec<String> = scores
        .iter()
        .filter(|s| !s.passed)
        .map(|s| {
            let reason = s.reason.as_deref().unwrap_or("the answer did not pass");
            format!("{}: {reason}", s.scorer)
        })
        .collect();
    Steer::Reopen(feedback.join("\n"))
}

/// The text of a feedback message, as the model reads it (a user message).
pub fn feedback_text(feedback: &str) -> String {
    format!("[feedback] {feedback}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn decision(continue_: bool, feedback: Option<&str>) -> IterationDecision {
        IterationDecision {
            continue_,
            feedback: feedback.map(str::to_owned),
        }
    }

    #[test]
    fn a_final_answer_is_reopened_only_with_feedback_and_room() {
        let reopen = steer_iteration(decision(true, Some("more")), true, true);
        assert_eq!(reopen, Steer::Reopen("more".into()));
        assert_eq!(
            steer_iteration(decision(true, Some("more")), true, false),
            Steer::Proceed
        );
        assert_eq!(
            steer_iteration(decision(true, None), true, true),
            Steer::Proceed
        );
        // Stopping after a final answer changes nothing: the run is over anyway.
        assert_eq!(
            steer_iteration(decision(false, Some("x")), true, true),
            Steer::Proceed
        );
    }

    #[test]
    fn after_tool_calls_a_stop_ends_the_run_or_grants_a_last_turn() {
        assert_eq!(
            steer_iteration(decision(false, None), false, true),
            Steer::Stop
        );
        assert_eq!(
            steer_iteration(decision(false, Some("wrap up")), false, true),
            Steer::LastTurn("wrap up".into())
        );
        assert_eq!(
            steer_iteration(decision(true, Some("hint")), false, true),
            Steer::Feedback("hint".into())
        );
        assert_eq!(
            steer_iteration(decision(true, None), false, false),
            Steer::Proceed
        );
    }

    #[test]
    fn failing_scores_reopen_with_their_reasons() {
        let scores = [
            Score {
                scorer: "length".into(),
                passed: false,
                score: 0.2,
                reason: Some("too short".into()),
            },
            Score {
                scorer: "tone".into(),
                passed: true,
                score: 1.0,
                reason: None,
            },
            Score {
                scorer: "facts".into(),
                passed: false,
                score: 0.0,
                reason: None,
            },
        ];
        assert_eq!(
            steer_completion(false, &scores, true),
            Steer::Reopen("length: too short\nfacts: the answer did not pass".into())
        );
        assert_eq!(steer_completion(false, &scores, false), Steer::Proceed);
        assert_eq!(steer_completion(true, &scores, true), Steer::Proceed);
        assert_eq!(feedback_text("x"), "[feedback] x");
    }
}
