//! Where a run stands as a whole: the one vocabulary of the run store, the storage crates, the
//! server and the Studio.
//!
//! A [`RunState`]'s own status ([`RunStatus`]) says what its loop does next; the phase adds
//! what only the driver knows (a pause, a wait on sub-agents) and, for an ended run, how it
//! ended. It is what is written next to every stored snapshot.

use serde::{Deserialize, Serialize};

use super::state::{RunState, RunStatus};
use crate::model::FinishReason;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPhase {
    /// Being driven by some process.
    Running,
    /// Stopped, waiting for a decision, resume data or a client tool's result.
    Suspended,
    /// Waiting for a delegated sub-agent's run (the parent holds no task while it waits
    /// in another process; it is continued once the sub-agent's run ends).
    WaitingForSubtask,
    /// Paused at a step boundary ([`crate::agent::RunHandle::pause`]), until resumed.
    Paused,
    /// Ended normally (an answer, the step limit, a hook's stop).
    Completed,
    /// Ended with an error.
    Failed,
    /// Aborted.
    Aborted,
    /// Stopped by a processor's tripwire ([`crate::processor::Tripwire`]).
    Tripwire,
}

impl RunPhase {
    /// Every phase.
    pub const ALL: [RunPhase; 8] = [
        Self::Running,
        Self::Suspended,
        Self::WaitingForSubtask,
        Self::Paused,
        Self::Completed,
        Self::Failed,
        Self::Aborted,
        Self::Tripwire,
    ];

    /// The stored name (also its JSON form).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Suspended => "suspended",
            Self::WaitingForSubtask => "waiting_for_subtask",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Aborted => "aborted",
            Self::Tripwire => "tripwire",
        }
    }

    /// The phase of this stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|phase| phase.as_str() == name)
    }

    /// Whether the run has ended (completed, failed, aborted or stopped by a tripwire):
    /// nothing continues it.
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Aborted | Self::Tripwire
        )
    }

    /// How a finished state ended; `None` while it has not.
    pub fn ended(state: &RunState) -> Option<Self> {
        match &state.status {
            RunStatus::Finished { reason, .. } => Some(match reason {
                FinishReason::Error => Self::Failed,
                FinishReason::Abort => Self::Aborted,
                FinishReason::Tripwire => Self::Tripwire,
                _ => Self::Completed,
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for RunPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::run::RunSettings;

    #[test]
    fn names_round_trip_and_match_the_json() {
        for phase in RunPhase::ALL {
            assert_eq!(RunPhase::parse(phase.as_str()), Some(phase));
            let json = serde_json::to_value(phase).unwrap();
            assert_eq!(json, serde_json::Value::String(phase.as_str().to_owned()));
        }
        assert_eq!(RunPhase::parse("finished"), None);
    }

    #[test]
    fn an_ended_state_names_how_it_ended() {
        let mut state = RunState::new("r".into(), "a".into(), vec![], 5, RunSettings::default());
        assert_eq!(RunPhase::ended(&state), None);
        for (reason, phase) in [
            (FinishReason::Stop, RunPhase::Completed),
            (FinishReason::MaxSteps, RunPhase::Completed),
            (FinishReason::Error, RunPhase::Failed),
            (FinishReason::Abort, RunPhase::Aborted),
            (FinishReason::Tripwire, RunPhase::Tripwire),
        ] {
            state.end(reason);
            assert_eq!(RunPhase::ended(&state), Some(phase));
            assert!(phase.is_ended());
        }
        assert!(!RunPhase::Paused.is_ended());
    }
}
