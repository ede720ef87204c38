//! Background sub-agents: delegations that return at once while the sub-agent runs on.
//!
//! [`AgentBuilder::background_tasks`](super::AgentBuilder::background_tasks) names the
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
//! - otherwise the run may finish first; the result is then delivered to its thread like
//!   [`Agent::send_message`](super::Agent::send_message) (into the thread's active run, or
//!   stored for the next turn). A run without a thread has nowhere to put it: it is logged.
//!
//! Background tasks live in this process: a restart loses those still running (their
//! delegations got no result references, and their sub-agents' threads keep what they stored).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, Semaphore, mpsc};

use super::Agent;
use crate::memory::MemoryScope;

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
        let name = if id.starts_with(super::delegation::DELEGATION_TOOL_PREFIX) {
            id
        } else {
            format!("{}{id}", super::delegation::DELEGATION_TOOL_PREFIX)
        };
        self.tools.insert(name, tool);
        self
    }

    /// The settings of a tool, if it runs in the background.
    pub(crate) fn get(&self, tool_name: &str) -> Option<BackgroundTool> {
        self.tools.get(tool_name).copied().filter(|t| t.enabled)
    }

    /// The names that are not delegation tools of `agent` (checked when the agent is built).
    pub(crate) fn unknown(&self, agent: &super::AgentInner) -> Vec<String> {
        self.tools
            .keys()
            .filter(|name| {
                let id = name
                    .strip_prefix(super::delegation::DELEGATION_TOOL_PREFIX)
                    .unwrap_or(name);
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

/// What a background delegation call gets through its tool context: its settings and the
/// run's side of its background tasks.
#[derive(Debug, Clone)]
pub(crate) struct BackgroundCall {
    pub config: BackgroundTool,
    pub runtime: Arc<BackgroundRuntime>,
}

/// A background task that ended, on its way to the run that started it.
#[derive(Debug, Clone)]
pub(crate) struct BackgroundDone {
    pub task_id: String,
    pub tool_name: String,
    pub tool_call_id: String,
    /// What the model reads.
    pub text: String,
    pub is_error: bool,
}

impl BackgroundDone {
    /// The message the model reads about it.
    pub(crate) fn message(&self) -> String {
        let outcome = if self.is_error { "failed" } else { "finished" };
        format!(
            "[background task {} ({}, call {}) {outcome}]\n{}",
            self.task_id, self.tool_name, self.tool_call_id, self.text
        )
    }
}

/// A run's side of its background tasks: where they report, and how many are out.
#[derive(Debug)]
pub(crate) struct BackgroundRuntime {
    /// `None` once the run stopped reading: later results go to its thread.
    tx: std::sync::Mutex<Option<mpsc::UnboundedSender<BackgroundDone>>>,
    rx: Mutex<mpsc::UnboundedReceiver<BackgroundDone>>,
    outstanding: AtomicUsize,
    /// Where results go once the run is gone: its agent and thread.
    pub fallback: Option<(Agent, MemoryScope)>,
    /// The instance's limit on tasks running at once.
    pub limit: Arc<Semaphore>,
}

impl BackgroundRuntime {
    pub(crate) fn new(limit: Arc<Semaphore>, fallback: Option<(Agent, MemoryScope)>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            tx: std::sync::Mutex::new(Some(tx)),
            rx: Mutex::new(rx),
            outstanding: AtomicUsize::new(0),
            fallback,
            limit,
        }
    }

    /// Counts a task that started.
    pub(crate) fn started(&self) {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
    }

    /// How many tasks have not reported yet.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    /// Reports an ended task to its run; `Err` gives it back when the run is gone.
    pub(crate) fn report(&self, done: BackgroundDone) -> Result<(), BackgroundDone> {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match tx.as_ref() {
            Some(tx) => tx.send(done).map_err(|e| e.0),
            None => Err(done),
        }
    }

    /// Results that are already in, without waiting.
    pub(crate) async fn ready(&self) -> Vec<BackgroundDone> {
        let mut rx = self.rx.lock().await;
        let mut ready = Vec::new();
        while let Ok(done) = rx.try_recv() {
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
            ready.push(done);
        }
        ready
    }

    /// The run stops reading: returns what is in but unread; later reports are refused.
    pub(crate) async fn close(&self) -> Vec<BackgroundDone> {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.ready().await
    }

    /// The next task that ends.
    pub(crate) async fn next(&self) -> Option<BackgroundDone> {
        let done = self.rx.lock().await.recv().await;
        if done.is_some() {
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
        }
        done
    }
}

/// Where a finished task's result goes when its run is no longer there to read it.
pub(crate) async fn deliver_late(runtime: &BackgroundRuntime, done: BackgroundDone) {
    let Some((agent, scope)) = &runtime.fallback else {
        tracing::warn!(
            task_id = %done.task_id,
            tool = %done.tool_name,
            "a background task ended after its run, which has no thread to deliver to; its result is dropped"
        );
        return;
    };
    let to = super::SendMessage::to(&scope.resource_id, &scope.thread_id)
        .if_active(super::IfActive::Deliver)
        .if_idle(super::IfIdle::Persist);
    if let Err(error) = agent.send_signal(done.message(), to).await {
        tracing::warn!(task_id = %done.task_id, %error, "delivering a background task's result failed");
    }
}
