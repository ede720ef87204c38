//! The runs in progress in this process: their abort signals, the per-thread lease that puts
//! runs on one thread in order, the inbox of messages delivered to a thread's active run, and
//! the pub/sub their events reach watchers through.
//!
//! Agents registered in one [`crate::kestrel::Kestrel`] instance share one registry, so the
//! lease orders the runs of every agent on a thread, and `abort_thread` reaches them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abort::AbortSignal;
use crate::cluster::ClusterError;
pub(crate) use crate::cluster::live::LiveRuns;
pub(crate) use crate::cluster::live::{LiveAbort, ThreadKey};
use crate::cluster::member::{ClusterRuntime, Hold, ThreadRecovery};
use crate::message::Message;
use crate::pubsub::{InProcessPubSub, SharedPubSub};

/// Messages delivered to a run; `None` once the run stopped taking them.
pub(crate) type Inbox = Arc<Mutex<Option<Vec<Message>>>>;

struct ActiveRun {
    abort: AbortSignal,
    pause: AbortSignal,
    thread: Option<ThreadKey>,
    /// The resource the run acts for, so a caller pinned to another cannot reach it.
    resource: Option<String>,
}

#[derive(Default)]
struct Threads {
    /// Each busy thread's lease (the runs waiting for it queue on the mutex, in order).
    leases: HashMap<ThreadKey, Arc<tokio::sync::Mutex<()>>>,
    /// The run holding each thread's lease, and its inbox.
    holders: HashMap<ThreadKey, (String, Inbox)>,
}

/// See the module docs.
pub(crate) struct RunRegistry {
    runs: Mutex<HashMap<String, ActiveRun>>,
    threads: Mutex<Threads>,
    pub(crate) pubsub: SharedPubSub,
    /// The limit on background tasks running at once.
    pub(crate) background: Arc<tokio::sync::Semaphore>,
    /// This instance's side of the cluster it shares runs with, if any.
    pub(crate) cluster: Option<Arc<ClusterRuntime>>,
    /// In a cluster, what continues the runs a dead instance left on a thread before a new
    /// run takes it (set once by the `Kestrel` instance, which knows every agent).
    pub(crate) thread_recovery: std::sync::OnceLock<Arc<dyn ThreadRecovery>>,
}

impl std::fmt::Debug for RunRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRegistry")
            .field("runs", &lock(&self.runs).len())
            .field("pubsub", &self.pubsub)
            .finish()
    }
}

impl Default for RunRegistry {
    fn default() -> Self {
        Self::new(Arc::new(InProcessPubSub::new()))
    }
}

/// Only plain data lives behind these locks; a panic elsewhere leaves it consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunRegistry {
    pub(crate) fn new(pubsub: SharedPubSub) -> Self {
        Self {
            runs: Mutex::new(HashMap::new()),
            threads: Mutex::new(Threads::default()),
            pubsub,
            background: Arc::new(tokio::sync::Semaphore::new(
                crate::definition::background::DEFAULT_BACKGROUND_CONCURRENCY,
            )),
            cluster: None,
            thread_recovery: std::sync::OnceLock::new(),
        }
    }

    /// Records a run in progress until the returned guard is dropped. One id names one run:
    /// when a run of that id is already in progress, nothing changes and the error carries
    /// the resource that run acts for.
    pub(crate) fn register(
        self: &Arc<Self>,
        run_id: &str,
        abort: AbortSignal,
        pause: AbortSignal,
        thread: Option<ThreadKey>,
        resource: Option<String>,
    ) -> Result<Registered, Option<String>> {
        use std::collections::hash_map::Entry;
        match lock(&self.runs).entry(run_id.to_owned()) {
            Entry::Occupied(live) => return Err(live.get().resource.clone()),
            Entry::Vacant(slot) => {
                slot.insert(ActiveRun {
                    abort,
                    pause,
                    thread,
                    resource,
                });
            }
        }
        Ok(Registered {
            registry: Arc::clone(self),
            run_id: run_id.to_owned(),
        })
    }

    /// Fires the abort signal of a run in progress if it acts for `resource` (any run when
    /// `None`).
    pub(crate) fn abort_run_of(&self, run_id: &str, resource: Option<&str>) -> LiveAbort {
        match lock(&self.runs).get(run_id) {
            Some(run) if resource.is_none_or(|r| run.resource.as_deref() == Some(r)) => {
                run.abort.abort();
                LiveAbort::Aborted
            }
            Some(_) => LiveAbort::OtherResource,
            None => LiveAbort::NotLive,
        }
    }

    /// Fires the abort signal of a run in progress; `false` when no such run is in progress.
    pub(crate) fn abort_run(&self, run_id: &str) -> bool {
        match lock(&self.runs).get(run_id) {
            Some(run) => {
                run.abort.abort();
                true
            }
            None => false,
        }
    }

    /// Asks a run in progress to pause at its next step boundary (its active sub-agents too);
    /// `false` when no such run is in progress.
    pub(crate) fn pause_run(&self, run_id: &str) -> bool {
        match lock(&self.runs).get(run_id) {
            Some(run) => {
                run.pause.abort();
                true
            }
            None => false,
        }
    }

    /// How many runs are in progress.
    pub(crate) fn len(&self) -> usize {
        lock(&self.runs).len()
    }

    /// Whether the run is in progress in this process.
    pub(crate) fn is_active(&self, run_id: &str) -> bool {
        lock(&self.runs).contains_key(run_id)
    }

    /// Fires the abort signals of every run in progress on the thread (running or waiting for
    /// its lease); returns how many.
    pub(crate) fn abort_thread(&self, thread: &ThreadKey) -> usize {
        let runs = lock(&self.runs);
        let mut aborted = 0;
        for run in runs.values().filter(|r| r.thread.as_ref() == Some(thread)) {
            run.abort.abort();
            aborted += 1;
        }
        aborted
    }

    /// The lease of `thread`, once the runs before this one released it (in this process,
    /// and in a cluster on every instance). Until the returned guard is dropped, this run is
    /// the thread's active run and takes delivered messages.
    pub(crate) async fn lease(
        self: &Arc<Self>,
        thread: ThreadKey,
        run_id: &str,
    ) -> Result<Lease, ClusterError> {
        let mutex = {
            let mut threads = lock(&self.threads);
            Arc::clone(threads.leases.entry(thread.clone()).or_default())
        };
        let guard = mutex.lock_owned().await;
        let hold = match &self.cluster {
            Some(cluster) => Some(cluster.wait_for_thread(&thread, run_id).await?),
            None => None,
        };
        let inbox: Inbox = Arc::new(Mutex::new(Some(Vec::new())));
        lock(&self.threads)
            .holders
            .insert(thread.clone(), (run_id.to_owned(), Arc::clone(&inbox)));
        Ok(Lease {
            registry: Arc::clone(self),
            thread,
            inbox,
            guard: Some(guard),
            hold,
        })
    }

    /// The run active on the thread here, or (in a cluster) on another instance.
    pub(crate) async fn active_run_anywhere(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<String>, ClusterError> {
        if let Some(run_id) = self.active_run(thread) {
            return Ok(Some(run_id));
        }
        Ok(self
            .remote_thread_holder(thread)
            .await?
            .and_then(|(_, run_id)| run_id))
    }

    /// In a cluster, the other instance whose run holds the thread's lease, and that run.
    pub(crate) async fn remote_thread_holder(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<(String, Option<String>)>, ClusterError> {
        let Some(cluster) = &self.cluster else {
            return Ok(None);
        };
        let key = crate::cluster::thread_lease_key(&thread.resource_id, &thread.thread_id);
        Ok(cluster.other_holder(&key).await?.map(|lease| {
            (
                crate::cluster::member::holder_instance(&lease.holder).to_owned(),
                crate::cluster::member::holder_run(&lease.holder).map(str::to_owned),
            )
        }))
    }

    /// The run holding the thread's lease.
    pub(crate) fn active_run(&self, thread: &ThreadKey) -> Option<String> {
        lock(&self.threads)
            .holders
            .get(thread)
            .map(|(run_id, _)| run_id.clone())
    }

    /// Puts `message` in the inbox of the thread's active run; gives it back when no run takes
    /// messages on the thread.
    pub(crate) fn deliver(&self, thread: &ThreadKey, message: Message) -> Result<String, Message> {
        let threads = lock(&self.threads);
        let Some((run_id, inbox)) = threads.holders.get(thread) else {
            return Err(message);
        };
        match lock(inbox).as_mut() {
            Some(messages) => {
                messages.push(message);
                Ok(run_id.clone())
            }
            None => Err(message),
        }
    }
}

/// Removes its run from the registry when dropped.
pub(crate) struct Registered {
    registry: Arc<RunRegistry>,
    run_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.registry.runs).remove(&self.run_id);
    }
}

/// A run's hold on its thread. Dropping it lets the next run on the thread go.
pub(crate) struct Lease {
    registry: Arc<RunRegistry>,
    thread: ThreadKey,
    inbox: Inbox,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    /// The thread's lease among the instances of a cluster.
    hold: Option<Hold>,
}

impl Lease {
    /// Gives the thread's cluster lease up now (before the next run here asks for it).
    pub(crate) async fn release_cluster_hold(&mut self) {
        if let Some(hold) = self.hold.take() {
            hold.release().await;
        }
    }

    /// The messages delivered since the last call.
    pub(crate) fn take_delivered(&self) -> Vec<Message> {
        lock(&self.inbox)
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Stops taking messages if none are waiting; otherwise hands them over and keeps taking.
    pub(crate) fn close_if_empty(&self) -> Result<(), Vec<Message>> {
        let mut inbox = lock(&self.inbox);
        match inbox.as_mut() {
            Some(messages) if !messages.is_empty() => Err(std::mem::take(messages)),
            _ => {
                *inbox = None;
                Ok(())
            }
        }
    }

    /// Stops taking messages and returns the last ones delivered: later deliveries find the
    /// thread idle.
    pub(crate) fn close_inbox(&self) -> Vec<Message> {
        lock(&self.inbox).take().unwrap_or_default()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut threads = lock(&self.registry.threads);
        threads.holders.remove(&self.thread);
        drop(self.guard.take());
        // Forget the lease when no run holds or waits for it.
        if let Some(mutex) = threads.leases.get(&self.thread)
            && Arc::strong_count(mutex) == 1
        {
            threads.leases.remove(&self.thread);
        }
    }
}

impl LiveRuns for RunRegistry {
    fn abort_run_of(&self, run_id: &str, resource: Option<&str>) -> LiveAbort {
        RunRegistry::abort_run_of(self, run_id, resource)
    }

    fn abort_thread(&self, thread: &ThreadKey) -> usize {
        RunRegistry::abort_thread(self, thread)
    }

    fn deliver(&self, thread: &ThreadKey, message: Message) -> Result<String, Message> {
        RunRegistry::deliver(self, thread, message)
    }

    fn pause_run(&self, run_id: &str) -> bool {
        RunRegistry::pause_run(self, run_id)
    }
}
