//! Background sub-agents: delegations that return at once while the sub-agent runs on.
//!
//! [`AgentBuilder::background_tasks`](crate::agent::AgentBuilder::background_tasks) names the
//! delegation tools that run in the background (Mastra's `backgroundTasks.tools`). Such a call
//! runs the start hook and the message filter, starts the sub-agent in a task of its own, and
//! gives the model at once a result saying the work goes on, with a `background-task-started`
//! event. The sub-agents of all runs share one concurrency limit (the [`crate::kestrel::Kestrel`]
//! instance's, [`DEFAULT_BACKGROUND_CONCURRENCY`] unless set): tasks beyond it queue. Each has
//! a timeout (default [`DEFAULT_BACKGROUND_TIMEOUT`]), after which its sub-agent is aborted.
//!
//! When a task ends, its result (or a generic failure, or the timeout) reaches the run that
//! started it as a message, with a `background-task-completed` / `-failed` event:
//!
//! - with [`RunOptions::until_idle`](super::RunOptions::until_idle), the run does not finish
//!   while tasks are out: it waits for each, and answers its result in another step (within
//!   `max_steps`), so the stream stays open until every task finished and was handled;
//! - otherwise the run may finish first; the result is then delivered to its thread like a
//!   signal sent to it ([`ThreadHandle::signal`](crate::agent::ThreadHandle::signal)): into
//!   the thread's active run, or stored for the next turn. A run without a thread has nowhere
//!   to put it: it is logged.
//!
//! A task's run records the run that started it ([`crate::run::BackgroundOrigin`]). In a
//! cluster ([`crate::cluster`]) its snapshots are saved like any run's, so when its instance
//! dies another instance continues it (the recovery sweep) and delivers its result to the
//! starting run's thread, as above; register the sub-agents on the `Kestrel` instance too, so
//! the other instance knows them. In a single process, the tasks still running when it stops
//! are lost (their sub-agents' threads keep what they stored).

use std::collections::HashMap;
use std::time::Duration;

use super::AgentDefinition;
use super::tools::DELEGATION_TOOL_PREFIX;

/// How long a background task may run unless its tool says otherwise (Mastra's default).
pub const DEFAULT_BACKGROUND_TIMEOUT: Duration = Duration::from_secs(300);

/// How many background tasks run at once, across all runs of an instance, unless set.
pub const DEFAULT_BACKGROUND_CONCURRENCY: usize = 10;

/// Which delegation tools run in the background.
#[derive(Debug, Clone, Default)]
pub struct BackgroundTasks {
    tools: HashMap<String, BackgroundTool>,
}

impl BackgroundTasks {
    /// No tool runs in the background.
    pub fn new() -> Self {
        Self::default()
    }

    /// Settings of one delegation tool, named by the sub-agent's id (`research`) or the
    /// tool's name (`agent-research`).
    pub fn tool(mut self, id: impl Into<String>, tool: BackgroundTool) -> Self {
        let id = id.into();
        let name = if id.starts_with(DELEGATION_TOOL_PREFIX) {
            id
        } else {
            format!("{}{id}", DELEGATION_TOOL_PREFIX)
        };
        self.tools.insert(name, tool);
        self
    }

    /// The settings of a tool, if it runs in the background.
    pub(crate) fn get(&self, tool_name: &str) -> Option<BackgroundTool> {
        self.tools.get(tool_name).copied().filter(|t| t.enabled)
    }

    /// The names that are not delegation tools of `agent` (checked when the agent is built).
    pub(crate) fn unknown(&self, agent: &AgentDefinition) -> Vec<String> {
        self.tools
            .keys()
            .filter(|name| {
                let id = name.strip_prefix(DELEGATION_TOOL_PREFIX).unwrap_or(name);
                !agent.sub_agents.contains_key(id)
            })
            .cloned()
            .collect()
    }
}

/// One tool's background settings (Mastra's `{enabled, timeoutMs}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackgroundTool {
    /// Whether the tool runs in the background.
    pub enabled: bool,
    /// How long a task may run before its sub-agent is aborted.
    pub timeout: Duration,
}

impl BackgroundTool {
    /// Runs in the background, with the default timeout.
    pub fn enabled() -> Self {
        Self {
            enabled: true,
            timeout: DEFAULT_BACKGROUND_TIMEOUT,
        }
    }

    /// Runs in the foreground (as if not listed).
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            timeout: DEFAULT_BACKGROUND_TIMEOUT,
        }
    }

    /// Aborts the task after `timeout_ms` milliseconds.
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout = Duration::from_millis(timeout_ms);
        self
    }
}
