//! A run's side of its background tasks: where they report when they end, how many are out,
//! and where a result goes once its run is gone. What runs in the background, and the limits,
//! are the agent's definition ([`crate::definition::background`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Mutex, Semaphore, mpsc};

use super::Agent;
use super::threads::{IfActive, IfIdle};
use crate::definition::BackgroundTool;
use crate::memory::MemoryScope;

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
    deliver_to_thread(agent, scope, done).await;
}

/// Delivers a finished task's result to a thread, as a signal
/// ([`super::ThreadHandle::signal`]): into the thread's active run (here or on another
/// instance), or stored for its next turn.
pub(crate) async fn deliver_to_thread(agent: &Agent, scope: &MemoryScope, done: BackgroundDone) {
    let sent = agent
        .thread(&scope.resource_id, &scope.thread_id)
        .signal(done.message())
        .if_active(IfActive::Deliver)
        .if_idle(IfIdle::Persist)
        .await;
    if let Err(error) = sent {
        tracing::warn!(task_id = %done.task_id, %error, "delivering a background task's result failed");
    }
}
